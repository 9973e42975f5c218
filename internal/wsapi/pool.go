package wsapi

import (
	"context"
	"log/slog"
	"math"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/fanoutd/fanoutd/internal/rawio"
	"github.com/fanoutd/fanoutd/subscriber"
)

// writeShard is one write-pool worker and the connections it serves.
//
// A worker sleeps until one of its connections has something to write
// (its queue's OnReady wakes the worker) or until the next one is due,
// and then drains and writes each connection that is due, with
// non-blocking writes (writer.poolWrite), so no goroutine is woken per
// connection. When a connection is due is the flush policy (flushAt with
// the connection's age, ageFor): at once if it was not written within the
// last age (it was idle: nothing to coalesce with), else age after its
// last write, so that under load each write carries what came meanwhile;
// and at once whatever its age once flushBytes are pending. The age grows
// with the connection's event rate, from Options.WriteDelay/4 to
// WriteDelay, so no byte waits longer than WriteDelay and a busy
// connection's writes carry more; and the worker scales every age so that
// writing takes about busyTarget of its time (adjust): down to 1/64 while
// writing takes little, the whole age while it takes more, so a machine
// with CPU to spare spends it on latency. Connections due together go out
// in one round (one io_uring_enter with io_uring). A
// connection leaves the pool for its own writer goroutine only while its
// socket is backed up, so one slow socket never holds up a worker and the
// write deadline still applies to it. With io_uring, a worker hands all of
// a round's sends to the kernel in one io_uring_enter (MSG_DONTWAIT: a full
// socket is met as by a non-blocking write). docs/design.md says
// what each saves.
type writeShard struct {
	mu    sync.Mutex // protects conns
	conns []*writer

	wake   chan struct{} // capacity 1: a connection of the shard went ready
	maxAge int64         // Options.WriteDelay, in ns: the ceiling of ageFor
	due    []*writer     // the connections written this round

	// The age scale (adjust): ages are ageFor's times scale/ageScaleOne.
	// busy is the time spent in rounds since since (ns, monotime). Only
	// the worker's goroutine uses them.
	scale       int64
	busy, since int64
	gauges      poolGauges

	ring    *rawio.Ring // nil: one write(2) per connection
	log     *slog.Logger
	metrics *Metrics
	slots   []ringSlot
	more    []*writer                        // connections for the next round
	round   []*writer                        // the round being written
	doneFn  func(userData uint64, res int32) // w.complete, bound once
}

// openRing is rawio.NewRing; tests replace it to see the pool without io_uring.
var openRing = rawio.NewRing

// startPool starts n write-pool workers.
func (s *Server) startPool(n int) {
	s.poolStop = make(chan struct{})
	s.shards = make([]*writeShard, max(n, 1))
	for i := range s.shards {
		w := &writeShard{log: s.log, metrics: s.o.Metrics, wake: make(chan struct{}, 1), maxAge: int64(s.o.WriteDelay),
			scale: ageScaleOne, since: monotime()}
		if s.o.Uring {
			if r, err := openRing(256); err != nil {
				if i == 0 {
					s.log.Info("wsapi: io_uring unavailable, the write pool makes one write(2) per connection", "err", err)
				}
			} else {
				w.ring, w.slots = r, make([]ringSlot, r.Free())
				w.doneFn = w.complete
			}
		}
		s.shards[i] = w
		s.poolWG.Add(1)
		w.metrics.writeWorker(w.ring != nil, 1)
		w.gauges = w.metrics.writePool(i)
		go pprof.Do(context.Background(), pprof.Labels("wsapi", "write-pool"), func(context.Context) {
			defer s.poolWG.Done()
			w.run(s.poolStop)
			w.metrics.writeWorker(w.ring != nil, -1)
		})
	}
}

// pickShard returns the shard of a new connection, round-robin.
func (s *Server) pickShard() *writeShard {
	return s.shards[int(s.nextShard.Add(1))%len(s.shards)]
}

