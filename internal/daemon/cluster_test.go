package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues"
)

// natsProxy sits on the TCP connection between a node and NATS. While
// drop is set it discards the messages (MSG and HMSG, whole) the server
// sends whose subject contains ".ev.": an edge loses events exactly as
// an at-most-once bus loses them, and the connection stays healthy. While
// mute is set it discards what the node publishes (PUB and HPUB, whole)
// under "fanoutd.": an ingest goes silent (events, notices, heartbeats)
// while its connection, and its lease in JetStream, stay up.
type natsProxy struct {
	ln     net.Listener
	target string
	drop   atomic.Bool
	mute   atomic.Bool
	wg     sync.WaitGroup
}

func newNATSProxy(t *testing.T, target string) *natsProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &natsProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *natsProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *natsProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.filter(s, c, "PUB", "HPUB", func(subj string) bool { return p.mute.Load() && strings.HasPrefix(subj, "fanoutd.") })
			s.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.filter(c, s, "MSG", "HMSG", func(subj string) bool { return p.drop.Load() && strings.Contains(subj, ".ev.") })
			c.Close()
		}()
	}
}

// filter copies one direction of the protocol, message by message,
// discarding the messages (verbs msg and hmsg: the size is the line's last
// field) whose subject drop says.
func (p *natsProxy) filter(dst io.Writer, src io.Reader, msg, hmsg string, drop func(subject string) bool) {
	r := bufio.NewReaderSize(src, 1<<16)
	w := bufio.NewWriterSize(dst, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var payload []byte
		f := strings.Fields(string(line))
		if len(f) >= 3 && (f[0] == msg || f[0] == hmsg) {
			n, _ := strconv.Atoi(f[len(f)-1])
			payload = make([]byte, n+2)
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
			if drop(f[1]) {
				continue
			}
		}
		w.Write(line)
		w.Write(payload)
		if r.Buffered() == 0 {
			if w.Flush() != nil {
				return
			}
		}
	}
}

// wsClient reads every message of one websocket subscriber.
type wsClient struct {
	t    *testing.T
	ws   *websocket.Conn
	mu   sync.Mutex
	msgs [][]byte // one JSON object each
	done chan struct{}
}

func dialSub(t *testing.T, url string, streams ...string) *wsClient {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	return readAll(t, ws, streams)
}

// readAll reads every message of ws in the background, after subscribing
// it to streams if any are given.
func readAll(t *testing.T, ws *websocket.Conn, streams []string) *wsClient {
	t.Helper()
	c := &wsClient{t: t, ws: ws, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			c.mu.Lock()
			for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
				c.msgs = append(c.msgs, bytes.Clone(l))
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { ws.Close(); <-c.done })
	if len(streams) == 0 {
		return c
	}
	if err := ws.WriteJSON(map[string]any{"op": "subscribe", "id": "1", "streams": streams}); err != nil {
		t.Fatal(err)
	}
	return c
}

type wireMsg struct {
	Type     string         `json:"type"`
	ID       string         `json:"id"`
	Code     string         `json:"code"`
	Kind     string         `json:"kind"`
	Stream   string         `json:"stream"`
	Seq      uint64         `json:"seq"`
	Snapshot bool           `json:"snapshot"`
	Details  map[string]any `json:"details"`
	raw      []byte
}

func (c *wsClient) all() []wireMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]wireMsg, len(c.msgs))
	for i, b := range c.msgs {
		json.Unmarshal(b, &out[i])
		out[i].raw = b
	}
	return out
}

// waitFor is testutil.WaitFor, the one polling helper of the tests.
var waitFor = testutil.WaitFor

// bookOf replays a subscriber's level2 events of st into a book, checking
// seq order: every update follows the event before it, or a snapshot.
func bookOf(t *testing.T, ms []wireMsg, st string) (*venue.Book, uint64) {
	t.Helper()
	var b venue.Book
	var last uint64
	for _, m := range ms {
		if m.Type != "book" || m.Stream != st {
			continue
		}
		var ev venue.Event
		if err := ev.UnmarshalJSON(m.raw); err != nil {
			t.Fatal(err)
		}
		if !ev.Snapshot && last != 0 && ev.Seq != last+1 {
			t.Fatalf("%s: update at seq %d after %d without a snapshot", st, ev.Seq, last)
		}
		b.Apply(&ev)
		last = ev.Seq
	}
	return &b, last
}

type httpBook struct {
	Seq        uint64
	Bids, Asks [][2]string
}

