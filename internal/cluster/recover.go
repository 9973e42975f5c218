package cluster

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fanoutd/fanoutd/venue"
)

// Recovery over the bus: the ingest leading a venue answers, from its
// feed's recovery window, a request for a range of one stream's events
// (P.recover.<venue>). An edge asks it for the range a bus gap lost,
// before it announces the gap (the events are forwarded in order instead,
// and nothing is announced), and for the range an adopted named
// subscriber lost before this edge followed its stream (Edge.Backfill).
const (
	// MaxRecoverReply bounds the body of one recover reply; a longer
	// range is asked for in several requests, and the events are only
	// forwarded once every one is answered (never a part of a range).
	MaxRecoverReply = 256 << 10
	// maxRecoverEvents bounds the range an edge asks for: a longer one is
	// a gap, as it would be past any ingest's window.
	maxRecoverEvents = 1 << 16
	recoverTimeout   = time.Second     // one request
	recoverDeadline  = 3 * time.Second // every request of one range
)

// HeaderOldest is, on a refused recover request, the oldest seq of the
// stream the ingest's window holds (absent: none).
const HeaderOldest = "Fanoutd-Oldest"

// Refusals of a recover request (the Fanoutd-Error header).
const (
	recoverRefused = "not_recoverable" // the window does not hold the first seq asked for
	recoverBad     = "bad_request"     // not a request this ingest can read
)

