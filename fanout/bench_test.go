package fanout

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/subscriber"
)

// benchDeliver measures delivering one encoded event to every subscriber of
// a stream: the queue-length check and the non-blocking push, per
// subscriber. Queues are drained every drainEvery events with the timer
// stopped, as centrifuge's broadcast benchmarks wait for queues to drain.
func benchDeliver(b *testing.B, live, churned int) {
	h, f := newHub(b, DefaultMaxQueueLen)
	for range churned { // subscribers that came and went
		c := subscriber.NewMailbox()
		s := h.NewEphemeral(c)
		h.Subscribe(s, tr)
		h.Detach(s, c)
	}
	conns := make([]*subscriber.Mailbox, live)
	for i := range conns {
		conns[i] = subscriber.NewMailbox()
		h.Subscribe(h.NewEphemeral(conns[i]), tr)
	}
	f.Publish(trade(tr, 1)) // creates the stream; warms the rings
	ev := trade(tr, 2)
	ev.Seq = 2
	m := &subscriber.Message{Stream: string(tr), Seq: 2, Data: ev.AppendJSON(nil), Published: time.Now()}
	st := f.streams[tr]
	const drainEvery = 64
	buf := make([]*subscriber.Message, 0, drainEvery+8)
	drainAll := func() {
		for _, c := range conns {
			buf, _ = c.Drain(buf[:0], math.MaxInt, math.MaxInt)
		}
	}
	for range drainEvery { // grow every ring to what the benchmark needs
		f.mu.Lock()
		f.deliver(st, m)
		f.mu.Unlock()
	}
	drainAll()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%drainEvery == drainEvery-1 {
			b.StopTimer()
			drainAll()
			b.StartTimer()
		}
		f.mu.Lock()
		f.deliver(st, m)
		f.mu.Unlock()
	}
	b.StopTimer()
	if live > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(live), "ns/sub")
	}
	if d := f.Counters().Dropped.Load(); d != 0 {
		b.Fatalf("%d deliveries dropped; the benchmark must measure delivery", d)
	}
}

func BenchmarkDeliver(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) { benchDeliver(b, n, 0) })
	}
}

// BenchmarkDeliverAfterChurn shows that 1000 ephemeral subscribers that
// came and went leave nothing behind: the cost is that of the live ones.
func BenchmarkDeliverAfterChurn(b *testing.B) {
	b.Run("live=1/churned=0", func(b *testing.B) { benchDeliver(b, 1, 0) })
	b.Run("live=1/churned=1000", func(b *testing.B) { benchDeliver(b, 1, 1000) })
}

// BenchmarkPublish is the whole publish path for one trade: seq, encode
// once, deliver to 1000 subscribers.
func BenchmarkPublish(b *testing.B) {
	h, f := newHub(b, DefaultMaxQueueLen)
	conns := make([]*subscriber.Mailbox, 1000)
	for i := range conns {
		conns[i] = subscriber.NewMailbox()
		h.Subscribe(h.NewEphemeral(conns[i]), tr)
	}
	buf := make([]*subscriber.Message, 0, 80)
	for i := range 64 {
		f.Publish(trade(tr, i))
	}
	for _, c := range conns {
		buf, _ = c.Drain(buf[:0], math.MaxInt, math.MaxInt)
	}
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
		f.Publish(trade(tr, i))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/sub")
}
