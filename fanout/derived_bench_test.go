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
