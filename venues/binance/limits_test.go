package binance_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
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
	for deadline := time.Now().Add(venuetest.Wait); m.Streams() != 1025 || ad.Coverage().Link != venue.LinkUp.String(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams subscribed, link %s; want 1,025, up", m.Streams(), ad.Coverage().Link)
		}
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
