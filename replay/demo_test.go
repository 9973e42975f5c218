package replay_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/binance/binancetest"
	"github.com/fanoutd/fanoutd/venues/bybit/bybittest"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
	"github.com/fanoutd/fanoutd/venues/okx/okxtest"
)

// demoSteps is the book changes per demo capture: with the trades and
// tickers beside them, a few hundred KB of gzip each.
const demoSteps = 3000

func demoPath(v string) string {
	return filepath.Join("..", "testdata", "replay", "demo", v+".jsonl.gz")
}

var demoChannels = []venue.Channel{venue.Level2, venue.Trades, venue.Ticker}

// demoExtra sends, beside the book's changes, a trade and a ticker in the
// venue's own form, where the mock's Step does not send them already.
func demoExtra(m venuetest.Venue, i int) {
	bid, _ := m.Book().Best(venue.Bid)
	ask, _ := m.Book().Best(venue.Ask)
	side, px := "buy", ask.Price
	if i%200 == 0 {
		side, px = "sell", bid.Price
	}
	now := time.Now()
	switch m := m.(type) {
	case *binancetest.Mock: // Step sends a trade and a bookTicker per change
	case *bybittest.Mock: // Step sends the ticker (orderbook.1) per change
		m.Trade(fmt.Sprint(1000+i), px.String(), "0.0125", side == "buy")
	case *coinbasetest.Mock: // Trade sends the ticker too
		m.Trade(px.String(), "0.0125", side)
	case *krakentest.Mock:
		m.Trade(int64(1000+i), side, px.String(), "0.0125")
		m.Server().Broadcast(fmt.Appendf(nil, `{"channel":"ticker","type":"update","data":[{"symbol":%q,"bid":%s,"bid_qty":%s,"ask":%s,"ask_qty":%s,"last":%s,"volume":1234.5,"vwap":45000.1,"low":44000.0,"high":46000.0,"change":-12.5,"change_pct":-0.03,"timestamp":%q}]}`,
			m.Symbol(), bid.Price, bid.Size, ask.Price, ask.Size, px, now.UTC().Format("2006-01-02T15:04:05.000000Z")))
	case *okxtest.Mock:
		ts := now.UnixMilli()
		m.Stream([][]byte{
			fmt.Appendf(nil, `{"arg":{"channel":"trades","instId":%q},"data":[{"instId":%q,"tradeId":"%d","px":"%s","sz":"0.0125","side":%q,"ts":"%d"}]}`,
				m.Symbol(), m.Symbol(), 1000+i, px, side, ts),
			fmt.Appendf(nil, `{"arg":{"channel":"tickers","instId":%q},"data":[{"instType":"SPOT","instId":%q,"last":"%s","lastSz":"0.0125","askPx":"%s","askSz":"%s","bidPx":"%s","bidSz":"%s","open24h":"64324","high24h":"64496.9","low24h":"63237.6","sodUtc0":"63589.4","sodUtc8":"63606.7","volCcy24h":"374703695.17","vol24h":"5874.19","ts":"%d"}]}`,
				m.Symbol(), m.Symbol(), px, ask.Price, ask.Size, bid.Price, bid.Size, ts),
		})
	}
}

// TestGenerateDemoCaptures rewrites testdata/replay/demo, the offline
// quick start's captures (level2, trades and ticker of each venue, a link
// drop in the middle), from the mock venues when run with -update.
func TestGenerateDemoCaptures(t *testing.T) {
	if !*update {
		t.Skip("run with -update to regenerate testdata/replay/demo")
	}
	os.MkdirAll(filepath.Dir(demoPath("x")), 0o755)
	for _, vc := range venueCases {
		t.Run(vc.name, func(t *testing.T) {
			r := recordWith(t, vc, demoSteps, demoChannels, demoExtra)
			data, err := os.ReadFile(r.capture)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(demoPath(vc.name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d frames, %d bytes", vc.name, r.frames, len(data))
		})
	}
}

// TestDemoCaptures: each venue's demo capture replays, through the venue's
// decoder, into a correct stream of every channel: books, trades and
// tickers, with the link drop in the middle.
func TestDemoCaptures(t *testing.T) {
	for _, vc := range venueCases {
		t.Run(vc.name, func(t *testing.T) {
			sink := venuetest.NewSink()
			st := playCapture(t, vc, demoPath(vc.name), sink)
			if st.Disconnects < 1 {
				t.Fatal("the capture holds no disconnect")
			}
			sink.Check(t)
			kinds := map[venue.Kind]int{}
			for _, e := range sink.Events() {
				kinds[e.Kind]++
			}
			for _, k := range []venue.Kind{venue.KindBook, venue.KindTrade, venue.KindTicker} {
				if kinds[k] < 10 {
					t.Errorf("%d %s events, want at least 10 (regenerate with go test ./replay -run TestGenerateDemoCaptures -update)", kinds[k], k)
				}
			}
		})
	}
}