func getBook(t *testing.T, base, venueName, symbol string) (httpBook, bool) {
	t.Helper()
	r, err := http.Get(base + "/v1/books/" + venueName + "/" + symbol)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var b httpBook
	if r.StatusCode != 200 {
		return b, false
	}
	json.NewDecoder(r.Body).Decode(&b)
	return b, true
}

func sameBook(b *venue.Book, h httpBook) bool {
	ev := b.Snapshot("x:level2:y")
	return fmt.Sprint(venuetest.Strings(ev.Bids)) == fmt.Sprint(h.Bids) && fmt.Sprint(venuetest.Strings(ev.Asks)) == fmt.Sprint(h.Asks)
}

// source publishes a level2 snapshot and then updates and trades on a
// testsource venue until stopped: the same events to every adapter it
// built (two ingests of one venue see the same market).
type source struct {
	mu   sync.Mutex
	src  *testsource.Source   // the first adapter built
	srcs []*testsource.Source // every adapter built, alive
	n    int
}

func (s *source) adapter() venues.Venue {
	return venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		src := testsource.New("coinbase", c)
		if s.src == nil {
			s.src = src
		}
		s.srcs = append(s.srcs, src)
		return src, nil
	}}
}

// drop stops feeding the i-th adapter built (its ingest was killed).
func (s *source) drop(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srcs[i] = nil
}

// restart numbers the steps from 1 again: the next step publishes the
// snapshot (to an adapter built since, after the others were dropped).
func (s *source) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n = 0
}

func lv(p, q int64) venue.Level {
	return venue.Level{Price: decimal.New(p, 0), Size: decimal.New(q, 0)}
}

func (s *source) step() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	i := s.n
	const l2, tr = venue.Stream("coinbase:level2:BTC-USD"), venue.Stream("coinbase:trades:BTC-USD")
	for _, src := range s.srcs {
		if src == nil {
			continue
		}
		if i == 1 {
			src.Publish(&venue.Event{Kind: venue.KindBook, Stream: l2, Snapshot: true,
				Bids: []venue.Level{lv(100, 1), lv(99, 2)}, Asks: []venue.Level{lv(101, 1), lv(102, 2)}})
			continue
		}
		src.Publish(&venue.Event{Kind: venue.KindBook, Stream: l2,
			Bids: []venue.Level{lv(90+int64(i%10), int64(i%4))}, Asks: []venue.Level{lv(101+int64(i%7), int64((i+1)%3))}})
		if i%3 == 0 {
			src.Publish(&venue.Event{Kind: venue.KindTrade, Stream: tr, TradeID: strconv.Itoa(i), Price: decimal.New(100, 0), Size: decimal.New(1, 0), Side: venue.SideBuy})
		}
	}
}

// run publishes one step every 2 ms until the returned stop is called, or
// the test ends; stop waits for the last step and may be called again.
func (s *source) run(t *testing.T) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tk.C:
				s.step()
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit) }); <-done }
	t.Cleanup(stop)
	return stop
}

const (
	l2BTC = "coinbase:level2:BTC-USD"
	trBTC = "coinbase:trades:BTC-USD"
)

// startCluster runs NATS, an ingest fed by a testsource venue and two
// edges, the second behind a proxy that can drop events. The ingest keeps
// no recovery window: a loss on the bus, or an edge's, is a gap.
func startCluster(t *testing.T) (ns *server.Server, src *source, ingest, edgeA, edgeB *daemontest.Running, proxy *natsProxy) {
	return startClusterWith(t, noRecovery)
}

// noRecovery is the configuration of a node without a recovery window.
const noRecovery = "recovery:\n  max_events_per_stream: 0\n"

// startClusterWith is startCluster with ingestExtra added to the
// ingest's configuration.
func startClusterWith(t *testing.T, ingestExtra string) (ns *server.Server, src *source, ingest, edgeA, edgeB *daemontest.Running, proxy *natsProxy) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections) // runs last
	ns = natstest.Start(t, 0, t.TempDir())
	t.Cleanup(func() { ns.Shutdown() })
	url := ns.ClientURL()
	src = &source{}
	ingest = daemontest.Start(t, "cluster:\n  role: ingest\n  node: in-1\n  nats_url: "+url+"\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n"+ingestExtra,
		daemon.Options{Venues: []venues.Venue{src.adapter()}})
	edgeYAML := "cluster:\n  role: edge\n  nats_url: %s\nvenues:\n  coinbase:\n    symbols: []\n"
	edgeA = daemontest.Start(t, fmt.Sprintf(edgeYAML, url), daemon.Options{})
	proxy = newNATSProxy(t, strings.TrimPrefix(url, "nats://"))
	edgeB = daemontest.Start(t, fmt.Sprintf(edgeYAML, proxy.URL()), daemon.Options{})
	waitReady(t, edgeA)
	waitReady(t, edgeB)
	return
}