// add puts cw, whose pool is w, in the shard's list, and wakes the
// worker for what cw's queue signalled before.
func (w *writeShard) add(cw *writer) {
	w.mu.Lock()
	cw.shardIdx = len(w.conns)
	w.conns = append(w.conns, cw)
	w.mu.Unlock()
	w.wakeUp()
}

// wakeUp has the worker look at its connections.
func (w *writeShard) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// flushBytes are the pending bytes that have a busy connection written
// at once rather than at its due time.
const flushBytes = 16 << 10

// agePerRate is what each event a second of a connection's rate adds to
// its age (ageFor, before the worker's scale): 2,000 events/s give 10 ms,
// and a write carrying 20 events.
const agePerRate = int64(5 * time.Microsecond)

// ageFor is the age of a connection that receives rate events a second:
// rate × agePerRate, between maxAge/4 and maxAge. A busy connection waits
// longer and each of its writes carries more (a send costs the same
// whatever it carries); one at tens or hundreds of events a second is
// older than maxAge/4 between events and is written event by event.
func ageFor(rate, maxAge int64) int64 {
	return min(max(rate*agePerRate, maxAge/4), maxAge)
}

// The age scale: a worker measures the share of its time it spends in
// rounds (scanning and writing, system calls included; a round preempted
// by other work on contended cores counts the longer), over periods of
// adjustEvery, and scales every connection's age so that the share comes
// near busyTarget: a batching connection's writes a second go as
// 1/age, so the new scale is the old one times share/busyTarget (damped by
// half, at most doubling or halving a period), between ageScaleMin and
// ageScaleOne. Connections written event by event cost the same whatever
// the scale; if they alone exceed the target, the scale stays at its top.
// Measured on a machine's own sends, it batches more where sends cost
// more or the cores are contended, and less where they are cheap.
const (
	ageScaleOne = 1024
	ageScaleMin = ageScaleOne / 64
	busyTarget  = 0.15
	adjustEvery = int64(100 * time.Millisecond)
)

// adjust ends a period of the age scale at now (see ageScaleOne).
func (w *writeShard) adjust(now int64) {
	share := float64(w.busy) / float64(now-w.since)
	f := min(max((share/busyTarget+1)/2, 0.5), 2)
	w.scale = min(max(int64(float64(w.scale)*f), ageScaleMin), ageScaleOne)
	w.busy, w.since = 0, now
	w.gauges.set(share, float64(w.scale)/ageScaleOne)
}

// age is the age of a connection at rate events a second: ageFor's, scaled.
func (w *writeShard) age(rate int64) int64 {
	return ageFor(rate, w.maxAge) * w.scale / ageScaleOne
}

// flushAt is the flush policy: when a connection is to be written whose
// queue went from empty to not at readySince and that was last written at
// lastWrite (ns on one monotonic clock; 0: never written). At once
// (readySince) if it was not written within the last maxAge; else maxAge
// after its last write, and never more than maxAge after readySince (a
// write that completed after the queue went ready counts from then).
func flushAt(readySince, lastWrite, maxAge int64) int64 {
	if lastWrite == 0 {
		return readySince
	}
	return min(max(readySince, lastWrite+maxAge), readySince+maxAge)
}

// remove takes cw out of the shard.
func (w *writeShard) remove(cw *writer) {
	w.mu.Lock()
	last := len(w.conns) - 1
	w.conns[cw.shardIdx] = w.conns[last]
	w.conns[cw.shardIdx].shardIdx = cw.shardIdx
	w.conns[last] = nil
	w.conns = w.conns[:last]
	w.mu.Unlock()
}

// run is the worker: it waits for a wake-up or the earliest due time of
// a connection not yet written, then writes every connection that is
// due (flushAt; or flushBytes pending). A worker behind on its work finds
// more connections due, with more queued each, and writes larger batches
// rather than falling further behind.
func (w *writeShard) run(stop chan struct{}) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	var list []*writer
	var batch []*subscriber.Message
	var buf []byte
	for {
		select {
		case <-stop:
			return
		case <-w.wake:
		case <-t.C:
		}
		start := monotime()
		w.mu.Lock()
		list = append(list[:0], w.conns...)
		w.mu.Unlock()
		next := w.scan(list, monotime())
		clear(list)
		if w.ring != nil {
			w.writeRing(w.due)
		} else {
			for _, cw := range w.due {
				batch, buf = cw.poolWrite(batch, buf)
			}
		}
		clear(w.due)
		end := monotime()
		if w.busy += end - start; end-w.since >= adjustEvery {
			w.adjust(end)
		}
		t.Stop()
		if next != math.MaxInt64 {
			t.Reset(time.Duration(next - end))
		}
	}
}

