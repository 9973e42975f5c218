package cluster

import (
	"context"
	"encoding/json"
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
	nc := testNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in := NewIngest(Subjects{Prefix: "t"}, "in-1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	in.nc = nc
	in.Tap("coinbase")
	p := in.pubs["coinbase"]
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: in.leaseBucket()})
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := json.Marshal(Lease{Node: in.node, Instance: in.instance})
	rev, err := kv.Create(ctx, "coinbase", mine)
	if err != nil {
		t.Fatal(err)
	}
	p.lead.Store(true)
	st := &leaseState{rev: rev, lastRenew: time.Now().Add(-LeaseRenew)}

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
