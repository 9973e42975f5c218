package cluster

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// notHolder is the reason (fanoutd_cluster_fenced_total) a message was
// dropped by fencing: its HeaderLeader is not the lease's holder.
const notHolder = "not_lease_holder"

// Fenced calls f, per venue, with the messages (events, notices,
// heartbeats, books) the edge dropped because the ingest that published
// them did not hold the venue's lease as the edge last saw it.
func (e *Edge) Fenced(f func(venueName string, n uint64)) {
	e.fences.each(func(v, _ string, n uint64) { f(v, n) })
}

// admits reports whether m comes from the lease's holder (or no holder
// is known yet: no lease bucket, or not read yet); a message that does
// not is counted. A message from another instance may be the first of a
// new holder whose lease the watch has not delivered yet (a takeover
// publishes its failover notices right after its compare-and-set): the
// lease is then read from the stream's leader, at most every
// fenceRecheck, before the message is dropped.
func (v *edgeVenue) admits(m *nats.Msg) bool {
	h := v.holder.Load()
	if h == nil {
		return true
	}
	got := m.Header.Get(HeaderLeader)
	if got == *h || v.recheck(got) {
		return true
	}
	v.e.fences.reject(v.name, notHolder, "subject", m.Subject, "from", got, "holder", *h)
	return false
}

// fenceRecheck bounds how often a venue's lease is read on a message
// from another instance than its holder's, and how long the read waits.
const fenceRecheck = 250 * time.Millisecond

// recheck reads the venue's lease (from the stream's leader: what
// JetStream stored last) and reports whether instance holds it.
func (v *edgeVenue) recheck(instance string) bool {
	now := time.Now()
	v.mu.Lock()
	if instance == "" || now.Sub(v.lastRecheck) < fenceRecheck {
		v.mu.Unlock()
		return false
	}
	v.lastRecheck = now
	v.mu.Unlock()
	bucket := leaseBucketOf(v.e.subj)
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + "." + v.name})
	r, err := v.e.nc.Request("$JS.API.STREAM.MSG.GET.KV_"+bucket, req, fenceRecheck)
	if err != nil {
		return false
	}
	var resp struct {
		Message struct {
			Data []byte `json:"data"`
		} `json:"message"`
	}
	var l Lease
	if json.Unmarshal(r.Data, &resp) != nil || json.Unmarshal(resp.Message.Data, &l) != nil || l.Instance == "" {
		return false
	}
	v.setHolder(l.Instance)
	return l.Instance == instance
}

// setHolder records the venue lease's holder.
func (v *edgeVenue) setHolder(instance string) {
	if old := v.holder.Load(); old == nil || *old != instance {
		v.holder.Store(&instance)
	}
}

func leaseBucketOf(subj Subjects) string {
	return strings.ReplaceAll(subj.Prefix, ".", "_") + "_leases"
}

// watchStall is how long a lease watch may deliver nothing before it is
// watched again.
const watchStall = 3 * HeartbeatEvery

// watchLeases follows the lease bucket (an ordered consumer: only what
// JetStream stored, never a refused compare-and-set) and keeps each
// venue's holder. It binds the bucket when it exists (an ingest creates
// it) and watches again whenever the watch ends.
func (e *Edge) watchLeases() {
	defer e.wg.Done()
	bucket := leaseBucketOf(e.subj)
	for {
		e.watchOnce(bucket)
		select {
		case <-e.stop:
			return
		case <-time.After(time.Second):
		}
	}
}

func (e *Edge) watchOnce(bucket string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	js, err := jetstream.New(e.nc)
	if err != nil {
		return
	}
	bctx, bcancel := context.WithTimeout(ctx, namesOpTimeout)
	kv, err := js.KeyValue(bctx, bucket)
	bcancel()
	if err != nil {
		return
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return
	}
	defer w.Stop()
	// The leader renews its lease every second, so a watch that delivers
	// nothing for watchStall is stalled (its consumer lost across a
	// partition or a server's death) or there is no leader: either way it
	// is watched again.
	stall := time.NewTimer(watchStall)
	defer stall.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stall.C:
			return
		case en, ok := <-w.Updates():
			stall.Reset(watchStall)
			if !ok {
				return
			}
			if en == nil {
				continue // the current values were all delivered
			}
			var l Lease
			if json.Unmarshal(en.Value(), &l) != nil || l.Instance == "" {
				continue
			}
			e.mu.Lock()
			v := e.venues[en.Key()]
			e.mu.Unlock()
			if v != nil {
				v.setHolder(l.Instance)
			}
		}
	}
}
