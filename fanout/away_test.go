package fanout

import (
	"fmt"
	"testing"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// TestDetachedLossIsExactPerStream: a named subscriber detached over
// events of three streams, one subscribed while detached and one left
// while detached, is told on reattach exactly the seqs it lost on each,
// and /v1/subscribers' counts (State) say as much while it is detached.
func TestDetachedLossIsExactPerStream(t *testing.T) {
	h, f := newHub(t, 100)
	f.Publish(bookSnap(l2)) // l2 seq 1
	c1 := subscriber.NewMailbox()
	s, _, _ := h.Attach("desk", "", c1, nil)
	for _, st := range []venue.Stream{l2, tr, tr2} {
		h.Subscribe(s, st)
	}
	f.Publish(trade(tr, 1)) // tr 1, written
	drain(t, c1)
	h.Detach(s, c1)
	for i := range 5 {
		f.Publish(bookUpd(l2, i)) // l2 2..6
	}
	for i := range 3 {
		f.Publish(trade(tr, i)) // tr 2..4
	}
	const tr3 = venue.Stream("coinbase:trades:SOL-USD")
	f.Publish(trade(tr3, 0)) // tr3 1, before the subscriber holds it
	h.Subscribe(s, tr3)      // while detached
	f.Publish(trade(tr3, 1)) // tr3 2, lost
	f.Publish(trade(tr2, 0)) // tr2 1, lost
	h.Unsubscribe(s, tr2)    // its gap goes with it; its loss still counts
	f.Publish(trade(tr2, 1)) // tr2 2: not the subscriber's
	if st, _ := f.State(s); st.Dropped != 10 || st.DroppedTotal != 10 {
		t.Fatalf("State while detached: %+v, want 10 dropped (l2 5, trades 3, SOL 1, ETH 1)", st)
	}
	f.Publish(trade(tr, 9)) // tr 5: lost too
	c2 := subscriber.NewMailbox()
	h.Attach("desk", "", c2, nil)
	ms := drain(t, c2)
	if len(ms) == 0 || ms[0].Kind != "resumed" {
		t.Fatalf("reattach got %+v, want resumed first", ms)
	}
	want := map[string][2]uint64{string(l2): {2, 6}, string(tr): {2, 5}, string(tr3): {2, 2}}
	if g := gapsOf(t, ms[0]); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("gaps %v, want %v", g, want)
	}
	if n := num(t, ms[0], "dropped"); n != 11 {
		t.Fatalf("dropped %d, want 11", n)
	}
	f.Publish(trade(tr, 10))
	if ms := drain(t, c2); len(ms) != 1 || ms[0].Seq != 6 {
		t.Fatalf("after the reattach got %+v, want trades seq 6", ms)
	}
	// Detached again: the loss starts after what the second connection had.
	h.Detach(s, c2)
	f.Publish(trade(tr, 11)) // tr 7
	c3 := subscriber.NewMailbox()
	h.Attach("desk", "", c3, nil)
	if g := gapsOf(t, drain(t, c3)[0]); g[string(tr)] != [2]uint64{7, 7} || len(g) != 1 {
		t.Fatalf("second detach's gaps %v, want trades 7..7 only", g)
	}
}

// BenchmarkDeliverDetached is one event on a stream held by 10,000
// detached named subscribers of five streams each (what a token could
// leave behind for named_ttl): the cost of each is a skip. Measured on
// the shared 2-core build machine (-benchtime 2000x -count 3): 64–92 µs an
// event when each recorded its loss per event, 37–43 µs with the loss
// marked per stream.
func BenchmarkDeliverDetached(b *testing.B) {
	h, f := newHub(b, DefaultMaxQueueLen)
	sts := []venue.Stream{l2, tr, tr2, "coinbase:trades:SOL-USD", "coinbase:trades:ADA-USD"}
	for i := range 10000 {
		c := subscriber.NewMailbox()
		s, _, _ := h.Attach(fmt.Sprintf("d%d", i), "", c, nil)
		for _, st := range sts {
			h.Subscribe(s, st)
		}
		h.Detach(s, c)
	}
	ev := trade(tr, 1)
	f.Publish(ev) // each finds its subscriber detached
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f.Publish(ev)
	}
}
