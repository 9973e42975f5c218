package fanout

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

func snapStream(sym string, depth int, iv string) venue.Stream {
	return venue.Stream(fmt.Sprintf("coinbase:book_snapshot_%d_%s:%s", depth, iv, sym))
}

func wantCap(t *testing.T, err error, c Cap) {
	t.Helper()
	be, ok := errors.AsType[*BudgetError](err)
	if !ok || be.Cap != c {
		t.Fatalf("got %v, want a refusal at the %s cap", err, c)
	}
}

// TestDerivedBudgetCaps: each cap refuses the subscription that would pass
// it, counts the refusal, and admits nothing of it; a stream held by
// several subscribers counts once; what is let go is free again.
func TestDerivedBudgetCaps(t *testing.T) {
	h, f := newHub(t, 100)
	h.SetDerivedLimits(DerivedLimits{PerToken: 4, PerSource: 6, Weight: 100})
	owned := func(owner string) *subscriber.Subscriber { return h.NewOwnedEphemeral(subscriber.NewMailbox(), owner) }

	// Per token: a's subscribers together hold at most 4 distinct streams.
	a1, a2 := owned("a"), owned("a")
	for d := 1; d <= 3; d++ {
		if err := h.Subscribe(a1, snapStream("BTC-USD", d, "0ms")); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Subscribe(a2, snapStream("BTC-USD", 1, "0ms")); err != nil {
		t.Fatal(err) // held by a already: no new stream for a
	}
	if err := h.Subscribe(a2, "coinbase:quote:BTC-USD"); err != nil {
		t.Fatal(err)
	}
	wantCap(t, h.Subscribe(a2, "coinbase:quote:ETH-USD"), CapPerToken)
	if h.DerivedRefused(CapPerToken) != 1 {
		t.Fatalf("token refusals %d", h.DerivedRefused(CapPerToken))
	}
	// Raw streams are not counted.
	if err := h.Subscribe(a2, l2); err != nil {
		t.Fatal(err)
	}

	// Per source: 6 distinct streams of coinbase:level2:BTC-USD, whoever holds them.
	b := owned("b")
	if err := h.Subscribe(b, snapStream("BTC-USD", 1, "0ms")); err != nil {
		t.Fatal(err) // an existing stream: nothing new for the source
	}
	for d := 4; d <= 5; d++ {
		if err := h.Subscribe(b, snapStream("BTC-USD", d, "10ms")); err != nil {
			t.Fatal(err)
		}
	}
	wantCap(t, h.Subscribe(b, snapStream("BTC-USD", 6, "10ms")), CapPerSource)
	// The same stream under another name is the same stream.
	if err := h.Subscribe(b, "coinbase:book_snapshot_5_10ms:BTC-USD"); err != nil {
		t.Fatal(err)
	}
	c := owned("c")
	if err := h.Subscribe(c, "coinbase:book_snapshot_2_1000ms:BTC-USD"); !errors.As(err, new(*BudgetError)) {
		t.Fatalf("a seventh stream of the source, named 1000ms: %v", err)
	}
	if err := h.Subscribe(c, "coinbase:book_snapshot_4_10ms:BTC-USD"); err != nil {
		t.Fatal(err)
	}
	if u := h.DerivedUsage(); u.Streams != 6 || u.Weight != 1+2+3+1+4+5 {
		t.Fatalf("usage %+v, want 6 streams of weight 16", u)
	}

	// Per node, by weight: 16 used of 100.
	wantCap(t, h.Subscribe(c, snapStream("ETH-USD", 85, "1s")), CapWeight)
	if err := h.Subscribe(c, snapStream("ETH-USD", 84, "1s")); err != nil {
		t.Fatal(err)
	}
	wantCap(t, h.Subscribe(c, "coinbase:trade_bar_1s:ETH-USD"), CapWeight)

	// All or none: one stream past a cap refuses the others with it.
	d := owned("d")
	err := h.Admit(d, []venue.Stream{"coinbase:quote:SOL-USD", snapStream("SOL-USD", 90, "1s")})
	wantCap(t, err, CapWeight)
	if u := h.DerivedUsage(); u.Streams != 7 || u.Weight != 100 {
		t.Fatalf("usage %+v after a refused Admit, want 7 streams of weight 100", u)
	}

	// Let go, the weight is free again: c's unsubscribe and a1's detach.
	h.Unsubscribe(c, snapStream("ETH-USD", 84, "1s"))
	if err := h.Subscribe(d, "coinbase:quote:SOL-USD"); err != nil {
		t.Fatal(err)
	}
	h.Detach(a1, a1.Mailbox())
	if u := h.DerivedUsage(); u.Streams != 5 || u.Weight != 1+1+4+5+1 {
		// a1's depth 2 and 3 streams are gone; depth 1 is held by a2 and b.
		t.Fatalf("usage %+v after releases", u)
	}
	for i := 0; i < 2; i++ { // a holds two (depth 1, quote): room for two more
		if err := h.Subscribe(a2, venue.Stream(fmt.Sprintf("coinbase:trade_bar_%ds:BTC-USD", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	wantCap(t, h.Subscribe(a2, "coinbase:trade_bar_9s:BTC-USD"), CapPerToken)
	f.mu.Lock()
	n := len(f.streams[l2].derived)
	f.mu.Unlock()
	if n != 4 {
		t.Fatalf("%d derived streams of the source in the feed, want 4 (depths 1, 4, 5 and the quote)", n)
	}
}

// TestDerivedBudgetNamed: a detached named subscriber keeps its streams
// counted; forgotten, it frees them.
func TestDerivedBudgetNamed(t *testing.T) {
	h, _ := newHub(t, 100)
	h.SetDerivedLimits(DerivedLimits{PerToken: 2})
	c := subscriber.NewMailbox()
	s, _, err := h.Attach("desk", "a", c, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Subscribe(s, snapStream("BTC-USD", 1, "0ms"))
	h.Subscribe(s, snapStream("BTC-USD", 2, "0ms"))
	h.Detach(s, c)
	other := h.NewOwnedEphemeral(subscriber.NewMailbox(), "a")
	wantCap(t, h.Subscribe(other, "coinbase:quote:BTC-USD"), CapPerToken)
	h.Forget("desk")
	if err := h.Subscribe(other, "coinbase:quote:BTC-USD"); err != nil {
		t.Fatal(err)
	}
	if u := h.DerivedUsage(); u.Streams != 1 || u.Weight != 1 {
		t.Fatalf("usage %+v", u)
	}
}

// TestDerivedCanonicalName: one stream under two spellings of its
// interval is one stream, computed once, named in its canonical form in
// what it sends.
func TestDerivedCanonicalName(t *testing.T) {
	h, f := newHub(t, 100)
	f.Publish(bookSnap(l2))
	c1, c2 := subscriber.NewMailbox(), subscriber.NewMailbox()
	s1, s2 := h.NewEphemeral(c1), h.NewEphemeral(c2)
	if err := h.Subscribe(s1, "coinbase:book_snapshot_2_0ms:BTC-USD"); err != nil {
		t.Fatal(err)
	}
	h.Subscribe(s1, "coinbase:trade_bar_60000ms:BTC-USD")
	h.Subscribe(s2, "coinbase:trade_bar_1m:BTC-USD")
	h.Subscribe(s2, "coinbase:trade_bar_60s:BTC-USD")
	if u := h.DerivedUsage(); u.Streams != 2 {
		t.Fatalf("%d derived streams, want 2", u.Streams)
	}
	if got := s1.Streams(); len(got) != 2 || got[1] != "coinbase:trade_bar_1m:BTC-USD" {
		t.Fatalf("s1 holds %v", got)
	}
	if got := s2.Streams(); len(got) != 1 {
		t.Fatalf("s2 holds %v", got)
	}
	h.Unsubscribe(s1, "coinbase:trade_bar_60s:BTC-USD")
	if got := s1.Streams(); len(got) != 1 {
		t.Fatalf("after unsubscribing another spelling, s1 holds %v", got)
	}
}
