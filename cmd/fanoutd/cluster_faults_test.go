package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
)

const (
	faultL2 = "kraken:level2:BTC/USD"
	faultTr = "kraken:trades:BTC/USD"
	// silencePromise is the longest a subscriber of a busy stream may go
	// without an event when one NATS server dies or restarts.
	silencePromise = 2 * time.Second
)

// faultSub is one subscriber of faultL2 and faultTr: every line it
// received, and the longest wait between two events within a window.
type faultSub struct {
	name string
	ws   *websocket.Conn
	done chan struct{}

	mu      sync.Mutex
	got     []line
	lastAt  time.Time
	window  bool
	longest time.Duration
	events  int
}

func dialFaultSub(t *testing.T, name, addr string) *faultSub {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &faultSub{name: name, ws: ws, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			now := time.Now()
			s.mu.Lock()
			for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
				var x line
				json.Unmarshal(l, &x)
				x.raw = bytes.Clone(l)
				s.got = append(s.got, x)
				if x.Type == "book" || x.Type == "trade" {
					if s.window && !s.lastAt.IsZero() {
						s.longest = max(s.longest, now.Sub(s.lastAt))
					}
					s.lastAt = now
					s.events++
				}
			}
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { ws.Close(); <-s.done })
	if err := ws.WriteJSON(map[string]any{"op": "subscribe", "id": "1", "streams": []string{faultL2, faultTr}}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *faultSub) all() []line {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]line(nil), s.got...)
}

// received is how many lines s has received so far.
func (s *faultSub) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func (s *faultSub) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events
}

// open starts a window: the longest wait between events from now on.
func (s *faultSub) open() {
	s.mu.Lock()
	s.window, s.longest = true, 0
	s.mu.Unlock()
}

// close ends the window and returns its longest wait (counting the wait
// since the last event, if that is longer).
func (s *faultSub) close() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = false
	return max(s.longest, time.Since(s.lastAt))
}

// startFaultEdge runs `fanoutd serve --role edge` as node in its own
// process and returns its address once it is ready.
func startFaultEdge(t *testing.T, node, urls string) (string, *exec.Cmd) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), node+".yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("log_level: warn\ncluster:\n  node: %s\nclaim_check:\n  stores:\n    - {name: default, kind: dir, path: %s}\nvenues:\n  kraken:\n    symbols: []\n    max_queue_len: 1000000\n", node, t.TempDir())), 0o644)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := startProcess(t, "serve", "--role", "edge", "--nats", urls, "--listen", addr, "--config", cfg)
	checkFor(t, 30*time.Second, node+" ready", func() bool {
		r, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})
	return addr, cmd
}

