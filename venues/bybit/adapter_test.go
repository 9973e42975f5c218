package bybit_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/bybit"
	"github.com/fanoutd/fanoutd/venues/bybit/bybittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	venuetest.Run(t, bybittest.New())
}

// waitCoverage waits for the coverage_change notice saying st is state
// ("live" or "gone").
func waitCoverage(t *testing.T, sink *venuetest.Sink, st venue.Stream, state string) {
	t.Helper()
	for i := 0; ; i++ {
		n, j := sink.WaitNotice(t, venuetest.Wait, i, notice.CoverageChange)
		if n.Stream == string(st) && n.Details["live"] == (state == "live") {
			return
		}
		i = j
	}
}

func hasOp(op string, args ...string) func([]bybittest.Request) bool {
	return func(rs []bybittest.Request) bool {
		for _, r := range rs {
			if r.Op == op && slices.Equal(r.Args, args) {
				return true
			}
		}
		return false
	}
}

func TestAllChannels(t *testing.T) {
	m := bybittest.New()
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{bybittest.Symbol}, Logger: quiet})
	m.WaitRequests(t, venuetest.Wait, "one subscribe with the three topics",
		hasOp("subscribe", "orderbook.50.BTCUSDT", "publicTrade.BTCUSDT", "orderbook.1.BTCUSDT"))
	sink.WaitNotice(t, venuetest.Wait, 0, notice.LinkUp)
	m.Step(3)
	m.Trade("t-1", "30000.5", "0.25", true)
	l2 := venue.NewStream("bybit", venue.Level2, "BTCUSDT")
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	var trade, ticker *venue.Event
	waitEvent := func(st venue.Stream) *venue.Event {
		waitCoverage(t, sink, st, "live")
		// The coverage notice reaches the sink just before its event.
		ev, _ := sink.WaitEvent(t, venuetest.Wait, 0, "the event after the coverage of "+string(st), func(ev *venue.Event) bool { return ev.Stream == st })
		return ev
	}
	trade = waitEvent("bybit:trades:BTCUSDT")
	if trade.TradeID != "t-1" || !trade.Price.Equal(decimal.RequireFromString("30000.5")) || trade.Side != venue.SideBuy {
		t.Errorf("trade = %+v", trade)
	}
	ticker = waitEvent("bybit:ticker:BTCUSDT")
	if ticker.Bid.Cmp(ticker.Ask) >= 0 || ticker.Last.Valid {
		t.Errorf("ticker = %+v", ticker)
	}
	// Keepalive: Bybit's {"op":"ping"} goes out on the ping interval.
	m.WaitRequests(t, venuetest.Wait, "a ping", func(rs []bybittest.Request) bool {
		for _, r := range rs {
			if r.Op == "ping" {
				return true
			}
		}
		return false
	})
	sink.Check(t)
}

// TestGapResyncProcedure: a gap is answered the Bybit way — unsubscribe and
// subscribe the orderbook topic — and the notice names the update ids.
func TestGapResyncProcedure(t *testing.T) {
	m := bybittest.New()
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{bybittest.Symbol}, Channels: []venue.Channel{venue.Level2}, Logger: quiet})
	l2 := venue.NewStream("bybit", venue.Level2, "BTCUSDT")
	m.Step(2)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	from := sink.NumNotices()
	m.DropNextUpdate()
	m.Step(2)
	n, _ := sink.WaitNotice(t, venuetest.Wait, from, notice.BookResync)
	if n.Details["reason"] != "gap" || n.Details["got_u"].(int64) != n.Details["last_u"].(int64)+2 {
		t.Errorf("book_resync details = %v", n.Details)
	}
	m.WaitRequests(t, venuetest.Wait, "unsubscribe then subscribe of the book topic", func(rs []bybittest.Request) bool {
		un := -1
		for i, r := range rs {
			if r.Op == "unsubscribe" && slices.Equal(r.Args, []string{"orderbook.50.BTCUSDT"}) {
				un = i
			}
			if un >= 0 && i > un && r.Op == "subscribe" && slices.Equal(r.Args, []string{"orderbook.50.BTCUSDT"}) {
				return true
			}
		}
		return false
	})
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	sink.Check(t)
	var snapAfter bool
	for _, ev := range sink.Events()[1:] {
		snapAfter = snapAfter || ev.Snapshot
	}
	if !snapAfter {
		t.Error("no snapshot event after the resync")
	}
}

