package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venues"
)

// coverageLeader returns what GET /v1/coverage says of coinbase's leader.
func coverageLeader(t *testing.T, base string) (leader string, leading *bool) {
	t.Helper()
	r, err := http.Get(base + "/v1/coverage")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var cov []struct {
		Venue   string `json:"venue"`
		Leader  string `json:"leader"`
		Leading *bool  `json:"leading"`
	}
	json.NewDecoder(r.Body).Decode(&cov)
	for _, c := range cov {
		if c.Venue == "coinbase" {
			return c.Leader, c.Leading
		}
	}
	return "", nil
}

func metricsText(t *testing.T, base string) string {
	t.Helper()
	r, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// TestClusterIngestFailover: two ingests serve coinbase; the leader is
// stopped abruptly; the standby takes the lease over within 3 s and
// continues every stream at the next seq (seq never goes back), starting
// the level2 stream with a snapshot:true announced by one book_resync
// (reason failover) and announcing the trades window that may be lost
// (stream_gap, reason failover); the edge's subscriber ends with the new
// leader's exact book; /v1/coverage and /metrics name the leader.
func TestClusterIngestFailover(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	ns := natstest.Start(t, 0, t.TempDir())
	t.Cleanup(func() { ns.Shutdown() })
	url := ns.ClientURL()
	src := &source{}
	ingYAML := "cluster:\n  role: ingest\n  node: %s\n  nats_url: " + url + "\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n"
	in1 := daemontest.Start(t, fmt.Sprintf(ingYAML, "in-1"), daemon.Options{Venues: []venues.Venue{src.adapter()}})
	waitFor(t, 10*time.Second, "in-1 to lead", func() bool { l, _ := coverageLeader(t, in1.URL("http")); return l == "in-1" })
	in2 := daemontest.Start(t, fmt.Sprintf(ingYAML, "in-2"), daemon.Options{Venues: []venues.Venue{src.adapter()}})
	edge := daemontest.Start(t, "cluster:\n  role: edge\n  node: edge-1\n  nats_url: "+url+"\nvenues:\n  coinbase:\n    symbols: []\n", daemon.Options{})
	waitReady(t, edge)
	if l, leading := coverageLeader(t, in2.URL("http")); l != "in-1" || leading == nil || *leading {
		t.Fatalf("in-2's coverage: leader %q leading %v, want in-1 and false", l, leading)
	}
	src.step()
	c := dialSub(t, edge.URL("ws"), l2BTC, trBTC)
	stop := src.run(t)
	waitFor(t, 10*time.Second, "trades through in-1", func() bool { return lastOf(c.all(), trBTC) > 30 })
	killed := time.Now()
	in1.Abort()
	src.drop(0)
	waitFor(t, 10*time.Second, "in-2 to lead", func() bool { l, _ := coverageLeader(t, in2.URL("http")); return l == "in-2" })
	took := time.Since(killed)
	waitFor(t, 10*time.Second, "the failover book_resync", func() bool { return len(kindsOf(c.all(), "book_resync")) > 0 })
	if took > 3*time.Second {
		t.Fatalf("the standby took %v to lead, want at most 3s", took)
	}
	t.Logf("standby leads %v after the leader was killed", took)
	time.Sleep(500 * time.Millisecond)
	stop()
	settle(t, c, in2, "the edge's subscriber")

	ms := c.all()
	rs := kindsOf(ms, "book_resync")
	if len(rs) != 1 || rs[0].Details["reason"] != "failover" || rs[0].Stream != l2BTC {
		t.Fatalf("book_resync notices %+v, want one with reason failover", rs)
	}
	gs := kindsOf(ms, "stream_gap")
	if len(gs) != 1 || gs[0].Details["reason"] != "failover" || gs[0].Stream != trBTC {
		t.Fatalf("stream_gap notices %+v, want one on trades with reason failover", gs)
	}
	// Seq never goes back, on either stream; the level2 stream restarts
	// with a snapshot right after the notice, at the next seq.
	last := map[string]uint64{}
	sawNotice := false
	for _, m := range ms {
		if m.Type == "notice" && m.Kind == "book_resync" {
			sawNotice = true
			continue
		}
		if m.Type != "book" && m.Type != "trade" {
			continue
		}
		if m.Seq <= last[m.Stream] && !(m.Snapshot && m.Seq == last[m.Stream]) {
			t.Fatalf("%s: seq %d after %d", m.Stream, m.Seq, last[m.Stream])
		}
		if sawNotice && m.Stream == l2BTC {
			if !m.Snapshot || m.Seq != last[l2BTC]+1 {
				t.Fatalf("after book_resync: %s seq %d snapshot %v, want the snapshot at %d", m.Stream, m.Seq, m.Snapshot, last[l2BTC]+1)
			}
			sawNotice = false
		}
		last[m.Stream] = m.Seq
	}
	if after := uint64(gs[0].Details["after"].(float64)); after == 0 {
		t.Fatalf("stream_gap without after: %v", gs[0].Details)
	}
	m := metricsText(t, in2.URL("http"))
	if !strings.Contains(m, `fanoutd_venue_leading{venue="coinbase"} 1`) || !strings.Contains(m, `fanoutd_venue_leader{node="in-2",venue="coinbase"} 1`) {
		t.Fatalf("in-2's metrics do not say it leads:\n%s", grepLines(m, "leader", "leading"))
	}
	waitFor(t, 5*time.Second, "the edge's coverage to name in-2", func() bool { l, _ := coverageLeader(t, edge.URL("http")); return l == "in-2" })
}

func grepLines(s string, words ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
