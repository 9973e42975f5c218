package wsapi

import (
	"bytes"
	"math"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/subscriber"
)

// TestFlushAt checks the flush policy: a connection not written within
// the last max age is due at once; a busy one is due max age after its
// last write, which is never more than max age after its queue went
// ready.
func TestFlushAt(t *testing.T) {
	const age = int64(3 * time.Millisecond)
	for _, tc := range []struct {
		name             string
		ready, last, due int64
	}{
		{"never written", 10 * age, 0, 10 * age},
		{"never written, early on the clock", age / 2, 0, age / 2},
		{"idle for longer than max age", 10 * age, 8 * age, 10 * age},
		{"idle for exactly max age", 10 * age, 9 * age, 10 * age},
		{"written a moment ago", 10 * age, 10*age - 1000, 11*age - 1000},
		{"written as the queue went ready", 10 * age, 10 * age, 11 * age},
		{"a write completed after the queue went ready", 10 * age, 10*age + 500, 11 * age},
	} {
		if got := flushAt(tc.ready, tc.last, age); got != tc.due {
			t.Errorf("%s: flushAt(%d, %d) = %d, want %d", tc.name, tc.ready, tc.last, got, tc.due)
		}
	}
	for last := int64(1); last <= 10*age; last += age / 7 {
		for ready := last - age; ready <= 12*age; ready += age / 5 {
			if at := flushAt(ready, last, age); at < ready || at > ready+age {
				t.Fatalf("flushAt(%d, %d) = %d: outside [ready, ready+max age]", ready, last, at)
			}
		}
	}
}

// TestScanDue checks a worker's round: an idle connection is written at
// once, a busy one waits until max age after its last write (the worker
// sleeps until then) and then is written, one with flushBytes pending is
// written at once however busy, and one whose queue did not go ready is
// left alone.
func TestScanDue(t *testing.T) {
	const age = int64(3 * time.Millisecond)
	w := &writeShard{maxAge: age, scale: ageScaleOne}
	mk := func(ready, last int64, pending int) *writer {
		cw := &writer{q: subscriber.NewMailbox()}
		cw.readySince.Store(ready)
		cw.lastWrite.Store(last)
		cw.rate.Store(1 << 20) // busy: its age is max age
		if pending > 0 {
			cw.q.Offer(&subscriber.Message{Data: make([]byte, pending)}, 10, 0)
		}
		return cw
	}
	now := 100 * age
	idle := mk(now-10, now-2*age, 100)
	busy := mk(now-10, now-age/3, 100)
	full := mk(now-10, now-age/3, flushBytes)
	quiet := mk(0, now-age/3, 0)
	slow := mk(now-10, now-age/3, 100) // a low rate: its age is max age/4, past since its last write
	slow.rate.Store(10)
	next := w.scan([]*writer{idle, busy, full, quiet, slow}, now)
	if len(w.due) != 3 || w.due[0] != idle || w.due[1] != full || w.due[2] != slow {
		t.Fatalf("due at once: %d connections, want the idle one, the one with flushBytes pending and the slow one", len(w.due))
	}
	if want := now - age/3 + age; next != want {
		t.Fatalf("next wake-up at %d, want %d (max age after the busy one's last write)", next, want)
	}
	if idle.readySince.Load() != 0 || full.readySince.Load() != 0 || busy.readySince.Load() == 0 {
		t.Fatal("the ready marks of the connections due are cleared, the busy one's kept")
	}
	next = w.scan([]*writer{busy, quiet}, next-1)
	if len(w.due) != 0 {
		t.Fatal("the busy connection was written before max age after its last write")
	}
	at := next
	next = w.scan([]*writer{busy, quiet}, at)
	if len(w.due) != 1 || w.due[0] != busy || next != math.MaxInt64 {
		t.Fatalf("at its due time: %d due, next %d; want the busy one, and no further wake-up", len(w.due), next)
	}
	if waited := at - (now - 10); waited > age {
		t.Fatalf("the busy connection's oldest message waited %d ns, past the max age %d", waited, age)
	}
}

// TestAgeFor checks that a connection's age grows with its event rate,
// between a quarter of the max age and the max age.
func TestAgeFor(t *testing.T) {
	const maxAge = int64(10 * time.Millisecond)
	for _, tc := range []struct{ rate, age int64 }{
		{0, maxAge / 4},
		{20, maxAge / 4},
		{200, maxAge / 4},
		{500, maxAge / 4},
		{1000, 5 * int64(time.Millisecond)},
		{1500, 7500 * int64(time.Microsecond)},
		{2000, maxAge},
		{100000, maxAge},
	} {
		if got := ageFor(tc.rate, maxAge); got != tc.age {
			t.Errorf("ageFor(%d events/s) = %v, want %v", tc.rate, time.Duration(got), time.Duration(tc.age))
		}
	}
	prev := int64(0)
	for rate := int64(0); rate <= 5000; rate += 7 {
		got := ageFor(rate, maxAge)
		if got < prev || got < maxAge/4 || got > maxAge {
			t.Fatalf("ageFor(%d) = %d: not growing with the rate within [max age/4, max age]", rate, got)
		}
		prev = got
	}
}

