package okx_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/okx/okxtest"
)

// The startup subscribe answered with 60014 is asked again after a backoff
// on the same link: the book arrives well before the 10 s ack deadline,
// nothing is refused, the link does not drop.
func TestStartupRateLimited(t *testing.T) {
	m := okxtest.New()
	m.Start(t)
	m.RateLimit(2)
	sink := venuetest.NewSink()
	venuetest.StartAdapter(t, m.NewAdapter, venue.Config{Symbols: []string{m.Symbol()}, Sink: sink})
	sink.WaitNotice(t, venuetest.Wait, 0, notice.RateLimited)
	sink.WaitBook(t, 6*time.Second, l2(m), m.Book)
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	sink.NoNotice(t, 0, notice.Refusal, notice.LinkDown)
	if n := len(m.Asked("subscribe")); n != 3 {
		t.Errorf("%d subscribes, want 3 (two rate-limited): %v", n, m.Asked("subscribe"))
	}
	sink.Check(t)
}

// A resync whose unsubscribe succeeds but whose subscribe gets 60014 is
// asked again until the book is whole, though no update for it arrives.
func TestResyncSubscribeRateLimited(t *testing.T) {
	m, _, sink := startAdapter(t, nil)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	from := sink.NumNotices()
	m.RateLimit(1)
	m.CorruptNextChecksum()
	m.Step(1)
	sink.WaitNotice(t, venuetest.Wait, from, notice.BookResync)
	sink.WaitNotice(t, venuetest.Wait, from, notice.RateLimited)
	n := sink.NumEvents()
	sink.WaitEvent(t, venuetest.Wait, n, "a new snapshot", func(e *venue.Event) bool { return e.Stream == l2(m) && e.Snapshot })
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	sink.NoNotice(t, from, notice.Refusal, notice.LinkDown)
	sink.Check(t)
}

// A refused symbol is reported unknown to the daemon.
func TestKnownSymbolFromRefusal(t *testing.T) {
	m := okxtest.New()
	ad, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{m.RefusedSymbol(), m.Symbol()}, Channels: []venue.Channel{venue.Level2}})
	sink.WaitNotice(t, venuetest.Wait, 0, notice.Refusal)
	sc, _ := ad.(venue.SymbolChecker)
	if sc == nil {
		t.Fatal("no SymbolChecker")
	}
	sink.WaitFor(t, venuetest.Wait, "the refusal recorded", func() bool { k, l := sc.KnownSymbol(m.RefusedSymbol()); return !k && l })
	if _, listed := sc.KnownSymbol(m.Symbol()); listed {
		t.Errorf("%s reported listed: OKX's list is not fetched", m.Symbol())
	}
}

// Requests leave evenly paced (3 a second): a run of Subscribe calls is
// not a burst for OKX's 60014.
func TestRequestsPaced(t *testing.T) {
	m, ad, sink := startAdapter(t, nil)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	for _, s := range []string{"A-USDT", "B-USDT", "C-USDT"} {
		if err := ad.Subscribe(s); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Poll(venuetest.Wait, func() bool { return len(m.Asked("subscribe")) >= 4 })
	at := m.Asked("subscribe")
	if len(at) != 4 {
		t.Fatalf("%d subscribes, want 4", len(at))
	}
	// Timed where the mock read them, which a loaded machine delays by
	// tens of ms: each gap is held to half the interval (a burst has
	// none), the rate to the span of the three paced ones.
	for i := 2; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 167*time.Millisecond {
			t.Errorf("subscribe %d %v after the one before, want about 333 ms", i, gap)
		}
	}
	if span := at[3].Sub(at[1]); span < 550*time.Millisecond {
		t.Errorf("subscribes 1 to 3 within %v, want about 667 ms (3 a second)", span)
	}
}

// Many books found broken at once are resynced a few at a time (4), not
// with 2N requests in one burst.
func TestResyncsPaced(t *testing.T) {
	m, ad, sink := startAdapter(t, nil)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	ids := []string{"A-USDT", "B-USDT", "C-USDT", "D-USDT", "E-USDT", "F-USDT"}
	if err := ad.Subscribe(ids...); err != nil {
		t.Fatal(err)
	}
	var fs [][]byte
	for _, id := range ids {
		fs = append(fs, fmt.Appendf(nil, `{"arg":{"channel":"books","instId":%q},"action":"snapshot","data":[{"asks":[["101","1","0","1"]],"bids":[["100","1","0","1"]],"ts":"1597026383085","checksum":0,"prevSeqId":-1,"seqId":1}]}`, id))
	}
	for _, id := range ids { // a gap on every book: 5 does not follow 1
		fs = append(fs, fmt.Appendf(nil, `{"arg":{"channel":"books","instId":%q},"action":"update","data":[{"asks":[["101","2","0","1"]],"bids":[],"ts":"1597026383086","checksum":0,"prevSeqId":5,"seqId":6}]}`, id))
	}
	from := sink.NumNotices()
	m.Stream(fs)
	for range ids {
		_, from = sink.WaitNotice(t, venuetest.Wait, from, notice.BookResync)
		from++
	}
	time.Sleep(6 * time.Second) // the paced requests are out (before the 10 s re-ask); no snapshot comes
	if n := len(m.Asked("unsubscribe")); n != 4 {
		t.Errorf("%d books resynced at once, want 4", n)
	}
}
