package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Lease timings. A leader renews its venue's lease every LeaseRenew; a
// standby that sees the lease's revision unchanged for LeaseLapse takes it
// (compare-and-set on that revision), checking every leasePoll: a venue
// whose leader died is taken over within LeaseLapse + leasePoll + the KV
// round trips (about 2.3 s; the promise is 3 s). A leader that could not
// renew for LeaseLapse stops publishing: two nodes never both lead for
// longer than a renewal.
const (
	LeaseRenew = time.Second
	LeaseLapse = 2 * time.Second
	leasePoll  = 250 * time.Millisecond
)

// Lease is the value of a venue's key in the lease bucket.
type Lease struct {
	Node     string `json:"node"`     // cluster.node of the leader
	Instance string `json:"instance"` // the leader process (node and a random suffix)
	Epoch    string `json:"epoch"`    // the epoch its events carry
}

// leaseBucket is the name of the lease bucket.
func (in *Ingest) leaseBucket() string {
	return leaseBucketOf(in.subj)
}

// leaseState is what the lease loop knows of one venue's lease.
type leaseState struct {
	rev       uint64    // the key's revision last seen (or written, leading)
	changed   time.Time // when rev last changed (standby), or was renewed (leader)
	lastRenew time.Time // leading: the last successful renewal
	// leading: renewals have failed for LeaseLapse without another
	// node's revision (logged once)
	unreachable bool
	// standing by: the last read of the lease failed, so the revision's
	// age is not known
	blind bool
}

// leases runs the lease loop: every leasePoll, per venue, renew what this
// node leads and take what lapsed.
func (in *Ingest) leases() {
	defer in.done.Done()
	state := map[string]*leaseState{}
	t := time.NewTicker(leasePoll)
	defer t.Stop()
	var kv jetstream.KeyValue
	for {
		if kv == nil {
			kv = in.leaseKV()
			if kv == nil && in.noLease() {
				return // no JetStream: every venue leads (logged)
			}
		}
		if kv != nil {
			for name, p := range in.pubs {
				st := state[name]
				if st == nil {
					st = &leaseState{}
					state[name] = st
				}
				in.leaseStep(kv, name, p, st)
			}
		}
		select {
		case <-in.stop:
			return
		case <-t.C:
		}
	}
}

// leaseKV binds (or creates) the lease bucket, or returns nil.
func (in *Ingest) leaseKV() jetstream.KeyValue {
	ctx, cancel := context.WithTimeout(context.Background(), namesOpTimeout)
	defer cancel()
	js, err := jetstream.New(in.nc)
	if err != nil {
		return nil
	}
	kv, n, err := ensureBucket(ctx, js, jetstream.KeyValueConfig{Bucket: in.leaseBucket(), History: 1,
		Description: "fanoutd ingest leases: per venue, the node that publishes it"}, in.KVReplicas)
	if err == nil {
		logReplicas(in.log, in.leaseBucket(), in.KVReplicas, n)
	}
	if err != nil {
		in.leaseErrs++
		if in.leaseErrs == 1 {
			in.log.Warn("nats: the lease bucket is unavailable (JetStream?); retrying", "err", err)
		}
		return nil
	}
	return kv
}

// noLease reports whether to give up on leases: JetStream stayed
// unavailable for 10 s. Every venue then leads without a lease (a standby
// would publish too: logged as an error).
func (in *Ingest) noLease() bool {
	if in.leaseErrs < int(10*time.Second/leasePoll) {
		return false
	}
	in.log.Error("nats: no lease bucket (JetStream off?): this ingest leads every venue without a lease; a second ingest would publish the same streams")
	for _, p := range in.pubs {
		in.takeover(p)
	}
	return true
}

func (in *Ingest) leaseStep(kv jetstream.KeyValue, name string, p *publisher, st *leaseState) {
	ctx, cancel := context.WithTimeout(context.Background(), namesOpTimeout)
	defer cancel()
	now := time.Now()
	mine, _ := json.Marshal(Lease{Node: in.node, Instance: in.instance, Epoch: p.epochNow()})
	if p.lead.Load() {
		if now.Sub(st.lastRenew) < LeaseRenew {
			return
		}
		rev, err := kv.Update(ctx, name, mine, st.rev)
		if err == nil {
			if st.unreachable {
				in.log.Info("ingest: lease renewed again", "venue", name, "after", now.Sub(st.lastRenew).Round(time.Millisecond))
			}
			st.rev, st.lastRenew, st.unreachable = rev, now, false
			return
		}
		if isWrongRevision(err) && in.wroteLast(ctx, kv, name, st) {
			return // a renewal that timed out had been written: still ours
		}
		if isWrongRevision(err) {
			in.demote(p, err)
			return
		}
		if now.Sub(st.lastRenew) >= LeaseLapse && !st.unreachable {
			st.unreachable = true
			in.log.Warn("ingest: the lease cannot be renewed (key-value store unreachable); still leading until another node's revision is seen", "venue", name, "err", err)
		}
		return
	}
	var e leaseRecord
	var err error
	if r, ok := kv.(leaseReader); ok {
		e, err = r.readLease(ctx, name)
	} else {
		e, err = in.leaderRead(name)
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if rev, err := kv.Create(ctx, name, mine); err == nil {
			st.rev, st.lastRenew = rev, now
			in.takeover(p)
		}
		return
	case err != nil:
		st.blind = true
		return
	}
	var l Lease
	json.Unmarshal(e.value, &l)
	p.setLeader(l.Node)
	if e.rev != st.rev || st.blind {
		// A lapse is counted only over time the store was seen: after
		// an outage (a bucket's leader election) the leader's renewal
		// gets its second.
		st.rev, st.changed, st.blind = e.rev, now, false
		return
	}
	if now.Sub(st.changed) < LeaseLapse {
		return
	}
	if rev, err := kv.Update(ctx, name, mine, e.rev); err == nil {
		st.rev, st.lastRenew = rev, now
		in.log.Warn("ingest: lease lapsed; taking the venue over", "venue", name, "from", l.Node)
		in.takeover(p)
	}
}

