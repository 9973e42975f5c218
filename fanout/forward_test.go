package fanout

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// The tap sees every event Publish encodes, in seq order, with the bytes
// subscribers receive, and costs the publish path no allocation.
func TestTapSeesEveryEncodedEvent(t *testing.T) {
	type tapped struct {
		st   venue.Stream
		seq  uint64
		data []byte
	}
	var got []tapped
	h := NewHub(subscriber.NewRegistry())
	f, _ := h.AddFeed(Options{Venue: "coinbase", Now: func() time.Time { return t0 },
		Tap: func(st venue.Stream, seq uint64, data []byte) { got = append(got, tapped{st, seq, bytes.Clone(data)}) }})
	c := subscriber.NewMailbox()
	h.Subscribe(h.NewEphemeral(c), tr)
	f.Publish(trade(tr, 1))
	f.Publish(trade(tr2, 1)) // no subscriber: tapped all the same
	f.Publish(trade(tr, 2))
	if len(got) != 3 || got[0].seq != 1 || got[1].st != tr2 || got[1].seq != 1 || got[2].seq != 2 {
		t.Fatalf("tapped %+v", got)
	}
	ms := drain(t, c)
	if len(ms) != 2 || !bytes.Equal(ms[0].raw, got[0].data) || !bytes.Equal(ms[1].raw, got[2].data) {
		t.Fatalf("subscriber got %d messages, not the tapped bytes", len(ms))
	}
}

func TestTapAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	var n int
	_, f := newHub(t, 100)
	f.tap = func(venue.Stream, uint64, []byte) { n++ }
	ev := trade(tr2, 1)
	f.Publish(ev)
	base := testing.AllocsPerRun(200, func() { f.Publish(ev) })
	f.tap = nil
	without := testing.AllocsPerRun(200, func() { f.Publish(ev) })
	if base > without {
		t.Fatalf("publish with a tap: %v allocs, without: %v", base, without)
	}
}

// Forward delivers the bytes it is given at the seq it is given, keeps the
// book from the decoded events, and never applies an update to a book
// invalidated since its last snapshot.
func TestForwardKeepsSeqBytesAndBook(t *testing.T) {
	// The "ingest": a feed that numbers and encodes.
	var wire [][]byte
	var seqs []uint64
	in := NewHub(subscriber.NewRegistry())
	src, _ := in.AddFeed(Options{Venue: "coinbase", Now: func() time.Time { return t0 },
		Tap: func(_ venue.Stream, seq uint64, data []byte) {
			wire = append(wire, bytes.Clone(data))
			seqs = append(seqs, seq)
		}})
	src.Publish(bookSnap(l2))
	for i := range 6 {
		src.Publish(bookUpd(l2, i))
	}
	// The "edge".
	var wanted []bool
	h := NewHub(subscriber.NewRegistry())
	f, _ := h.AddFeed(Options{Venue: "coinbase", Now: func() time.Time { return t0 },
		OnWanted: func(st venue.Stream, w bool) { wanted = append(wanted, w) }})
	c := subscriber.NewMailbox()
	s := h.NewEphemeral(c)
	h.Subscribe(s, l2)
	fwd := func(i int) {
		var ev venue.Event
		if err := ev.UnmarshalJSON(wire[i]); err != nil {
			t.Fatal(err)
		}
		f.Forward(l2, seqs[i], wire[i], &ev)
	}
	for i := range 4 {
		fwd(i)
	}
	ms := drain(t, c)
	for i, m := range ms {
		if !bytes.Equal(m.raw, wire[i]) || m.Seq != seqs[i] {
			t.Fatalf("message %d: %s, want %s", i, m.raw, wire[i])
		}
	}
	f.Invalidate(l2)
	if _, ok := f.Book(l2); ok {
		t.Fatal("an invalidated book is served")
	}
	fwd(4) // an update to a book known wrong: delivered, not applied
	if _, ok := f.Book(l2); ok {
		t.Fatal("an update made an invalidated book whole")
	}
	snap, _ := src.Book(l2)
	f.Forward(l2, snap.Seq, snap.AppendJSON(nil), snap)
	got, ok := f.Book(l2)
	var a, b venue.Book
	if ok {
		a.Apply(got)
		b.Apply(snap)
	}
	if !ok || got.Seq != seqs[6] || !a.Equal(&b) {
		t.Fatalf("book after the snapshot: %v %+v", ok, got)
	}
	h.Unsubscribe(s, l2)
	if len(wanted) != 2 || !wanted[0] || wanted[1] {
		t.Fatalf("OnWanted calls %v, want [true false]", wanted)
	}
	f.Reset(l2)
	if _, ok := f.Book(l2); ok {
		t.Fatal("Reset kept the book")
	}
}

// A derived stream is computed on the node: subscribing to it makes its
// raw source wanted (an edge then follows the source on the bus), and the
// derived stream itself is never reported.
func TestDerivedStreamWantsItsSource(t *testing.T) {
	type call struct {
		st venue.Stream
		w  bool
	}
	var calls []call
	h := NewHub(subscriber.NewRegistry())
	h.AddFeed(Options{Venue: "coinbase", Now: func() time.Time { return t0 },
		OnWanted: func(st venue.Stream, w bool) { calls = append(calls, call{st, w}) }})
	src := venue.NewStream("coinbase", venue.Level2, "BTC-USD")
	q := venue.NewStream("coinbase", venue.Quote, "BTC-USD")
	a, b := h.NewEphemeral(subscriber.NewMailbox()), h.NewEphemeral(subscriber.NewMailbox())
	h.Subscribe(a, q)
	h.Subscribe(b, src) // already wanted through the quote
	h.Unsubscribe(a, q) // still wanted by b
	h.Unsubscribe(b, src)
	want := []call{{src, true}, {src, false}}
	if !slices.Equal(calls, want) {
		t.Fatalf("OnWanted calls %v, want %v", calls, want)
	}
}
