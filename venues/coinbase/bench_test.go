package coinbase_test

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/coinbase"
)

// countSink counts and drops what it receives, so a benchmark measures
// the decoder, not a recording sink.
type countSink struct{ events, notices int }

func (s *countSink) Event(*venue.Event) { s.events++ }
func (s *countSink) Notice(n notice.Notice) {
	if n.Kind != notice.CoverageChange {
		s.notices++
	}
}

// genStream makes a typical Advanced Trade level2 stream: a snapshot of
// 2×200 levels around 50000 with two-decimal prices, then n update frames
// with one change each (the common shape of live l2_data), sizes drawn
// from a wide range so that the size cache mostly misses, a third of them
// removals.
func genStream(n int) (snap []byte, updates [][]byte) {
	r := rand.New(rand.NewPCG(7, 8))
	ts := "2026-09-07T01:57:58.894355Z"
	sz := func() string { return fmt.Sprintf("%d.%08d", r.IntN(5), r.IntN(1e8)) }
	px := func(ticks int) string {
		c := 5000000 + ticks
		s := fmt.Sprintf("%d.%02d", c/100, c%100)
		for s[len(s)-1] == '0' { // Coinbase trims trailing zeros
			s = s[:len(s)-1]
		}
		if s[len(s)-1] == '.' {
			s = s[:len(s)-1]
		}
		return s
	}
	var ups []string
	for i := 1; i <= 200; i++ {
		ups = append(ups, "bid", px(-i), sz(), "offer", px(i), sz())
	}
	snap = l2(0, "snapshot", ups...)
	for i := 1; i <= n; i++ {
		side, ticks := "bid", -(1 + r.IntN(200))
		if r.IntN(2) == 0 {
			side, ticks = "offer", -ticks
		}
		q := sz()
		if r.IntN(3) == 0 {
			q = "0"
		}
		updates = append(updates, fmt.Appendf(nil, `{"channel":"l2_data","client_id":"","timestamp":%q,"sequence_num":%d,"events":[{"type":"update","product_id":"BTC-USD","updates":[{"side":%q,"event_time":%q,"price_level":%q,"new_quantity":%q}]}]}`,
			ts, i, side, ts, px(ticks), q))
	}
	return snap, updates
}

func benchStream(b *testing.B, snap []byte, updates [][]byte) {
	sink := &countSink{}
	d := coinbase.NewDecoder(venue.Config{Sink: sink})
	recv := time.Unix(1, 0)
	d.Frame(recv, snap)
	var bytes int
	for _, u := range updates {
		bytes += len(u)
	}
	b.SetBytes(int64(bytes / len(updates)))
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		j := i % len(updates)
		if j == 0 && i > 0 { // wrap: a new link, a new snapshot
			d.LinkDown(recv)
			d.Frame(recv, snap)
		}
		d.Frame(recv, updates[j])
	}
	el, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	if d.BadFrames() != 0 {
		b.Fatalf("%d bad frames", d.BadFrames())
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "frames/s")
	// On a shared machine wall time measures the neighbours too; frames
	// per CPU-second of this process (GC included) is the per-core rate.
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "frames/cpu-s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecodeLevel2 is decode + book apply + event build on a
// generated stream of typical one-change l2_data frames.
func BenchmarkDecodeLevel2(b *testing.B) {
	snap, ups := genStream(1 << 16)
	benchStream(b, snap, ups)
}

// BenchmarkDecodeLevel2Recorded is the same on real data: the 2021
// SKL-BTC level2 stream (1,539 changes) carried in Advanced Trade frames;
// its full-book snapshot is re-applied once per pass.
func BenchmarkDecodeLevel2Recorded(b *testing.B) {
	frames := legacyToAdvanced(b)
	benchStream(b, frames[0], frames[1:])
}