// TestRateOfWrites checks the rate the flush policy sees: a connection
// written every 5 ms with 10 events each converges on 2,000 events/s (its
// age about the max age), then one written an event at a time every 5 ms
// converges on 200 (a quarter of it), and an idle spell counts as a
// low rate at the next write.
func TestRateOfWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxAge = int64(10 * time.Millisecond)
		w := &writer{o: &Options{}}
		write := func(n, every int, gap time.Duration) {
			for range n {
				time.Sleep(gap)
				w.drained(every, 0)
			}
		}
		near := func(want int64) bool { r := w.rate.Load(); return r > want*9/10 && r < want*11/10 }
		write(20, 10, 5*time.Millisecond)
		if !near(2000) || ageFor(w.rate.Load(), maxAge) < maxAge*9/10 {
			t.Fatalf("10 events every 5 ms: rate %d, age %v; want about 2000 and the max age", w.rate.Load(), time.Duration(ageFor(w.rate.Load(), maxAge)))
		}
		write(20, 1, 5*time.Millisecond)
		if !near(200) || ageFor(w.rate.Load(), maxAge) != maxAge/4 {
			t.Fatalf("1 event every 5 ms: rate %d, age %v; want about 200 and max age/4", w.rate.Load(), time.Duration(ageFor(w.rate.Load(), maxAge)))
		}
		before := w.rate.Load()
		w.drained(1, 1) // a notice alone is not data
		write(1, 1, time.Second)
		if r := w.rate.Load(); r >= before {
			t.Fatalf("after an idle second the rate is %d, want below %d", r, before)
		}
	})
}

// TestLowLatencyConnection: with a max coalescing age of an hour, a
// connection that asks ?latency=low gets every event at once, while a
// batched one gets the first (it was idle) and then holds the next for
// the max age. Both get the same wire form.
func TestLowLatencyConnection(t *testing.T) {
	for _, uring := range []bool{false, true} {
		t.Run(map[bool]string{false: "write", true: "io_uring"}[uring], func(t *testing.T) {
			feed, url, _ := poolServer(t, Options{WriteDelay: time.Hour, Uring: uring}, 0)
			batched := dialSubscribed(t, url)
			low := dialSubscribed(t, url+"?latency=low")
			read := func(ws *websocket.Conn, d time.Duration) ([]byte, error) {
				ws.SetReadDeadline(time.Now().Add(d))
				_, m, err := ws.ReadMessage()
				return m, err
			}
			publishTrades(feed, 0, 1)
			b1, err := read(batched, 10*time.Second)
			if err != nil {
				t.Fatalf("the idle batched connection did not get the first event at once: %v", err)
			}
			l1, err := read(low, 10*time.Second)
			if err != nil || !bytes.Equal(b1, l1) {
				t.Fatalf("low-latency connection read %q (%v), the batched one %q", l1, err, b1)
			}
			for i := 2; i <= 4; i++ {
				publishTrades(feed, i-1, 1)
				if _, err := read(low, 10*time.Second); err != nil {
					t.Fatalf("event %d not written at once to the low-latency connection: %v", i, err)
				}
			}
			// The batched connection holds events 2 to 4 until an hour
			// after its last write.
			if m, err := read(batched, 300*time.Millisecond); err == nil {
				t.Fatalf("the busy batched connection was written before its max age: %q", m)
			}
		})
	}
}

// TestLatencyQuery: a latency other than low or batched is refused
// before the upgrade.
func TestLatencyQuery(t *testing.T) {
	_, url, _ := poolServer(t, Options{WriteDelay: time.Millisecond}, 0)
	_, resp, err := websocket.DefaultDialer.Dial(url+"?latency=fast", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("?latency=fast: %v, %v; want 400", resp, err)
	}
	ws, _, err := websocket.DefaultDialer.Dial(url+"?latency=batched", nil)
	if err != nil {
		t.Fatalf("?latency=batched: %v", err)
	}
	ws.Close()
}

// TestEveryEventInOrder publishes a burst faster than the max age to
// batched and low-latency connections alike: each reads every event,
// in seq order, whatever its batching.
func TestEveryEventInOrder(t *testing.T) {
	for _, uring := range []bool{false, true} {
		t.Run(map[bool]string{false: "write", true: "io_uring"}[uring], func(t *testing.T) {
			feed, url, _ := poolServer(t, Options{WriteDelay: 2 * time.Millisecond, Uring: uring}, 0)
			var conns []*websocket.Conn
			for i := range 6 {
				u := url
				if i%2 == 1 {
					u += "?latency=low"
				}
				conns = append(conns, dialSubscribed(t, u))
			}
			const events = 3000
			go func() {
				for i := 0; i < events; i += 100 {
					publishTrades(feed, i, 100)
				}
			}()
			var pings int
			for _, ws := range conns {
				last := uint64(0)
				for last < events {
					last = readSeqs(t, ws, last, &pings)
				}
			}
		})
	}
}

