package coinbase_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/coinbase"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

func noNotice(t *testing.T, sink *venuetest.Sink, from int, kinds ...notice.Kind) {
	t.Helper()
	for _, n := range sink.Notices()[from:] {
		for _, k := range kinds {
			if n.Kind == k {
				t.Errorf("unexpected %s: %s", n.Kind, n.Message)
			}
		}
	}
}

// Past Coinbase's level2 limit per session, the products over it are
// refused level2 up front (a refusal on that stream alone) and keep
// their trades and ticker; the products within it get their books.
func TestTooManyL2RefusedUpFront(t *testing.T) {
	m := &coinbasetest.Mock{MaxL2: 16}
	syms := []string{coinbasetest.Symbol}
	for i := range 19 {
		p := fmt.Sprintf("P%02d-USD", i)
		m.Products = append(m.Products, p)
		syms = append(syms, p)
	}
	ad, sink := venuetest.Start(t, m, venue.Config{Symbols: syms})
	l2 := venue.NewStream(coinbase.Name, venue.Level2, coinbasetest.Symbol)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	var refused []string
	for _, n := range sink.Notices() {
		if n.Kind == notice.Refusal {
			refused = append(refused, n.Stream)
		}
	}
	if want := "coinbase:level2:P15-USD coinbase:level2:P16-USD coinbase:level2:P17-USD coinbase:level2:P18-USD"; strings.Join(refused, " ") != want {
		t.Errorf("refusals on %v, want %s", refused, want)
	}
	sink.WaitEvent(t, venuetest.Wait, 0, "P18-USD's ticker", func(e *venue.Event) bool {
		return e.Stream == venue.NewStream(coinbase.Name, venue.Ticker, "P18-USD")
	})
	noNotice(t, sink, 0, notice.LinkDown)
	if _, listed := ad.(venue.SymbolChecker).KnownSymbol("P18-USD"); listed {
		t.Error("P18-USD reported unknown")
	}
	// A freed place goes to a product that had none.
	from := sink.NumEvents()
	if err := ad.Unsubscribe("P00-USD"); err != nil {
		t.Fatal(err)
	}
	sink.WaitEvent(t, venuetest.Wait, from, "P15-USD's book", func(e *venue.Event) bool {
		return e.Stream == venue.NewStream(coinbase.Name, venue.Level2, "P15-USD") && e.Snapshot
	})
	sink.Check(t)
}

// When the venue's limit is lower than the adapter's, its "too many L2
// streams" error (naming no product) refuses level2 alone: the products'
// trades and ticker go on, and nothing else is refused.
func TestTooManyL2ErrorRefusesOnlyLevel2(t *testing.T) {
	m := &coinbasetest.Mock{MaxL2: 1}
	m.Start(t)
	sink := venuetest.NewSink()
	venuetest.StartAdapter(t, m.NewAdapter, venue.Config{Symbols: []string{coinbasetest.Symbol, coinbasetest.Other}, Sink: sink})
	sink.WaitNotice(t, venuetest.Wait, 0, notice.Refusal)
	sink.WaitEvent(t, venuetest.Wait, 0, "a ticker", func(e *venue.Event) bool { return e.Kind == venue.KindTicker })
	m.Trade("50000.02", "0.25", "SELL")
	sink.WaitEvent(t, venuetest.Wait, 0, "the trade", func(e *venue.Event) bool { return e.Kind == venue.KindTrade })
	for _, n := range sink.Notices() {
		if n.Kind == notice.Refusal && n.Details["channel"] != "level2" {
			t.Errorf("refusal beyond level2: %+v", n)
		}
	}
	noNotice(t, sink, 0, notice.LinkDown)
	// The products are still wanted: a new connection asks for them again.
	from, ev := sink.NumNotices(), sink.NumEvents()
	m.Server().CloseAll()
	sink.WaitNotice(t, venuetest.Wait, from, notice.LinkUp)
	sink.WaitEvent(t, venuetest.Wait, ev, "a ticker after the reconnect", func(e *venue.Event) bool { return e.Kind == venue.KindTicker })
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
	noNotice(t, sink, from, notice.LinkDown, notice.BookResync)
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
	noNotice(t, sink, from, notice.LinkDown)
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
