package binance_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/binance"
	"github.com/fanoutd/fanoutd/venues/binance/binancetest"
)

// Past Binance's 1,024 streams per connection (which the mock enforces,
// refusing a SUBSCRIBE past it whole), symbols are spread over more
// connections: 1,025 symbols on two, all subscribed, nothing refused.
func TestStreamsSpreadOverConnections(t *testing.T) {
	syms := []string{"BTCUSDT"}
	for i := range 1024 {
		syms = append(syms, fmt.Sprintf("S%04dUSDT", i))
	}
	m := &binancetest.Mock{Symbols: syms}
	m.Start(t)
	sink := venuetest.NewSink()
	ad := venuetest.StartAdapter(t, m.NewAdapter, venue.Config{Sink: sink, Symbols: syms, Channels: []venue.Channel{venue.Ticker}})
	// The mock's count changes with no event: poll it.
	if !testutil.Poll(venuetest.Wait, func() bool { return m.Streams() == 1025 && ad.Coverage().Link == venue.LinkUp.String() }) {
		t.Fatalf("%d streams subscribed, link %s; want 1,025, up", m.Streams(), ad.Coverage().Link)
	}
	for _, n := range sink.Notices() {
		switch n.Kind {
		case notice.Refusal, notice.LinkDown:
			t.Errorf("%s: %s", n.Kind, n.Message)
		}
	}
	sc, _ := ad.(venue.SymbolChecker)
	if sc == nil {
		t.Fatal("no SymbolChecker")
	}
	if known, listed := sc.KnownSymbol("S1023USDT"); !known || !listed {
		t.Errorf("S1023USDT: known %v listed %v", known, listed)
	}
	if known, listed := sc.KnownSymbol("NOPEUSDT"); known || !listed {
		t.Errorf("NOPEUSDT: known %v listed %v", known, listed)
	}
}

// A dropped connection costs only its own books: its link_down names its
// streams, only its books are fetched again, and a book on the other
// connection goes on without a new snapshot, exact.
func TestConnectionDropRefetchesOnlyItsBooks(t *testing.T) {
	syms := []string{"BTCUSDT"}
	for i := range 1024 {
		syms = append(syms, fmt.Sprintf("S%04dUSDT", i))
	}
	m := &binancetest.Mock{Symbols: syms, WeightLimit: -1}
	m.Start(t)
	sink := venuetest.NewSink()
	venuetest.StartAdapter(t, func(cfg venue.Config) (*binance.Adapter, error) {
		ad, err := m.NewAdapter(cfg)
		if err != nil {
			return nil, err
		}
		a := ad.(*binance.Adapter)
		binance.SetWeightBudget(a, 1e9, time.Second) // the weight is not what this tests
		return a, nil
	}, venue.Config{Sink: sink, Symbols: syms, Channels: []venue.Channel{venue.Level2}, Depth: 100})
	var streams []venue.Stream
	for _, s := range syms {
		streams = append(streams, venue.NewStream(binance.Name, venue.Level2, s))
	}
	waitSnapshots(t, sink, 0, streams)
	btc, last := streams[0], streams[len(streams)-1]
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, btc, m.Book)
	from, ev, req := sink.NumNotices(), sink.NumEvents(), len(m.Requests())
	if n := m.CloseConnOf("s1023usdt@depth@100ms"); n != 1 {
		t.Fatalf("S1023USDT's connection had %d streams, want 1 (1,024 on the other)", n)
	}
	n, _ := sink.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	if got, _ := n.Details["streams"].([]string); len(got) != 1 || got[0] != string(last) {
		t.Errorf("link_down streams %v, want [%s]", n.Details["streams"], last)
	}
	sink.WaitEvent(t, venuetest.Wait, ev, "S1023USDT's new snapshot", func(e *venue.Event) bool { return e.Stream == last && e.Snapshot })
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, btc, m.Book)
	for _, e := range sink.Events()[ev:] {
		if e.Snapshot && e.Stream != last {
			t.Errorf("%s got a new snapshot; its connection stayed up", e.Stream)
		}
	}
	for _, r := range m.Requests()[req:] {
		if strings.HasPrefix(r, "/api/v3/depth?") && !strings.Contains(r, "symbol=S1023USDT") {
			t.Errorf("fetched %s after S1023USDT's connection dropped", r)
		}
	}
	sink.Check(t)
}
