package derive_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/derive"
	"github.com/fanoutd/fanoutd/venue"
)

// setChannels are book streams of one source sharing a Set: several depths
// per interval (each sliced from one read), several intervals, every
// change and quote.
var setChannels = []string{
	"book_snapshot_1_0ms", "book_snapshot_3_0ms", "book_snapshot_25_0ms", "book_snapshot_1000_0ms", "quote",
	"book_snapshot_1_10ms", "book_snapshot_5_10ms", "book_snapshot_400_10ms",
	"book_snapshot_2_100ms", "book_snapshot_10_100ms", "book_snapshot_10_7ms", "book_snapshot_50_200ms",
}

// TestSetOnCaptures: a Set holding many book streams of one source emits,
// for each, exactly what that stream computed alone emits (the same
// messages at the same points of the source), and reads the book's top at
// most twice per source event (once closing intervals, once applying the
// event), not once per stream.
func TestSetOnCaptures(t *testing.T) {
	for _, name := range captures {
		evs := captureEvents(t, name)
		for _, src := range streamsOf(evs, venue.Level2) {
			t.Run(string(src), func(t *testing.T) {
				sevs := sourceEvents(evs, src)
				set := derive.NewSet(src)
				// What each stream sent, in wire form, at seq 1, 2, …
				got := map[venue.Stream][]string{}
				n := 0
				for _, ch := range setChannels {
					id := venue.Stream(src.Venue() + ":" + ch + ":" + src.Symbol())
					if err := set.Add(id, func(o derive.Out) {
						o.Event.Seq = uint64(len(got[id]) + 1)
						got[id] = append(got[id], fmt.Sprintf("after %d: %s", n, o.AppendJSON(nil)))
					}); err != nil {
						t.Fatal(err)
					}
				}
				if set.Len() != len(setChannels) {
					t.Fatalf("Len %d, want %d", set.Len(), len(setChannels))
				}
				book := &venue.Book{}
				for _, ev := range sevs {
					set.Advance(ev.RecvTime, book)
					book.Apply(ev)
					n++
					set.Apply(ev, book)
				}
				set.Advance(time.Unix(1<<40, 0), book)
				if r, max := set.Reads(), uint64(2*len(sevs)+1); r > max {
					t.Fatalf("%d reads of the book for %d events and %d streams: more than 2 per event", r, len(sevs), len(setChannels))
				}
				for _, ch := range setChannels {
					id := venue.Stream(src.Venue() + ":" + ch + ":" + src.Symbol())
					d, err := derive.New(id)
					if err != nil {
						t.Fatal(err)
					}
					want := drive(t, d, evs)
					g := got[id]
					if len(g) != len(want) || len(g) < 2 {
						t.Fatalf("%s: %d messages in the set, %d alone (want at least 2)", ch, len(g), len(want))
					}
					for i := range g {
						want[i].out.Event.Seq = uint64(i + 1)
						if w := fmt.Sprintf("after %d: %s", want[i].applied, want[i].out.AppendJSON(nil)); g[i] != w {
							t.Fatalf("%s message %d:\n set   %s\n alone %s", ch, i, g[i], w)
						}
					}
				}
			})
		}
	}
}

// decode is the event o's wire form says.
func decode(t *testing.T, o derive.Out) *venue.Event {
	t.Helper()
	var ev venue.Event
	if err := json.Unmarshal(o.AppendJSON(nil), &ev); err != nil {
		t.Fatalf("%s: %v", o.AppendJSON(nil), err)
	}
	return &ev
}