// settle waits until c has received the ingest's latest level2 seq, then
// checks c's book (built from what it received) against the ingest's
// GET /v1/books.
func settle(t *testing.T, c *wsClient, ingest *daemontest.Running, who string) {
	t.Helper()
	var want httpBook
	waitFor(t, 10*time.Second, who+" to catch up", func() bool {
		var ok bool
		if want, ok = getBook(t, ingest.URL("http"), "coinbase", "BTC-USD"); !ok {
			return false
		}
		_, last := bookOf(t, c.all(), l2BTC)
		return last == want.Seq
	})
	got, _ := bookOf(t, c.all(), l2BTC)
	if !sameBook(got, want) {
		t.Fatalf("%s's book differs from the ingest's at seq %d:\n got %v\nwant %v / %v", who, want.Seq, venuetest.Strings(got.Snapshot("x:level2:y").Bids), want.Bids, want.Asks)
	}
}

func kindsOf(ms []wireMsg, kind string) []wireMsg {
	var out []wireMsg
	for _, m := range ms {
		if m.Type == "notice" && m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// TestClusterTwoEdgesIdenticalBytes: subscribers of one stream on two
// edges receive byte-identical events with the ingest's seq; the ingest
// serves no subscribers.
func TestClusterTwoEdgesIdenticalBytes(t *testing.T) {
	_, src, ingest, edgeA, edgeB, _ := startCluster(t)
	r, err := http.Get(ingest.URL("http") + "/v1/stream")
	if err != nil || r.StatusCode != 404 {
		t.Fatalf("ingest /v1/stream: %v %v", r, err)
	}
	r.Body.Close()
	src.step() // the snapshot
	a := dialSub(t, edgeA.URL("ws"), l2BTC, trBTC)
	b := dialSub(t, edgeB.URL("ws"), l2BTC, trBTC)
	stop := src.run(t)
	waitFor(t, 20*time.Second, "events on both edges", func() bool { return lastOf(a.all(), l2BTC) > 200 && lastOf(b.all(), l2BTC) > 200 })
	stop()
	settle(t, a, ingest, "edge A")
	settle(t, b, ingest, "edge B")
	bySeq := map[string]map[uint64][]byte{}
	for _, m := range a.all() {
		if (m.Type == "book" || m.Type == "trade") && !m.Snapshot { // a first book may be a snapshot at an update's seq
			if bySeq[m.Stream] == nil {
				bySeq[m.Stream] = map[uint64][]byte{}
			}
			bySeq[m.Stream][m.Seq] = m.raw
		}
	}
	same := 0
	for _, m := range b.all() {
		if m.Snapshot || (m.Type != "book" && m.Type != "trade") {
			continue
		}
		if other, ok := bySeq[m.Stream][m.Seq]; ok {
			if !bytes.Equal(other, m.raw) {
				t.Fatalf("%s seq %d differs between edges:\n%s\n%s", m.Stream, m.Seq, other, m.raw)
			}
			same++
		}
	}
	if same < 50 {
		t.Fatalf("only %d events compared", same)
	}
	for _, c := range []*wsClient{a, b} {
		if n := kindsOf(c.all(), "book_resync"); len(n) != 0 {
			t.Fatalf("resync without loss: %s", n[0].raw)
		}
	}
}

// TestClusterBusGapResyncs: events dropped between NATS and an edge are a
// gap: book_resync (bus_gap, with the range), a snapshot, an exact book;
// a trades stream announces its lost range.
func TestClusterBusGapResyncs(t *testing.T) {
	ms, ingest, edgeB := dropOnBus(t, noRecovery)
	rs := kindsOf(ms, "book_resync")
	if len(rs) == 0 || rs[0].Details["reason"] != "bus_gap" || rs[0].Stream != l2BTC {
		t.Fatalf("no bus_gap book_resync: %v", rs)
	}
	first, last := rs[0].Details["first"].(float64), rs[0].Details["last"].(float64)
	if first < 2 || last < first {
		t.Fatalf("book_resync range [%v, %v]", first, last)
	}
	snaps := 0
	for _, m := range ms {
		if m.Stream == l2BTC && m.Snapshot {
			snaps++
		}
	}
	if snaps < 2 {
		t.Fatalf("%d snapshots, want the first and one after the gap", snaps)
	}
	gs := kindsOf(ms, "stream_gap")
	if len(gs) == 0 || gs[0].Stream != trBTC || gs[0].Details["reason"] != "bus_gap" {
		t.Fatalf("no stream_gap on trades: %v", gs)
	}
	// The edge's own book is the ingest's.
	eb, ok1 := getBook(t, edgeB.URL("http"), "coinbase", "BTC-USD")
	ib, ok2 := getBook(t, ingest.URL("http"), "coinbase", "BTC-USD")
	if !ok1 || !ok2 || fmt.Sprint(eb) != fmt.Sprint(ib) {
		t.Fatalf("edge book %v, ingest book %v", eb, ib)
	}
}

// TestClusterNATSRestart: NATS restarted mid-stream: link_down, /readyz not
// ready, reconnection, link_up, a snapshot, an exact book.
func TestClusterNATSRestart(t *testing.T) {
	ns, src, ingest, edgeA, _, _ := startCluster(t)
	src.step()
	a := dialSub(t, edgeA.URL("ws"), l2BTC, trBTC)
	stop := src.run(t)
	waitFor(t, 10*time.Second, "events on edge A", func() bool { return lastOf(a.all(), l2BTC) > 5 })
	port := ns.Addr().(*net.TCPAddr).Port
	dir := ns.JetStreamConfig().StoreDir
	ns.Shutdown()
	ns.WaitForShutdown()
	waitFor(t, 10*time.Second, "link_down", func() bool { return len(kindsOf(a.all(), "link_down")) > 0 })
	r, err := http.Get(edgeA.URL("http") + "/readyz")
	if err != nil || r.StatusCode != 503 {
		t.Fatalf("readyz with NATS down: %v %v", r.StatusCode, err)
	}
	r.Body.Close()
	lost := ingestSeq(t, ingest)
	waitFor(t, 10*time.Second, "the ingest to go on", func() bool { return ingestSeq(t, ingest) > lost+30 }) // lost to the edge
	ns2 := natstest.Start(t, port, dir)
	t.Cleanup(func() { ns2.Shutdown() })
	waitFor(t, 15*time.Second, "link_up", func() bool { return len(kindsOf(a.all(), "link_up")) > 0 })
	back := ingestSeq(t, ingest)
	waitFor(t, 10*time.Second, "events after link_up", func() bool { return lastOf(a.all(), l2BTC) > back+5 })
	stop()
	settle(t, a, ingest, "edge A")
	ms := a.all()
	up := -1
	for i, m := range ms {
		if m.Type == "notice" && m.Kind == "link_up" {
			up = i
		}
		if up >= 0 && m.Stream == l2BTC && m.Snapshot {
			return // a snapshot after link_up
		}
	}
	t.Fatal("no snapshot after link_up")
}

// ingestSeq returns the seq of the ingest's level2 book (0 before it has one).
func ingestSeq(t *testing.T, ingest *daemontest.Running) uint64 {
	t.Helper()
	b, ok := getBook(t, ingest.URL("http"), "coinbase", "BTC-USD")
	if !ok {
		return 0
	}
	return b.Seq
}

// dropOnBus starts a cluster whose ingest has extra configuration, drops
// every event between NATS and edge B while the ingest publishes 30 more,
// then lets them through again, and returns what edge B's subscriber of
// level2 and trades received once its book settled on the ingest's, with
// the ingest and edge B.
func dropOnBus(t *testing.T, extra string) ([]wireMsg, *daemontest.Running, *daemontest.Running) {
	t.Helper()
	_, src, ingest, _, edgeB, proxy := startClusterWith(t, extra)
	src.step()
	b := dialSub(t, edgeB.URL("ws"), l2BTC, trBTC)
	stop := src.run(t)
	waitFor(t, 10*time.Second, "events on edge B", func() bool { return lastOf(b.all(), trBTC) > 0 && lastOf(b.all(), l2BTC) > 5 })
	proxy.drop.Store(true)
	dropFrom := ingestSeq(t, ingest)
	waitFor(t, 10*time.Second, "the ingest to go on", func() bool { return ingestSeq(t, ingest) > dropFrom+30 })
	proxy.drop.Store(false)
	resumeFrom := ingestSeq(t, ingest)
	waitFor(t, 10*time.Second, "events after the drop", func() bool { return lastOf(b.all(), l2BTC) > resumeFrom+5 })
	stop()
	settle(t, b, ingest, "edge B")
	return b.all(), ingest, edgeB
}
