package coinbase_test

import (
	"slices"
	"testing"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/coinbase"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

// products starts a mock serving n products (Symbol first) and an
// adapter subscribed to them all.
func products(t *testing.T, m *coinbasetest.Mock, n int) (venue.Adapter, *venuetest.Sink, []string) {
	t.Helper()
	syms := m.Serve(n)
	ad, sink := venuetest.Start(t, m, venue.Config{Symbols: syms})
	return ad, sink, syms
}

// booksExact changes every product's true book and waits until each
// consumer book equals it.
func booksExact(t *testing.T, m *coinbasetest.Mock, sink *venuetest.Sink, syms []string) {
	t.Helper()
	m.Step(5)
	m.StepProducts(3, syms[1:]...)
	sink.WaitBook(t, venuetest.Wait, venue.NewStream(coinbase.Name, venue.Level2, coinbasetest.Symbol), m.Book)
	for _, s := range syms[1:] {
		sink.WaitBook(t, venuetest.Wait, venue.NewStream(coinbase.Name, venue.Level2, s), func() *venue.Book { return m.ProductBook(s) })
	}
}

// Past Coinbase's level2 limit per session (16, which the mock enforces
// with the venue's "too many L2 streams" error), products are spread over
// more connections: 40 products on 3, every book exact, nothing refused.
func TestL2SpreadOverConnections(t *testing.T) {
	m := &coinbasetest.Mock{}
	ad, sink, syms := products(t, m, 40)
	booksExact(t, m, sink, syms)
	perConn := m.Level2()
	var all []string
	for _, ps := range perConn {
		if len(ps) > coinbasetest.DefaultMaxL2 {
			t.Errorf("a connection has %d level2 products", len(ps))
		}
		all = append(all, ps...)
	}
	slices.Sort(all)
	want := slices.Clone(syms)
	slices.Sort(want)
	if len(perConn) != 3 || !slices.Equal(all, want) {
		t.Errorf("level2 on %d connections: %v; want 3 with %v", len(perConn), perConn, want)
	}
	sink.NoNotice(t, 0, notice.Refusal, notice.LinkDown, notice.BookResync)
	sink.WaitFor(t, venuetest.Wait, "coverage of every level2 stream, link up", func() bool {
		c := ad.Coverage()
		n := 0
		for _, sc := range c.Streams {
			if sc.Stream.Channel() == venue.Level2 {
				n++
			}
		}
		return c.Link == venue.LinkUp.String() && n == len(syms)
	})
	// Unsubscribed products leave their connection; new ones fill it.
	if err := ad.Unsubscribe("P00-USD", "P01-USD"); err != nil {
		t.Fatal(err)
	}
	m.AddProducts("NEW1-USD", "NEW2-USD")
	if err := ad.Subscribe("NEW1-USD", "NEW2-USD"); err != nil {
		t.Fatal(err)
	}
	syms = append(slices.DeleteFunc(syms, func(s string) bool { return s == "P00-USD" || s == "P01-USD" }), "NEW1-USD", "NEW2-USD")
	booksExact(t, m, sink, syms)
	sink.WaitFor(t, venuetest.Wait, "3 connections", func() bool { return len(m.Level2()) == 3 })
	sink.NoNotice(t, 0, notice.Refusal, notice.LinkDown)
	sink.Check(t)
}

// A dropped connection costs only its own books: its link_down names its
// streams, those books alone get a new snapshot, and every book is exact
// after.
func TestConnectionDropResyncsOnlyItsBooks(t *testing.T) {
	m := &coinbasetest.Mock{}
	_, sink, syms := products(t, m, 40)
	booksExact(t, m, sink, syms)
	from, ev := sink.NumNotices(), sink.NumEvents()
	had := m.CloseConnOf("P30-USD")
	if len(had) == 0 || len(had) > coinbasetest.DefaultMaxL2 {
		t.Fatalf("the connection had %v", had)
	}
	n, _ := sink.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	streams, _ := n.Details["streams"].([]string)
	var l2 []string
	for _, st := range streams {
		if s, err := venue.ParseStream(st); err == nil && s.Channel() == venue.Level2 {
			l2 = append(l2, s.Symbol())
		}
	}
	slices.Sort(l2)
	slices.Sort(had)
	if !slices.Equal(l2, had) {
		t.Errorf("link_down names level2 of %v; the connection had %v", l2, had)
	}
	if _, ok := n.Details["connection"]; !ok {
		t.Errorf("link_down names no connection: %v", n.Details)
	}
	sink.WaitNotice(t, venuetest.Wait, from, notice.LinkUp)
	booksExact(t, m, sink, syms)
	for _, e := range sink.Events()[ev:] {
		if e.Snapshot && !slices.Contains(had, e.Stream.Symbol()) {
			t.Errorf("%s got a new snapshot; its connection stayed up", e.Stream)
		}
	}
	sink.NoNotice(t, from, notice.BookResync, notice.Refusal)
	sink.Check(t)
}

// When the venue's limit is lower than the adapter's, its "too many L2
// streams" error (naming no product) lowers that connection's limit and
// moves the products over it to another connection: every book arrives,
// nothing is refused.
func TestLowerL2LimitMovesProducts(t *testing.T) {
	m := &coinbasetest.Mock{MaxL2: 1}
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{coinbasetest.Symbol, coinbasetest.Other}})
	m.Step(3)
	m.StepProducts(3, coinbasetest.Other)
	sink.WaitBook(t, venuetest.Wait, venue.NewStream(coinbase.Name, venue.Level2, coinbasetest.Symbol), m.Book)
	sink.WaitBook(t, venuetest.Wait, venue.NewStream(coinbase.Name, venue.Level2, coinbasetest.Other),
		func() *venue.Book { return m.ProductBook(coinbasetest.Other) })
	m.Trade("50000.02", "0.25", "SELL")
	sink.WaitEvent(t, venuetest.Wait, 0, "the trade", func(e *venue.Event) bool { return e.Kind == venue.KindTrade })
	if got := m.Level2(); len(got) != 2 {
		t.Errorf("level2 per connection %v, want one product on each of 2", got)
	}
	sink.NoNotice(t, 0, notice.Refusal, notice.LinkDown)
	sink.Check(t)
}

