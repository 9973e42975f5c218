package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fanoutd/fanoutd/internal/cluster"
	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venues"
)

// kvValue reads key of bucket on the server at url into v; false while
// the bucket or the key does not exist.
func kvValue(t *testing.T, js jetstream.JetStream, bucket, key string, v any) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return false
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return false
	}
	return json.Unmarshal(e.Value(), v) == nil
}

// jetStream connects a JetStream client to the server at url, closed when
// the test ends.
func jetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestClusterStandaloneNATSServer: the cluster against nats-server run as
// a separate process (-js -sd <dir> -p <port>; the binary of the module
// go.mod requires, or $FANOUTD_NATS_SERVER): an ingest leads (its lease in
// the P_leases bucket), events flow to an edge's named subscriber, whose
// record in the P_names bucket carries it to another edge once its own
// edge is aborted (resumed/reattached, exact gaps), a standby ingest takes
// the lapsed lease over, and the subscriber ends with the new leader's
// exact book.
func TestClusterStandaloneNATSServer(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	ns := natstest.Standalone(t)
	t.Logf("against %s", natstest.Version(t))
	url := ns.URL()
	js := jetStream(t, url)

	src := &source{}
	ingYAML := "cluster:\n  role: ingest\n  node: %s\n  nats_url: " + url + "\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n" + noRecovery // exact gaps, not recovery
	in1 := daemontest.Start(t, fmt.Sprintf(ingYAML, "in-1"), daemon.Options{Venues: []venues.Venue{src.adapter()}})
	waitFor(t, 10*time.Second, "in-1 to lead", func() bool { l, _ := coverageLeader(t, in1.URL("http")); return l == "in-1" })
	var lease cluster.Lease
	if !kvValue(t, js, "fanoutd_leases", "coinbase", &lease) || lease.Node != "in-1" {
		t.Fatalf("the lease bucket's coinbase key: %+v, want in-1's", lease)
	}
	in2 := daemontest.Start(t, fmt.Sprintf(ingYAML, "in-2"), daemon.Options{Venues: []venues.Venue{src.adapter()}})
	edgeYAML := "cluster:\n  role: edge\n  node: %s\n  nats_url: " + url + "\nvenues:\n  coinbase:\n    symbols: []\n"
	edgeA := daemontest.Start(t, fmt.Sprintf(edgeYAML, "edge-a"), daemon.Options{})
	edgeB := daemontest.Start(t, fmt.Sprintf(edgeYAML, "edge-b"), daemon.Options{})
	waitReady(t, edgeA)
	waitReady(t, edgeB)

	src.step()
	a := dialNamed(t, edgeA.URL("ws"), "desk-sa", nil, l2BTC, trBTC)
	stop := src.run(t)
	waitFor(t, 10*time.Second, "trades on edge A", func() bool { return lastOf(a.all(), trBTC) > 30 })
	waitFor(t, 10*time.Second, "desk-sa's record in the names bucket", func() bool {
		var rec cluster.NameRecord
		return kvValue(t, js, "fanoutd_names", "desk-sa", &rec) && rec.Conn != "" &&
			slices.Contains(rec.Streams, l2BTC) && slices.Contains(rec.Streams, trBTC) && rec.Last[trBTC] > 0
	})

	// Edge A dies: the subscriber reattaches on edge B from the bucket.
	edgeA.Abort()
	<-a.done
	ms := a.all()
	read := map[string]uint64{trBTC: lastOf(ms, trBTC), l2BTC: lastOf(ms, l2BTC)}
	b := dialNamed(t, edgeB.URL("ws"), "desk-sa", read) // no subscribe: the bucket has them
	waitFor(t, 10*time.Second, "events on edge B", func() bool { return lastOf(b.all(), trBTC) > 0 && lastOf(b.all(), l2BTC) > 0 })
	checkReattach(t, b.all(), read)

	// The leader dies: the standby takes the lease over within 3 s.
	killed := time.Now()
	in1.Abort()
	src.drop(0)
	waitFor(t, 10*time.Second, "in-2 to lead", func() bool { l, _ := coverageLeader(t, in2.URL("http")); return l == "in-2" })
	if took := time.Since(killed); took > 3*time.Second {
		t.Fatalf("the standby took %v to lead, want at most 3s", took)
	}
	if !kvValue(t, js, "fanoutd_leases", "coinbase", &lease) || lease.Node != "in-2" {
		t.Fatalf("the lease bucket's coinbase key: %+v, want in-2's", lease)
	}
	waitFor(t, 10*time.Second, "the failover book_resync on edge B", func() bool { return len(kindsOf(b.all(), "book_resync")) > 0 })
	stop()
	settle(t, b, in2, "edge B")
}
