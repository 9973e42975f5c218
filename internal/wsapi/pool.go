package wsapi

import (
	"context"
	"log/slog"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/fanoutd/fanoutd/internal/rawio"
	"github.com/fanoutd/fanoutd/subscriber"
)

// writeShard is one write-pool worker and the connections it serves.
//
// Every WriteDelay, a worker drains and writes each of its connections
// whose queue signalled Ready, with non-blocking writes
// (writer.poolWrite), so no goroutine is woken per connection. A
// connection leaves the pool for its own writer goroutine only while its
// socket is backed up, so one slow socket never holds up a worker and the
// write deadline still applies to it. With io_uring, a worker hands all of
// a tick's sends to the kernel in one io_uring_enter (MSG_DONTWAIT: a full
// socket is met as by a non-blocking write). docs/design.md says
// what each saves.
type writeShard struct {
	mu    sync.Mutex // protects conns
	conns []*writer

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
		w := &writeShard{log: s.log, metrics: s.o.Metrics}
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
		go pprof.Do(context.Background(), pprof.Labels("wsapi", "write-pool"), func(context.Context) {
			defer s.poolWG.Done()
			w.run(s.o.WriteDelay, s.poolStop)
			w.metrics.writeWorker(w.ring != nil, -1)
		})
	}
}

// addToShard puts cw in a shard, before its writer goroutine starts.
func (s *Server) addToShard(cw *writer) {
	w := s.shards[int(s.nextShard.Add(1))%len(s.shards)]
	w.mu.Lock()
	cw.pool, cw.shardIdx = w, len(w.conns)
	w.conns = append(w.conns, cw)
	w.mu.Unlock()
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

// run is the worker: every delay, write the connections whose queue went
// from empty to not empty since they were last drained (the queue's
// Ready token). A tick that finds the worker still busy is dropped by the
// ticker, so a worker behind on its work writes larger batches rather than
// falling further behind.
func (w *writeShard) run(delay time.Duration, stop chan struct{}) {
	t := time.NewTicker(delay)
	defer t.Stop()
	var list []*writer
	var batch []*subscriber.Message
	var buf []byte
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		list = append(list[:0], w.conns...)
		w.mu.Unlock()
		if w.ring != nil {
			w.writeRing(list)
			clear(list)
			continue
		}
		for _, cw := range list {
			select {
			case <-cw.q.Ready():
				batch, buf = cw.poolWrite(batch, buf)
			default:
			}
		}
		clear(list)
	}
}

// writeRing is a tick with io_uring: one send per ready connection,
// submitted together (in rounds of the ring's size), and further rounds
// for connections whose batch stopped at a bound while more was queued.
// If the ring fails, the connections not yet written go to their writer
// goroutines: their Ready tokens are spent, and a writer goroutine drains
// until empty before the pool takes a connection back.
func (w *writeShard) writeRing(list []*writer) {
	w.more = w.more[:0]
	for _, cw := range list {
		select {
		case <-cw.q.Ready():
			w.more = append(w.more, cw)
		default:
		}
	}
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