// scan puts in w.due the connections of list that are due at now, and
// returns the earliest due time of the others that have something
// queued (math.MaxInt64 if none).
func (w *writeShard) scan(list []*writer, now int64) (next int64) {
	next = math.MaxInt64
	w.due = w.due[:0]
	for _, cw := range list {
		rs := cw.readySince.Load()
		if rs == 0 {
			continue
		}
		if at := flushAt(rs, cw.lastWrite.Load(), w.age(cw.rate.Load())); at > now && cw.q.Bytes() < flushBytes {
			next = min(next, at)
			continue
		}
		// Cleared before the drain: a message queued after the drain
		// empties the queue sets it again.
		cw.readySince.Store(0)
		w.due = append(w.due, cw)
	}
	return next
}

// writeRing is a round with io_uring: one send per due connection,
// submitted together (in rounds of the ring's size), and further rounds
// for connections whose batch stopped at a bound while more was queued.
// If the ring fails, the connections not yet written go to their writer
// goroutines: their ready marks are cleared, and a writer goroutine drains
// until empty before the pool takes a connection back.
func (w *writeShard) writeRing(list []*writer) {
	w.more = append(w.more[:0], list...)
	for len(w.more) > 0 {
		w.round, w.more = w.more, w.round[:0]
		for j, cw := range w.round {
			if w.ring.Free() == 0 {
				if w.submit(); w.ring == nil {
					handOffAll(w.round[j:], w.more)
					clear(w.round)
					clear(w.more)
					return
				}
			}
			i := len(w.slots) - w.ring.Free()
			cw.ringPrep(w.ring, &w.slots[i], uint64(i))
		}
		w.submit()
		clear(w.round)
		if w.ring == nil {
			handOffAll(w.more)
			clear(w.more)
			return
		}
	}
}

// handOffAll gives each connection to its writer goroutine.
func handOffAll(lists ...[]*writer) {
	for _, l := range lists {
		for _, cw := range l {
			cw.handToGoroutine()
		}
	}
}

// submit sends what is queued on the ring and completes each connection.
func (w *writeShard) submit() {
	if err := w.ring.Submit(w.doneFn); err != nil {
		// The ring failed as a whole (not one socket): the connections it
		// held end with write_failed, and the worker goes on without it.
		w.log.Warn("wsapi: io_uring failed, this write worker goes on with write(2); the connections in the failed submission are closed", "err", err)
		w.metrics.writeWorker(true, -1)
		w.metrics.writeWorker(false, 1)
		for i := range w.slots {
			if cw := w.slots[i].conn; cw != nil {
				cw.ringDone(&w.slots[i], -int32(syscall.EIO))
				w.slots[i].conn = nil
			}
		}
		w.ring.Close()
		w.ring = nil
	}
}

// complete is the ring's completion callback: slot i's send took res.
// A slot whose frame buffer grew past twice the batch bound (a large
// snapshot is always written whole) lets it go, so that the ring's slots
// do not each keep the largest frame they ever held.
func (w *writeShard) complete(i uint64, res int32) {
	slot := &w.slots[i]
	if slot.conn.ringDone(slot, res) {
		w.more = append(w.more, slot.conn)
	}
	if cap(slot.buf) > 2*slot.conn.o.MaxBatchBytes {
		slot.buf = nil
	}
	slot.conn = nil
}

// stopPool stops the write-pool workers, if any, and waits for them.
func (s *Server) stopPool() {
	s.stopOnce.Do(func() {
		if s.poolStop != nil {
			close(s.poolStop)
			s.poolWG.Wait()
		}
	})
}
