package bybit_test

import (
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/bybit"
)

// discard is a sink that drops everything: the benchmarks measure the
// decoder, not a sink.
type discard struct{ events int }

func (d *discard) Event(*venue.Event)   { d.events++ }
func (d *discard) Notice(notice.Notice) {}

// genStream returns a Bybit spot orderbook.50 stream for BTCUSDT: one
// snapshot of 50 levels a side, then n deltas with consecutive u, each
// changing 1 to perLevel levels (half of those on each side at random;
// one in five a removal), prices at a 0.01 tick written as Bybit writes
// them ("28165.07"), sizes with 6 decimals. That is the shape of the
// recorded spot deltas (1–3 levels a side at 20 ms).
func genStream(n, perLevel int) [][]byte {
	rng := rand.New(rand.NewPCG(7, 11))
	const mid = 2816500 // 28165.00 in ticks
	price := func(t int64) string {
		s := strconv.FormatInt(t, 10)
		return s[:len(s)-2] + "." + s[len(s)-2:]
	}
	size := func() string {
		v := 1 + rng.Int64N(9_999_999)
		s := strconv.FormatInt(v+10_000_000, 10) // leading 1 keeps 8 digits
		return s[1:2] + "." + s[2:]
	}
	frame := func(typ string, bids, asks [][2]string, u int64) []byte {
		f := []byte(`{"topic":"orderbook.50.BTCUSDT","ts":1680652808065,"type":"` + typ + `","data":{"s":"BTCUSDT","b":[`)
		add := func(ls [][2]string) {
			for i, l := range ls {
				if i > 0 {
					f = append(f, ',')
				}
				f = append(f, `["`+l[0]+`","`+l[1]+`"]`...)
			}
		}
		add(bids)
		f = append(f, `],"a":[`...)
		add(asks)
		f = append(f, `],"u":`...)
		f = strconv.AppendInt(f, u, 10)
		f = append(f, `,"seq":4281282229},"cts":1680652808063}`...)
		return f
	}
	var bids, asks [][2]string
	for i := int64(1); i <= 50; i++ {
		bids = append(bids, [2]string{price(mid - i), size()})
		asks = append(asks, [2]string{price(mid + i), size()})
	}
	u := int64(59438060)
	out := [][]byte{frame("snapshot", bids, asks, u)}
	for range n {
		u++
		var b, a [][2]string
		for range 1 + rng.IntN(perLevel) {
			off := 1 + rng.Int64N(50)
			sz := size()
			if rng.IntN(5) == 0 {
				sz = "0"
			}
			if rng.IntN(2) == 0 {
				b = append(b, [2]string{price(mid - off), sz})
			} else {
				a = append(a, [2]string{price(mid + off), sz})
			}
		}
		out = append(out, frame("delta", b, a, u))
	}
	return out
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecodeLevel2 measures decode + book apply + event building for
// a level2 stream (run with -cpu 1 -benchmem). frames/s is wall-clock;
// frames/cpu-s divides by the process's CPU time (GC included), which is
// the per-core figure when the machine is shared.
func BenchmarkDecodeLevel2(b *testing.B) {
	for _, c := range []struct {
		name     string
		perFrame int
	}{{"typical-1to4levels", 4}, {"busy-1to12levels", 12}} {
		b.Run(c.name, func(b *testing.B) {
			frames := genStream(20000, c.perFrame)
			var bytes int
			for _, f := range frames {
				bytes += len(f)
			}
			sink := &discard{}
			d := bybit.NewDecoder(venue.Config{Sink: sink, Depth: 50})
			recv := time.Unix(1680652808, 0)
			for _, f := range frames { // warm the book and the decimal cache
				d.Frame(recv, f)
			}
			b.SetBytes(int64(bytes / len(frames)))
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			i := -1
			for b.Loop() {
				i++
				if i == len(frames) {
					i = 0 // the snapshot again: the book resets, u restarts
				}
				d.Frame(recv, frames[i])
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			if s := d.Stats(); s.BadFrames != 0 || s.DroppedUpdates != 0 {
				b.Fatalf("stats %+v", s)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
			if cpu > 0 {
				b.ReportMetric(float64(b.N)/cpu.Seconds(), "frames/cpu-s")
			}
		})
	}
}

// TestDecodeAllocs holds a typical delta to no allocation: decode, book
// apply and the event (fixed-point levels, reused: venue.Sink).
func TestDecodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	frames := genStream(2000, 4)
	d := bybit.NewDecoder(venue.Config{Sink: &discard{}, Depth: 50})
	recv := time.Unix(1680652808, 0)
	for _, f := range frames {
		d.Frame(recv, f)
	}
	i := -1
	allocs := testing.AllocsPerRun(len(frames)-2, func() { // one warm-up run, then the rest: one pass
		i++
		if i == len(frames) {
			i = 0
		}
		d.Frame(recv, frames[i])
	})
	if allocs != 0 {
		t.Errorf("%.1f allocs per typical level2 frame, want 0", allocs)
	}
}
