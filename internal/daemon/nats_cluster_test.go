package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venues"
)

// silenceMeter records the longest time the subscriber's trades stream
// went without a new seq while the source ran.
type silenceMeter struct {
	mu      sync.Mutex
	longest time.Duration
}

func (m *silenceMeter) run(t *testing.T, c *wsClient) (stop func() time.Duration) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		last, at := uint64(0), time.Now()
		for {
			select {
			case <-quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if s := lastOf(c.all(), trBTC); s != last {
				last, at = s, time.Now()
			} else if d := time.Since(at); d > m.longest {
				m.mu.Lock()
				m.longest = d
				m.mu.Unlock()
			}
		}
	}()
	var once sync.Once
	stop = func() time.Duration {
		once.Do(func() { close(quit) })
		<-done
		m.mu.Lock()
		defer m.mu.Unlock()
		d := m.longest
		m.longest = 0
		return d
	}
	t.Cleanup(func() { stop() })
	return stop
}

// leaseStreamLeader names the server leading the lease bucket's stream.
func leaseStreamLeader(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	var name string
	waitFor(t, 20*time.Second, "the lease stream's leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "KV_fanoutd_leases")
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
			return false
		}
		name = info.Cluster.Leader
		return true
	})
	return name
}

// replicasCurrent waits until the lease stream has three replicas, all
// current (a restarted server caught up).
func replicasCurrent(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	waitFor(t, 30*time.Second, "the lease stream's replicas current", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "KV_fanoutd_leases")
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			return false
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		return true
	})
}

// TestNATSClusterFaults: three nats-server processes clustered on
// loopback, two ingests and an edge given the list of all three, a
// subscriber on a busy stream. Each server in turn is SIGKILLed (so each
// of them holds, at some point, the lease bucket's stream leader, an
// ingest's or the edge's connection), then each is restarted in
// lame-duck mode. Promises checked: the lease bucket has three replicas,
// seq never goes back, every lost trade seq is announced, the book is
// exact afterwards, and the events reaching the subscriber come from one
// ingest at a time. The longest silence per fault is measured and logged
// (not asserted: the machine is shared).
func TestNATSClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("three nats-server processes")
	}
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	servers := natstest.Cluster(t, 3, "")
	urls := natstest.URLs(servers)
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	waitFor(t, 30*time.Second, "JetStream", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})

	src := &source{}
	ingYAML := "cluster:\n  role: ingest\n  node: %s\n  nats_url: \"" + urls + "\"\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n"
	in1 := daemontest.Start(t, fmt.Sprintf(ingYAML, "in-1"), daemon.Options{Venues: []venues.Venue{src.adapter()}})
	waitFor(t, 30*time.Second, "in-1 to lead", func() bool { l, _ := coverageLeader(t, in1.URL("http")); return l == "in-1" })
	in2 := daemontest.Start(t, fmt.Sprintf(ingYAML, "in-2"), daemon.Options{Venues: []venues.Venue{src.adapter()}})
	edge := daemontest.Start(t, "cluster:\n  role: edge\n  node: edge-1\n  nats_url: \""+urls+"\"\nvenues:\n  coinbase:\n    symbols: []\n", daemon.Options{})
	waitReady(t, edge)
	ctx := context.Background()
	s, err := js.Stream(ctx, "KV_fanoutd_leases")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("the lease bucket has %d replicas on a three-server cluster, want 3", r)
	}
	replicasCurrent(t, js)

	src.step()
	c := dialSub(t, edge.URL("ws"), l2BTC, trBTC)
	stopSrc := src.run(t)
	waitFor(t, 10*time.Second, "trades", func() bool { return lastOf(c.all(), trBTC) > 30 })

	var meter silenceMeter
	progress := func(what string) {
		from := lastOf(c.all(), trBTC)
		waitFor(t, 30*time.Second, "trades after "+what, func() bool { return lastOf(c.all(), trBTC) > from+100 })
	}
	report := map[string]time.Duration{}
	for i, srv := range servers {
		leader := leaseStreamLeader(t, js)
		what := fmt.Sprintf("SIGKILL n%d", i)
		if leader == fmt.Sprintf("n%d", i) {
			what += " (the lease stream's leader)"
		}
		stop := meter.run(t, c)
		srv.Kill()
		progress(what)
		report[what] = stop()
		srv.Start()
		replicasCurrent(t, js)
	}
	for i, srv := range servers {
		what := fmt.Sprintf("lame-duck restart n%d", i)
		stop := meter.run(t, c)
		srv.LameDuck()
		if !srv.Wait(60 * time.Second) {
			t.Fatalf("n%d did not leave lame-duck mode", i)
		}
		progress(what)
		report[what] = stop()
		srv.Start()
		replicasCurrent(t, js)
	}
	stopSrc()
	lead := in1
	if l, _ := coverageLeader(t, in2.URL("http")); l == "in-2" {
		lead = in2
	}
	settle(t, c, lead, "the subscriber")

	// Seq never goes back; every trade seq not delivered is inside an
	// announced gap.
	ms := c.all()
	last := map[string]uint64{}
	covered := map[uint64]bool{}
	for _, m := range ms {
		if m.Type == "notice" && m.Kind == "stream_gap" && m.Stream == trBTC {
			first, _ := m.Details["first"].(float64)
			lastSeq, _ := m.Details["last"].(float64)
			if after, ok := m.Details["after"].(float64); ok {
				first = after + 1
			}
			for s := uint64(first); s <= uint64(lastSeq) && s > 0; s++ {
				covered[s] = true
			}
			if lastSeq == 0 { // unknown end: up to the next event
				covered[uint64(first)] = true
				covered[0] = true
			}
			continue
		}
		if m.Type != "book" && m.Type != "trade" {
			continue
		}
		if m.Seq <= last[m.Stream] && !(m.Snapshot && m.Seq == last[m.Stream]) {
			t.Fatalf("%s: seq %d after %d", m.Stream, m.Seq, last[m.Stream])
		}
		if m.Stream == trBTC && last[trBTC] > 0 && m.Seq > last[trBTC]+1 {
			for s := last[trBTC] + 1; s < m.Seq; s++ {
				if !covered[s] && !covered[0] {
					t.Errorf("trade seq %d lost between %d and %d without a stream_gap", s, last[trBTC], m.Seq)
					break
				}
			}
			delete(covered, 0)
		}
		last[m.Stream] = m.Seq
	}
	var lines []string
	for k, v := range report {
		lines = append(lines, fmt.Sprintf("%s: longest silence %v", k, v.Round(time.Millisecond)))
	}
	m := metricsText(t, edge.URL("http"))
	t.Logf("subscriber silence per fault:\n%s\nedge: %s", strings.Join(lines, "\n"), grepLines(m, "fanoutd_cluster_fenced_total", "fanoutd_cluster_slow_consumer_total", "fanoutd_cluster_lame_duck"))
	t.Logf("gaps announced: %d stream_gap, %d book_resync", len(kindsOf(ms, "stream_gap")), len(kindsOf(ms, "book_resync")))
}
