package daemon_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/venue"
)

// TestHostileDerivedBudget: many distinct book_snapshot_<depth>_<interval>
// streams from several connections and tokens. Promise: a subscription
// that would pass limits.max_derived_per_token, max_derived_per_source or
// max_derived_weight is refused whole with too_many_derived, naming the
// key, and the connection stays; equal names (1000ms, 1s) are one stream,
// acked in one form; however many derived streams a source feeds, each of
// its events reads its book at most twice (fanoutd_derived_reads_total)
// and every raw event is still delivered; streams held only by a detached
// named subscriber are not computed, and its reattach gets their current
// state at once.
func TestHostileDerivedBudget(t *testing.T) {
	h := startHostile(t, twoVenues+"limits:\n  command_burst: 1000\n  commands_per_second: 1000\n"+
		"  max_derived_per_token: 8\n  max_derived_per_source: 12\n  max_derived_weight: 500\n"+
		"tokens:\n  - {name: a, token: secret-a}\n  - {name: b, token: secret-b}\n  - {name: c, token: secret-c}\n")
	src := venue.Stream("coinbase:level2:BTC-USD")
	deep := &venue.Event{Kind: venue.KindBook, Stream: src, Snapshot: true}
	for i := range 200 {
		deep.Bids = append(deep.Bids, venue.Level{Price: decimal.New(int64(10000-i), 0), Size: decimal.New(1, 0)})
		deep.Asks = append(deep.Asks, venue.Level{Price: decimal.New(int64(10001+i), 0), Size: decimal.New(1, 0)})
	}
	h.src.Publish(deep)
	name := func(d int, iv string) string { return fmt.Sprintf("coinbase:book_snapshot_%d_%s:BTC-USD", d, iv) }
	n := 0
	sub := func(ws *websocket.Conn, sts ...string) map[string]any {
		t.Helper()
		n++
		id := fmt.Sprint(n)
		cmd, _ := json.Marshal(map[string]any{"op": "subscribe", "id": id, "streams": sts})
		return replyTo(t, ws, id, string(cmd))
	}
	ack := func(ws *websocket.Conn, sts ...string) {
		t.Helper()
		if r := sub(ws, sts...); r["type"] != "ack" {
			t.Fatalf("subscribe %v: %v", sts, r)
		}
	}
	refused := func(ws *websocket.Conn, key string, sts ...string) {
		t.Helper()
		r := sub(ws, sts...)
		if msg, _ := r["message"].(string); r["code"] != "too_many_derived" || !strings.Contains(msg, key) {
			t.Fatalf("subscribe %d streams: %v %v %v, want too_many_derived naming %s", len(sts), r["type"], r["code"], r["message"], key)
		}
	}
	dial := func(query, secret string) *websocket.Conn {
		t.Helper()
		ws, _, err := wsDial(t, websocket.DefaultDialer, h, query, secret)
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}

	// Token a: 256 distinct streams in one command are refused whole; one
	// by one, the ninth is.
	a1 := dial("", "secret-a")
	var many []string
	for d := 1; d <= 256; d++ {
		many = append(many, name(d, "0ms"))
	}
	refused(a1, "limits.max_derived_per_token", many...)
	if r := sub(a1, name(1, "1000ms")); r["type"] != "ack" || fmt.Sprint(r["streams"]) != fmt.Sprint([]any{name(1, "1s")}) {
		t.Fatalf("subscribe with 1000ms: %v, want an ack naming %s", r, name(1, "1s"))
	}
	for d := 2; d <= 8; d++ {
		ack(a1, name(d, "0ms"))
	}
	refused(a1, "limits.max_derived_per_token", name(9, "0ms"))
	// Another connection of a: a's streams, under either name, and no other.
	a2 := dial("", "secret-a")
	ack(a2, name(1, "1s"), name(2, "0ms"))
	refused(a2, "limits.max_derived_per_token", name(9, "0ms"))
	// Token b, a named subscriber: four more streams of the source, then
	// the source's cap.
	b := dial("?name=deskB", "secret-b")
	for d := 9; d <= 12; d++ {
		ack(b, name(d, "0ms"))
	}
	refused(b, "limits.max_derived_per_source", name(13, "0ms"))
	// Token c: the node's weight, 1+…+12 = 78 used of 500.
	c := dial("", "secret-c")
	ack(c, "kraken:book_snapshot_400_0ms:BTC/USD")
	refused(c, "limits.max_derived_weight", "kraken:book_snapshot_30_0ms:BTC/USD")
	ack(c, "kraken:quote:BTC/USD")
	if r := replyTo(t, a1, "p", `{"op":"ping","id":"p"}`); r["type"] != "pong" {
		t.Fatalf("after the refusals: %v", r)
	}
	for capName, want := range map[string]float64{"token": 3, "source": 1, "node": 1} {
		if got := metric(t, h, "fanoutd_derived_refused_total", "cap", capName); got != want {
			t.Errorf("fanoutd_derived_refused_total{cap=%q} = %v, want %v", capName, got, want)
		}
	}
	if got := metric(t, h, "fanoutd_refusals_total", "code", "too_many_derived"); got != 5 {
		t.Errorf("fanoutd_refusals_total{code=too_many_derived} = %v, want 5", got)
	}
	if s, w := metric(t, h, "fanoutd_derived_streams"), metric(t, h, "fanoutd_derived_weight"); s != 14 || w != 78+401 {
		t.Errorf("fanoutd_derived_streams %v, fanoutd_derived_weight %v; want 14 and 479", s, w)
	}

	// Twelve derived streams of the source, every one touched by each of
	// its events (the best bid's size changes): each event reads the book
	// at most twice, and every raw event reaches a subscriber of it.
	ack(a1, string(src))
	reads := func() float64 { return metric(t, h, "fanoutd_derived_reads_total", "venue", "coinbase") }
	update := func(size int64) {
		h.src.Publish(&venue.Event{Kind: venue.KindBook, Stream: src, Bids: []venue.Level{{Price: decimal.New(10000, 0), Size: decimal.New(size, 0)}}})
	}
	before := reads()
	const events = 100
	for i := range events {
		update(int64(i + 2))
	}
	raw := 0
	var newest map[string]any
	for raw < events {
		for _, o := range objects(t, a1) {
			switch o["stream"] {
			case string(src):
				if o["type"] == "book" && o["snapshot"] != true {
					raw++
				}
			case name(8, "0ms"):
				newest = o
			}
		}
	}
	if r := reads() - before; r < events || r > 2*events {
		t.Fatalf("%v reads of the book for %d events of a source with 12 derived streams: want one or two per event", r, events)
	}
	if bids, _ := newest["bids"].([]any); len(bids) != 8 || fmt.Sprint(bids[0]) != fmt.Sprint([]any{"10000", fmt.Sprint(events + 1)}) {
		t.Fatalf("the depth-8 stream's newest message after the updates: %v", newest)
	}

	// Only b's named subscriber left, detached: its streams stay counted
	// and are not computed.
	for _, ws := range []*websocket.Conn{a1, a2, b, c} {
		ws.Close()
	}
	if !testutil.Poll(10*time.Second, func() bool {
		return metric(t, h, "fanoutd_derived_streams") == 4 && metric(t, h, "fanoutd_subscribers", "kind", "ephemeral") == 0
	}) {
		t.Fatalf("fanoutd_derived_streams %v after every connection closed, want 4 (the detached name's)", metric(t, h, "fanoutd_derived_streams"))
	}
	size := int64(events + 2)
	if !testutil.Poll(10*time.Second, func() bool {
		r := reads()
		update(size)
		size++
		return reads() == r
	}) {
		t.Fatal("the detached name's streams are still computed")
	}
	r := reads()
	for range events {
		update(size)
		size++
	}
	if got := reads() - r; got != 0 {
		t.Fatalf("%v reads of the book for %d events with only a detached name's derived streams", got, events)
	}
	b = dial("?name=deskB", "secret-b")
	got := map[string]map[string]any{}
	for len(got) < 4 {
		for _, o := range objects(t, b) {
			if st, _ := o["stream"].(string); strings.Contains(st, "book_snapshot") && o["type"] == "book" {
				got[st] = o
			}
		}
	}
	for d := 9; d <= 12; d++ {
		bids, _ := got[name(d, "0ms")]["bids"].([]any)
		if len(bids) != d || fmt.Sprint(bids[0]) != fmt.Sprint([]any{"10000", fmt.Sprint(size - 1)}) {
			t.Fatalf("%s on reattach: %v, want the current top", name(d, "0ms"), got[name(d, "0ms")])
		}
	}
}