func TestRefusalWithReqID(t *testing.T) {
	m := bybittest.New()
	m.ReqIDOnError = true
	a, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{bybittest.Symbol, "NOPEUSDT"}, Logger: quiet})
	n, _ := sink.WaitNotice(t, venuetest.Wait, 0, notice.Refusal)
	if n.Details["symbol"] != "NOPEUSDT" || !strings.Contains(n.Details["message"].(string), "Invalid symbol") {
		t.Errorf("refusal = %+v", n)
	}
	// Refused is dropped: the next link does not ask again.
	sink.WaitNotice(t, venuetest.Wait, 0, notice.LinkUp)
	from := sink.NumNotices()
	m.Server().CloseAll()
	sink.WaitNotice(t, venuetest.Wait, from, notice.LinkUp)
	subs := 0
	for _, r := range m.Requests() {
		if r.Op == "subscribe" && slices.Contains(r.Args, "orderbook.50.NOPEUSDT") {
			subs++
		}
	}
	if subs != 1 {
		t.Errorf("refused symbol subscribed %d times, want 1", subs)
	}
	if err := a.Subscribe("BAD SYMBOL"); err == nil {
		t.Error("Subscribe accepted a symbol with a space")
	}
}

func TestUnsubscribeForgetsCoverage(t *testing.T) {
	m := bybittest.New()
	a, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{bybittest.Symbol}, Channels: []venue.Channel{venue.Level2}, Logger: quiet})
	l2 := venue.NewStream("bybit", venue.Level2, "BTCUSDT")
	m.Step(1)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	if len(a.Coverage().Streams) != 1 {
		t.Fatalf("coverage = %+v", a.Coverage())
	}
	if err := a.Unsubscribe(bybittest.Symbol); err != nil {
		t.Fatal(err)
	}
	m.WaitRequests(t, venuetest.Wait, "an unsubscribe", hasOp("unsubscribe", "orderbook.50.BTCUSDT"))
	waitCoverage(t, sink, l2, "gone")
	if cov := a.Coverage(); len(cov.Streams) != 0 {
		t.Errorf("coverage after unsubscribe = %+v", cov.Streams)
	}
}

func TestRecorderAndReconnectNotices(t *testing.T) {
	m := bybittest.New()
	rec := &venuetest.Recorder{}
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{bybittest.Symbol}, Channels: []venue.Channel{venue.Level2}, Recorder: rec, Logger: quiet})
	sink.WaitNotice(t, venuetest.Wait, 0, notice.LinkUp)
	from := sink.NumNotices()
	m.Server().CloseAll()
	n, _ := sink.WaitNotice(t, venuetest.Wait, from, notice.LinkReconnecting)
	if n.Details["attempt"] != 1 || n.Details["delay_ms"] != int64(0) {
		t.Errorf("first reconnect = %v, want attempt 1 at once", n.Details)
	}
	sink.WaitNotice(t, venuetest.Wait, from, notice.LinkUp)
	frames, downs := rec.Counts()
	bad := false
	for _, r := range rec.Records() {
		bad = bad || !r.Disconnect && (r.Venue != "bybit" || r.At.IsZero() || len(r.Frame) == 0)
	}
	if frames < 3 || downs != 1 || bad {
		t.Errorf("recorder saw %d frames, %d disconnects, bad=%v", frames, downs, bad)
	}
}

func TestNewValidates(t *testing.T) {
	sink := venuetest.NewSink()
	for _, cfg := range []venue.Config{
		{},
		{Sink: sink, Depth: 25},
		{Sink: sink, Symbols: []string{`BTC"USDT`}},
		{Sink: sink, Channels: []venue.Channel{"book"}},
	} {
		if _, err := bybit.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	a, err := bybit.New(venue.Config{Sink: sink})
	if err != nil || a.Venue() != "bybit" {
		t.Fatalf("New = %v, %v", a, err)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Errorf("Stop before Start = %v", err)
	}
}

func TestHandshakeRateLimited(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	sink := venuetest.NewSink()
	a, err := bybit.New(venue.Config{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), Sink: sink,
		Symbols: []string{"BTCUSDT"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, _ := sink.WaitNotice(t, venuetest.Wait, 0, notice.RateLimited)
	if n.Details["status"] != 429 {
		t.Errorf("rate_limited details = %v", n.Details)
	}
	r, _ := sink.WaitNotice(t, venuetest.Wait, 0, notice.LinkReconnecting)
	if r.Details["attempt"] != 1 {
		t.Errorf("reconnecting = %v", r.Details)
	}
	ctx, cancel := context.WithTimeout(context.Background(), venuetest.Wait)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if cov := a.Coverage(); cov.Link == venue.LinkUp.String() {
		t.Errorf("link %s after refused handshakes", cov.Link)
	}
}