// RecoverRequest is the body of a request on P.recover.<venue>: the events
// of Stream from seq From to seq To.
type RecoverRequest struct {
	Stream string `json:"stream"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
}

// answerRecover answers a request on P.recover.<venue>: the leader's
// events of the stream from From, as many as MaxRecoverReply holds, one a
// line (Fanoutd-Seq: the first one's seq), or Fanoutd-Error.
func (in *Ingest) answerRecover(m *nats.Msg) {
	name := strings.TrimPrefix(m.Subject, in.subj.Prefix+".recover.")
	p, f := in.pubs[name], in.feeds[name]
	if p == nil || f == nil || !p.lead.Load() {
		return // the leader answers
	}
	reply := &nats.Msg{Header: nats.Header{HeaderEpoch: {p.epochNow()}, HeaderLeader: {in.instance}}}
	var req RecoverRequest
	var st venue.Stream
	err := json.Unmarshal(m.Data, &req)
	if err == nil {
		st, err = venue.ParseStream(req.Stream)
	}
	limit := MaxRecoverReply
	if mp := int(in.nc.MaxPayload()) - 4096; mp > 0 && mp < limit {
		limit = mp
	}
	switch {
	case err != nil || st.Venue() != name || st.Channel().Derived() || req.From == 0 || req.To < req.From:
		reply.Header.Set(HeaderError, recoverBad)
	default:
		data, oldest, _, ok := f.Range(st, req.From, req.To, limit)
		if !ok {
			reply.Header.Set(HeaderError, recoverRefused)
			if oldest > 0 {
				reply.Header.Set(HeaderOldest, strconv.FormatUint(oldest, 10))
			}
			break
		}
		reply.Header.Set(HeaderSeq, strconv.FormatUint(req.From, 10))
		reply.Data = bytes.Join(data, []byte{'\n'})
	}
	m.RespondMsg(reply)
}

// parseRange returns the events of a recover reply's body, which carries
// stream c's events from seq first, one a line, no more than up to seq
// last: each must pass c.check at its seq, as a message on the stream's
// subject does; why says which did not ("" if every one did). The events
// are slices of data.
func parseRange(data []byte, c *eventCheck, first, last uint64) (events [][]byte, why string) {
	switch {
	case len(data) == 0:
		return nil, badJSON
	case len(data) > MaxRecoverReply:
		return nil, badSize
	case first == 0 || last < first:
		return nil, badSeq
	}
	seq := first
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
			if len(data) == 0 {
				return nil, badJSON // a trailing newline: an empty event
			}
		} else {
			data = nil
		}
		if seq > last {
			return nil, badSeq // more than asked for
		}
		if why := c.check(line, seq, false); why != "" {
			return nil, why
		}
		events = append(events, line)
		seq++
	}
	return events, ""
}

// fetchRange asks the leader for stream es's events from first to last of
// epoch, in as many requests as their size needs, until recoverDeadline;
// ok is false if any request was refused, unanswered, or answered with
// bytes that are not those events (counted as rejected). stale, checked
// between requests, gives up.
func (es *edgeStream) fetchRange(first, last uint64, epoch string, stale func() bool) (events [][]byte, ok bool) {
	if first == 0 || last < first || last-first >= maxRecoverEvents {
		return nil, false
	}
	subj := es.e.subj.Recover(es.id.Venue())
	deadline := time.Now().Add(recoverDeadline)
	for from := first; from <= last; {
		if stale() || time.Now().After(deadline) {
			return nil, false
		}
		body, _ := json.Marshal(RecoverRequest{Stream: string(es.id), From: from, To: last})
		r, err := es.e.nc.RequestMsg(&nats.Msg{Subject: subj, Data: body}, min(recoverTimeout, time.Until(deadline)))
		if err != nil || r.Header.Get(HeaderError) != "" || !es.v.admits(r) {
			return nil, false
		}
		if r.Header.Get(HeaderEpoch) != epoch || r.Header.Get(HeaderSeq) != strconv.FormatUint(from, 10) {
			return nil, false // another numbering, or not the range asked for
		}
		got, why := parseRange(r.Data, &es.check, from, last)
		if why != "" {
			es.e.rejects.reject(es.id.Venue(), why, "subject", subj, "seq", from)
			return nil, false
		}
		events = append(events, got...)
		from += uint64(len(got))
	}
	return events, true
}

// recover starts recovering the range first..last lost on the bus, h (if
// not nil) being the event after it: what arrives meanwhile is held, and
// is handled once the range is forwarded, or once it is announced as a gap
// if the ingest could not send it. It reports false, doing nothing, if the
// edge does not recover. es.mu must be held.
func (es *edgeStream) recover(first, last uint64, h *heldMsg) bool {
	if !es.e.RecoverGaps || last < first || last-first >= maxRecoverEvents {
		return false
	}
	es.recovering, es.recFirst, es.recLast = true, first, last
	es.gen++
	if h != nil {
		es.held = append(es.held, *h)
	}
	go es.recoverGap(es.gen, first, last, es.epoch)
	return true
}

// recoverGap fetches the range recover asked for and forwards it, or
// announces it lost, then handles what was held.
func (es *edgeStream) recoverGap(gen int, first, last uint64, epoch string) {
	data, ok := es.fetchRange(first, last, epoch, func() bool {
		es.mu.Lock()
		defer es.mu.Unlock()
		return es.closed || es.gen != gen
	})
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.closed || es.gen != gen || !es.recovering {
		return
	}
	es.endRecovery(first, last, data, ok)
}

// endRecovery ends a recovery of first..last: forwards data (ok) or
// announces the range lost, then handles what was held. es.mu must be
// held.
func (es *edgeStream) endRecovery(first, last uint64, data [][]byte, ok bool) {
	es.recovering = false
	held := es.held
	es.held = nil
	if ok {
		for i, d := range data {
			es.forward(heldMsg{es.epoch, first + uint64(i), d, es.from})
		}
		es.e.busRecovered.add(es.id.Venue(), 1)
	} else {
		es.e.busRecovered.add(es.id.Venue(), 0)
		es.gap("bus_gap", first, last, "")
		if !es.level2 {
			es.last = last // the stream goes on after the loss
		}
	}
	for _, m := range held {
		es.handle(m)
	}
}

// Backfill fills this edge's recovery window of st, which it follows, from
// seq from up to the event before the oldest it holds, from the ingest's
// window: the range a named subscriber adopted from another edge lost
// before this edge followed the stream, so that its reattach recovers it.
// It waits for the ingest's answer (at most recoverDeadline) and does
// nothing if the window already holds from, or the ingest does not.
func (e *Edge) Backfill(st venue.Stream, from uint64) {
	e.mu.Lock()
	es := e.streams[st]
	e.mu.Unlock()
	if es == nil || from == 0 {
		return
	}
	f := es.v.feed
	to := f.Seq(st)
	if o := f.Oldest(st); o != 0 {
		to = o - 1
	}
	es.mu.Lock()
	epoch, started := es.epoch, es.started && !es.resyncing
	es.mu.Unlock()
	if !started || from > to {
		return
	}
	data, ok := es.fetchRange(from, to, epoch, func() bool {
		es.mu.Lock()
		defer es.mu.Unlock()
		return es.closed || es.epoch != epoch
	})
	if ok {
		f.Backfill(st, from, data)
	}
	e.backfills.add(st.Venue(), boolN(ok))
}

func boolN(ok bool) uint64 {
	if ok {
		return 1
	}
	return 0
}

// outcomes counts, per venue, what was recovered and what was not.
type outcomes struct {
	mu sync.Mutex // protects n
	n  map[string][2]uint64
}

// add counts one outcome of venueName: ok 1 recovered, 0 not.
func (o *outcomes) add(venueName string, ok uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string][2]uint64{}
	}
	c := o.n[venueName]
	c[1-ok]++
	o.n[venueName] = c
}

func (o *outcomes) each(f func(venueName string, recovered, lost uint64)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for v, c := range o.n {
		f(v, c[0], c[1])
	}
}

// BusRecovered calls f, per venue, with the ranges lost on the bus that
// the ingest sent again (recovered) and those announced as gaps instead
// (lost): fanoutd_cluster_bus_recovered_total.
func (e *Edge) BusRecovered(f func(venueName string, recovered, lost uint64)) { e.busRecovered.each(f) }

// Backfilled calls f, per venue, with the ranges an adopted named
// subscriber lost that the ingest filled (recovered), and those it could
// not: fanoutd_cluster_backfills_total.
func (e *Edge) Backfilled(f func(venueName string, recovered, lost uint64)) { e.backfills.each(f) }
