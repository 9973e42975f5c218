package wsapi

import "github.com/fanoutd/fanoutd/venue"

// snapshotAck is the reply to a snapshot op of st that was queued: the
// ack, carrying the claim check of the stream's newest stored snapshot
// when Options.SnapshotClaim gives one:
//
//	{"type":"ack","id":"3","streams":["coinbase:level2:BTC-USD"],"claim":{"url":…,"stream":…,"seq":…}}
//
// The inline snapshot:true book is queued either way: the stored snapshot
// is older than the live book, and rebuilding from it needs the updates
// since its seq.
func (o *Options) snapshotAck(id string, st venue.Stream) []byte {
	ack := appendAck(nil, id, []venue.Stream{st})
	if o.SnapshotClaim == nil {
		return ack
	}
	c := o.SnapshotClaim(st)
	if len(c) == 0 {
		return ack
	}
	ack = append(ack[:len(ack)-1], `,"claim":`...)
	ack = append(ack, c...)
	return append(ack, '}')
}
