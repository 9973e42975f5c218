package daemon

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/replay/replaytest"
)

// TestHistoryStreamEventAllocs: once a stream's first events are out, an
// event of a history answer costs no allocation from the decoder's frame
// to the encoded line: the venue's decoder, its coverage sink, the export
// tap (every stream, `<venue>:*:*`) and the export sink, for each venue's
// recorded capture.
func TestHistoryStreamEventAllocs(t *testing.T) {
	for _, v := range []string{"binance", "okx", "coinbase", "bybit", "kraken"} {
		t.Run(v, func(t *testing.T) {
			c := replaytest.ReadCapture(t, filepath.Join("..", "..", "testdata", "replay", v+".jsonl.gz"))
			cfg := &config.Config{}
			if err := cfg.ForCaptures(map[string][]string{v: nil}); err != nil {
				t.Fatal(err)
			}
			w := &countWriter{}
			sink := replay.NewExportSink(w)
			tap := newExportTap(sink, []string{v + ":*:*"})
			dec, err := decoderFor(cfg, slog.New(slog.DiscardHandler))(v, tap)
			if err != nil {
				t.Fatal(err)
			}
			// The frames before the capture's first disconnect: the first
			// half of them set up the books and the streams' state, the
			// second half is measured.
			n := len(c.Records)
			for i, r := range c.Records {
				if r.Disconnect {
					n = i
					break
				}
			}
			for _, r := range c.Records[:n/2] {
				dec.Frame(r.Time, r.Frame)
			}
			frames := c.Records[n/2 : n]
			if err := sink.Flush(); err != nil {
				t.Fatal(err)
			}
			before := w.lines
			runs := min(len(frames)-1, 2000)
			i := 0
			allocs := testing.AllocsPerRun(runs, func() {
				r := frames[i]
				i++
				dec.Frame(r.Time, r.Frame)
			})
			if allocs != 0 {
				t.Errorf("%s: %.3f allocations per frame, want 0", v, allocs)
			}
			if err := sink.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := w.lines - before; got < runs/2 { // most frames of these captures are events
				t.Errorf("%s: %d lines written for %d frames", v, got, runs+1)
			}
		})
	}
}