// A bad ticker frame costs no book and no reconnect.
func TestBadTickerCostsNoBook(t *testing.T) {
	m := &coinbasetest.Mock{}
	_, sink := venuetest.Start(t, m, venue.Config{})
	l2 := venue.NewStream(coinbase.Name, venue.Level2, coinbasetest.Symbol)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	from := sink.NumNotices()
	m.BadTicker()
	sink.WaitNotice(t, venuetest.Wait, from, notice.DataQuality)
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	sink.NoNotice(t, from, notice.LinkDown, notice.BookResync)
	sink.Check(t)
}

// A bad update for one product resyncs that book alone, by resubscribing
// its level2 on the same link.
func TestBadUpdateResubscribesItsBook(t *testing.T) {
	m := &coinbasetest.Mock{}
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{coinbasetest.Symbol, coinbasetest.Other}})
	l2 := venue.NewStream(coinbase.Name, venue.Level2, coinbasetest.Symbol)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	from := sink.NumNotices()
	m.CrossNextUpdate()
	n, _ := sink.WaitNotice(t, venuetest.Wait, from, notice.BookResync)
	if n.Stream != string(l2) || n.Details["resync"] != "resubscribe" {
		t.Errorf("book_resync %+v", n)
	}
	ev := sink.NumEvents()
	sink.WaitEvent(t, venuetest.Wait, ev, "a new snapshot", func(e *venue.Event) bool { return e.Stream == l2 && e.Snapshot })
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	sink.NoNotice(t, from, notice.LinkDown)
	for _, n := range sink.Notices()[from:] {
		if n.Kind == notice.BookResync && n.Stream != string(l2) {
			t.Errorf("resync of another book: %+v", n)
		}
	}
	sink.Check(t)
}

// A product Coinbase refused as not valid is reported unknown; one it
// serves is not listed (the product list is not fetched).
func TestKnownSymbolFromRefusal(t *testing.T) {
	m := &coinbasetest.Mock{}
	ad, sink := venuetest.Start(t, m, venue.Config{})
	if err := ad.Subscribe(coinbasetest.RefusedSymbol); err != nil {
		t.Fatal(err)
	}
	sink.WaitNotice(t, venuetest.Wait, 0, notice.Refusal)
	sc := ad.(venue.SymbolChecker)
	sink.WaitFor(t, venuetest.Wait, "the refusal recorded", func() bool {
		known, listed := sc.KnownSymbol(coinbasetest.RefusedSymbol)
		return !known && listed
	})
	if _, listed := sc.KnownSymbol(coinbasetest.Symbol); listed {
		t.Errorf("%s reported listed", coinbasetest.Symbol)
	}
}
