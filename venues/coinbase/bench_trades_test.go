package coinbase_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/coinbase"
)

// BenchmarkDecodeTicker is decode + event build on generated ticker
// frames, the path whose prices and sizes are decimals shared through
// the decoder's cache: best prices near 63320 in cents, sizes with eight
// decimals drawn from a wide range (as live ones are), so that prices
// repeat and sizes mostly do not.
func BenchmarkDecodeTicker(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	px := func() string { c := 6332000 + r.IntN(400); return fmt.Sprintf("%d.%02d", c/100, c%100) }
	sz := func() string { return fmt.Sprintf("%d.%08d", r.IntN(5), 1+r.IntN(1e8)) }
	frames := make([][]byte, 1<<14)
	for i := range frames {
		typ := "update"
		if i == 0 {
			typ = "snapshot"
		}
		frames[i] = fmt.Appendf(nil, `{"channel":"ticker","timestamp":"2026-08-12T19:27:33.829058895Z","sequence_num":%d,"events":[{"type":%q,"tickers":[{"type":"ticker","product_id":"BTC-USD","price":%q,"volume_24_h":"6629.927726","low_24_h":"63235.88","high_24_h":"64416.3","low_52_w":"57717.55","high_52_w":"126296","price_percent_chg_24_h":"0.03813791548644","best_bid":%q,"best_ask":%q,"best_bid_quantity":%q,"best_ask_quantity":%q}]}]}`,
			i, typ, px(), px(), px(), sz(), sz())
	}
	sink := &countSink{}
	d := coinbase.NewDecoder(venue.Config{Sink: sink})
	recv := time.Unix(1, 0)
	b.SetBytes(int64(len(frames[1])))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(frames)
		if j == 0 && i > 0 {
			d.LinkDown(recv)
		}
		d.Frame(recv, frames[j])
	}
	b.StopTimer()
	if sink.events == 0 || d.BadFrames() != 0 {
		b.Fatalf("%d events, %d bad frames", sink.events, d.BadFrames())
	}
}
