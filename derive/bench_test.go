package derive_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/derive"
	"github.com/fanoutd/fanoutd/venue"
)

// BenchmarkSourceEvent: one update near the top of a 1000-level book (one
// per millisecond of receive time) with n distinct book_snapshot streams
// of it (depths 1 to 1000, intervals 0ms to 1s): in one Set, which reads
// and encodes the top once for all of them, and as n Derivers each on its
// own (derive.New), each reading the book and building its levels.
// ns/op is per source event; emitted messages are encoded (AppendJSON) and
// dropped.
func BenchmarkSourceEvent(b *testing.B) {
	src := venue.Stream("okx:level2:BTC-USDT")
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Levels in fixed point, as the venue adapters decode them.
	fl := func(p, s int) venue.FixedLevel {
		return venue.FixedLevel{Price: venue.Fixed{M: int64(p), Scale: 1}, Size: venue.Fixed{M: int64(s)}}
	}
	snap := &venue.Event{Kind: venue.KindBook, Stream: src, Snapshot: true, RecvTime: start}
	for i := range 1000 {
		snap.FixedBids = append(snap.FixedBids, fl(100000-i, 1))
		snap.FixedAsks = append(snap.FixedAsks, fl(100001+i, 1))
	}
	r := rand.New(rand.NewPCG(1, 1))
	evs := make([]*venue.Event, 4096)
	for i := range evs {
		evs[i] = &venue.Event{Kind: venue.KindBook, Stream: src,
			FixedBids: []venue.FixedLevel{fl(100000-r.IntN(20), r.IntN(4))}, FixedAsks: []venue.FixedLevel{fl(100001+r.IntN(20), r.IntN(4))}}
	}
	ivs := []string{"0ms", "10ms", "100ms", "1s"}
	ids := func(n int) []venue.Stream {
		out := make([]venue.Stream, n)
		for i := range out {
			out[i] = venue.Stream(fmt.Sprintf("okx:book_snapshot_%d_%s:BTC-USDT", 1+(i*37)%1000, ivs[i%len(ivs)]))
		}
		return out
	}
	var buf []byte
	sink := func(o derive.Out) {
		o.Event.Seq = 1
		buf = o.AppendJSON(buf[:0])
	}
	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("streams=%d/set", n), func(b *testing.B) {
			book := &venue.Book{}
			book.Apply(snap)
			set := derive.NewSet(src)
			for _, id := range ids(n) {
				set.Add(id, sink)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ev := *evs[i%len(evs)]
				ev.RecvTime = start.Add(time.Duration(i+1) * time.Millisecond)
				set.Advance(ev.RecvTime, book)
				book.Apply(&ev)
				set.Apply(&ev, book)
			}
			b.ReportMetric(float64(set.Reads())/float64(b.N), "reads/event")
		})
		b.Run(fmt.Sprintf("streams=%d/separate", n), func(b *testing.B) {
			book := &venue.Book{}
			book.Apply(snap)
			var ds []derive.Deriver
			for _, id := range ids(n) {
				d, _ := derive.New(id)
				ds = append(ds, d)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ev := *evs[i%len(evs)]
				ev.RecvTime = start.Add(time.Duration(i+1) * time.Millisecond)
				for _, d := range ds {
					d.Advance(ev.RecvTime, book, sink)
				}
				book.Apply(&ev)
				for _, d := range ds {
					d.Apply(&ev, book, sink)
				}
			}
		})
	}
}
