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

// Past Binance's 1,024 streams per connection, the symbols over it are
// refused up front (a refusal notice each) and the others are subscribed
// (it used to subscribe nothing and only log).
func TestOverMaxStreamsRefusedUpFront(t *testing.T) {
	syms := []string{"BTCUSDT"}
	for i := range 1024 {
		syms = append(syms, fmt.Sprintf("S%04dUSDT", i))
	}
	m := &binancetest.Mock{Symbols: syms}
	m.Start(t)
	sink := venuetest.NewSink()
	ad := venuetest.StartAdapter(t, m.NewAdapter, venue.Config{Sink: sink, Symbols: syms, Channels: []venue.Channel{venue.Ticker}})
	n, _ := sink.WaitNotice(t, venuetest.Wait, 0, notice.Refusal)
	if n.Details["symbol"] != "S1023USDT" {
		t.Errorf("refused %v, want S1023USDT (last in name order)", n.Details["symbol"])
	}
	for deadline := time.Now().Add(venuetest.Wait); m.Streams() != 1024; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams subscribed, want 1024", m.Streams())
		}
	}
	var refusals int
	for _, n := range sink.Notices() {
		switch n.Kind {
		case notice.Refusal:
			refusals++
		case notice.LinkDown:
			t.Errorf("link dropped: %s", n.Message)
		}
	}
	if refusals != 1 {
		t.Errorf("%d refusals, want 1", refusals)
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