// leaseRecord is a lease as the lease stream's leader has it.
type leaseRecord struct {
	value []byte
	rev   uint64
}

// leaseReader is a bucket that reads a lease itself (a test's store
// outage); any other is read with leaderRead.
type leaseReader interface {
	readLease(ctx context.Context, key string) (leaseRecord, error)
}

// leaderRead reads venue's lease from the lease stream's leader (the
// stream API's message get, not a direct get, which any replica answers):
// while the stream has no leader (a server's death, an election) nobody
// can write the lease, and this read fails too, so a standby counts a
// lapse only over time the leader could have renewed.
func (in *Ingest) leaderRead(venueName string) (leaseRecord, error) {
	bucket := in.leaseBucket()
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + "." + venueName})
	r, err := in.nc.Request("$JS.API.STREAM.MSG.GET.KV_"+bucket, req, namesOpTimeout)
	if err != nil {
		return leaseRecord{}, err
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Data, &resp); err != nil {
		return leaseRecord{}, err
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == 10037 { // no message found
			return leaseRecord{}, jetstream.ErrKeyNotFound
		}
		return leaseRecord{}, fmt.Errorf("lease stream: %d %s", resp.Error.ErrCode, resp.Error.Desc)
	}
	if resp.Message == nil {
		return leaseRecord{}, errors.New("lease stream: no message in the answer")
	}
	return leaseRecord{value: resp.Message.Data, rev: resp.Message.Seq}, nil
}

// wroteLast reports whether the lease's newest record is this process's
// own (a renewal whose answer timed out was written after all), and if so
// takes its revision as the one to renew from.
func (in *Ingest) wroteLast(ctx context.Context, kv jetstream.KeyValue, name string, st *leaseState) bool {
	e, err := kv.Get(ctx, name)
	if err != nil {
		return false
	}
	var l Lease
	if json.Unmarshal(e.Value(), &l) != nil || l.Instance != in.instance {
		return false
	}
	st.rev = e.Revision()
	return true
}

// isWrongRevision reports whether err is a compare-and-set refused because
// the key has another revision: code 10071 from a one-replica stream,
// 10164 from a replicated one.
func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return true
	}
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// takeover makes this node the venue's publisher: its feed continues the
// numbering the bus carried (see fanout.Feed.Continue) in the previous
// leader's epoch, each level2 stream restarting with a snapshot:true event
// announced by a book_resync (reason failover), each other stream the
// previous leader had announced by a stream_gap (reason failover) naming
// the time window whose events may be lost.
func (in *Ingest) takeover(p *publisher) {
	f := in.feeds[p.venue]
	if f == nil {
		return
	}
	p.drainFollow()
	p.mu.Lock()
	seqs := maps.Clone(p.seen)
	seenAt := maps.Clone(p.seenAt)
	epoch, prev := p.seenEpoch, p.leader
	p.mu.Unlock()
	failover := epoch != "" && len(seqs) > 0
	if !failover {
		epoch, seqs = in.epoch, nil
	}
	now := time.Now()
	f.Continue(seqs, func() {
		p.mu.Lock()
		p.epoch, p.leader = epoch, in.node
		p.mu.Unlock()
		p.msg.Header[HeaderEpoch][0] = epoch
		p.lead.Store(true)
	}, func(id venue.Stream, seq uint64, book bool) {
		if !failover {
			return
		}
		var n notice.Notice
		if book {
			n = notice.Must(notice.BookResync, p.venue, string(id), now, "the ingest leading the venue changed: the book continues from the new leader's, sent next as snapshot:true",
				map[string]any{"reason": "failover", "node": in.node, "previous": prev, "seq": seq + 1})
		} else if _, ok := seqs[id]; ok {
			d := map[string]any{"reason": "failover", "after": seq, "node": in.node, "previous": prev, "until": now.UTC().Format(time.RFC3339Nano)}
			if t, ok := seenAt[id]; ok {
				d["from"] = t.UTC().Format(time.RFC3339Nano)
			}
			n = notice.Must(notice.StreamGap, p.venue, string(id), now, "the ingest leading the venue changed: events between from and until may be lost; seq continues at after+1", d)
		} else {
			return
		}
		in.nc.PublishMsg(&nats.Msg{Subject: in.subj.Notice(p.venue), Data: n.AppendJSON(nil), Header: nats.Header{HeaderEpoch: {epoch}, HeaderLeader: {in.instance}}})
	})
	p.unfollow()
	select { // the edges hear from the new leader at once, not up to a second later
	case in.hbNow <- struct{}{}:
	default:
	}
	in.log.Info("ingest: leading the venue", "venue", p.venue, "epoch", epoch, "failover", failover, "previous", prev, "streams", len(seqs))
}

