package binance_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/binance"
)

// discard is a sink that drops what it gets, as cheaply as a sink can.
type discard struct{ events, notices int }

func (d *discard) Event(*venue.Event) { d.events++ }
func (d *discard) Notice(n notice.Notice) {
	if n.Kind != notice.CoverageChange {
		d.notices++
	}
}

// depthStream is a generated BTCUSDT depth@100ms stream in Binance's exact
// format (combined-stream wrapper, eight-digit decimals as strings), over a
// 1000-level book: each frame changes levels near the top, a quarter of
// them removals, like the 2021 capture. U and u are 12 digits wide so the
// benchmark can renumber the frames in place and replay them endlessly.
type depthStream struct {
	frames [][]byte
	ids    [][2]int // offsets of the U and u digits in each frame
	base   int64    // id before the first frame
	snap   []byte
}

const idWidth = 12

func newDepthStream(nframes, levelsPerFrame int) *depthStream {
	r := rand.New(rand.NewPCG(7, 7))
	s := &depthStream{base: 100000000000}
	px := func(ticks int) string { return fmt.Sprintf("%d.%02d000000", ticks/100, ticks%100) }
	// Snapshot: 1000 bids below 60000.00, 1000 asks above.
	snap := []byte(`{"stream":"btcusdt@depthSnapshot","generated":true,"data":{"lastUpdateId":` + strconv.FormatInt(s.base, 10) + `,"bids":[`)
	for i := range 1000 {
		if i > 0 {
			snap = append(snap, ',')
		}
		snap = fmt.Appendf(snap, `["%s","%d.%08d"]`, px(6000000-1-i), r.IntN(5), r.IntN(1e8))
	}
	snap = append(snap, `],"asks":[`...)
	for i := range 1000 {
		if i > 0 {
			snap = append(snap, ',')
		}
		snap = fmt.Appendf(snap, `["%s","%d.%08d"]`, px(6000000+i), r.IntN(5), r.IntN(1e8))
	}
	s.snap = append(snap, `]}}`...)
	for i := range nframes {
		f := []byte(`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":1700000000000,"s":"BTCUSDT","U":`)
		u := len(f)
		f = strconv.AppendInt(f, s.base+int64(2*i+1), 10)
		f = append(f, `,"u":`...)
		v := len(f)
		f = strconv.AppendInt(f, s.base+int64(2*i+2), 10)
		side := func(name string, sign int) {
			f = append(f, `,"`+name+`":[`...)
			for j := range levelsPerFrame / 2 {
				if j > 0 {
					f = append(f, ',')
				}
				ticks := 6000000 + sign*(1+r.IntN(40))
				if sign < 0 {
					ticks = 6000000 - 1 - r.IntN(40)
				} else {
					ticks = 6000000 + r.IntN(40)
				}
				if r.IntN(4) == 0 {
					f = fmt.Appendf(f, `["%s","0.00000000"]`, px(ticks))
				} else {
					f = fmt.Appendf(f, `["%s","%d.%08d"]`, px(ticks), r.IntN(5), 1+r.IntN(1e8-1))
				}
			}
			f = append(f, ']')
		}
		side("b", -1)
		side("a", 1)
		f = append(f, "}}"...)
		s.frames = append(s.frames, f)
		s.ids = append(s.ids, [2]int{u, v})
	}
	return s
}

// advance renumbers every frame to follow the last one.
func (s *depthStream) advance() {
	s.base += int64(2 * len(s.frames))
	var tmp [20]byte
	for i, f := range s.frames {
		copy(f[s.ids[i][0]:], strconv.AppendInt(tmp[:0], s.base+int64(2*i+1), 10))
		copy(f[s.ids[i][1]:], strconv.AppendInt(tmp[:0], s.base+int64(2*i+2), 10))
	}
}

func benchDepth(b *testing.B, levels int) {
	s := newDepthStream(4096, levels)
	sink := &discard{}
	d := binance.NewDecoder(venue.Config{Sink: sink})
	recv := time.Now()
	d.Frame(recv, s.snap)
	bytes := 0
	for _, f := range s.frames {
		bytes += len(f)
	}
	b.SetBytes(int64(bytes / len(s.frames)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := binance.CPUTime()
	n := 0
	for b.Loop() {
		d.Frame(recv, s.frames[n])
		n++
		if n == len(s.frames) {
			b.StopTimer()
			s.advance()
			n = 0
			b.StartTimer()
		}
	}
	b.StopTimer()
	cpu := binance.CPUTime() - cpu0
	if sink.notices != 0 || d.BadFrames() != 0 {
		b.Fatalf("%d notices, %d bad frames: the stream does not chain", sink.notices, d.BadFrames())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
	// On a shared machine wall time includes waiting for a core; CPU time
	// (user+system of the whole process, so GC workers count) does not.
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "frames/cpu-s")
}

// BenchmarkDecodeDepth measures decode + book apply + event construction
// for depthUpdate frames of 2, 4 and 20 levels (the 2021 capture averages
// 1.6 levels and 180 bytes a frame; a busy pair such as BTCUSDT sends tens
// of levels every 100 ms).
func BenchmarkDecodeDepth(b *testing.B) {
	for _, levels := range []int{2, 4, 20} {
		b.Run(fmt.Sprintf("levels=%d", levels), func(b *testing.B) { benchDepth(b, levels) })
	}
}

// TestDepthAllocBudget holds decode + apply of a four-level update, and
// the event handed to the sink, to no allocation: levels are fixed point
// and the event is reused (venue.Sink).
func TestDepthAllocBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	s := newDepthStream(512, 4)
	sink := &discard{}
	d := binance.NewDecoder(venue.Config{Sink: sink})
	recv := time.Now()
	d.Frame(recv, s.snap)
	for _, f := range s.frames { // warm the price cache
		d.Frame(recv, f)
	}
	s.advance()
	n := 0
	allocs := testing.AllocsPerRun(len(s.frames)-1, func() {
		d.Frame(recv, s.frames[n])
		n++
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per frame, want 0", allocs)
	}
	if sink.notices != 0 {
		t.Fatalf("%d notices: the stream does not chain", sink.notices)
	}
}
