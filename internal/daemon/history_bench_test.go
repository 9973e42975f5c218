package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/history"
	"github.com/fanoutd/fanoutd/replay"
)

// countWriter counts the lines written.
type countWriter struct{ lines int }

func (c *countWriter) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHistoryStream is a history query's answer once its segments
// are read (held in memory, as the claim-check cache holds them): the
// chain's gunzip, the venue's decoder, the range cut and the export
// encoding, one venue connection (decoded on the answer's goroutine, as
// playRange decodes one); events/s is the rate of lines written,
// events/cpu-s the lines per second of the process's CPU time (per core,
// whatever else runs on the machine).
func BenchmarkHistoryStream(b *testing.B) {
	for _, v := range []string{"binance", "okx", "coinbase"} {
		b.Run(v, func(b *testing.B) {
			path := filepath.Join("..", "..", "testdata", "replay", v+".jsonl.gz")
			data, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			e, err := history.Describe(path, data)
			if err != nil {
				b.Fatal(err)
			}
			e.Venue, e.Claim = v, "default/x"
			cfg := &config.Config{}
			if err := cfg.ForCaptures(map[string][]string{v: nil}); err != nil {
				b.Fatal(err)
			}
			fetch := func(context.Context, string) ([]byte, error) { return data, nil }
			var lines int
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU()
			for range b.N {
				w := &countWriter{}
				src := history.Source(context.Background(), []history.Entry{e}, fetch)
				sink := replay.NewExportSink(w)
				sink.Window(e.First, e.Last.Add(1))
				if _, _, err := exportTo(context.Background(), cfg, []replay.Source{src}, sink, nil, []string{v + ":*:*"}, false, nil); err != nil {
					b.Fatal(err)
				}
				lines += w.lines
			}
			b.ReportMetric(float64(lines)/time.Since(start).Seconds(), "events/s")
			b.ReportMetric(float64(lines)/(processCPU()-cpu0).Seconds(), "events/cpu-s")
			b.ReportMetric(float64(lines)/float64(b.N), "events/op")
		})
	}
}
