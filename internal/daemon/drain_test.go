package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/cluster"
)

// TestClusterEdgeDrain: what a preStop hook does to an edge. POST /drainz
// makes /readyz answer 503 draining and refuses a new websocket 503
// shutting_down, while the open connection keeps receiving; stopping the
// edge then sends its named subscriber the shutdown notice and close 1001
// and releases the name, so the subscriber reattaches on the other edge
// with exact gaps after what it read.
func TestClusterEdgeDrain(t *testing.T) {
	ns, src, ingest, edgeA, edgeB, _ := startCluster(t)
	src.step()
	a := dialNamed(t, edgeA.URL("ws"), "desk1", nil, l2BTC, trBTC)
	stop := src.run(t)
	waitFor(t, 10*time.Second, "trades on edge A", func() bool { return lastOf(a.all(), trBTC) > 30 })
	awaitName(t, ns.ClientURL(), "desk1", func(r cluster.NameRecord) bool { return len(r.Streams) == 2 })

	r, err := http.Post(edgeA.URL("http")+"/drainz", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	var ans struct {
		Draining    bool `json:"draining"`
		Connections int  `json:"connections"`
	}
	if r.StatusCode != 200 || json.Unmarshal(body, &ans) != nil || !ans.Draining || ans.Connections != 1 {
		t.Fatalf("POST /drainz: %d %s", r.StatusCode, body)
	}
	r, err = http.Get(edgeA.URL("http") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(r.Body)
	r.Body.Close()
	var ready map[string]any
	if r.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &ready) != nil || ready["ready"] != false || ready["draining"] != true {
		t.Fatalf("/readyz while draining: %d %s", r.StatusCode, body)
	}
	_, resp, err := websocket.DefaultDialer.Dial(edgeA.URL("ws")+"/v1/stream", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a new websocket while draining: %v %v, want 503", err, resp)
	}
	b, _ := io.ReadAll(resp.Body)
	var refusal struct{ Code string }
	if json.Unmarshal(b, &refusal); refusal.Code != "shutting_down" {
		t.Fatalf("refusal %s, want shutting_down", b)
	}
	from := lastOf(a.all(), trBTC)
	waitFor(t, 10*time.Second, "trades on edge A while it drains", func() bool { return lastOf(a.all(), trBTC) > from+10 })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := edgeA.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-a.done
	ms := a.all()
	if n := len(kindsOf(ms, "shutdown")); n != 1 {
		t.Fatalf("%d shutdown notices, want 1", n)
	}
	awaitName(t, ns.ClientURL(), "desk1", func(r cluster.NameRecord) bool { return r.Conn == "" })
	read := map[string]uint64{trBTC: lastOf(ms, trBTC), l2BTC: lastOf(ms, l2BTC)}
	c := dialNamed(t, edgeB.URL("ws"), "desk1", read) // its subscriptions come from the bucket
	waitFor(t, 10*time.Second, "events on edge B", func() bool { return lastOf(c.all(), trBTC) > read[trBTC] })
	checkReattach(t, c.all(), read)
	stop()
	settle(t, c, ingest, "edge B")
}
