package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
)

// startProcess runs this test binary as `fanoutd args…` in its own
// process; it is killed when the test ends.
func startProcess(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FANOUTD_TEST_AS_MAIN=1")
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if len(args) > 0 && args[0] == "serve" {
		edgeProcs = append(edgeProcs, cmd)
	}
	return cmd
}

// edgeProcs are the serve processes startProcess started (tests are not
// parallel).
var edgeProcs []*exec.Cmd

func leaderOf(base, venueName string) (string, bool) {
	r, err := http.Get(base + "/v1/coverage")
	if err != nil {
		return "", false
	}
	defer r.Body.Close()
	var cov []struct {
		Venue   string `json:"venue"`
		Leader  string `json:"leader"`
		Leading *bool  `json:"leading"`
	}
	json.NewDecoder(r.Body).Decode(&cov)
	for _, c := range cov {
		if c.Venue == venueName {
			return c.Leader, c.Leading != nil && *c.Leading
		}
	}
	return "", false
}

type line struct {
	Type     string         `json:"type"`
	Kind     string         `json:"kind"`
	Stream   string         `json:"stream"`
	Seq      uint64         `json:"seq"`
	Snapshot bool           `json:"snapshot"`
	Details  map[string]any `json:"details"`
	raw      []byte
}

// TestIngestKilledStandbyTakesOver: two ingest processes replay the same
// capture into NATS, an edge process serves the subscriber; the leader is killed with SIGKILL; the standby leads
// within 3 s, seq never goes back for the edge's subscriber, the level2
// stream restarts with one book_resync (failover) and a snapshot at the
// next seq, and the subscriber's book is exactly the new leader's.
func TestIngestKilledStandbyTakesOver(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	natsURL := natstest.Run(t).ClientURL()
	const l2, tr = "kraken:level2:BTC/USD", "kraken:trades:BTC/USD"
	ingest := func(node string) (string, *exec.Cmd) {
		port := freePort(t)
		cfg := filepath.Join(t.TempDir(), node+".yaml")
		os.WriteFile(cfg, []byte(fmt.Sprintf("log_level: warn\ncluster:\n  node: %s\nclaim_check:\n  stores:\n    - {name: default, kind: dir, path: %s}\n", node, t.TempDir())), 0o644)
		cmd := startProcess(t, "replay", "--role", "ingest", "--nats", natsURL, "--speed", "1", "--loop",
			"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--config", cfg, capture("kraken"))
		return fmt.Sprintf("http://127.0.0.1:%d", port), cmd
	}
	aURL, a := ingest("in-a")
	checkFor(t, 20*time.Second, "in-a to lead", func() bool { _, l := leaderOf(aURL, "kraken"); return l })
	bURL, _ := ingest("in-b")
	checkFor(t, 20*time.Second, "in-b to stand by", func() bool { n, l := leaderOf(bURL, "kraken"); return n == "in-a" && !l })
	// The edge is a process of its own too.
	edgeAddr := startEdgeProcess(t, natsURL)
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+edgeAddr+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []line
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			mu.Lock()
			for _, l := range strings.Split(string(b), "\n") {
				var x line
				json.Unmarshal([]byte(l), &x)
				x.raw = []byte(l)
				got = append(got, x)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { ws.Close(); <-done })
	ws.WriteJSON(map[string]any{"op": "subscribe", "id": "1", "streams": []string{l2, tr}})
	snapshot := func() []line { mu.Lock(); defer mu.Unlock(); return append([]line(nil), got...) }
	count := func(kind string) int {
		n := 0
		for _, l := range snapshot() {
			if l.Type == "notice" && l.Kind == kind && l.Details["reason"] == "failover" {
				n++
			}
		}
		return n
	}
	checkFor(t, 20*time.Second, "events through in-a", func() bool {
		n := 0
		for _, l := range snapshot() {
			if l.Type == "book" && !l.Snapshot {
				n++
			}
		}
		return n > 100
	})
	killed := time.Now()
	a.Process.Kill() // SIGKILL
	a.Wait()
	checkFor(t, 10*time.Second, "in-b to lead", func() bool { _, l := leaderOf(bURL, "kraken"); return l })
	took := time.Since(killed)
	if took > 3*time.Second {
		t.Fatalf("in-b led %v after in-a was killed, want at most 3s", took)
	}
	t.Logf("in-b leads %v after kill -9 of in-a", took)
	checkFor(t, 10*time.Second, "the failover book_resync", func() bool { return count("book_resync") > 0 })
	time.Sleep(time.Second)
	if n := count("book_resync"); n != 1 {
		t.Fatalf("%d failover book_resync notices, want 1", n)
	}
	// Seq never goes back; the book_resync is followed by the snapshot at
	// the next seq.
	last := map[string]uint64{}
	after := false
	for _, l := range snapshot() {
		if l.Type == "notice" && l.Kind == "book_resync" {
			after = true
			continue
		}
		if l.Type != "book" && l.Type != "trade" {
			continue
		}
		if l.Seq < last[l.Stream] || l.Seq == last[l.Stream] && !l.Snapshot {
			t.Fatalf("%s: seq %d after %d", l.Stream, l.Seq, last[l.Stream])
		}
		if after && l.Stream == l2 {
			if !l.Snapshot || l.Seq != last[l2]+1 {
				t.Fatalf("after the failover book_resync: seq %d snapshot %v, want the snapshot at %d", l.Seq, l.Snapshot, last[l2]+1)
			}
			after = false
		}
		last[l.Stream] = l.Seq
	}
	// The subscriber's book, rebuilt from what it received up to the new
	// leader's book seq, is that book.
	checkBookReaches(t, "the subscriber to reach the new leader's book", bURL+"/v1/books/kraken/BTC/USD", l2, 20*time.Second, snapshot)
}

