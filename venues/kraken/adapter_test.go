package kraken_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/kraken"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
)

// All three channels flow, every frame reaches the recorder, and the link
// drop reaches it too.
func TestAllChannelsAndRecorder(t *testing.T) {
	m := &krakentest.Mock{}
	rec := &venuetest.Recorder{}
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{"BTC/USD"}, Recorder: rec})
	l2 := venue.NewStream(kraken.Name, venue.Level2, "BTC/USD")
	tk := venue.NewStream(kraken.Name, venue.Ticker, "BTC/USD")
	tr := venue.NewStream(kraken.Name, venue.Trades, "BTC/USD")
	// trade is subscribed before ticker on the same link, so once the
	// ticker's snapshot is here the mock has the trade subscription.
	e, i := sink.WaitEvent(t, venuetest.Wait, 0, "a ticker", func(e *venue.Event) bool { return e.Stream == tk })
	if e.Bid.Cmp(e.Ask) >= 0 || !e.Last.Valid {
		t.Errorf("ticker %+v", e)
	}
	m.Trade(42, "buy", "45000.1", "0.50000000")
	e, _ = sink.WaitEvent(t, venuetest.Wait, i+1, "a trade", func(e *venue.Event) bool { return e.Stream == tr })
	if e.TradeID != "42" || e.Side != venue.SideBuy || e.Price.String() != "45000.1" || e.Size.String() != "0.5" {
		t.Errorf("trade %+v", e)
	}
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	m.Step(10)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	sink.Check(t)
	if n, _ := rec.Counts(); n < 10 {
		t.Fatalf("recorder got %d frames", n)
	}
	from := sink.NumNotices()
	m.Server().CloseAll()
	sink.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	if _, downs := rec.Counts(); downs < 1 {
		t.Fatal("recorder saw no disconnect")
	}
}

// The venue's own error frames: a refused symbol is a refusal notice, a
// rate-limit error a rate_limited notice; neither drops the link.
func TestVenueErrorFrames(t *testing.T) {
	m := &krakentest.Mock{}
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{"BTC/USD"}, Channels: []venue.Channel{venue.Level2}})
	l2 := venue.NewStream(kraken.Name, venue.Level2, "BTC/USD")
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	from := sink.NumNotices()
	for _, f := range m.VenueErrors() {
		m.Server().Broadcast(f)
	}
	sink.WaitNotice(t, venuetest.Wait, from, notice.Refusal)
	sink.WaitNotice(t, venuetest.Wait, from, notice.RateLimited)
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	for _, n := range sink.Notices()[from:] {
		if n.Kind == notice.LinkDown {
			t.Fatalf("link dropped on a venue error frame: %+v", n)
		}
	}
}

// Unsubscribe stops the stream and takes it out of coverage; Subscribe
// brings it back with a fresh snapshot.
// TestUnsubscribeResubscribe unsubscribes, waits for the venue to
// confirm, and subscribes again: the book starts over from a new
// snapshot and follows the venue's.
func TestUnsubscribeResubscribe(t *testing.T) {
	m := &krakentest.Mock{}
	rec := &venuetest.Recorder{}
	ad, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{"BTC/USD"}, Channels: []venue.Channel{venue.Level2}, Recorder: rec})
	l2 := venue.NewStream(kraken.Name, venue.Level2, "BTC/USD")
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	if err := ad.Unsubscribe("BTC/USD"); err != nil {
		t.Fatal(err)
	}
	for _, sc := range ad.Coverage().Streams {
		if sc.Stream == l2 {
			t.Fatalf("coverage still has %s after Unsubscribe", l2)
		}
	}
	rec.WaitFor(t, venuetest.Wait, "the venue's unsubscribe answer", func(rs []venuetest.Record) bool {
		for _, r := range rs {
			if bytes.Contains(r.Frame, []byte(`"method":"unsubscribe"`)) && bytes.Contains(r.Frame, []byte(`"success":true`)) {
				return true
			}
		}
		return false
	})
	from := len(sink.Events())
	if err := ad.Subscribe("BTC/USD"); err != nil {
		t.Fatal(err)
	}
	sink.WaitEvent(t, venuetest.Wait, from, "a new snapshot", func(e *venue.Event) bool { return e.Stream == l2 && e.Snapshot })
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	sink.Check(t)
}

// TestUnsubscribeResubscribeAtOnce: an Unsubscribe and a Subscribe of
// the same symbol in a row. The adapter reconciles the symbols it wants
// with those it has, so if it did not act between the two calls they
// cancel out (nothing is sent, no new snapshot) and otherwise it
// resubscribes; either way the book follows the venue's and the stream
// returns to coverage with its next event.
func TestUnsubscribeResubscribeAtOnce(t *testing.T) {
	m := &krakentest.Mock{}
	ad, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{"BTC/USD"}, Channels: []venue.Channel{venue.Level2}})
	l2 := venue.NewStream(kraken.Name, venue.Level2, "BTC/USD")
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	if err := errors.Join(ad.Unsubscribe("BTC/USD"), ad.Subscribe("BTC/USD")); err != nil {
		t.Fatal(err)
	}
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	sink.WaitFor(t, venuetest.Wait, string(l2)+" back in coverage", func() bool {
		for _, sc := range ad.Coverage().Streams {
			if sc.Stream == l2 {
				return true
			}
		}
		return false
	})
	sink.Check(t)
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := kraken.New(venue.Config{}); err == nil {
		t.Error("New without a sink succeeded")
	}
	if _, err := kraken.New(venue.Config{Sink: venuetest.NewSink(), Depth: 20}); err == nil {
		t.Error("New with depth 20 succeeded")
	}
	a, err := kraken.New(venue.Config{Sink: venuetest.NewSink()})
	if err != nil || a.Venue() != "kraken" {
		t.Fatalf("New = %v, %v", a, err)
	}
}
