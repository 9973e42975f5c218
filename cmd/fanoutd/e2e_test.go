package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/subscriber"
)

const baseConfig = `
venues:
  coinbase:
    symbols: [BTC-USD]
`

func TestCommandsAndErrors(t *testing.T) {
	td := startDaemon(t, `
limits:
  max_streams_per_connection: 2
  max_message_bytes: 512
  commands_per_second: 1
  command_burst: 30
venues:
  coinbase:
    symbols: [BTC-USD]
    channels: [level2, trades]
`)
	c := dial(t, td.url(""), dialOpts{})
	cases := []struct {
		name string
		cmd  any
		want string // "ack", "pong" or an error code
	}{
		{"ping", map[string]any{"op": "ping", "id": "p"}, "pong"},
		{"not json", "{", "bad_request"},
		{"no op", map[string]any{"id": "x"}, "bad_request"},
		{"id not a string", map[string]any{"op": "ping", "id": 7}, "bad_request"},
		{"unknown op", map[string]any{"op": "frob", "id": "x"}, "unknown_op"},
		{"malformed stream", map[string]any{"op": "subscribe", "id": "x", "streams": []string{"nope"}}, "bad_request"},
		{"empty streams", map[string]any{"op": "subscribe", "id": "x", "streams": []string{}}, "bad_request"},
		{"unknown venue", map[string]any{"op": "subscribe", "id": "x", "streams": []string{"kraken:level2:BTC/USD"}}, "unknown_stream"},
		{"channel not served", map[string]any{"op": "subscribe", "id": "x", "streams": []string{"coinbase:ticker:BTC-USD"}}, "unknown_stream"},
		{"snapshot not subscribed", map[string]any{"op": "snapshot", "id": "x", "stream": string(l2)}, "not_subscribed"},
		{"subscribe", map[string]any{"op": "subscribe", "id": "x", "streams": []string{string(l2), string(tr)}}, "ack"},
		{"snapshot no book", map[string]any{"op": "snapshot", "id": "x", "stream": string(l2)}, "no_book"},
		{"snapshot of trades", map[string]any{"op": "snapshot", "id": "x", "stream": string(tr)}, "not_level2"},
		{"too many streams", map[string]any{"op": "subscribe", "id": "x", "streams": []string{"coinbase:trades:ETH-USD"}}, "too_many_streams"},
		{"too large", map[string]any{"op": "ping", "id": "x", "pad": strings.Repeat("x", 600)}, "message_too_large"},
		{"unsubscribe", map[string]any{"op": "unsubscribe", "id": "x", "streams": []string{string(tr)}}, "ack"},
		{"subscribe again within limit", map[string]any{"op": "subscribe", "id": "x", "streams": []string{"coinbase:trades:ETH-USD"}}, "ack"},
	}
	for i, tc := range cases {
		id := fmt.Sprint("c", i)
		if m, ok := tc.cmd.(map[string]any); ok {
			if _, has := m["id"]; has && m["id"] == "x" {
				m["id"] = id
			}
			c.send(m)
		} else {
			c.ws.WriteMessage(websocket.TextMessage, []byte(tc.cmd.(string)))
		}
		var w wire
		switch tc.cmd.(type) {
		case string:
			w = c.until(func(w wire) bool { return w.Type == "error" })[0]
		default:
			if tc.name == "ping" {
				w = c.reply("p")
			} else if tc.name == "no op" || tc.name == "id not a string" || tc.name == "too large" {
				ws := c.until(func(w wire) bool { return w.Type == "error" })
				w = ws[len(ws)-1]
			} else {
				w = c.reply(id)
			}
		}
		got := w.Type
		if got == "error" {
			got = w.Code
		}
		if got != tc.want {
			t.Errorf("%s: got %s (%s), want %s", tc.name, got, w.Message, tc.want)
		}
	}
	// The connection stays open after errors; now exhaust the command rate.
	limited := false
	for i := 0; i < 40 && !limited; i++ {
		c.send(map[string]any{"op": "ping", "id": fmt.Sprint("r", i)})
		w := c.until(func(w wire) bool { return w.Type == "pong" || w.Type == "error" })
		last := w[len(w)-1]
		limited = last.Type == "error" && last.Code == "rate_limited"
	}
	if !limited {
		t.Error("no rate_limited error after 40 pings at 1/s with a burst of 30")
	}
	_, body := httpGet(t, "http://"+td.addr+"/metrics", nil)
	for _, want := range []string{`fanoutd_refusals_total{code="unknown_stream"} 2`, `fanoutd_refusals_total{code="rate_limited"} 1`,
		`fanoutd_refusals_total{code="message_too_large"} 1`, "fanoutd_connections 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// readEvents returns the seqs of the non-snapshot events of stream in ws.
func seqs(ws []wire, stream string) []uint64 {
	var out []uint64
	for _, w := range ws {
		if w.Stream == stream && w.Type != "notice" && !w.Snapshot {
			out = append(out, w.Seq)
		}
	}
	return out
}

func TestSnapshotThenUpdatesInOrder(t *testing.T) {
	t.Run("write_delay=0", func(t *testing.T) { testSnapshotThenUpdates(t, "websocket:\n  write_delay: 0s\n"+baseConfig) })
	t.Run("write_delay=2ms", func(t *testing.T) { testSnapshotThenUpdates(t, "websocket:\n  write_delay: 2ms\n"+baseConfig) })
	t.Run("write_delay=2ms,io_uring=false", func(t *testing.T) {
		testSnapshotThenUpdates(t, "websocket:\n  write_delay: 2ms\n  io_uring: false\n"+baseConfig)
	})
}

func testSnapshotThenUpdates(t *testing.T, yml string) {
	td := startDaemon(t, yml)
	td.bookSnapshot()
	for i := range 5 {
		td.bookUpdate(i, 0)
	}
	c := dial(t, td.url(""), dialOpts{})
	c.send(map[string]any{"op": "subscribe", "id": "1", "streams": []string{string(l2)}})
	if w := c.next(); w.Type != "ack" || w.ID != "1" || !slices.Equal(w.Streams, []string{string(l2)}) {
		t.Fatalf("first message %+v, want the ack", w)
	}
	snap := c.next()
	if snap.Type != "book" || !snap.Snapshot || snap.Seq != 6 || len(snap.Bids) != 3 {
		t.Fatalf("got %+v, want a snapshot at seq 6 with 3 bid levels", snap)
	}
	for i := range 20 {
		td.bookUpdate(i, 0)
	}
	for want := uint64(7); want <= 26; want++ {
		w := c.next()
		if w.Type != "book" || w.Snapshot || w.Seq != want {
			t.Fatalf("got %+v, want update seq %d", w, want)
		}
	}
	// An explicit snapshot request: a fresh snapshot at the current seq.
	c.send(map[string]any{"op": "snapshot", "id": "2", "stream": string(l2)})
	ws := c.until(func(w wire) bool { return w.Snapshot })
	if w := ws[len(ws)-1]; w.Seq != 26 {
		t.Fatalf("requested snapshot at seq %d, want 26", w.Seq)
	}
}

func TestStalledClientDropsThenResumes(t *testing.T) {
	td := startDaemon(t, `
websocket:
  send_buffer_bytes: 4096
venues:
  coinbase:
    symbols: [BTC-USD]
    max_queue_len: 200
    max_queue_bytes: 0
`)
	td.bookSnapshot()
	healthy := dial(t, td.url(""), dialOpts{})
	stalled := dial(t, td.url(""), dialOpts{readBuf: 4096, paused: true})
	for _, c := range []*client{healthy, stalled} {
		c.send(map[string]any{"op": "subscribe", "id": "s", "streams": []string{string(l2)}})
	}
	checkFor(t, 5*time.Second, "both subscribed", func() bool {
		n := 0
		for _, s := range td.d.Hub().Registry().All() {
			n += s.NumStreams()
		}
		return n == 2
	})
	// Publishing goes in lock-step with the healthy client: each event is
	// published once the healthy client has read the one before, so the
	// healthy client's queue never holds more than one event.
	feed := td.d.Hub().Feed("coinbase")
	i := 0
	var hw []wire
	pub := func() {
		td.bookUpdate(i, 10)
		i++
		want := uint64(i) + 1 // seq 1 is the first snapshot
		hw = append(hw, healthy.until(func(w wire) bool { return w.Seq == want && !w.Snapshot })...)
	}
	// Publish until the stalled client is dropping, then 50 more.
	for feed.Counters().Dropping.Load() == 0 {
		if i > 100000 {
			t.Fatal("stalled client never dropped")
		}
		pub()
	}
	for range 50 {
		pub()
	}
	// Now the stalled client reads. Once its queue is below half the bound,
	// one more event makes it resume; five more follow in lock-step with
	// both clients, so it cannot overflow again.
	var stalledSub *subscriber.Subscriber
	for _, s := range td.d.Hub().Registry().All() {
		if st, ok := feed.State(s); ok && st.Dropping {
			stalledSub = s
		}
	}
	if stalledSub == nil {
		t.Fatal("no dropping subscriber")
	}
	stalled.start()
	checkFor(t, 20*time.Second, "the stalled client to drain below half its bound", func() bool {
		c := stalledSub.Resolve()
		return c != nil && c.Len() < fanout.ResumeBelow(200)
	})
	var sw []wire
	for range 6 {
		pub()
		want := uint64(i) + 1
		sw = append(sw, stalled.until(func(w wire) bool { return w.Seq == want && !w.Snapshot })...)
	}
	resumedAt := slices.IndexFunc(sw, func(w wire) bool { return w.Type == "notice" && w.Kind == "resumed" })
	if resumedAt < 0 {
		t.Fatal("no resumed notice")
	}
	snapAt := -1
	for j := resumedAt + 1; j < len(sw) && snapAt < 0; j++ {
		if sw[j].Snapshot {
			snapAt = j
		}
	}
	if snapAt < 0 {
		t.Fatal("no snapshot after resumed")
	}
	last := uint64(i) + 1
	hs := seqs(hw, string(l2))
	for j, s := range hs {
		if s != uint64(j)+2 {
			t.Fatalf("healthy client: seq %d at position %d, want %d (no loss)", s, j, j+2)
		}
	}
	if len(hs) == 0 || hs[len(hs)-1] != last {
		t.Fatalf("healthy client: last seq %v, want %d", hs[len(hs)-1:], last)
	}
	for _, w := range hw {
		if w.Type == "notice" {
			t.Fatalf("healthy client got a notice: %+v", w)
		}
	}

	// The stalled client: dropping, then resumed with the exact gap.
	dropAt := slices.IndexFunc(sw, func(w wire) bool { return w.Type == "notice" && w.Kind == "dropping" })
	if dropAt < 0 || dropAt > resumedAt {
		t.Fatalf("dropping notice at %d, resumed at %d", dropAt, resumedAt)
	}
	res := sw[resumedAt]
	if res.Details["reason"] != "drained" {
		t.Fatalf("resumed reason %v", res.Details["reason"])
	}
	gaps, _ := res.Details["gaps"].(map[string]any)
	g, _ := gaps[string(l2)].([]any)
	if len(g) != 2 {
		t.Fatalf("resumed gaps %v", res.Details["gaps"])
	}
	first, lastLost := uint64(g[0].(float64)), uint64(g[1].(float64))
	received := map[uint64]bool{}
	for _, s := range seqs(sw, string(l2)) {
		received[s] = true
	}
	for s := uint64(2); s <= last; s++ {
		lost := s >= first && s <= lastLost
		if lost == received[s] {
			t.Fatalf("seq %d: received %v, but the gap is [%d,%d]", s, received[s], first, lastLost)
		}
	}
	if n := lastLost - first + 1; uint64(res.Details["dropped"].(float64)) != n {
		t.Fatalf("dropped %v, gap of %d", res.Details["dropped"], n)
	}
	// The snapshot after resumed stands for the book at the last lost seq,
	// and the event after it continues from there.
	if snap := sw[snapAt]; snap.Seq != lastLost {
		t.Fatalf("snapshot after resumed at seq %d, want %d", snap.Seq, lastLost)
	}
	if next := sw[snapAt+1]; next.Seq != lastLost+1 {
		t.Fatalf("event after the snapshot has seq %d, want %d", next.Seq, lastLost+1)
	}
}

func TestNamedReattachAndTakeover(t *testing.T) {
	td := startDaemon(t, baseConfig)
	td.bookSnapshot()
	a := dial(t, td.url("name=desk-1"), dialOpts{})
	a.send(map[string]any{"op": "subscribe", "id": "s", "streams": []string{string(l2)}})
	a.reply("s")
	if w := a.next(); !w.Snapshot || w.Seq != 1 {
		t.Fatalf("got %+v, want the snapshot at seq 1", w)
	}
	td.bookUpdate(1, 0) // seq 2
	if w := a.next(); w.Seq != 2 {
		t.Fatalf("got %+v, want seq 2", w)
	}
	a.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	a.closeErr()
	sub := td.d.Hub().Registry().Named("desk-1")
	checkFor(t, 5*time.Second, "detach", func() bool { return sub.Resolve() == nil })
	for i := range 3 {
		td.bookUpdate(i, 0) // seqs 3..5, missed
	}
	b := dial(t, td.url("name=desk-1"), dialOpts{})
	res := b.next()
	if res.Type != "notice" || res.Kind != "resumed" || res.Details["reason"] != "reattached" {
		t.Fatalf("first message on reattach %+v, want resumed/reattached", res)
	}
	if g := fmt.Sprint(res.Details["gaps"]); g != "map[coinbase:level2:BTC-USD:[3 5]]" {
		t.Fatalf("gaps %s, want [3 5]", g)
	}
	if w := b.next(); !w.Snapshot || w.Seq != 5 {
		t.Fatalf("got %+v, want the snapshot at seq 5", w)
	}
	td.bookUpdate(9, 0)
	if w := b.next(); w.Seq != 6 || w.Snapshot {
		t.Fatalf("got %+v, want update seq 6", w)
	}

	// Takeover: a third connection under the name; b is told and closed.
	c := dial(t, td.url("name=desk-1"), dialOpts{})
	w := b.until(func(w wire) bool { return w.Type == "error" })
	if last := w[len(w)-1]; last.Code != "taken_over" {
		t.Fatalf("taken-over connection got %+v", last)
	}
	if err := b.closeErr(); !websocket.IsCloseError(err, 4001) {
		t.Fatalf("taken-over connection closed with %v, want 4001", err)
	}
	if r := c.next(); r.Kind != "resumed" || r.Details["reason"] != "reattached" {
		t.Fatalf("new holder got %+v", r)
	}
	if w := c.next(); !w.Snapshot || w.Seq != 6 {
		t.Fatalf("got %+v, want the snapshot at seq 6", w)
	}
	_, body := httpGet(t, "http://"+td.addr+"/metrics", nil)
	if !strings.Contains(body, `fanoutd_closes_total{reason="taken_over"} 1`) {
		t.Error("metrics lack the taken_over close")
	}
}

// TestConfigTokens: the binary reads a config file's tokens, plain and
// sha256, each with its scopes; what is refused without them, or outside
// a scope, is the hostile suite's (internal/daemon TestHostileAuth,
// TestHostileNameTakeover).
func TestConfigTokens(t *testing.T) {
	td := startDaemon(t, `
tokens:
  - name: trades-only
    token: s3cret
    streams: ["coinbase:trades:*"]
  - name: full
    sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
venues:
  coinbase:
    symbols: [BTC-USD]
`)
	c := dial(t, td.url("token=s3cret"), dialOpts{})
	c.send(map[string]any{"op": "subscribe", "id": "1", "streams": []string{string(l2)}})
	if w := c.reply("1"); w.Code != "unauthorized" {
		t.Fatalf("level2 outside trades-only's streams: %+v", w)
	}
	c.send(map[string]any{"op": "subscribe", "id": "2", "streams": []string{string(tr)}})
	if w := c.reply("2"); w.Type != "ack" {
		t.Fatalf("trades-only's trades: %+v", w)
	}
	full := dial(t, td.url(""), dialOpts{header: http.Header{"Authorization": {"Bearer password"}}})
	full.send(map[string]any{"op": "subscribe", "id": "1", "streams": []string{string(l2)}})
	if w := full.reply("1"); w.Type != "ack" {
		t.Fatalf("the sha256 token: %+v", w)
	}
	code, body := httpGet(t, "http://"+td.addr+"/v1/subscribers", http.Header{"Authorization": {"Bearer password"}})
	if code != 200 || !strings.Contains(body, `"kind": "ephemeral"`) {
		t.Fatalf("/v1/subscribers: %d %s", code, body)
	}
}

func TestShutdownNoticeAndClose(t *testing.T) {
	td := startDaemon(t, baseConfig)
	c := dial(t, td.url(""), dialOpts{})
	c.send(map[string]any{"op": "subscribe", "id": "1", "streams": []string{string(tr)}})
	c.reply("1")
	for i := range 5 {
		td.trade(i)
	}
	errc := make(chan error, 1)
	go func() { errc <- td.stop() }()
	ws := c.until(func(w wire) bool { return w.Type == "notice" && w.Kind == "shutdown" })
	if n := len(seqs(ws, string(tr))); n > 5 {
		t.Fatalf("%d trades", n)
	}
	if err := c.closeErr(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("closed with %v, want 1001", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run returned %v", err)
	}
}

func TestHTTPRoutes(t *testing.T) {
	td := startDaemon(t, baseConfig)
	base := "http://" + td.addr
	checkFor(t, 5*time.Second, "ready", func() bool { code, _ := httpGet(t, base+"/readyz", nil); return code == 200 })
	td.bookSnapshot()
	td.bookUpdate(1, 0)
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/healthz", 200, "ok"},
		{"/v1/coverage", 200, `"link": "up"`},
		{"/v1/books/coinbase/BTC-USD?depth=1", 200, `"seq": 2`},
		{"/v1/books/coinbase/ETH-USD", 404, "no_book"},
		{"/v1/books/coinbase/BTC-USD?depth=x", 400, "bad_request"},
		{"/v1/subscribers", 200, "[]"},
		{"/metrics", 200, "fanoutd_published_total{venue=\"coinbase\"} 2"},
	} {
		code, body := httpGet(t, base+tc.path, nil)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %q, want %d containing %q", tc.path, code, body, tc.code, tc.want)
		}
	}
	code, body := httpGet(t, base+"/v1/books/coinbase/BTC-USD?depth=1", nil)
	if code != 200 || strings.Count(body, `"99"`) != 1 || strings.Contains(body, `"98"`) {
		t.Errorf("depth=1 book: %s", body)
	}
	// Subscribing to a new symbol makes the adapter subscribe it.
	c := dial(t, td.url(""), dialOpts{})
	c.send(map[string]any{"op": "subscribe", "id": "1", "streams": []string{"coinbase:trades:SOL-USD"}})
	c.reply("1")
	// The ack is queued before the venue subscription is made (it must
	// precede the snapshot), so the adapter may see the symbol just after.
	checkFor(t, 5*time.Second, "the adapter subscribes SOL-USD", func() bool { return slices.Contains(td.src.Symbols(), "SOL-USD") })
}
