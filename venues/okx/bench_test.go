package okx_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/okx"
	"github.com/fanoutd/fanoutd/venues/okx/okxtest"
)

// discard counts what a decoder emits.
type discard struct{ events, notices int }

func (d *discard) Event(*venue.Event) { d.events++ }
func (d *discard) Notice(n notice.Notice) {
	if n.Kind != notice.CoverageChange {
		d.notices++
	}
}

// genStream makes a books snapshot of depth levels per side and n updates
// of 1..maxLevels levels each, chained by seqId, with valid checksums when
// checksums is set (else 0, as OKX sends).
func genStream(n, depth, maxLevels int, checksums bool) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	const mid = 6402860 // ticks of 0.01
	bids, asks := map[int64]int64{}, map[int64]int64{}
	for i := int64(1); i <= int64(depth); i++ {
		bids[mid-i] = 1 + rng.Int64N(5e8)
		asks[mid+i] = 1 + rng.Int64N(5e8)
	}
	px := func(t int64) string {
		s := fmt.Sprintf("%d.%02d", t/100, t%100)
		for s[len(s)-1] == '0' {
			s = s[:len(s)-1]
		}
		if s[len(s)-1] == '.' {
			s = s[:len(s)-1]
		}
		return s
	}
	sz := func(l int64) string {
		s := fmt.Sprintf("%d.%08d", l/1e8, l%1e8)
		for s[len(s)-1] == '0' {
			s = s[:len(s)-1]
		}
		if s[len(s)-1] == '.' {
			s = s[:len(s)-1]
		}
		return s
	}
	top := func(m map[int64]int64, desc bool, k int) [][2]string {
		ts := make([]int64, 0, len(m))
		for t := range m {
			ts = append(ts, t)
		}
		slices.Sort(ts)
		if desc {
			slices.Reverse(ts)
		}
		if k > 0 && len(ts) > k {
			ts = ts[:k]
		}
		out := make([][2]string, len(ts))
		for i, t := range ts {
			out[i] = [2]string{px(t), sz(m[t])}
		}
		return out
	}
	cs := func() int32 {
		if !checksums {
			return 0
		}
		return okxtest.ChecksumOf(top(bids, true, 25), top(asks, false, 25))
	}
	lv := func(ls [][2]string) string {
		b := []byte{'['}
		for i, l := range ls {
			if i > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `["%s","%s","0","%d"]`, l[0], l[1], 1+len(l[1])%7)
		}
		return string(append(b, ']'))
	}
	ts := int64(1786538789464)
	seq := int64(79706765242)
	frame := func(action string, a, b [][2]string, prev int64) []byte {
		return fmt.Appendf(nil, `{"arg":{"channel":"books","instId":"BTC-USDT"},"action":"%s","data":[{"asks":%s,"bids":%s,"ts":"%d","checksum":%d,"prevSeqId":%d,"seqId":%d}]}`,
			action, lv(a), lv(b), ts, cs(), prev, seq)
	}
	out := [][]byte{frame("snapshot", top(asks, false, 0), top(bids, true, 0), -1)}
	for range n {
		var ua, ub [][2]string
		for range 1 + rng.IntN(maxLevels) {
			bid := rng.IntN(2) == 0
			var t int64
			m := asks
			if bid {
				t, m = mid-1-rng.Int64N(int64(depth)), bids
			} else {
				t = mid + 1 + rng.Int64N(int64(depth))
			}
			var l int64
			if rng.IntN(4) > 0 {
				l = 1 + rng.Int64N(5e8)
				m[t] = l
			} else {
				delete(m, t)
			}
			if bid {
				ub = append(ub, [2]string{px(t), sz(l)})
			} else {
				ua = append(ua, [2]string{px(t), sz(l)})
			}
		}
		prev := seq
		seq += 1 + rng.Int64N(50)
		ts += int64(rng.IntN(100))
		out = append(out, frame("update", ua, ub, prev))
	}
	return out
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchStream decodes frames over and over (the snapshot starts each
// pass) and reports frames/s and allocations per frame.
func benchStream(b *testing.B, frames [][]byte) {
	sink := &discard{}
	d := okx.NewDecoder(venue.Config{Sink: sink})
	now := time.Now()
	var bytes int
	for _, f := range frames {
		bytes += len(f)
	}
	b.SetBytes(int64(bytes / len(frames)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	i := 0
	for b.Loop() {
		d.Frame(now, frames[i])
		if i++; i == len(frames) {
			i = 0
			d.ResetCache() // each pass starts cold, as a live feed would
		}
	}
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
	// The machine is shared: wall time includes waiting for a core.
	// Process CPU time (GC included) per frame gives frames/s per core.
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "frames/cpu-s")
	if sink.notices != 0 || d.Stats().BadFrames != 0 {
		b.Fatalf("%d notices, stats %+v: the stream did not decode cleanly", sink.notices, d.Stats())
	}
}

// BenchmarkDecodeBooks measures decode + book apply + checksum (where
// present) for level2 streams: typical small updates (1-3 levels, without
// checksums as OKX sends them), the same with checksums, larger updates,
// and the real 2022 BTC-USDT capture (about 38 levels per update, every
// frame checksummed).
func BenchmarkDecodeBooks(b *testing.B) {
	b.Run("typical_1-3lvl", func(b *testing.B) { benchStream(b, genStream(20000, 400, 3, false)) })
	b.Run("typical_1-3lvl_checksum", func(b *testing.B) { benchStream(b, genStream(20000, 400, 3, true)) })
	b.Run("medium_1-20lvl", func(b *testing.B) { benchStream(b, genStream(20000, 400, 20, false)) })
	b.Run("recorded_2022", func(b *testing.B) { benchStream(b, testdata.Frames(b, "books_sequence_BTC-USDT_2022.jsonl")) })
}

// TestAllocBudget: a typical update (decode, book apply and the event)
// costs no allocation: levels are fixed point and the event is reused
// (venue.Sink).
func TestAllocBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	frames := genStream(2000, 400, 3, false)
	d := okx.NewDecoder(venue.Config{Sink: &discard{}})
	now := time.Now()
	d.Frame(now, frames[0])
	i := 1
	avg := testing.AllocsPerRun(len(frames)-2, func() {
		d.Frame(now, frames[i])
		i++
	})
	if avg != 0 {
		t.Errorf("%.1f allocations per typical update, want 0", avg)
	}
	t.Logf("%.2f allocations per typical update", avg)
}
