package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestLeaseRenewalWrittenUnseen: a renewal whose answer was lost (the
// write happened, the revision was never learned) does not cost the
// lease; a record of another process does.
func TestLeaseRenewalWrittenUnseen(t *testing.T) {
	ctx := context.Background()
	in, p, kv, mine, st := leadingIngest(t)

	// The renewal that timed out had been written.
	unseen, err := kv.Put(ctx, "coinbase", mine)
	if err != nil {
		t.Fatal(err)
	}
	in.leaseStep(kv, "coinbase", p, st)
	if !p.lead.Load() || st.rev != unseen {
		t.Fatalf("leading %v at revision %d, want still leading at %d", p.lead.Load(), st.rev, unseen)
	}
	st.lastRenew = time.Now().Add(-LeaseRenew)
	in.leaseStep(kv, "coinbase", p, st)
	if !p.lead.Load() || st.rev <= unseen {
		t.Fatalf("the next renewal: leading %v at revision %d", p.lead.Load(), st.rev)
	}

	// Another process took it.
	theirs, _ := json.Marshal(Lease{Node: "in-2", Instance: "in-2~abc"})
	if _, err := kv.Put(ctx, "coinbase", theirs); err != nil {
		t.Fatal(err)
	}
	st.lastRenew = time.Now().Add(-LeaseRenew)
	in.leaseStep(kv, "coinbase", p, st)
	if p.lead.Load() {
		t.Fatal("still leading after another process wrote the lease")
	}
}

// outageKV is a bucket whose operations time out while down, as during
// its stream's leader election.
type outageKV struct {
	jetstream.KeyValue
	down bool
}

func (o *outageKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if o.down {
		return nil, context.DeadlineExceeded
	}
	return o.KeyValue.Get(ctx, key)
}

func (o *outageKV) readLease(ctx context.Context, key string) (leaseRecord, error) {
	e, err := o.Get(ctx, key)
	if err != nil {
		return leaseRecord{}, err
	}
	return leaseRecord{value: e.Value(), rev: e.Revision()}, nil
}

func (o *outageKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if o.down {
		return 0, context.DeadlineExceeded
	}
	return o.KeyValue.Update(ctx, key, value, rev)
}

// TestLeaseSurvivesStoreOutage: while the key-value store cannot be
// reached the leader keeps leading however long renewals fail (nobody
// can take the lease: it is taken only by compare-and-set), and a standby
// does not count the outage toward the lapse, so the leader's renewal
// after it wins; the leader stops when it sees another's revision.
func TestLeaseSurvivesStoreOutage(t *testing.T) {
	nc := testNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	leader := NewIngest(Subjects{Prefix: "t"}, "in-1", log)
	standby := NewIngest(Subjects{Prefix: "t"}, "in-2", log)
	for _, in := range []*Ingest{leader, standby} {
		in.nc = nc
		in.Tap("coinbase")
	}
	bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: leader.leaseBucket()})
	if err != nil {
		t.Fatal(err)
	}
	kv := &outageKV{KeyValue: bucket}
	mine, _ := json.Marshal(Lease{Node: leader.node, Instance: leader.instance})
	rev, err := kv.Create(ctx, "coinbase", mine)
	if err != nil {
		t.Fatal(err)
	}
	lp, sp := leader.pubs["coinbase"], standby.pubs["coinbase"]
	lp.lead.Store(true)
	lst := &leaseState{rev: rev, lastRenew: time.Now()}
	sst := &leaseState{}
	standby.leaseStep(kv, "coinbase", sp, sst) // sees the revision
	sst.changed = time.Now().Add(-time.Hour)   // long unchanged, as if the leader were gone

	kv.down = true
	lst.lastRenew = time.Now().Add(-10 * LeaseLapse)
	for range 3 {
		leader.leaseStep(kv, "coinbase", lp, lst)
		standby.leaseStep(kv, "coinbase", sp, sst)
	}
	if !lp.lead.Load() {
		t.Fatal("the leader stopped while the store was unreachable")
	}
	kv.down = false
	standby.leaseStep(kv, "coinbase", sp, sst) // back: the lapse starts over
	if sp.lead.Load() {
		t.Fatal("the standby took the lease on its first read after the outage")
	}
	leader.leaseStep(kv, "coinbase", lp, lst)
	if !lp.lead.Load() || lst.rev == rev {
		t.Fatalf("the leader's renewal after the outage: leading %v, revision %d (was %d)", lp.lead.Load(), lst.rev, rev)
	}

	// Another node's revision: the leader stands by.
	theirs, _ := json.Marshal(Lease{Node: "in-3", Instance: "in-3~x"})
	if _, err := kv.Put(ctx, "coinbase", theirs); err != nil {
		t.Fatal(err)
	}
	lst.lastRenew = time.Now().Add(-LeaseRenew)
	leader.leaseStep(kv, "coinbase", lp, lst)
	if lp.lead.Load() {
		t.Fatal("still leading after another node's revision")
	}
}

// replicatedKV refuses a compare-and-set whose revision is not the key's
// as a replicated (R>1) stream can under load: code 10164, not 10071 (seen
// from nats-server 2.15.2 in TestClusterFaultsProcesses).
type replicatedKV struct{ jetstream.KeyValue }

func (r replicatedKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	e, err := r.Get(ctx, key)
	if err == nil && e.Revision() != rev {
		return 0, fmt.Errorf("%w: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant,
			Description: "wrong last sequence"}, jetstream.ErrKeyRevisionMismatch)
	}
	return r.KeyValue.Update(ctx, key, value, rev)
}

// TestLeaseLostOnReplicatedBucket: a leader whose renewal a replicated
// bucket refuses (code 10164) because another process took the lease
// stops publishing and stands by, as with a one-replica bucket.
func TestLeaseLostOnReplicatedBucket(t *testing.T) {
	ctx := context.Background()
	in, p, bucket, _, st := leadingIngest(t)
	kv := replicatedKV{bucket}
	theirs, _ := json.Marshal(Lease{Node: "in-2", Instance: "in-2~abc"})
	if _, err := kv.Put(ctx, "coinbase", theirs); err != nil {
		t.Fatal(err)
	}
	in.leaseStep(kv, "coinbase", p, st)
	if p.lead.Load() {
		t.Fatal("still leading after a refused renewal (10164): another process holds the lease")
	}
	p.unfollow()
}

// leadingIngest is an ingest tapping coinbase that holds the venue's lease
// in a fresh bucket on an embedded NATS server, its renewal due: the ingest,
// the venue's publisher, the bucket, the ingest's lease record and its state.
func leadingIngest(t *testing.T) (*Ingest, *publisher, jetstream.KeyValue, []byte, *leaseState) {
	t.Helper()
	nc := testNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	in := NewIngest(Subjects{Prefix: "t"}, "in-1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	in.nc = nc
	in.Tap("coinbase")
	p := in.pubs["coinbase"]
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: in.leaseBucket()})
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := json.Marshal(Lease{Node: in.node, Instance: in.instance})
	rev, err := kv.Create(context.Background(), "coinbase", mine)
	if err != nil {
		t.Fatal(err)
	}
	p.lead.Store(true)
	return in, p, kv, mine, &leaseState{rev: rev, lastRenew: time.Now().Add(-LeaseRenew)}
}
