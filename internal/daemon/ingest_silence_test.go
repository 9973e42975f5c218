package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fanoutd/fanoutd/internal/cluster"
	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venues"
)

const edgeOnlyYAML = "cluster:\n  role: edge\n  node: edge-1\n  nats_url: %s\nvenues:\n  coinbase:\n    symbols: []\n"

func waitReady(t *testing.T, e *daemontest.Running) {
	t.Helper()
	waitFor(t, 10*time.Second, "the edge ready", func() bool {
		r, err := http.Get(e.URL("http") + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})
}

// indexOf returns the index of the first message after from that match
// says, or -1.
func indexOf(ms []wireMsg, from int, match func(wireMsg) bool) int {
	for i := max(from, 0); i < len(ms); i++ {
		if match(ms[i]) {
			return i
		}
	}
	return -1
}

func isNotice(kind string) func(wireMsg) bool {
	return func(m wireMsg) bool { return m.Type == "notice" && m.Kind == kind }
}

// lastBefore returns the seq of the last event of st before index i.
func lastBefore(ms []wireMsg, i int, st string) uint64 {
	return lastOf(ms[:i], st)
}

// TestClusterIngestSilent: the ingest's messages stop reaching NATS while
// NATS, the ingest's connection and its lease stay up (a proxy between
// the ingest and NATS discards what it publishes). The edge's subscriber
// gets link_down (reason ingest_silent) once the heartbeats have been
// missing for 3 s, and /readyz answers 503 naming the venue; when the
// ingest is heard again, link_up and a snapshot:true after it, the level2
// loss announced by one book_resync (bus_gap, from the seq after the last
// the subscriber had), the trades loss by a stream_gap, and an exact book.
// The ingest keeps no recovery window (with one, the loss is recovered:
// TestClusterBusGapRecovered).
func TestClusterIngestSilent(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	ns := natstest.Run(t)
	proxy := newNATSProxy(t, strings.TrimPrefix(ns.ClientURL(), "nats://"))
	src := &source{}
	ingest := daemontest.Start(t, "cluster:\n  role: ingest\n  node: in-1\n  nats_url: "+proxy.URL()+"\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n"+noRecovery,
		daemon.Options{Venues: []venues.Venue{src.adapter()}})
	edge := daemontest.Start(t, fmt.Sprintf(edgeOnlyYAML, ns.ClientURL()), daemon.Options{})
	waitReady(t, edge)
	src.step()
	c := dialSub(t, edge.URL("ws"), l2BTC, trBTC)
	stop := src.run(t)
	waitFor(t, 10*time.Second, "trades", func() bool { return lastOf(c.all(), trBTC) > 10 })

	muted := time.Now()
	proxy.mute.Store(true)
	waitFor(t, 15*time.Second, "link_down", func() bool { return len(kindsOf(c.all(), "link_down")) > 0 })
	if took := time.Since(muted); took < cluster.IngestSilence-cluster.HeartbeatEvery {
		t.Fatalf("link_down %v after the ingest went silent, before the heartbeats could be missing for %v", took, cluster.IngestSilence)
	}
	r, err := http.Get(edge.URL("http") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	var ready struct {
		Ready     bool     `json:"ready"`
		NotLinked []string `json:"not_linked"`
	}
	json.Unmarshal(body, &ready)
	if r.StatusCode != 503 || ready.Ready || len(ready.NotLinked) != 1 || ready.NotLinked[0] != "coinbase" {
		t.Fatalf("readyz with the ingest silent: %d %s", r.StatusCode, body)
	}

	proxy.mute.Store(false)
	waitFor(t, 15*time.Second, "link_up", func() bool { return len(kindsOf(c.all(), "link_up")) > 0 })
	up := indexOf(c.all(), 0, isNotice("link_up"))
	waitFor(t, 15*time.Second, "a snapshot after link_up", func() bool {
		return indexOf(c.all(), up, func(m wireMsg) bool { return m.Stream == l2BTC && m.Snapshot }) > 0
	})
	// Trades after the loss, then the books settle.
	waitFor(t, 15*time.Second, "trades after the loss", func() bool { return len(kindsOf(c.all(), "stream_gap")) > 0 })
	stop()
	settle(t, c, ingest, "the edge's subscriber")

	ms := c.all()
	downs := kindsOf(ms, "link_down")
	if len(downs) != 1 || downs[0].Details["reason"] != "ingest_silent" || downs[0].Stream != "" {
		t.Fatalf("link_down notices %+v, want one with reason ingest_silent", downs)
	}
	if ups := kindsOf(ms, "link_up"); len(ups) != 1 {
		t.Fatalf("link_up notices %+v, want one", ups)
	}
	down := indexOf(ms, 0, isNotice("link_down"))
	rs := kindsOf(ms, "book_resync")
	if len(rs) != 1 || rs[0].Stream != l2BTC || rs[0].Details["reason"] != "bus_gap" {
		t.Fatalf("book_resync notices %+v, want one on level2 with reason bus_gap", rs)
	}
	ri := indexOf(ms, 0, isNotice("book_resync"))
	first, last := uint64(rs[0].Details["first"].(float64)), uint64(rs[0].Details["last"].(float64))
	if had := lastBefore(ms, ri, l2BTC); first != had+1 || last < first || ri < down {
		t.Fatalf("book_resync at %d (link_down at %d) range [%d, %d], the subscriber had seq %d", ri, down, first, last, had)
	}
	if next := indexOf(ms, ri, func(m wireMsg) bool { return m.Stream == l2BTC && m.Type == "book" }); next < 0 || !ms[next].Snapshot || ms[next].Seq < last {
		t.Fatalf("after book_resync: %+v, want a snapshot at or past %d", ms[next], last)
	}
	gs := kindsOf(ms, "stream_gap")
	gi := indexOf(ms, 0, isNotice("stream_gap"))
	if len(gs) != 1 || gs[0].Stream != trBTC || gs[0].Details["reason"] != "bus_gap" {
		t.Fatalf("stream_gap notices %+v, want one on trades with reason bus_gap", gs)
	}
	if had := lastBefore(ms, gi, trBTC); uint64(gs[0].Details["first"].(float64)) != had+1 {
		t.Fatalf("trades gap %v, the subscriber had seq %d", gs[0].Details, had)
	}
}

// TestClusterIngestRestartEpochChange: the only ingest is killed and a
// new one (a new process: a new epoch, its seq from 1) leads the venue.
// The edge's subscriber gets one book_resync on level2 (reason
// epoch_change, first the seq after the last it had, epoch the new
// ingest's) then the new ingest's snapshot:true and, in the end, its exact
// book; on trades a stream_gap (reason epoch_change, first the seq after
// the last it had). A symbol the ingest had only because an edge asked for
// it is subscribed by the new ingest too, from the edge's renewals.
func TestClusterIngestRestartEpochChange(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	ns := natstest.Run(t)
	url := ns.ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	var epochs []string // of the heartbeats, in order, each once
	sub, err := nc.Subscribe("fanoutd.hb.coinbase", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if e := m.Header.Get(cluster.HeaderEpoch); len(epochs) == 0 || epochs[len(epochs)-1] != e {
			epochs = append(epochs, e)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	heardEpochs := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), epochs...) }

	src := &source{}
	ingYAML := "cluster:\n  role: ingest\n  node: in-1\n  nats_url: " + url + "\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n"
	in1 := daemontest.Start(t, ingYAML, daemon.Options{Venues: []venues.Venue{src.adapter()}})
	edge := daemontest.Start(t, fmt.Sprintf(edgeOnlyYAML, url), daemon.Options{})
	waitReady(t, edge)
	src.step()
	c := dialSub(t, edge.URL("ws"), l2BTC, trBTC)
	stop := src.run(t)
	waitFor(t, 10*time.Second, "trades", func() bool { return lastOf(c.all(), trBTC) > 10 })
	// A symbol only an edge's subscriber asked for: the new ingest gets it
	// from the edge's renewals.
	eth := dialSub(t, edge.URL("ws"))
	if r := eth.send(t, "subscribe", "1", "coinbase:trades:ETH-USD"); r.Type != "ack" {
		t.Fatalf("subscribe ETH-USD: %s", r.raw)
	}
	symbolsOf := func(i int) []string { src.mu.Lock(); s := src.srcs[i]; src.mu.Unlock(); return s.Symbols() }
	if !slices.Contains(symbolsOf(0), "ETH-USD") {
		t.Fatalf("the ingest's venue subscribes %v, want ETH-USD among them", symbolsOf(0))
	}

	in1.Abort()
	stop()
	src.drop(0)
	// The new ingest's venue publishes once the daemon runs (its HTTP
	// serves after the bus and the venues started), starting with a
	// snapshot.
	in2 := daemontest.Start(t, ingYAML, daemon.Options{Venues: []venues.Venue{src.adapter()}})
	waitFor(t, 10*time.Second, "the new ingest to serve", func() bool {
		r, err := http.Get(in2.URL("http") + "/healthz")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	})
	waitFor(t, 10*time.Second, "the new ingest to subscribe ETH-USD (renewed by the edge)", func() bool { return slices.Contains(symbolsOf(1), "ETH-USD") })
	src.restart()
	stop = src.run(t)
	waitFor(t, 15*time.Second, "the epoch_change book_resync", func() bool { return len(kindsOf(c.all(), "book_resync")) > 0 })
	waitFor(t, 15*time.Second, "the trades gap", func() bool { return len(kindsOf(c.all(), "stream_gap")) > 0 })
	stop()
	settle(t, c, in2, "the edge's subscriber")

	es := heardEpochs()
	if len(es) != 2 {
		t.Fatalf("heartbeat epochs %v, want the first ingest's then the second's", es)
	}
	ms := c.all()
	rs := kindsOf(ms, "book_resync")
	if len(rs) != 1 || rs[0].Stream != l2BTC || rs[0].Details["reason"] != "epoch_change" || rs[0].Details["epoch"] != es[1] {
		t.Fatalf("book_resync notices %+v, want one on level2 with reason epoch_change and epoch %s", rs, es[1])
	}
	ri := indexOf(ms, 0, isNotice("book_resync"))
	if had := lastBefore(ms, ri, l2BTC); uint64(rs[0].Details["first"].(float64)) != had+1 {
		t.Fatalf("book_resync %v, the subscriber had seq %d", rs[0].Details, had)
	}
	if next := indexOf(ms, ri, func(m wireMsg) bool { return m.Stream == l2BTC && m.Type == "book" }); next < 0 || !ms[next].Snapshot {
		t.Fatalf("after book_resync: %+v, want the new ingest's snapshot", ms[next:])
	}
	gs := kindsOf(ms, "stream_gap")
	gi := indexOf(ms, 0, isNotice("stream_gap"))
	if len(gs) != 1 || gs[0].Stream != trBTC || gs[0].Details["reason"] != "epoch_change" || gs[0].Details["epoch"] != es[1] {
		t.Fatalf("stream_gap notices %+v, want one on trades with reason epoch_change", gs)
	}
	if had := lastBefore(ms, gi, trBTC); uint64(gs[0].Details["first"].(float64)) != had+1 {
		t.Fatalf("trades gap %v, the subscriber had seq %d", gs[0].Details, had)
	}
}
