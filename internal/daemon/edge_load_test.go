package daemon_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fanoutd/fanoutd/internal/cluster"
	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testutil"
)

// TestEdgeKeepsUpWithBusyStream: an edge fed one stream at about 25,000
// events/s (50,000 trades, in bursts of 25 a millisecond) by a publisher
// on the bus forwards them without a NATS slow-consumer drop: no
// bus_gap is announced and fanoutd_cluster_slow_consumer_total stays
// absent. The rate achieved is logged.
func TestEdgeKeepsUpWithBusyStream(t *testing.T) {
	if testing.Short() {
		t.Skip("load")
	}
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	ns := natstest.Run(t)
	edge := daemontest.Start(t, fmt.Sprintf(edgeOnlyYAML, ns.ClientURL()), daemon.Options{})
	pub, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	subj := cluster.Subjects{Prefix: "fanoutd"}
	hdr := func(seq uint64) nats.Header {
		return nats.Header{cluster.HeaderEpoch: {"e1"}, cluster.HeaderSeq: {strconv.FormatUint(seq, 10)}, cluster.HeaderLeader: {"in-1~x"}}
	}
	hb := func() {
		pub.PublishMsg(&nats.Msg{Subject: subj.Heartbeat("coinbase"), Header: hdr(0), Data: []byte(`{"node":"in-1","epoch":"e1","streams":{}}`)})
	}
	hb()
	waitFor(t, 10*time.Second, "the edge ready", func() bool { hb(); return readyStatus(t, edge.URL("http")) == 200 })
	c := dialSub(t, edge.URL("ws"), trBTC)
	body := func(seq uint64) []byte {
		s := strconv.FormatUint(seq, 10)
		return []byte(`{"type":"trade","stream":"` + trBTC + `","seq":` + s + `,"id":"` + s + `","price":"1","size":"1","side":"buy","recv_time":"2026-01-01T00:00:00Z"}`)
	}
	// The edge subscribes the stream's subject once its subscriber holds it.
	waitFor(t, 10*time.Second, "the edge to follow the stream", func() bool {
		pub.PublishMsg(&nats.Msg{Subject: subj.Event(trBTC), Header: hdr(1), Data: body(1)})
		pub.Flush()
		return lastOf(c.all(), trBTC) >= 1
	})
	const n = 50000
	start := time.Now()
	tk := time.NewTicker(time.Millisecond)
	seq := uint64(1)
	for seq < n {
		<-tk.C
		for range 25 {
			seq++
			pub.PublishMsg(&nats.Msg{Subject: subj.Event(trBTC), Header: hdr(seq), Data: body(seq)})
		}
		if seq%1000 == 0 {
			hb()
		}
	}
	tk.Stop()
	pub.Flush()
	took := time.Since(start)
	testutil.Poll(30*time.Second, func() bool { return lastOf(c.all(), trBTC) == seq })
	if l := lastOf(c.all(), trBTC); l != seq {
		var kinds []string
		for _, m := range c.all() {
			if m.Type != "trade" {
				kinds = append(kinds, string(m.raw))
			}
		}
		t.Fatalf("last trade %d of %d; other messages %.2000v\n%s", l, seq, kinds, grepLines(metricsText(t, edge.URL("http")), "slow_consumer", "dropped", "queue"))
	}
	for _, m := range kindsOf(c.all(), "stream_gap") {
		if m.Details["reason"] == "bus_gap" {
			t.Errorf("a loss on the bus: %v", m.Details)
		}
	}
	m := metricsText(t, edge.URL("http"))
	if s := grepLines(m, "fanoutd_cluster_slow_consumer_total{"); s != "" {
		t.Errorf("slow consumer:\n%s", s)
	}
	t.Logf("%d events in %v: %.0f events/s published, all forwarded", seq-1, took.Round(time.Millisecond), float64(seq-1)/took.Seconds())
}
