package fanout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// BenchmarkDerivedVsRaw: 1000 subscribers of a busy level2 stream (one
// update per millisecond of receive time, near the top of a 200-level
// book), on the raw stream and on book_snapshot_10_100ms. The cost is per
// source event, and per source event per subscriber (ns/sub): the derived
// stream computes once and delivers at most ten times a second.
func BenchmarkDerivedVsRaw(b *testing.B) {
	for _, st := range []venue.Stream{l2, "coinbase:book_snapshot_10_100ms:BTC-USD"} {
		b.Run(fmt.Sprintf("subs=1000/%s", st.Channel()), func(b *testing.B) {
			h, f := newHub(b, DefaultMaxQueueLen)
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			snap := &venue.Event{Kind: venue.KindBook, Stream: l2, Snapshot: true, RecvTime: start}
			for i := range 200 {
				snap.Bids = append(snap.Bids, lvl(int64(10000-i), 1))
				snap.Asks = append(snap.Asks, lvl(int64(10001+i), 1))
			}
			f.Publish(snap)
			conns := make([]*subscriber.Mailbox, 1000)
			for i := range conns {
				conns[i] = subscriber.NewMailbox()
				h.Subscribe(h.NewEphemeral(conns[i]), st)
			}
			r := rand.New(rand.NewPCG(1, 1))
			evs := make([]*venue.Event, 4096)
			for i := range evs {
				evs[i] = &venue.Event{Kind: venue.KindBook, Stream: l2,
					Bids: []venue.Level{lvl(int64(10000-r.IntN(20)), int64(r.IntN(4)))}, Asks: []venue.Level{lvl(int64(10001+r.IntN(20)), int64(r.IntN(4)))}}
			}
			buf := make([]*subscriber.Message, 0, 256)
			drainAll := func() {
				for _, c := range conns {
					buf, _ = c.Drain(buf[:0], math.MaxInt, math.MaxInt)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%64 == 63 {
					b.StopTimer()
					drainAll()
					b.StartTimer()
				}
				ev := *evs[i%len(evs)]
				ev.RecvTime = start.Add(time.Duration(i+1) * time.Millisecond)
				f.Publish(&ev)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/sub")
			if d := f.Counters().Dropped.Load(); d != 0 {
				b.Fatalf("%d dropped", d)
			}
		})
	}
}

// flvl is a level in fixed point, as the venue adapters decode them.
func flvl(p, s int) venue.FixedLevel {
	return venue.FixedLevel{Price: venue.Fixed{M: int64(p), Scale: 1}, Size: venue.Fixed{M: int64(s)}}
}

// derivedLoad is a feed whose level2 source has a 1000-level book and n
// distinct derived streams book_snapshot_<depth>_<interval> (depths 1 to
// 1000, intervals 10ms to 1s), one subscriber each, and updates near the
// top of the book, one per millisecond of receive time.
func derivedLoad(tb testing.TB, n int) (*Feed, []*subscriber.Mailbox, []*venue.Event, time.Time) {
	h, f := newHub(tb, DefaultMaxQueueLen)
	h.SetDerivedLimits(DerivedLimits{PerToken: 1 << 20, PerSource: 1 << 20, Weight: 1 << 30})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snap := &venue.Event{Kind: venue.KindBook, Stream: l2, Snapshot: true, RecvTime: start}
	for i := range 1000 {
		snap.FixedBids = append(snap.FixedBids, flvl(100000-i, 1))
		snap.FixedAsks = append(snap.FixedAsks, flvl(100001+i, 1))
	}
	f.Publish(snap)
	ivs := []string{"10ms", "100ms", "250ms", "1s"}
	conns := make([]*subscriber.Mailbox, n)
	for i := range conns {
		conns[i] = subscriber.NewMailbox()
		st := venue.Stream(fmt.Sprintf("coinbase:book_snapshot_%d_%s:BTC-USD", 1+(i*37)%1000, ivs[i%len(ivs)]))
		if err := h.Subscribe(h.NewEphemeral(conns[i]), st); err != nil {
			tb.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(1, 1))
	evs := make([]*venue.Event, 4096)
	for i := range evs {
		evs[i] = &venue.Event{Kind: venue.KindBook, Stream: l2,
			FixedBids: []venue.FixedLevel{flvl(100000-r.IntN(20), r.IntN(4))}, FixedAsks: []venue.FixedLevel{flvl(100001+r.IntN(20), r.IntN(4))}}
	}
	return f, conns, evs, start
}

// BenchmarkDerivedSourceEvent: the cost of one source event (ns/op) with
// 1 to 256 distinct derived streams of it. The book is read once per event
// at most, whatever their number (reads/event); what grows with them is
// what they emit, at most once per interval each.
func BenchmarkDerivedSourceEvent(b *testing.B) {
	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			f, conns, evs, start := derivedLoad(b, n)
			buf := make([]*subscriber.Message, 0, 256)
			reads := f.Counters().DerivedReads.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%64 == 63 {
					b.StopTimer()
					for _, c := range conns {
						buf, _ = c.Drain(buf[:0], math.MaxInt, math.MaxInt)
					}
					b.StartTimer()
				}
				ev := *evs[i%len(evs)]
				ev.RecvTime = start.Add(time.Duration(i+1) * time.Millisecond)
				f.Publish(&ev)
			}
			b.StopTimer()
			b.ReportMetric(float64(f.Counters().DerivedReads.Load()-reads)/float64(b.N), "reads/event")
		})
	}
}