// TestSetSlices: streams of several depths of one interval share one read
// at the deepest depth, each sliced to its own; a stream removed emits no
// more, and a depth past the book's takes what the book has.
func TestSetSlices(t *testing.T) {
	src := venue.Stream("okx:level2:BTC-USDT")
	set := derive.NewSet(src)
	out := map[venue.Stream][]*venue.Event{}
	add := func(ch string) venue.Stream {
		id := venue.Stream("okx:" + ch + ":BTC-USDT")
		if err := set.Add(id, func(o derive.Out) { out[id] = append(out[id], decode(t, o)) }); err != nil {
			t.Fatal(err)
		}
		return id
	}
	d1, d3, d9, q := add("book_snapshot_1_0ms"), add("book_snapshot_3_0ms"), add("book_snapshot_9_0ms"), add("quote")
	if err := set.Add(d3, func(derive.Out) {}); err == nil {
		t.Fatal("a stream added twice")
	}
	if err := set.Add("okx:book_snapshot_3_0ms:ETH-USDT", func(derive.Out) {}); err == nil {
		t.Fatal("a stream of another source added")
	}
	book := &venue.Book{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := &venue.Event{Kind: venue.KindBook, Stream: src, Snapshot: true, RecvTime: t0}
	for i := range 5 {
		ev.Bids = append(ev.Bids, venue.Level{Price: dec(100 - i), Size: dec(1)})
		ev.Asks = append(ev.Asks, venue.Level{Price: dec(101 + i), Size: dec(1)})
	}
	apply := func(ev *venue.Event) {
		set.Advance(ev.RecvTime, book)
		book.Apply(ev)
		set.Apply(ev, book)
	}
	apply(ev)
	if set.Reads() != 1 {
		t.Fatalf("%d reads for one snapshot and four streams", set.Reads())
	}
	for id, depth := range map[venue.Stream]int{d1: 1, d3: 3, d9: 5} {
		if len(out[id]) != 1 || len(out[id][0].Bids) != depth || len(out[id][0].Asks) != depth || !out[id][0].Bids[0].Price.Equal(dec(100)) {
			t.Fatalf("%s: %v, want one snapshot of %d levels a side", id, out[id], depth)
		}
	}
	if len(out[q]) != 1 || !out[q][0].Bid.Equal(dec(100)) || !out[q][0].Ask.Equal(dec(101)) {
		t.Fatalf("quote %v", out[q])
	}
	// A change at the fourth bid touches only the depth-9 stream.
	apply(&venue.Event{Kind: venue.KindBook, Stream: src, RecvTime: t0.Add(time.Millisecond), Bids: []venue.Level{{Price: dec(97), Size: dec(2)}}})
	if len(out[d1]) != 1 || len(out[d3]) != 1 || len(out[q]) != 1 || len(out[d9]) != 2 || !out[d9][1].Bids[3].Size.Equal(dec(2)) {
		t.Fatalf("after a change at level 4: %d %d %d %d messages", len(out[d1]), len(out[d3]), len(out[d9]), len(out[q]))
	}
	set.Remove(d9)
	apply(&venue.Event{Kind: venue.KindBook, Stream: src, RecvTime: t0.Add(2 * time.Millisecond), Bids: []venue.Level{{Price: dec(100), Size: dec(3)}}})
	if len(out[d9]) != 2 || len(out[d1]) != 2 || len(out[d3]) != 2 || len(out[q]) != 2 || set.Len() != 3 {
		t.Fatalf("after removing the deepest: %d %d %d %d messages, %d streams", len(out[d1]), len(out[d3]), len(out[d9]), len(out[q]), set.Len())
	}
	if r := set.Reads(); r != 3 {
		t.Fatalf("%d reads after three events, want 3", r)
	}
}

// TestSetIntervalsShareSchedule: interval streams close at their own
// boundaries, all from one read per Advance; a Seed starts a stream at the
// end of the interval holding the source's last event.
func TestSetIntervalsShareSchedule(t *testing.T) {
	src := venue.Stream("okx:level2:BTC-USDT")
	set := derive.NewSet(src)
	var got []string
	for _, ch := range []string{"book_snapshot_1_10ms", "book_snapshot_4_10ms", "book_snapshot_2_20ms"} {
		id := venue.Stream("okx:" + ch + ":BTC-USDT")
		set.Add(id, func(o derive.Out) {
			ev := decode(t, o)
			got = append(got, fmt.Sprintf("%s@%d/%d", ch, ev.RecvTime.UnixMilli()%1000, len(ev.Bids)))
		})
	}
	book := &venue.Book{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := func(ms int, p int) {
		ev := &venue.Event{Kind: venue.KindBook, Stream: src, RecvTime: t0.Add(time.Duration(ms) * time.Millisecond), Bids: []venue.Level{{Price: dec(p), Size: dec(1)}}}
		set.Advance(ev.RecvTime, book)
		book.Apply(ev)
		set.Apply(ev, book)
	}
	step(1, 100)
	step(2, 99)
	if d := set.Due(); !d.Equal(t0.Add(10 * time.Millisecond)) {
		t.Fatalf("due %v", d)
	}
	step(15, 98) // closes the 10ms interval (both 10ms streams, one read)
	r := set.Reads()
	set.Advance(t0.Add(time.Second), book)
	want := []string{"book_snapshot_1_10ms@10/1", "book_snapshot_4_10ms@10/2", "book_snapshot_4_10ms@20/3", "book_snapshot_2_20ms@20/2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if set.Reads() != r+1 || r != 1 {
		t.Fatalf("reads %d then %d, want 1 then 2", r, set.Reads())
	}
}

func dec(i int) decimal.Decimal { return decimal.New(int64(i), 0) }

// TestSetPause: a paused stream is not computed (no read of the book for
// it, nothing emitted); resumed, it emits the current top at once.
func TestSetPause(t *testing.T) {
	src := venue.Stream("okx:level2:BTC-USDT")
	set := derive.NewSet(src)
	var got []*venue.Event
	id := venue.Stream("okx:book_snapshot_5_0ms:BTC-USDT")
	set.Add(id, func(o derive.Out) { got = append(got, decode(t, o)) })
	book := &venue.Book{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	apply := func(ms, p int) {
		ev := &venue.Event{Kind: venue.KindBook, Stream: src, RecvTime: t0.Add(time.Duration(ms) * time.Millisecond), Bids: []venue.Level{{Price: dec(p), Size: dec(1)}}}
		set.Advance(ev.RecvTime, book)
		book.Apply(ev)
		set.Apply(ev, book)
	}
	apply(1, 100)
	set.Pause(id)
	for i := range 10 {
		apply(2+i, 101+i)
	}
	if len(got) != 1 || set.Reads() != 1 {
		t.Fatalf("paused: %d messages, %d reads, want 1 and 1", len(got), set.Reads())
	}
	set.Resume(id, book, t0.Add(11*time.Millisecond))
	if len(got) != 2 || !got[1].Bids[0].Price.Equal(dec(110)) || len(got[1].Bids) != 5 || set.Reads() != 2 {
		t.Fatalf("resumed: %d messages (%v), %d reads", len(got), got[len(got)-1].Bids, set.Reads())
	}
	apply(20, 111)
	if len(got) != 3 {
		t.Fatalf("after resume: %d messages, want 3", len(got))
	}
}
