package coinbase_test

import (
	"testing"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/coinbase"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

func TestAllChannels(t *testing.T) {
	m := &coinbasetest.Mock{}
	rec := &venuetest.Recorder{}
	_, sink := venuetest.Start(t, m, venue.Config{Recorder: rec})
	l2 := venue.NewStream(coinbase.Name, venue.Level2, coinbasetest.Symbol)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	// The ticker snapshot on subscribe is published; the trade snapshot
	// is history and is not.
	sink.WaitEvent(t, venuetest.Wait, 0, "the ticker snapshot", func(e *venue.Event) bool {
		return e.Kind == venue.KindTicker && e.Bid.String() == "49999.99"
	})
	m.Trade("50000.02", "0.25", "SELL")
	sink.WaitEvent(t, venuetest.Wait, 0, "the trade", func(e *venue.Event) bool {
		return e.Kind == venue.KindTrade && e.Price.String() == "50000.02" && e.Side == venue.SideBuy
	})
	m.Step(10)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	sink.Check(t)
	if frames, _ := rec.Counts(); frames < 5 {
		t.Errorf("recorder saw %d frames", frames)
	}
}

func TestRefusedSymbolIsNotRetried(t *testing.T) {
	m := &coinbasetest.Mock{}
	ad, sink := venuetest.Start(t, m, venue.Config{})
	from := sink.NumNotices()
	if err := ad.Subscribe(coinbasetest.RefusedSymbol, coinbasetest.Other); err != nil {
		t.Fatal(err)
	}
	n, _ := sink.WaitNotice(t, venuetest.Wait, from, notice.Refusal)
	if n.Details["symbol"] != coinbasetest.RefusedSymbol {
		t.Fatalf("refusal = %+v", n)
	}
	other := venue.NewStream(coinbase.Name, venue.Level2, coinbasetest.Other)
	sink.WaitEvent(t, venuetest.Wait, 0, "the other symbol's snapshot", func(e *venue.Event) bool {
		return e.Stream == other && e.Snapshot
	})
	// After a reconnect the refused symbol is not asked for again.
	from = sink.NumNotices()
	accepted := m.Server().Accepted()
	m.Server().CloseAll()
	m.Server().WaitAccepted(t, accepted+1, venuetest.Wait)
	_, i := sink.WaitNotice(t, venuetest.Wait, from, notice.LinkUp)
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, venue.NewStream(coinbase.Name, venue.Level2, coinbasetest.Symbol), m.Book)
	for _, n := range sink.Notices()[i:] {
		if n.Kind == notice.Refusal {
			t.Fatalf("refusal after reconnect: %+v", n)
		}
	}
	// Unsubscribe drops the other symbol from coverage.
	if err := ad.Unsubscribe(coinbasetest.Other); err != nil {
		t.Fatal(err)
	}
	for _, sc := range ad.Coverage().Streams {
		if sc.Stream.Symbol() == coinbasetest.Other {
			t.Fatalf("coverage still lists %s after unsubscribe", sc.Stream)
		}
	}
	sink.Check(t)
}

func TestVenueDisconnectReconnects(t *testing.T) {
	m := &coinbasetest.Mock{}
	rec := &venuetest.Recorder{}
	_, sink := venuetest.Start(t, m, venue.Config{Recorder: rec})
	from := sink.NumNotices()
	accepted := m.Server().Accepted()
	m.Disconnect("going away")
	_, i := sink.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	m.Server().WaitAccepted(t, accepted+1, venuetest.Wait)
	sink.WaitNotice(t, venuetest.Wait, i, notice.LinkUp)
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, venue.NewStream(coinbase.Name, venue.Level2, coinbasetest.Symbol), m.Book)
	sink.Check(t)
	if _, disconnects := rec.Counts(); disconnects < 1 {
		t.Errorf("recorder saw %d disconnects", disconnects)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := coinbase.New(venue.Config{}); err == nil {
		t.Error("New without a Sink succeeded")
	}
	if _, err := coinbase.New(venue.Config{Sink: venuetest.NewSink(), Symbols: []string{"BAD SYMBOL"}}); err == nil {
		t.Error("New with a symbol holding a space succeeded")
	}
	if _, err := coinbase.New(venue.Config{Sink: venuetest.NewSink(), Channels: []venue.Channel{"candles"}}); err == nil {
		t.Error("New with an unknown channel succeeded")
	}
}

// A recorded stream sent through the mock's socket (renumbered into the
// connection's sequence) builds the same book as the decoder alone.
func TestStreamRecordedThroughSocket(t *testing.T) {
	m := &coinbasetest.Mock{}
	_, sink := venuetest.Start(t, m, venue.Config{})
	frames := legacyToAdvanced(t)
	m.Stream(frames)
	want, _ := decode(frames)
	wantBook, _ := want.Book("SKL-BTC")
	st := venue.NewStream(coinbase.Name, venue.Level2, "SKL-BTC")
	sink.WaitBook(t, venuetest.Wait, st, func() *venue.Book { return wantBook })
	sink.Check(t)
	if n := countNotices(sink, notice.BookResync); n != 0 {
		t.Fatalf("%d book_resync notices", n)
	}
}
