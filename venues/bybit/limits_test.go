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

// Past Bybit's 21,000 characters of args per connection, the symbols over
// it are refused up front and the connection stays within the limit (it
// used to send them and lose them).
func TestArgsCharsLimit(t *testing.T) {
	m := bybittest.New()
	syms := []string{bybittest.Symbol}
	for i := range 900 {
		s := fmt.Sprintf("S%04dUSDT", i)
		m.Extra = append(m.Extra, s)
		syms = append(syms, s)
	}
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: syms, Channels: []venue.Channel{venue.Level2}, Logger: quiet})
	sink.WaitNotice(t, venuetest.Wait, 0, notice.Refusal)
	sink.WaitNotice(t, venuetest.Wait, 0, notice.LinkUp)
	var refused []string
	for _, n := range sink.Notices() {
		switch n.Kind {
		case notice.Refusal:
			refused = append(refused, n.Details["symbol"].(string))
		case notice.LinkDown:
			t.Errorf("link dropped: %s", n.Message)
		}
	}
	// orderbook.50.S0000USDT is 22 characters, 25 with quotes and comma;
	// BTCUSDT's topic 23: BTCUSDT and 839 others fit in 21,000.
	if len(refused) != 901-840 || refused[0] != "S0839USDT" {
		t.Errorf("%d refused, first %v; want %d from S0839USDT", len(refused), refused[:min(1, len(refused))], 901-840)
	}
	for _, n := range m.ArgsChars() {
		if n > 21000 {
			t.Errorf("a connection subscribed %d characters of args", n)
		}
	}
}
