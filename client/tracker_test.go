package client

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// feed runs lines (wire objects) through a tracker subscribed to streams
// and returns what it handed out and asked for.
type feedT struct {
	t    *testing.T
	tr   *tracker
	out  []Message
	asks []string
}

func newFeed(t *testing.T, streams ...string) *feedT {
	f := &feedT{t: t, tr: newTracker()}
	for _, s := range streams {
		f.tr.add(s)
	}
	return f
}

func (f *feedT) line(s string) {
	f.t.Helper()
	var w wire
	if err := json.Unmarshal([]byte(s), &w); err != nil {
		f.t.Fatalf("%s: %v", s, err)
	}
	switch w.Type {
	case "notice":
		f.tr.notice(w.notice())
	default:
		var ev *BookEvent
		if w.Type == "book" {
			ev = w.book()
		}
		if f.tr.data(&w, ev) {
			f.tr.emit(ev)
		}
	}
	out, asks := f.tr.take()
	f.out = append(f.out, out...)
	f.asks = append(f.asks, asks...)
}

const l2 = "kraken:level2:BTC/USD"

func snap(seq int, bids, asks string) string {
	return fmt.Sprintf(`{"type":"book","stream":%q,"seq":%d,"snapshot":true,"bids":%s,"asks":%s}`, l2, seq, bids, asks)
}

func upd(seq int, bids, asks string) string {
	return fmt.Sprintf(`{"type":"book","stream":%q,"seq":%d,"bids":%s,"asks":%s}`, l2, seq, bids, asks)
}

func (f *feedT) state() (State, Reason) { return f.tr.streams[l2].book.State() }

func (f *feedT) want(s State, r Reason) {
	f.t.Helper()
	if gs, gr := f.state(); gs != s || gr != r {
		f.t.Fatalf("state %v %q, want %v %q", gs, gr, s, r)
	}
}

func (f *feedT) gaps() (g []Gap) {
	for _, m := range f.out {
		if x, ok := m.(*Gap); ok {
			g = append(g, *x)
		}
	}
	return g
}

func TestBookValidAfterSnapshotAndExact(t *testing.T) {
	f := newFeed(t, l2)
	f.want(Invalid, ReasonSubscribing)
	f.line(snap(5, `[["100.5","1"],["100","2"]]`, `[["101","1"],["102.25","3"]]`))
	f.want(Valid, ReasonNone)
	f.line(upd(6, `[["100.5","0"],["100.75","4"]]`, `[["101","0.5"]]`))
	b := f.tr.streams[l2].book
	bids, asks := b.TopRaw(0)
	if want := []RawLevel{{"100.75", "4"}, {"100", "2"}}; !slices.Equal(bids, want) {
		t.Fatalf("bids %v, want %v", bids, want)
	}
	if want := []RawLevel{{"101", "0.5"}, {"102.25", "3"}}; !slices.Equal(asks, want) {
		t.Fatalf("asks %v, want %v", asks, want)
	}
	bid, ask, ok1, ok2 := b.BBO()
	if !ok1 || !ok2 || bid.Price.String() != "100.75" || ask.Price.String() != "101" {
		t.Fatalf("BBO %v %v", bid, ask)
	}
	if b.Seq() != 6 {
		t.Fatalf("seq %d", b.Seq())
	}
	// A duplicate is not handed out nor applied.
	n := len(f.out)
	f.line(upd(6, `[["1","1"]]`, `[]`))
	if len(f.out) != n {
		t.Fatalf("duplicate seq 6 handed out: %v", f.out[n:])
	}
}

func TestHoleInvalidatesAndAsksSnapshot(t *testing.T) {
	f := newFeed(t, l2)
	f.line(snap(1, `[["100","1"]]`, `[["101","1"]]`))
	f.line(upd(2, `[["99","1"]]`, `[]`))
	f.line(upd(5, `[["98","1"]]`, `[]`))
	f.want(Invalid, ReasonGap)
	if first, last := f.tr.streams[l2].book.Gap(); first != 3 || last != 4 {
		t.Fatalf("gap %d..%d, want 3..4", first, last)
	}
	if !slices.Equal(f.asks, []string{l2}) {
		t.Fatalf("asks %v, want one snapshot op", f.asks)
	}
	if g := f.gaps(); len(g) != 1 || g[0].First != 3 || g[0].Last != 4 || g[0].Reason != "hole" {
		t.Fatalf("gaps %+v", g)
	}
	f.line(upd(7, `[]`, `[]`)) // another hole: no second op while one is outstanding
	if len(f.asks) != 1 {
		t.Fatalf("asks %v", f.asks)
	}
	// The reply's snapshot is at the stream's seq when it was asked (5 or
	// later); an older one does not repair.
	f.line(snap(7, `[["97","1"]]`, `[["101","1"]]`))
	f.want(Valid, ReasonNone)
	if bids, _ := f.tr.streams[l2].book.TopRaw(0); !slices.Equal(bids, []RawLevel{{"97", "1"}}) {
		t.Fatalf("bids %v", bids)
	}
}