// TestDerivedEventAllocatesNothing: a source event that closes no
// interval allocates nothing, however many derived streams it feeds.
func TestDerivedEventAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	f, _, evs, start := derivedLoad(t, 64)
	ev := *evs[0]
	ev.RecvTime = start.Add(time.Hour + time.Microsecond) // past every interval open
	f.Publish(&ev)
	ev.RecvTime = ev.RecvTime.Add(time.Microsecond) // within them all
	if n := testing.AllocsPerRun(200, func() { f.Publish(&ev) }); n != 0 {
		t.Fatalf("%v allocations per source event with 64 derived streams and no interval closing", n)
	}
}

// BenchmarkDerivedAtDefaultCaps: the worst one source can be made to
// cost at the default caps: DefaultMaxDerivedPerSource every-change
// streams whose depths fill DefaultMaxDerivedWeight (eight of 1000 levels,
// the rest shallow) on a 1000-level book, and updates at the best bid, so
// that every event changes every stream's top and each sends a message.
func BenchmarkDerivedAtDefaultCaps(b *testing.B) {
	h, f := newHub(b, DefaultMaxQueueLen)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snap := &venue.Event{Kind: venue.KindBook, Stream: l2, Snapshot: true, RecvTime: start}
	for i := range 1000 {
		snap.FixedBids = append(snap.FixedBids, flvl(100000-i, 1))
		snap.FixedAsks = append(snap.FixedAsks, flvl(100001+i, 1))
	}
	f.Publish(snap)
	var conns []*subscriber.Mailbox
	weight := 0
	for i := range DefaultMaxDerivedPerSource {
		d := 1000
		if i >= 8 {
			d = 1 + i
		}
		if weight+d > DefaultMaxDerivedWeight {
			d = DefaultMaxDerivedWeight - weight - (DefaultMaxDerivedPerSource - 1 - i)
		}
		weight += d
		c := subscriber.NewMailbox()
		conns = append(conns, c)
		if err := h.Subscribe(h.NewOwnedEphemeral(c, fmt.Sprint(i)), venue.Stream(fmt.Sprintf("coinbase:book_snapshot_%d_0ms:BTC-USD", d))); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]*subscriber.Message, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%64 == 63 {
			b.StopTimer()
			for _, c := range conns {
				buf, _ = c.Drain(buf[:0], math.MaxInt, math.MaxInt)
			}
			b.StartTimer()
		}
		f.Publish(&venue.Event{Kind: venue.KindBook, Stream: l2, RecvTime: start.Add(time.Duration(i+1) * time.Millisecond),
			FixedBids: []venue.FixedLevel{flvl(100000, 2+i%2)}})
	}
	b.StopTimer()
	b.ReportMetric(float64(weight), "weight")
}
