package binance

import (
	"syscall"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/scan"
)

// CPUTime returns the user+system CPU time the process has used; the
// benchmarks report frames per CPU-second next to frames per second
// because on a shared machine wall time includes waiting for a core.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkParseDepthOnly is the scanning and decimal parsing of one
// four-level depthUpdate payload, without the book or the event: the split
// of BenchmarkDecodeDepth's cost.
func BenchmarkParseDepthOnly(b *testing.B) {
	f := []byte(`{"e":"depthUpdate","E":1700000000000,"s":"BTCUSDT","U":100000000001,"u":100000000002,"b":[["59999.61000000","3.12345678"],["59999.12000000","0.00000000"]],"a":[["60000.10000000","1.12345678"],["60000.33000000","2.00000000"]]}`)
	d := NewDecoder(venueConfigForBench())
	b.ReportAllocs()
	cpu0 := CPUTime()
	for b.Loop() {
		sc := scan.New(f)
		if _, ok := d.parseDepth(&sc); !ok {
			b.Fatal("parse failed")
		}
	}
	b.ReportMetric(float64(b.N)/(CPUTime()-cpu0).Seconds(), "frames/cpu-s")
}