// startEdgeProcess runs `fanoutd serve --role edge` for kraken in its own
// process and returns its address once it is ready.
func startEdgeProcess(t *testing.T, natsURL string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("log_level: warn\nclaim_check:\n  stores:\n    - {name: default, kind: dir, path: %s}\nvenues:\n  kraken:\n    symbols: []\n    max_queue_len: 1000000\n", t.TempDir())), 0o644)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "serve", "--role", "edge", "--nats", natsURL, "--listen", addr, "--config", cfg)
	checkFor(t, 20*time.Second, "the edge ready", func() bool {
		r, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})
	return addr
}

// lineReader reads every object of a websocket connection.
type lineReader struct {
	ws   *websocket.Conn
	mu   sync.Mutex
	got  []line
	done chan struct{}
}

func readLines(t *testing.T, ws *websocket.Conn) *lineReader {
	r := &lineReader{ws: ws, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			r.mu.Lock()
			for _, l := range strings.Split(string(b), "\n") {
				var x line
				json.Unmarshal([]byte(l), &x)
				x.raw = []byte(l)
				r.got = append(r.got, x)
			}
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { ws.Close(); <-r.done })
	return r
}

func (r *lineReader) all() []line {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]line(nil), r.got...)
}

func lastSeq(ls []line, st string) uint64 {
	var s uint64
	for _, l := range ls {
		if l.Stream == st && l.Type != "notice" && l.Seq > s {
			s = l.Seq
		}
	}
	return s
}

// TestEdgeKilledNamedReattaches: a named subscriber's edge process is
// killed with SIGKILL; it reattaches on another edge process, stating the
// last seq it read per stream: resumed (reattached) first, gaps starting
// right after what it read and ending right before what follows (a
// snapshot at the gap's end); its subscriptions came from the NATS
// key-value bucket. The ingest keeps no recovery window (with one, the
// loss is recovered: the client scenario named_reattach_cluster).
func TestEdgeKilledNamedReattaches(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	natsURL := natstest.Run(t).ClientURL()
	const l2 = "kraken:level2:BTC/USD" // the captures hold no trades: the trades path is TestClusterNamedSurvivesEdgeLoss's
	cfg := filepath.Join(t.TempDir(), "in.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("log_level: warn\nrecovery:\n  max_events_per_stream: 0\ncluster:\n  node: in-a\nclaim_check:\n  stores:\n    - {name: default, kind: dir, path: %s}\n", t.TempDir())), 0o644)
	startProcess(t, "replay", "--role", "ingest", "--nats", natsURL, "--speed", "1", "--loop",
		"--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--config", cfg, capture("kraken"))
	e1 := startEdgeProcess(t, natsURL)
	e2 := startEdgeProcess(t, natsURL)
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+e1+"/v1/stream?name=desk9", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := readLines(t, ws)
	ws.WriteJSON(map[string]any{"op": "subscribe", "id": "1", "streams": []string{l2}})
	checkFor(t, 20*time.Second, "events on edge 1", func() bool { return lastSeq(a.all(), l2) > 100 })
	time.Sleep(1500 * time.Millisecond) // the bucket has what was written
	// Kill edge 1's process: it is the second-to-last process started.
	var victim *exec.Cmd
	for _, c := range edgeProcs {
		if strings.Contains(strings.Join(c.Args, " "), e1) {
			victim = c
		}
	}
	if victim == nil {
		t.Fatal("edge 1's process not found")
	}
	victim.Process.Kill()
	victim.Wait()
	<-a.done
	got := a.all()
	read := map[string]uint64{l2: lastSeq(got, l2) - 5}
	q := fmt.Sprintf("name=desk9&last=%s:%d", l2, read[l2])
	ws2, _, err := websocket.DefaultDialer.Dial("ws://"+e2+"/v1/stream?"+strings.ReplaceAll(q, "/", "%2F"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := readLines(t, ws2)
	checkFor(t, 20*time.Second, "events on edge 2", func() bool {
		return lastSeq(b.all(), l2) > read[l2]+10
	})
	ms := b.all()
	if ms[0].Kind != "resumed" || ms[0].Details["reason"] != "reattached" {
		t.Fatalf("first message on edge 2: %s", ms[0].raw)
	}
	gaps := ms[0].Details["gaps"].(map[string]any)
	for st, r := range read {
		g, ok := gaps[st].([]any)
		if !ok || uint64(g[0].(float64)) != r+1 {
			t.Fatalf("gap of %s: %v, want it to start at %d", st, gaps[st], r+1)
		}
		end := uint64(g[1].(float64))
		for _, l := range ms[1:] {
			if l.Stream != st || l.Type == "notice" {
				continue
			}
			if !l.Snapshot || l.Seq != end {
				t.Fatalf("%s after the gap %v: seq %d snapshot %v", st, g, l.Seq, l.Snapshot)
			}
			break
		}
	}
	// Then the updates follow the snapshot one by one.
	var prev uint64
	for _, l := range ms[1:] {
		if l.Stream != l2 || l.Type != "book" {
			continue
		}
		if prev != 0 && !l.Snapshot && l.Seq != prev+1 {
			t.Fatalf("update %d after %d", l.Seq, prev)
		}
		prev = l.Seq
	}
}