// connectedTo names the fanoutd nodes connected to a server (its /connz).
func connectedTo(s *natstest.Server) []string {
	r, err := http.Get(s.MonitorURL() + "/connz")
	if err != nil {
		return nil
	}
	defer r.Body.Close()
	var cz struct {
		Connections []struct {
			Name string `json:"name"`
		} `json:"connections"`
	}
	json.NewDecoder(r.Body).Decode(&cz)
	var out []string
	for _, c := range cz.Connections {
		if n, ok := strings.CutPrefix(c.Name, "fanoutd-"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// leaseStream reports the lease bucket's stream leader and whether its two
// other replicas are current.
func leaseStream(js jetstream.JetStream) (leader string, current bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "KV_fanoutd_leases")
	if err != nil {
		return "", false
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return "", false
	}
	current = info.Cluster.Leader != "" && len(info.Cluster.Replicas) == 2
	for _, r := range info.Cluster.Replicas {
		current = current && r.Current && !r.Offline
	}
	return info.Cluster.Leader, current
}

func metricLines(base string, names ...string) string {
	r, err := http.Get(base + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		for _, n := range names {
			if strings.HasPrefix(l, n) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "; ")
}

// TestClusterFaultsProcesses: three nats-server processes in one cluster
// (the third behind a pausable proxy on its routes), two ingest processes
// replaying the same Kraken capture (one leads, one stands by), two edge
// processes, a subscriber on each. Faults, each in turn: SIGKILL of each
// server (each run names what it held: the lease stream's leader, the
// nodes connected to it), a lame-duck restart of each, and the third
// server cut off from the others for 5 s. Promises, checked by each
// subscriber: the longest time without an event is at most 2 s when a
// server dies or restarts in lame-duck mode; seq never goes back; every
// lost seq is announced (a trades hole inside a stream_gap, a level2 hole
// only to a snapshot after a book_resync or link_up); a seq both subscribers received
// has the same bytes on both (one publisher reached them), outside a
// partition where each side followed its own leader; each book is
// exactly the leading ingest's afterwards. The silence per fault is
// logged (the partition's too, which is not promised: see
// docs/cluster.md).
func TestClusterFaultsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("three nats-server and four fanoutd processes")
	}
	if raceEnabled {
		// The processes are this test binary: under the race detector
		// they run several times slower, which no timing promise is
		// about, and the book check still fails there (a new leader's
		// book tens of thousands of seqs behind what the edge forwarded;
		// docs/performance/2026-12-02-cluster-faults.md). .ci/run runs
		// this test without it.
		t.Skip("timing promises: run without -race (.ci/run does)")
	}
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	servers, cut := natstest.PartitionCluster(t, 3, "")
	urls := natstest.URLs(servers)
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	checkFor(t, 30*time.Second, "JetStream", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})

	procs := map[string]*exec.Cmd{}
	ingest := func(node string) string {
		port := freePort(t)
		cfg := filepath.Join(t.TempDir(), node+".yaml")
		os.WriteFile(cfg, []byte(fmt.Sprintf("log_level: warn\ncluster:\n  node: %s\nclaim_check:\n  stores:\n    - {name: default, kind: dir, path: %s}\n", node, t.TempDir())), 0o644)
		procs[node] = startProcess(t, "replay", "--role", "ingest", "--nats", urls, "--speed", "0.5", "--loop",
			"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--config", cfg, capture("kraken"))
		return fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	ingests := map[string]string{"in-a": ingest("in-a")}
	checkFor(t, 30*time.Second, "in-a to lead", func() bool { _, l := leaderOf(ingests["in-a"], "kraken"); return l })
	ingests["in-b"] = ingest("in-b")
	checkFor(t, 30*time.Second, "in-b to stand by", func() bool { n, l := leaderOf(ingests["in-b"], "kraken"); return n == "in-a" && !l })
	edges := map[string]string{}
	for _, e := range []string{"edge-1", "edge-2"} {
		edges[e], procs[e] = startFaultEdge(t, e, urls)
	}
	subs := []*faultSub{dialFaultSub(t, "sub@edge-1", edges["edge-1"]), dialFaultSub(t, "sub@edge-2", edges["edge-2"])}
	live := subs // the subscribers still connected
	progress := func(what string) {
		for _, s := range live {
			from := s.count()
			checkFor(t, 30*time.Second, s.name+": events after "+what, func() bool { return s.count() > from+200 })
		}
	}
	progress("the start")
	current := func() {
		checkFor(t, 60*time.Second, "the lease stream's replicas current", func() bool { _, ok := leaseStream(js); return ok })
	}
	current()

	type row struct {
		fault   string
		silence []time.Duration
	}
	var rows []row
	window := func(fault string, promise bool, do func()) {
		for _, s := range subs {
			s.open()
		}
		do()
		progress(fault)
		r := row{fault: fault}
		for _, s := range subs {
			d := s.close()
			r.silence = append(r.silence, d)
			if promise && d > silencePromise {
				t.Errorf("%s: %s went %v without an event, promised at most %v", fault, s.name, d.Round(time.Millisecond), silencePromise)
			}
		}
		rows = append(rows, r)
	}
	var edge2Metrics string // edge-2's counters, read before it is killed
	report := func() {
		var b strings.Builder
		fmt.Fprintf(&b, "subscriber silence per fault (longest time without an event; %s, %s):\n", subs[0].name, subs[1].name)
		for _, r := range rows {
			fmt.Fprintf(&b, "  %-90s %8v %8v\n", r.fault, r.silence[0].Round(time.Millisecond), r.silence[1].Round(time.Millisecond))
		}
		fmt.Fprintf(&b, "edge-1: %s\n", metricLines("http://"+edges["edge-1"], edgeMetrics...))
		fmt.Fprintf(&b, "edge-2 (before its death): %s\n", edge2Metrics)
		for name, u := range ingests {
			fmt.Fprintf(&b, "%s: %s\n", name, metricLines(u, "fanoutd_cluster_lame_duck_moves_total", "fanoutd_cluster_publish_dropped_total"))
		}
		for _, s := range subs {
			ms := s.all()
			s.mu.Lock()
			quiet := time.Since(s.lastAt).Round(time.Millisecond)
			s.mu.Unlock()
			fmt.Fprintf(&b, "%s: %d events, %d stream_gap, %d book_resync, the last event %v ago; its last lines:\n", s.name, s.count(), countKind(ms, "stream_gap"), countKind(ms, "book_resync"), quiet)
			for _, m := range ms[max(0, len(ms)-4):] {
				fmt.Fprintf(&b, "    %.300s\n", m.raw)
			}
		}
		t.Log(b.String())
	}
	defer report() // also when a promise fails: the figures say where
	held := func(i int) string {
		leader, _ := leaseStream(js)
		var what []string
		if leader == fmt.Sprintf("n%d", i) {
			what = append(what, "lease stream leader")
		}
		if c := connectedTo(servers[i]); len(c) > 0 {
			what = append(what, strings.Join(c, ", "))
		}
		return strings.Join(what, "; ")
	}

	for i, srv := range servers {
		window(fmt.Sprintf("SIGKILL n%d (%s)", i, held(i)), true, srv.Kill)
		srv.Start()
		current()
	}
	for i, srv := range servers {
		window(fmt.Sprintf("lame-duck restart n%d (%s)", i, held(i)), true, func() {
			srv.LameDuck()
			if !srv.Wait(60 * time.Second) {
				t.Fatalf("n%d did not leave lame-duck mode", i)
			}
		})
		srv.Start()
		current()
	}
	// The partition: the server the leading ingest is connected to is cut
	// off from the other two.
	leading := func() string {
		var leader string
		checkFor(t, 20*time.Second, "one ingest leading", func() bool {
			n := 0
			for name, u := range ingests {
				if _, l := leaderOf(u, "kraken"); l {
					leader, n = name, n+1
				}
			}
			return n == 1
		})
		return leader
	}
	leader := leading()
	k := 0
	for i := range servers {
		if slices.Contains(connectedTo(servers[i]), "ingest-"+leader) {
			k = i
		}
	}
	split := map[*faultSub][2]int{} // each subscriber's lines from the cut to the edge's death
	for _, s := range subs {
		split[s] = [2]int{s.received(), 0}
	}
	window(fmt.Sprintf("partition: n%d cut off for 5 s (%s)", k, held(k)), false, func() {
		cut(k).Pause()
		time.Sleep(5 * time.Second) // the fault's length, not a wait for a condition
		cut(k).Resume()
	})
	current()

	// An edge dies: its subscriber connects to the other edge at once.
	for _, s := range subs {
		s.open()
	}
	for _, s := range subs {
		split[s] = [2]int{split[s][0], s.received()}
	}
	edge2Metrics = metricLines("http://"+edges["edge-2"], edgeMetrics...)
	killed := time.Now()
	procs["edge-2"].Process.Kill()
	<-subs[1].done
	moved := dialFaultSub(t, "sub moved to edge-1", edges["edge-1"])
	checkFor(t, 30*time.Second, "events on the moved subscriber", func() bool { return moved.count() > 0 })
	rows = append(rows, row{fault: "SIGKILL edge-2 (its subscriber reconnects to edge-1: kill to first event)", silence: []time.Duration{subs[0].close(), time.Since(killed)}})
	subs, live = append(subs, moved), []*faultSub{subs[0], moved}
	progress("the edge's death")

	// The leading ingest dies: the other takes the lease within 3 s.
	leader = leading() // the partition may have moved the lease
	for _, s := range live {
		s.open()
	}
	procs[leader].Process.Kill()
	progress("the ingest's death")
	rows = append(rows, row{fault: "SIGKILL the leading ingest " + leader + " (the standby takes the lease)", silence: []time.Duration{live[0].close(), live[1].close()}})
	delete(ingests, leader)

	// Which ingest leads now; each subscriber's book, rebuilt from what
	// it received up to that ingest's book seq, is that book.
	lead := leading()
	for _, s := range subs {
		checkFaultSub(t, s)
	}
	for _, s := range []*faultSub{subs[0], moved} {
		checkFaultBook(t, s, ingests[lead])
	}
	// One publisher: an event (not a snapshot, which an edge makes) that
	// two subscribers received at the same seq has the same bytes, except
	// where a partition gave each side its own publisher (sideOfSplit).
	bySeq := map[uint64][]byte{}
	lines0 := subs[0].all()
	for i, l := range lines0 {
		if l.Type == "book" && !l.Snapshot && !sideOfSplit(lines0, split[subs[0]], i) {
			bySeq[l.Seq] = l.raw
		}
	}
	for _, other := range subs[1:] {
		same, differ := 0, 0
		lines := other.all()
		for i, l := range lines {
			if b, ok := bySeq[l.Seq]; ok && l.Type == "book" && !l.Snapshot && !sideOfSplit(lines, split[other], i) {
				if bytes.Equal(b, l.raw) {
					same++
				} else {
					differ++
				}
			}
		}
		if same == 0 || differ > 0 {
			t.Errorf("level2 events %s and %s both received: %d the same, %d differ", subs[0].name, other.name, same, differ)
		}
	}

}

// sideOfSplit reports whether line i of a subscriber's lines may be its
// side's publisher's during a partition (docs/cluster.md, Partitions):
// each side's edges forward the ingest that leads for them, so a seq may
// carry different events on the two sides from the cut until the
// subscriber's edge fails over to the leader that follows it. cut holds
// the subscriber's line counts at the cut and at the edge's death (0: not
// subscribed then): that span, up to the snapshot after its last failover
// book_resync (the whole span if it had none).
func sideOfSplit(lines []line, cut [2]int, i int) bool {
	from, to := cut[0], cut[1]
	if to == 0 || i < from {
		return false
	}
	settled := to
	for j := to - 1; j >= from; j-- {
		if m := lines[j]; m.Type == "notice" && m.Kind == "book_resync" && m.Stream == faultL2 && m.Details["reason"] == "failover" {
			settled = len(lines)
			for k := j + 1; k < len(lines); k++ {
				if lines[k].Type == "book" && lines[k].Stream == faultL2 && lines[k].Snapshot {
					settled = k
					break
				}
			}
			break
		}
	}
	return i < settled
}

// edgeMetrics are the edge counters the fault test's report shows.
var edgeMetrics = []string{"fanoutd_cluster_fenced_total", "fanoutd_cluster_slow_consumer_total", "fanoutd_cluster_lame_duck_moves_total",
	"fanoutd_cluster_bus_invalid_total", "fanoutd_cluster_bus_recovered_total"}

func countKind(ms []line, kind string) int {
	n := 0
	for _, m := range ms {
		if m.Type == "notice" && m.Kind == kind {
			n++
		}
	}
	return n
}

// checkFaultSub: seq never goes back on either stream; every trades seq
// not delivered is inside an announced stream_gap; a level2 seq jumps only
// to a snapshot after a book_resync.
func checkFaultSub(t *testing.T, s *faultSub) {
	t.Helper()
	last := map[string]uint64{}
	covered := map[uint64]bool{}
	open := false // a stream_gap without an end: covers up to the next trade
	resync := false
	all := s.all()
	for i, m := range all {
		if m.Type == "notice" {
			switch {
			case m.Kind == "stream_gap" && m.Stream == faultTr:
				first, _ := m.Details["first"].(float64)
				lastSeq, _ := m.Details["last"].(float64)
				if after, ok := m.Details["after"].(float64); ok {
					first = after + 1
				}
				for q := uint64(first); q <= uint64(lastSeq) && q > 0; q++ {
					covered[q] = true
				}
				if lastSeq == 0 {
					open = true
				}
			case m.Kind == "book_resync" && (m.Stream == faultL2 || m.Stream == ""):
				resync = true
			case m.Kind == "link_down" || m.Kind == "link_up":
				resync = true // a fresh snapshot follows link_up
			}
			continue
		}
		if m.Type != "book" && m.Type != "trade" {
			continue
		}
		prev := last[m.Stream]
		if m.Seq < prev || m.Seq == prev && !m.Snapshot {
			t.Fatalf("%s: %s seq %d after %d", s.name, m.Stream, m.Seq, prev)
		}
		switch m.Stream {
		case faultTr:
			if prev > 0 && m.Seq > prev+1 && !open {
				for q := prev + 1; q < m.Seq; q++ {
					if !covered[q] {
						t.Errorf("%s: trade seq %d lost between %d and %d without a stream_gap", s.name, q, prev, m.Seq)
						break
					}
				}
			}
			open = false
		case faultL2:
			if prev > 0 && m.Seq > prev+1 && !(m.Snapshot && resync) {
				var before []string
				for _, b := range all[max(0, i-6):i] {
					before = append(before, fmt.Sprintf("%s %s %s %d snapshot=%v %v", b.Type, b.Kind, b.Stream, b.Seq, b.Snapshot, b.Details))
				}
				t.Errorf("%s: level2 seq %d (snapshot %v) after %d without a book_resync and a snapshot; before it:\n%s", s.name, m.Seq, m.Snapshot, prev, strings.Join(before, "\n"))
			}
			if m.Snapshot {
				// The snapshot a resync or link_up announced. Notices are
				// written ahead of queued events, so updates queued before
				// the notice may come between it and its snapshot.
				resync = false
			}
		}
		last[m.Stream] = m.Seq
	}
}

// checkFaultBook: s's level2 book, rebuilt from what it received up to
// the leader's current book seq, is the leader's book.
func checkFaultBook(t *testing.T, s *faultSub, leader string) {
	t.Helper()
	checkBookReaches(t, s.name+"'s book to be the leader's", leader+"/v1/books/kraken/BTC/USD", faultL2, 30*time.Second, s.all)
}

// checkBookReaches waits up to within for the level2 book of stream
// rebuilt from lines (what a subscriber received) up to the seq of the
// book bookURL answers to be that book. The source moves on meanwhile, so
// each attempt waits up to 5 s for the subscriber to reach the seq of the
// book it fetched.
func checkBookReaches(t *testing.T, what, bookURL, stream string, within time.Duration, lines func() []line) {
	t.Helper()
	var want struct {
		Seq        uint64
		Bids, Asks [][2]string
	}
	// rebuild applies the level2 events up to seq; it reports whether the
	// last one applied is at seq.
	rebuild := func(seq uint64) (*venue.Book, bool) {
		var book venue.Book
		reached := false
		for _, l := range lines() {
			if l.Type != "book" || l.Stream != stream || l.Seq > seq {
				continue
			}
			var ev venue.Event
			if ev.UnmarshalJSON(l.raw) != nil {
				t.Fatalf("bad event %s", l.raw)
			}
			book.Apply(&ev)
			reached = l.Seq == seq
		}
		return &book, reached
	}
	// On failure, what the subscriber's level2 stream last did: its
	// snapshots, notices and seq jumps, and the two books' tops.
	var diag string
	defer func() {
		if t.Failed() && diag != "" {
			t.Logf("%s: %s", what, diag)
		}
	}()
	describe := func(seq uint64, book *venue.Book, reached bool) string {
		var marks []string
		var prev, n uint64
		for _, l := range lines() {
			if l.Stream != stream && !(l.Type == "notice" && l.Stream == "") {
				continue
			}
			switch {
			case l.Type == "notice":
				marks = append(marks, fmt.Sprintf("%s%v@%d", l.Kind, l.Details["reason"], prev))
			case l.Snapshot:
				marks = append(marks, fmt.Sprintf("snap@%d", l.Seq))
			case prev != 0 && l.Seq != prev+1:
				marks = append(marks, fmt.Sprintf("jump %d->%d", prev, l.Seq))
			}
			if l.Type == "book" {
				prev, n = l.Seq, n+1
			}
		}
		marks = marks[max(0, len(marks)-20):]
		ev := book.Snapshot(venue.Stream(stream))
		top := func(x [][2]string) [][2]string { return x[:min(3, len(x))] }
		return fmt.Sprintf("want seq %d (reached %v); %d level2 events, last %d; last marks %v; got bids %v asks %v; want bids %v asks %v",
			seq, reached, n, prev, marks, top(venuetest.Strings(ev.Bids)), top(venuetest.Strings(ev.Asks)), top(want.Bids), top(want.Asks))
	}
	checkFor(t, within, what, func() bool {
		r, err := http.Get(bookURL)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if json.Unmarshal(b, &want) != nil {
			return false
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			book, reached := rebuild(want.Seq)
			if reached {
				ev := book.Snapshot(venue.Stream(stream))
				if fmt.Sprint(venuetest.Strings(ev.Bids)) == fmt.Sprint(want.Bids) && fmt.Sprint(venuetest.Strings(ev.Asks)) == fmt.Sprint(want.Asks) {
					return true
				}
			}
			if reached || time.Now().After(deadline) {
				diag = describe(want.Seq, book, reached)
				return false
			}
		}
	})
}
