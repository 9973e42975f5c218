package kraken_test

import (
	"slices"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/kraken"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
)

// A rate-limited subscribe is asked again after a backoff: the book
// arrives, nothing is refused, and the link stays up (Kraken's bare rate
// limit names no request: the subscribe is not left pending until the
// link is dropped for it).
func TestRateLimitedSubscribeRetried(t *testing.T) {
	for _, bare := range []bool{true, false} {
		t.Run(map[bool]string{true: "bare", false: "answer"}[bare], func(t *testing.T) {
			m := &krakentest.Mock{}
			m.Start(t)
			m.RateLimit("book", 2, bare)
			sink := venuetest.NewSink()
			venuetest.StartAdapter(t, m.NewAdapter, venue.Config{Symbols: []string{"BTC/USD"}, Channels: []venue.Channel{venue.Level2}, Sink: sink})
			l2 := venue.NewStream(kraken.Name, venue.Level2, "BTC/USD")
			sink.WaitNotice(t, venuetest.Wait, 0, notice.RateLimited)
			sink.WaitBook(t, 2*venuetest.Wait, l2, m.Book)
			m.Step(3)
			sink.WaitBook(t, venuetest.Wait, l2, m.Book)
			sink.NoNotice(t, 0, notice.Refusal, notice.LinkDown)
			if asked := m.Asked("subscribe", "book"); len(asked) != 3 {
				t.Errorf("book subscribed %d times, want 3", len(asked))
			} else if gap := asked[2].Sub(asked[1]); gap < 1500*time.Millisecond {
				t.Errorf("second retry %v after the first: no backoff", gap)
			}
			sink.Check(t)
		})
	}
}

// A resync whose unsubscribe succeeds but whose subscribe is rate-limited
// is asked again until the book is whole, on the same link.
func TestResyncRateLimited(t *testing.T) {
	m := &krakentest.Mock{}
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{"BTC/USD"}, Channels: []venue.Channel{venue.Level2}})
	l2 := venue.NewStream(kraken.Name, venue.Level2, "BTC/USD")
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	from := sink.NumNotices()
	m.RateLimit("book", 1, true)
	m.CorruptNextChecksum()
	m.Step(1)
	sink.WaitNotice(t, venuetest.Wait, from, notice.BookResync)
	sink.WaitNotice(t, venuetest.Wait, from, notice.RateLimited)
	n := sink.NumEvents()
	sink.WaitEvent(t, 2*venuetest.Wait, n, "a new snapshot", func(e *venue.Event) bool { return e.Stream == l2 && e.Snapshot })
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	sink.NoNotice(t, from, notice.Refusal, notice.LinkDown)
	sink.Check(t)
}

// A snapshot that cannot make a book (crossed, or finer than the
// instrument's precision) is asked for again, with backoff, until one
// does.
func TestBadSnapshotReasked(t *testing.T) {
	for _, kinds := range [][]string{{"crossed"}, {"fine"}, {"crossed", "fine"}} {
		t.Run(kinds[len(kinds)-1]+"x"+string(rune('0'+len(kinds))), func(t *testing.T) {
			m := &krakentest.Mock{}
			m.Start(t)
			m.SpoilSnapshots(kinds...)
			sink := venuetest.NewSink()
			venuetest.StartAdapter(t, m.NewAdapter, venue.Config{Symbols: []string{"BTC/USD"}, Channels: []venue.Channel{venue.Level2}, Sink: sink})
			l2 := venue.NewStream(kraken.Name, venue.Level2, "BTC/USD")
			sink.WaitBook(t, 2*venuetest.Wait, l2, m.Book)
			m.Step(3)
			sink.WaitBook(t, venuetest.Wait, l2, m.Book)
			sink.NoNotice(t, 0, notice.LinkDown)
			asked := m.Asked("subscribe", "book")
			if len(asked) != len(kinds)+1 {
				t.Errorf("book subscribed %d times, want %d", len(asked), len(kinds)+1)
			}
			if len(asked) > 2 && asked[2].Sub(asked[1]) < 700*time.Millisecond {
				t.Errorf("second resync %v after the first: no backoff", asked[2].Sub(asked[1]))
			}
		})
	}
}

// KnownSymbol answers from the instrument snapshot once it arrived.
func TestKnownSymbol(t *testing.T) {
	m := &krakentest.Mock{}
	ad, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{"BTC/USD"}, Channels: []venue.Channel{venue.Level2}})
	sc := ad.(venue.SymbolChecker)
	sink.WaitBook(t, venuetest.Wait, venue.NewStream(kraken.Name, venue.Level2, "BTC/USD"), m.Book)
	if known, listed := sc.KnownSymbol("BTC/USD"); !known || !listed {
		t.Errorf("BTC/USD: known %v listed %v", known, listed)
	}
	if known, listed := sc.KnownSymbol("NOPE/USD"); known || !listed {
		t.Errorf("NOPE/USD: known %v listed %v", known, listed)
	}
}

// Requests leave evenly paced (10 a second), so a burst of them, resyncs
// included, cannot trip Kraken's message rate.
func TestRequestsPaced(t *testing.T) {
	m := &krakentest.Mock{}
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{"BTC/USD"}})
	sink.WaitBook(t, venuetest.Wait, venue.NewStream(kraken.Name, venue.Level2, "BTC/USD"), m.Book)
	var at []time.Time
	for _, ch := range []string{"instrument", "book", "trade", "ticker"} {
		at = append(at, m.Asked("subscribe", ch)...)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	if len(at) != 4 {
		t.Fatalf("%d subscribes, want 4", len(at))
	}
	// Timed where the mock read them, which a loaded machine delays by
	// tens of ms (70 ms gaps were seen): each gap is held to half the
	// interval (a burst has none), the rate to the span of all three.
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 50*time.Millisecond {
			t.Errorf("request %d %v after the one before, want about 100 ms", i, gap)
		}
	}
	if span := at[len(at)-1].Sub(at[0]); span < 240*time.Millisecond {
		t.Errorf("4 requests within %v, want about 300 ms (10 a second)", span)
	}
}
