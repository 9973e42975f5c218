package kraken_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/kraken"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
)

// countSink counts what it is given and keeps nothing.
type countSink struct{ events, notices int }

func (s *countSink) Event(*venue.Event) { s.events++ }
func (s *countSink) Notice(n notice.Notice) {
	if n.Kind != notice.CoverageChange {
		s.notices++
	}
}

// BenchmarkDecodeLevel2 measures decode + book apply + depth truncation +
// checksum per level2 update frame, on a generated BTC/USD stream of the
// shape Kraken sends (one change per message, 1–2 levels, depth 10).
func BenchmarkDecodeLevel2(b *testing.B) {
	for _, depth := range []int{10, 100} {
		b.Run("depth"+itoa(depth), func(b *testing.B) {
			instr, snap, ups := benchFrames(depth)
			size := 0
			for _, u := range ups {
				size += len(u)
			}
			sink := &countSink{}
			d := kraken.NewDecoder(venue.Config{Sink: sink, Depth: depth})
			t0 := time.Unix(0, 0)
			d.Frame(t0, instr)
			d.Frame(t0, snap)
			b.SetBytes(int64(size / len(ups)))
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			i := 0
			for b.Loop() {
				if i == len(ups) {
					d.Frame(t0, snap)
					i = 0
				}
				d.Frame(t0, ups[i])
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
			// On a shared machine wall time says more about the neighbours
			// than about the decoder: frames per second of this process's
			// CPU time (GC included) is the per-core figure.
			b.ReportMetric(float64(b.N)/(cpuTime()-c0).Seconds(), "frames/cpu-s")
			if sink.notices != 0 {
				b.Fatalf("%d notices: the stream did not verify", sink.notices)
			}
		})
	}
}

var benchCache = map[int][3][][]byte{}

// benchFrames generates the stream once per depth: making it costs more
// than decoding it.
func benchFrames(depth int) (instr, snap []byte, ups [][]byte) {
	if c, ok := benchCache[depth]; ok {
		return c[0][0], c[1][0], c[2]
	}
	instr, snap, ups = (&krakentest.Mock{Depth: depth}).Frames(20000)
	benchCache[depth] = [3][][]byte{{instr}, {snap}, ups}
	return instr, snap, ups
}

func itoa(n int) string {
	if n >= 10 {
		return itoa(n/10) + string(rune('0'+n%10))
	}
	return string(rune('0' + n))
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A typical update frame (decode, book apply, truncation, checksum and the
// event) costs no allocation: levels are fixed point and the event is
// reused (venue.Sink).
func TestUpdateAllocBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	instr, snap, ups := benchFrames(10)
	d := kraken.NewDecoder(venue.Config{Sink: &countSink{}, Depth: 10})
	t0 := time.Unix(0, 0)
	d.Frame(t0, instr)
	d.Frame(t0, snap)
	i := 0
	avg := testing.AllocsPerRun(5000, func() {
		d.Frame(t0, ups[i])
		i++
	})
	if avg != 0 {
		t.Fatalf("%.2f allocations per update frame, want 0", avg)
	}
}