// demote stops publishing the venue: another node leads it (or this one
// could not renew its lease in time).
func (in *Ingest) demote(p *publisher, err error) {
	p.lead.Store(false)
	p.mu.Lock()
	p.seen, p.seenAt, p.seenEpoch = map[venue.Stream]uint64{}, map[venue.Stream]time.Time{}, ""
	p.mu.Unlock()
	in.log.Warn("ingest: lease lost; standing by", "venue", p.venue, "err", err)
	p.follow()
}

// follow subscribes the venue's events and heartbeats on the bus, to know
// each stream's last seq while another node leads.
func (p *publisher) follow() {
	in := p.in
	ev, err1 := in.nc.Subscribe(in.subj.Prefix+".ev."+p.venue+".>", p.onEvent)
	hb, err2 := in.nc.Subscribe(in.subj.Heartbeat(p.venue), p.onHeartbeat)
	if err1 != nil || err2 != nil {
		in.log.Warn("nats: standby cannot follow the leader", "venue", p.venue, "err", errors.Join(err1, err2))
	}
	if ev != nil {
		ev.SetPendingLimits(-1, 256<<20)
	}
	p.mu.Lock()
	p.followSubs = []*nats.Subscription{ev, hb}
	p.mu.Unlock()
}

// drainFollow waits (at most a second) until the leader's events this
// standby already received have been counted: a takeover continues after
// them, and one still queued would otherwise have its seq used again.
func (p *publisher) drainFollow() {
	p.mu.Lock()
	var ev *nats.Subscription
	if len(p.followSubs) > 0 {
		ev = p.followSubs[0]
	}
	p.mu.Unlock()
	if ev == nil {
		return
	}
	closed := ev.StatusChanged(nats.SubscriptionClosed)
	if ev.Drain() != nil {
		return
	}
	select {
	case <-closed:
	case <-time.After(time.Second):
	}
}

func (p *publisher) unfollow() {
	p.mu.Lock()
	subs := p.followSubs
	p.followSubs = nil
	p.mu.Unlock()
	for _, s := range subs {
		if s != nil {
			s.Unsubscribe()
		}
	}
}

// onEvent records the leader's seq of the event's stream.
func (p *publisher) onEvent(m *nats.Msg) {
	if p.lead.Load() {
		return
	}
	rest := strings.TrimPrefix(m.Subject, p.in.subj.Prefix+".ev."+p.venue+".")
	ch, tok, ok := strings.Cut(rest, ".")
	sym, ok2 := UnescapeToken(tok)
	if !ok || !ok2 {
		return
	}
	seq, err := parseSeq(m.Header.Get(HeaderSeq))
	if err != nil {
		return
	}
	p.seenSeq(m.Header.Get(HeaderEpoch), venue.Stream(p.venue+":"+ch+":"+sym), seq, time.Now())
}

func (p *publisher) onHeartbeat(m *nats.Msg) {
	if p.lead.Load() {
		return
	}
	var hb Heartbeat
	if json.Unmarshal(m.Data, &hb) != nil {
		return
	}
	p.setLeader(hb.Node)
	for s, seq := range hb.Streams {
		p.seenSeq(hb.Epoch, venue.Stream(s), seq, time.Time{})
	}
}

// seenSeq records seq of st in epoch; a new epoch starts the record over.
func (p *publisher) seenSeq(epoch string, st venue.Stream, seq uint64, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch != p.seenEpoch {
		clear(p.seen)
		clear(p.seenAt)
		p.seenEpoch = epoch
	}
	if seq > p.seen[st] {
		p.seen[st] = seq
	}
	if !at.IsZero() {
		p.seenAt[st] = at
	}
}

func (p *publisher) setLeader(node string) {
	p.mu.Lock()
	p.leader = node
	p.mu.Unlock()
}

func (p *publisher) epochNow() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// Leader returns the node leading venueName as this ingest knows it
// ("" if unknown) and whether it is this one.
func (in *Ingest) Leader(venueName string) (node string, leading bool) {
	p := in.pubs[venueName]
	if p == nil {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leader, p.lead.Load()
}