// The notice overtakes the queued events: they still apply in seq order,
// the book stays invalid until the rebuilt book (a snapshot at a new seq),
// and a snapshot reusing the current seq does not repair it.
func TestResyncWaitsForRebuiltSnapshot(t *testing.T) {
	f := newFeed(t, l2)
	f.line(snap(1, `[["100","1"]]`, `[["101","1"]]`))
	f.line(`{"type":"notice","kind":"book_resync","venue":"kraken","stream":"kraken:level2:BTC/USD","details":{"reason":"checksum"}}`)
	f.want(Invalid, ReasonResync)
	f.line(upd(2, `[["99","1"]]`, `[]`))
	f.want(Invalid, ReasonResync)
	f.line(snap(2, `[["99","1"]]`, `[]`)) // a reply at the current seq: the old book
	f.want(Invalid, ReasonResync)
	if len(f.asks) != 0 {
		t.Fatalf("asked %v: a snapshot op during a resync returns the book being replaced", f.asks)
	}
	f.line(snap(3, `[["98","2"]]`, `[["102","1"]]`))
	f.want(Valid, ReasonNone)
}

func TestDroppingResumedGapThenSnapshot(t *testing.T) {
	const tr = "kraken:trades:BTC/USD"
	f := newFeed(t, l2, tr)
	f.line(snap(1, `[["100","1"]]`, `[["101","1"]]`))
	f.line(`{"type":"trade","stream":"kraken:trades:BTC/USD","seq":1,"price":"1","size":"1"}`)
	f.line(`{"type":"notice","kind":"dropping","venue":"kraken","details":{}}`)
	f.want(Invalid, ReasonDropping)
	f.line(upd(2, `[["99","1"]]`, `[]`)) // queued before the loss
	f.line(`{"type":"notice","kind":"resumed","venue":"kraken","details":{"reason":"drained","gaps":{"kraken:level2:BTC/USD":[4,9],"kraken:trades:BTC/USD":[3,5]}}}`)
	f.want(Invalid, ReasonGap)
	f.line(upd(3, `[["98","1"]]`, `[]`)) // still queued before the loss
	f.line(`{"type":"trade","stream":"kraken:trades:BTC/USD","seq":2,"price":"1","size":"1"}`)
	f.line(`{"type":"trade","stream":"kraken:trades:BTC/USD","seq":6,"price":"1","size":"1"}`)
	f.line(snap(9, `[["90","1"]]`, `[["101","1"]]`))
	f.want(Valid, ReasonNone)
	f.line(upd(10, `[["91","1"]]`, `[]`))
	f.want(Valid, ReasonNone)
	g := f.gaps()
	want := []Gap{{tr, 3, 5, "resumed"}, {l2, 4, 9, "resumed"}}
	slices.SortFunc(g, func(a, b Gap) int { return int(a.First) - int(b.First) })
	if !slices.Equal(g, want) {
		t.Fatalf("gaps %+v, want %+v (no hole reported twice)", g, want)
	}
	if len(f.asks) != 0 {
		t.Fatalf("asked %v: the daemon sends the snapshot after resumed", f.asks)
	}
}

func TestResumedRecoveredIsContiguous(t *testing.T) {
	const tr = "kraken:trades:BTC/USD"
	f := newFeed(t, l2, tr)
	f.line(snap(1, `[["100","1"]]`, `[["101","1"]]`))
	f.line(`{"type":"trade","stream":"kraken:trades:BTC/USD","seq":1,"price":"1","size":"1"}`)
	f.line(`{"type":"notice","kind":"resumed","venue":"kraken","details":{"reason":"reattached","gaps":{"kraken:level2:BTC/USD":[2,3],"kraken:trades:BTC/USD":[2,3]},"recovered":["kraken:level2:BTC/USD","kraken:trades:BTC/USD"]}}`)
	f.want(Valid, ReasonNone)
	f.line(upd(2, `[["99","1"]]`, `[]`))
	f.line(upd(3, `[["98","1"]]`, `[]`))
	f.line(`{"type":"trade","stream":"kraken:trades:BTC/USD","seq":2,"price":"1","size":"1"}`)
	f.want(Valid, ReasonNone)
	if g := f.gaps(); len(g) != 0 {
		t.Fatalf("gaps %+v for recovered streams", g)
	}
}

func TestLinkDownStaleUntilNextSnapshot(t *testing.T) {
	f := newFeed(t, l2, "kraken:level2:ETH/USD")
	f.line(snap(1, `[["100","1"]]`, `[["101","1"]]`))
	f.line(`{"type":"notice","kind":"link_down","venue":"okx","details":{"reason":"x"}}`)
	f.want(Valid, ReasonNone) // another venue
	f.line(`{"type":"notice","kind":"link_down","venue":"kraken","details":{"reason":"x","streams":["kraken:level2:ETH/USD"]}}`)
	f.want(Valid, ReasonNone) // one connection of several, not this stream's
	f.line(`{"type":"notice","kind":"link_down","venue":"kraken","details":{"reason":"x"}}`)
	f.want(Invalid, ReasonLinkDown)
	f.line(snap(1, `[["100","1"]]`, `[["101","1"]]`))
	f.want(Invalid, ReasonLinkDown)
	f.line(snap(2, `[["100","1"]]`, `[["101","1"]]`))
	f.want(Valid, ReasonNone)
}