// TestFlushPolicyAllocs: a worker's scan and a queue's OnReady (on every
// delivery that makes a queue ready) allocate nothing.
func TestFlushPolicyAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	w := &writeShard{maxAge: int64(3 * time.Millisecond), scale: ageScaleOne, wake: make(chan struct{}, 1)}
	var list []*writer
	for range 64 {
		cw := &writer{q: subscriber.NewMailbox(), pool: w}
		cw.lastWrite.Store(monotime())
		list = append(list, cw)
	}
	w.due = make([]*writer, 0, len(list))
	if n := testing.AllocsPerRun(100, func() {
		for _, cw := range list {
			cw.readied()
		}
		w.scan(list, monotime())
	}); n != 0 {
		t.Fatalf("%v allocations per round of OnReady and scan, want 0", n)
	}
}

// TestAgeScale checks the worker's age scale: a worker that spends little
// of its time writing scales its connections' ages down to 1/64, one past
// its busy target scales them back up to the whole age, and one at its
// target keeps its scale; a step at most halves or doubles it.
func TestAgeScale(t *testing.T) {
	const period = adjustEvery
	w := &writeShard{maxAge: int64(10 * time.Millisecond), scale: ageScaleOne}
	now := int64(0)
	run := func(share float64) {
		w.busy = int64(share * float64(period))
		now += period
		w.adjust(now)
	}
	full := w.age(2000)
	if full != int64(10*time.Millisecond) {
		t.Fatalf("age at 2,000 events/s with the whole scale: %v, want the max age", time.Duration(full))
	}
	run(0)
	if w.scale != ageScaleOne/2 {
		t.Fatalf("an idle period: scale %d, want it halved (%d)", w.scale, ageScaleOne/2)
	}
	for range 10 {
		run(0.01)
	}
	if w.scale != ageScaleMin || w.age(2000) != full/64 {
		t.Fatalf("idle periods: scale %d, age %v; want %d and 1/64 of %v", w.scale, time.Duration(w.age(2000)), ageScaleMin, time.Duration(full))
	}
	before := w.scale
	run(busyTarget)
	if w.scale != before {
		t.Fatalf("a period at the busy target moved the scale from %d to %d", before, w.scale)
	}
	run(10 * busyTarget)
	if w.scale != 2*before {
		t.Fatalf("a busy period: scale %d, want it doubled (%d)", w.scale, 2*before)
	}
	for range 10 {
		run(1)
	}
	if w.scale != ageScaleOne || w.age(2000) != full {
		t.Fatalf("busy periods: scale %d, want the whole age (%d)", w.scale, ageScaleOne)
	}
	// A worker whose writes a second follow 1/age settles at its target.
	for range 20 {
		run(min(1, busyTarget*0.25*ageScaleOne/float64(w.scale)))
	}
	if got := float64(w.scale) / ageScaleOne; got < 0.2 || got > 0.3 {
		t.Fatalf("writes going as 1/age, at the target with a quarter of the age: settled at scale %.3f", got)
	}
}

// TestAgeScaleAllocs: ending a period of the age scale, metrics
// included, allocates nothing.
func TestAgeScaleAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts (the race detector allocates)")
	}
	w := &writeShard{maxAge: int64(10 * time.Millisecond), scale: ageScaleOne, gauges: NewMetrics(prometheus.NewRegistry()).writePool(0)}
	now := int64(0)
	if n := testing.AllocsPerRun(100, func() {
		now += adjustEvery
		w.busy = adjustEvery / 10
		w.adjust(now)
	}); n != 0 {
		t.Fatalf("%v allocations per adjust, want 0", n)
	}
}

// TestAgeScaleOfAServer: a server's write-pool workers, writing a few
// events a second to one connection, scale their ages down and say so in
// fanoutd_write_age_scale and fanoutd_write_pool_busy_ratio.
func TestAgeScaleOfAServer(t *testing.T) {
	feed, url, metrics := poolServer(t, Options{WriteDelay: 10 * time.Millisecond}, 0)
	ws := dialSubscribed(t, url)
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	i := 0
	testutil.WaitFor(t, 10*time.Second, "a write-pool worker's age scale below 1", func() bool {
		publishTrades(feed, i, 1)
		i++
		time.Sleep(20 * time.Millisecond)
		for w := range 64 {
			l := strconv.Itoa(w)
			scale := promtest.ToFloat64(metrics.writeAgeScale.WithLabelValues(l))
			busy := promtest.ToFloat64(metrics.writeBusy.WithLabelValues(l))
			if scale > 0 && scale < 1 && busy >= 0 && busy < busyTarget {
				return true
			}
		}
		return false
	})
}
