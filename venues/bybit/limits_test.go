package bybit_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/bybit/bybittest"
)

// A crossed snapshot is asked for again with backoff, not at once in a
// loop, until a snapshot makes the book whole.
func TestCrossedSnapshotBacksOff(t *testing.T) {
	m := bybittest.New()
	m.Start(t)
	m.CrossSnapshots(3)
	sink := venuetest.NewSink()
	venuetest.StartAdapter(t, m.NewAdapter, venue.Config{Sink: sink, Symbols: []string{bybittest.Symbol}, Channels: []venue.Channel{venue.Level2}, Logger: quiet})
	l2 := venue.NewStream("bybit", venue.Level2, bybittest.Symbol)
	sink.WaitBook(t, 2*venuetest.Wait, l2, m.Book)
	var subs []time.Time
	for _, r := range m.Requests() {
		if r.Op == "subscribe" && slices.Equal(r.Args, []string{"orderbook.50.BTCUSDT"}) {
			subs = append(subs, r.At)
		}
	}
	if len(subs) != 4 {
		t.Fatalf("%d subscribes of the book, want 4 (three crossed snapshots)", len(subs))
	}
	if gap := subs[2].Sub(subs[1]); gap < 700*time.Millisecond {
		t.Errorf("second resubscribe %v after the first: no backoff", gap)
	}
	if gap := subs[3].Sub(subs[2]); gap < 1500*time.Millisecond {
		t.Errorf("third resubscribe %v after the second: backoff not doubling", gap)
	}
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	sink.Check(t)
}

// Past Bybit's 21,000 characters of args per connection (which the mock
// enforces with an error), symbols are spread over more connections: 901
// symbols on two, each within the limit, nothing refused, books exact.
func TestArgsCharsSpreadOverConnections(t *testing.T) {
	m := bybittest.New()
	syms := []string{bybittest.Symbol}
	for i := range 900 {
		s := fmt.Sprintf("S%04dUSDT", i)
		m.Extra = append(m.Extra, s)
		syms = append(syms, s)
	}
	ad, sink := venuetest.Start(t, m, venue.Config{Symbols: syms, Channels: []venue.Channel{venue.Level2}, Logger: quiet})
	// orderbook.50.S0000USDT is 22 characters, 25 with quotes and comma;
	// BTCUSDT's 23 with them: BTCUSDT and 839 others fit in 21,000, the other
	// 61 go on a second connection.
	want := []int{61 * 25, 23 + 839*25}
	sink.WaitFor(t, 2*venuetest.Wait, "every symbol subscribed on two connections, the link up", func() bool {
		chars := m.ArgsChars()
		slices.Sort(chars)
		return ad.Coverage().Link == venue.LinkUp.String() && slices.Equal(chars, want)
	})
	l2 := venue.NewStream("bybit", venue.Level2, bybittest.Symbol)
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	for _, n := range sink.Notices() {
		if n.Kind == notice.Refusal || n.Kind == notice.LinkDown {
			t.Errorf("%s: %s", n.Kind, n.Message)
		}
	}
	sink.Check(t)
}