func TestReconnectRestartAndHoles(t *testing.T) {
	const tr = "kraken:trades:BTC/USD"
	f := newFeed(t, l2, tr)
	f.line(snap(10, `[["100","1"]]`, `[["101","1"]]`))
	f.line(`{"type":"trade","stream":"kraken:trades:BTC/USD","seq":7,"price":"1","size":"1"}`)
	f.tr.disconnected()
	f.want(Invalid, ReasonReconnecting)
	f.line(snap(3, `[["100","1"]]`, `[["101","1"]]`)) // a restarted daemon numbers from 1 again
	f.want(Valid, ReasonNone)
	f.line(`{"type":"trade","stream":"kraken:trades:BTC/USD","seq":2,"price":"1","size":"1"}`)
	f.line(`{"type":"trade","stream":"kraken:trades:BTC/USD","seq":4,"price":"1","size":"1"}`)
	g := f.gaps()
	if want := []Gap{{tr, 0, 0, "restart"}, {tr, 3, 3, "hole"}}; !slices.Equal(g, want) {
		t.Fatalf("gaps %+v, want %+v", g, want)
	}
	if last := f.tr.lastRead(); last[l2] != 3 || last[tr] != 4 {
		t.Fatalf("lastRead %v", last)
	}
}

func TestParseKeyOrdersExactly(t *testing.T) {
	ps := []string{"0.000000000000000001", "0.1", "0.10000000000000001", "1", "1.5", "10", "99999.99999999", "100000", "1844674407370955161"}
	for i := 1; i < len(ps); i++ {
		a, err1 := parseKey(ps[i-1])
		b, err2 := parseKey(ps[i])
		if err1 != nil || err2 != nil || a.cmp(b) >= 0 {
			t.Fatalf("%s < %s: %v %v %d", ps[i-1], ps[i], err1, err2, a.cmp(b))
		}
	}
	a, _ := parseKey("1.50")
	b, _ := parseKey("1.5")
	if a.cmp(b) != 0 {
		t.Fatal("1.50 != 1.5")
	}
	for _, bad := range []string{"", "-1", "1e5", "1.2.3", "0.0000000000000000001", "12345678901234567890"} {
		if _, err := parseKey(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestBadLevelAsksSnapshot(t *testing.T) {
	f := newFeed(t, l2)
	f.line(snap(1, `[["100","1"]]`, `[["101","1"]]`))
	f.line(upd(2, `[["1e5","1"]]`, `[]`))
	f.want(Invalid, ReasonBadLevel)
	if !slices.Equal(f.asks, []string{l2}) {
		t.Fatalf("asks %v", f.asks)
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"0", "1.5", "45001.7", "0.00000001", "", "1e5", "-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := parseKey(s)
		if err != nil {
			return
		}
		k2, err := parseKey(s + "0")
		if err == nil && !containsDot(s) {
			if k2.cmp(k) <= 0 && k.hi|k.lo != 0 {
				t.Fatalf("%s0 <= %s", s, s)
			}
		}
	})
}

func containsDot(s string) bool {
	for i := range len(s) {
		if s[i] == '.' {
			return true
		}
	}
	return false
}

// A recovered reattach sends no snapshot: the book continues with the
// update after the last one read; an update past it names the hole and
// asks for a snapshot.
func TestReattachWithoutSnapshot(t *testing.T) {
	f := newFeed(t, l2)
	f.line(snap(1, `[["100","1"]]`, `[["101","1"]]`))
	f.line(upd(2, `[["99","1"]]`, `[]`))
	f.tr.disconnected()
	f.line(`{"type":"notice","kind":"resumed","venue":"kraken","details":{"reason":"reattached","gaps":{},"recovered":{"kraken:level2:BTC/USD":[3,4]}}}`)
	f.line(upd(3, `[["98","1"]]`, `[]`))
	f.want(Valid, ReasonNone)
	f.line(upd(4, `[["97","1"]]`, `[]`))
	if bids, _ := f.tr.streams[l2].book.TopRaw(0); len(bids) != 4 || f.tr.streams[l2].book.Seq() != 4 {
		t.Fatalf("bids %v at %d", bids, f.tr.streams[l2].book.Seq())
	}
	if len(f.gaps()) != 0 || len(f.asks) != 0 {
		t.Fatalf("gaps %v asks %v", f.gaps(), f.asks)
	}

	f.tr.disconnected()
	f.line(upd(9, `[["96","1"]]`, `[]`))
	f.want(Invalid, ReasonGap)
	if g := f.gaps(); len(g) != 1 || g[0] != (Gap{l2, 5, 8, "hole"}) {
		t.Fatalf("gaps %+v", g)
	}
	if len(f.asks) != 1 {
		t.Fatalf("asks %v", f.asks)
	}
	f.line(snap(9, `[["96","1"]]`, `[["101","1"]]`))
	f.want(Valid, ReasonNone)
}
