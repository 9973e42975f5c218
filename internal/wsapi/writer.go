package wsapi

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/rawio"
	"github.com/fanoutd/fanoutd/subscriber"
)

// writer is the write side of one websocket connection.
//
// What it owns: every frame written to the socket (batches of the
// connection's queue, pings, pongs, close frames), the unsent tail of a
// frame the socket did not take (pending), whether a close frame went out
// (after it nothing more is written), the connection's place in a
// write-pool shard, and the writer goroutine's life.
//
// Its lock, mu, is held for every write to the socket and for Drain and
// write together, so batches go out in queue order whoever writes them:
// the writer goroutine, a write-pool worker, or the reader answering a
// ping or a close. mu is taken before the queue's (subscriber.Mailbox)
// lock; a write-pool worker only tries it. stateMu (whether a writer
// goroutine runs) and fdMu (the descriptor an io_uring send names) are
// leaves. docs/lock-order.md has the daemon's whole order.
//
// How it batches: without a write pool (Options.WriteDelay 0), or for a
// connection that asked for low latency (?latency=low, or its token), the
// writer goroutine runs for the connection's life and writes each drain of
// the queue as one websocket message as soon as the queue signals Ready.
// Otherwise a worker of the connection's shard drains and writes it with
// non-blocking writes when it is due (writeShard, flushAt: at once after
// an idle spell, under load an age after the last write that grows with
// the connection's rate up to WriteDelay, scaled by how busy the worker
// is), and
// the writer goroutine runs only while it has work the pool does not do:
// a backed-up socket to finish under the write deadline, a ping, a close.
// An idle connection then has no writer goroutine.
type writer struct {
	sess   *session
	q      *subscriber.Mailbox
	o      *Options
	pooled bool // a write pool writes the connection's batches

	readySince atomic.Int64 // monotime when the queue went from empty to not, unseen by the pool; 0 when none
	lastWrite  atomic.Int64 // monotime of the last write of data (replies and notices alone leave it)
	rate       atomic.Int64 // events a second written, a moving average over writes (observe); the pool's age grows with it

	kick    chan struct{} // capacity 1: a write-pool worker hands the connection to the writer goroutine
	ctl     chan struct{} // capacity 1: stop, flush or a ping is due
	pingDue atomic.Bool
	ping    *time.Timer   // sets pingDue and pokes; stopped until the session runs
	done    chan struct{} // closed when the writer's work is over for good

	// With a write pool, a writer goroutine is started by a token on kick
	// or ctl when none runs (startGoroutine), and ends when it finds
	// neither (park). running says whether one runs, and stays true once
	// the writer's work is over; none starts before the session runs
	// (started).
	stateMu sync.Mutex
	running bool
	started bool

	mu          sync.Mutex
	pending     []byte       // unsent tail of a frame a non-blocking write left; guarded by mu
	byGoroutine bool         // the writer goroutine has the connection (a pending tail, or ending): the pool leaves it alone; guarded by mu
	closeSent   bool         // a close frame was written: nothing more may be; guarded by mu
	sock        rawio.Socket // the socket's descriptor, written under mu
	raw         bool         // sock is set (else every write blocks on net.Conn.Write)

	fdMu     sync.RWMutex // read-locked by a write-pool worker while an io_uring send names sock's descriptor; closeSocket write-locks it
	pool     *writeShard  // the shard serving this connection; nil unless pooled
	shardIdx int          // index in pool.conns; guarded by pool.mu
}

// init sets w up for sess, whose socket is c; lowLatency keeps it out of
// the write pool.
func (w *writer) init(sess *session, c net.Conn, lowLatency bool) {
	w.sess, w.q, w.o, w.pooled = sess, sess.q, &sess.srv.o, sess.srv.shards != nil && !lowLatency
	if w.pooled {
		w.pool = sess.srv.pickShard()
		w.q.OnReady(w.readied)
	}
	w.kick, w.ctl, w.done = make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	w.ping = time.AfterFunc(time.Hour, func() { w.pingDue.Store(true); w.poke() })
	w.ping.Stop()
	w.raw = w.sock.Init(c)
}

// start begins the writer's work when the session runs: without a pool
// the writer goroutine runs from now on; with one, only if a token came
// before (a takeover, a shutdown).
func (w *writer) start() {
	w.ping.Reset(w.o.PingInterval)
	if w.pooled {
		w.pool.add(w)
	}
	w.stateMu.Lock()
	w.started = true
	w.running = !w.pooled || len(w.kick) > 0 || len(w.ctl) > 0
	start := w.running
	w.stateMu.Unlock()
	if start {
		go w.goroutine()
	}
}

// readied is the queue's OnReady: the pool has something to write.
func (w *writer) readied() {
	w.readySince.CompareAndSwap(0, monotime())
	w.pool.wakeUp()
}

// epoch is monotime's zero.
var epoch = time.Now()

// monotime is the time in ns on the monotonic clock, never 0.
func monotime() int64 { return int64(time.Since(epoch)) + 1 }

// stop is the end of the writer's part once its work is done (done
// closed): the ping timer stops and the pool forgets the connection.
func (w *writer) stop() {
	w.ping.Stop()
	if w.pool != nil {
		w.pool.remove(w)
	}
}

// goroutine is the writer goroutine: writeLoop, and once the writer's work
// is over, closing the socket, which ends the reader.
func (w *writer) goroutine() {
	pprof.Do(context.Background(), pprof.Labels("subscriber", w.sess.sub.ID()), func(context.Context) {
		if w.writeLoop() {
			w.keepPoolAway()
			w.sess.closeSocket()
			close(w.done)
		}
	})
}

// startGoroutine starts a writer goroutine, with a write pool, if none
// runs and the session has started. A token is on kick or ctl: the writer running or
// started (here or by start) meets it.
func (w *writer) startGoroutine() {
	if !w.pooled {
		return // the writer runs for the connection's life
	}
	w.stateMu.Lock()
	start := w.started && !w.running
	w.running = w.running || start
	w.stateMu.Unlock()
	if start {
		go w.goroutine()
	}
}

// park ends a write pool's writer goroutine that found no token, unless
// one came meanwhile (then it returns false and the writer goes on): a
// token sent before startGoroutine took wstateMu is seen here, and one sent
// after it finds writing false and starts a writer.
func (w *writer) park() bool {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	if len(w.kick) > 0 || len(w.ctl) > 0 {
		return false
	}
	w.running = false
	return true
}

// writeLoop is the connection's writer. Without a write delay it writes
// every batch: wait for Ready, drain until empty, one websocket message per
// drain. With a write delay a write-pool worker writes the batches (see
// writeShard) and hands the connection to a writer goroutine (kick) only
// when the socket did not take a whole batch, to finish it with blocking
// writes under the write deadline; that writer returns false once it has
// nothing left to do (park). Either way the writer writes the pings and
// the closing frames; it returns true when the connection's writing is
// over.
func (w *writer) writeLoop() bool {
	o := w.o
	batch := make([]*subscriber.Message, 0, 64)
	// The hot wait is a two-case select (the queue, and ctl for every
	// rarer event), since each case costs a channel lock per wake-up; pings
	// poke ctl from a timer rather than adding a ticker case.
	pooled := w.pooled
	wake := w.q.Ready()
	if pooled {
		wake = w.kick
	}
	flushing := false
	for {
		for {
			var n int
			var err error
			batch, n, err = w.writeNext(batch)
			if err != nil {
				w.sess.end(writeReason(err))
				return true
			}
			if n == 0 {
				break
			}
			if !flushing && isClosed(w.sess.stop) {
				w.finish()
				return true
			}
			// A reader that never quite catches up keeps this loop busy:
			// its pings go out between batches, not only once it is idle.
			if w.pingDue.Swap(false) {
				if err := w.control(websocket.PingMessage, nil, o.WriteTimeout, true); err != nil {
					w.sess.end(writeReason(err))
					return true
				}
				w.ping.Reset(o.PingInterval)
			}
		}
		if flushing {
			w.closeWith(websocket.CloseGoingAway, "shutting down")
			// Wait for the client's close frame (or give up) so that
			// closing the socket does not reset what is still in flight.
			t := time.NewTimer(time.Second)
			select {
			case <-w.sess.readerDone:
			case <-w.sess.stop:
			case <-t.C:
			}
			t.Stop()
			return true
		}
		if w.q.IsClosed() {
			w.sess.end(Removed)
			w.finish()
			return true
		}
		if pooled {
			select {
			case <-wake:
				continue
			case <-w.ctl:
			default:
				if w.park() {
					return false
				}
				continue
			}
		} else {
			select {
			case <-wake:
				continue
			case <-w.ctl:
			}
		}
		switch {
		case isClosed(w.sess.stop):
			w.finish()
			return true
		case isClosed(w.sess.flush):
			flushing = true
		}
		if w.pingDue.Swap(false) {
			if err := w.control(websocket.PingMessage, nil, o.WriteTimeout, true); err != nil {
				w.sess.end(writeReason(err))
				return true
			}
			w.ping.Reset(o.PingInterval)
		}
	}
}

// keepPoolAway keeps the write pool away from the connection once its writer
// goroutine has returned.
func (w *writer) keepPoolAway() {
	w.mu.Lock()
	w.byGoroutine = true
	w.mu.Unlock()
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// poke wakes the writer to look at its control state.
func (w *writer) poke() {
	select {
	case w.ctl <- struct{}{}:
	default:
	}
	w.startGoroutine()
}

// handToGoroutine wakes the writer goroutine to write what the pool could not.
func (w *writer) handToGoroutine() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
	w.startGoroutine()
}

// finish writes what the close reason calls for before the socket closes.
func (w *writer) finish() {
	switch CloseReason(w.sess.reason.Load()) {
	case TakenOver:
		if w.control(websocket.TextMessage, appendTakenOver(nil, w.sess.sub.ID()), w.o.WriteTimeout, true) == nil {
			w.closeWith(CloseCodeTakenOver, "taken over")
		}
	case TokenExpired:
		w.closeWith(CloseCodeTokenExpired, "token expired")
	case TokenRevoked:
		w.closeWith(CloseCodeTokenRevoked, "token revoked")
	case UnreadReplies:
		// The socket is likely backed up: the close frame goes out only
		// if it is taken within a second and no frame is half written.
		w.control(websocket.CloseMessage, websocket.FormatCloseMessage(CloseCodeUnreadReplies, "replies not read"), time.Second, false)
	}
}

func (w *writer) closeWith(code int, text string) {
	w.control(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), w.o.WriteTimeout, true)
}

func writeReason(err error) CloseReason {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return WriteTimeout
	}
	return WriteFailed
}

// bufPool holds the frame buffers of writer goroutines while they write,
// so an idle connection holds none (1000 connections would otherwise pin
// up to 64 MiB). Write-pool workers keep their own.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// writeNext is the writer goroutine's write: it finishes a pending frame
// tail, then drains one batch and writes it as one websocket text message
// (nn notices first, then data, objects separated by '\n'), blocking under
// the write deadline if the socket does not take it at once. It returns
// how many messages it wrote; 0 means the queues were empty (and the pool
// may write the connection again).
func (w *writer) writeNext(batch []*subscriber.Message) ([]*subscriber.Message, int, error) {
	o := w.o
	w.mu.Lock()
	if len(w.pending) > 0 {
		if err := w.writeFrame(w.pending, o.WriteTimeout); err != nil {
			w.mu.Unlock()
			return batch, 0, err
		}
		w.pending = w.pending[:0]
	}
	if w.closeSent {
		w.mu.Unlock()
		return batch, 0, nil
	}
	batch, nn := w.q.Drain(batch[:0], o.MaxBatchMessages, o.MaxBatchBytes)
	if len(batch) == 0 {
		w.byGoroutine = false
		w.mu.Unlock()
		return batch, 0, nil
	}
	w.drained(len(batch), nn)
	bp := bufPool.Get().(*[]byte)
	buf := appendBatch((*bp)[:0], batch)
	err := w.writeFrame(buf, o.WriteTimeout)
	w.mu.Unlock()
	*bp = buf
	bufPool.Put(bp)
	n := len(batch)
	if err == nil {
		w.observe(len(batch), nn, len(buf), firstPublished(batch[nn:]))
		w.sess.noteWritten(batch[nn:])
	}
	clear(batch)
	return batch, n, err
}

// poolWrite is a write-pool worker's turn at the connection, whose queue
// signalled Ready: it drains and writes batches until the queues are
// empty, with non-blocking writes only, so a worker never waits for a
// socket. What a write leaves (the socket's buffer is full) becomes the
// pending tail and the connection goes to its writer goroutine, as it
// does when that goroutine is busy or ending. batch and buf are the
// worker's scratch space, returned for reuse.
func (w *writer) poolWrite(batch []*subscriber.Message, buf []byte) ([]*subscriber.Message, []byte) {
	if !w.mu.TryLock() {
		w.handToGoroutine()
		return batch, buf
	}
	if w.byGoroutine || w.closeSent || !w.raw {
		w.mu.Unlock()
		w.handToGoroutine()
		return batch, buf
	}
	o := w.o
	for {
		var nn int
		batch, nn = w.q.Drain(batch[:0], o.MaxBatchMessages, o.MaxBatchBytes)
		if len(batch) == 0 {
			break
		}
		w.drained(len(batch), nn)
		buf = appendBatch(buf[:0], batch)
		n, err := w.sock.TryWrite(buf)
		if err != nil {
			w.byGoroutine = true
			w.mu.Unlock()
			clear(batch)
			w.sess.end(writeReason(err))
			return batch, buf
		}
		w.observe(len(batch), nn, len(buf), firstPublished(batch[nn:]))
		w.sess.noteWritten(batch[nn:])
		clear(batch)
		if n < len(buf) {
			w.pending = append(w.pending[:0], buf[n:]...)
			w.byGoroutine = true
			w.mu.Unlock()
			w.handToGoroutine()
			return batch, buf
		}
	}
	w.mu.Unlock()
	return batch, buf
}

// ringPrep is a write-pool worker's turn at the connection with an
// io_uring: it drains one batch into slot and queues its send on r, as
// poolWrite would write it, and keeps mu (and fdMu read-locked) until
// ringDone. It returns false, with nothing queued and no lock kept, if
// the queues were empty or the connection is its writer goroutine'w.
func (w *writer) ringPrep(r *rawio.Ring, slot *ringSlot, userData uint64) bool {
	if !w.mu.TryLock() {
		w.handToGoroutine()
		return false
	}
	if w.byGoroutine || w.closeSent || !w.raw || !w.fdMu.TryRLock() {
		w.mu.Unlock()
		w.handToGoroutine()
		return false
	}
	o := w.o
	var nn int
	slot.batch, nn = w.q.Drain(slot.batch[:0], o.MaxBatchMessages, o.MaxBatchBytes)
	if len(slot.batch) == 0 {
		w.fdMu.RUnlock()
		w.mu.Unlock()
		return false
	}
	w.drained(len(slot.batch), nn)
	slot.buf = appendBatch(slot.buf[:0], slot.batch)
	slot.conn, slot.msgs, slot.notices = w, len(slot.batch), nn
	slot.published = firstPublished(slot.batch[nn:])
	// What Drain left (it stopped at a bound) is written in another round:
	// no Ready signal comes for a queue that never went empty. (Anything
	// queued after Drain emptied the queue also signalled Ready, and is
	// then met by an empty Drain next tick.)
	slot.more = w.q.Queued() > 0
	w.sess.noteWritten(slot.batch[nn:])
	clear(slot.batch)
	r.Send(w.sock.FD(), slot.buf, userData)
	return true
}

// ringDone completes ringPrep's send, which took res bytes (or failed
// with errno -res), the way poolWrite completes a write(2). It releases
// the locks and returns whether the connection has more queued for
// another turn.
func (w *writer) ringDone(slot *ringSlot, res int32) bool {
	w.fdMu.RUnlock()
	n := int(res)
	if res < 0 {
		n = 0
		if errno := syscall.Errno(-res); errno != syscall.EAGAIN && errno != syscall.EINTR {
			w.byGoroutine = true
			w.mu.Unlock()
			w.sess.end(writeReason(&net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("send", errno)}))
			return false
		}
	}
	w.observe(slot.msgs, slot.notices, len(slot.buf), slot.published)
	if n < len(slot.buf) {
		w.pending = append(w.pending[:0], slot.buf[n:]...)
		w.byGoroutine = true
		w.mu.Unlock()
		w.handToGoroutine()
		return false
	}
	w.mu.Unlock()
	return slot.more
}

// rateWeight is the inverse weight of a write's sample in a connection's
// rate: a change of rate is seen within a few writes.
const rateWeight = 4

// ringSlot is one connection's send in a write-pool worker's ring.
type ringSlot struct {
	conn          *writer
	batch         []*subscriber.Message
	buf           []byte // the frame; the kernel reads it until ringDone
	msgs, notices int
	published     time.Time
	more          bool
}

// firstPublished returns the publish time of the first data message
// that has one.
func firstPublished(data []*subscriber.Message) time.Time {
	for _, msg := range data {
		if !msg.Published.IsZero() {
			return msg.Published
		}
	}
	return time.Time{}
}

// drained records, for the flush policy, a batch of msgs messages (nn of
// them notices) about to be written: its time and the connection's rate
// (the data messages over the time since the last write, averaged over
// writes with weight 1/rateWeight). It is called before the write, so an
// event queued once the peer can read this batch is timed from it.
func (w *writer) drained(msgs, nn int) {
	if msgs <= nn {
		return
	}
	now := monotime()
	if prev := w.lastWrite.Swap(now); prev != 0 {
		sample := int64(msgs-nn) * int64(time.Second) / max(now-prev, int64(time.Microsecond))
		r := w.rate.Load()
		w.rate.Store(r + (sample-r)/rateWeight)
	}
}

// observe records a written batch of msgs messages (nn of them notices)
// in a frame of frameLen bytes in the metrics.
func (w *writer) observe(msgs, nn, frameLen int, published time.Time) {
	m := w.o.Metrics
	if m == nil {
		return
	}
	m.queueLen.Observe(float64(msgs - nn))
	m.batchBytes.Observe(float64(frameLen - frameHeaderLen(frameLen)))
	if !published.IsZero() {
		m.latency.Observe(time.Since(published).Seconds())
	}
}

// control writes one frame of type op (a ping, pong, close or the
// taken-over text message) under mu, with timeout as the write deadline.
// A pending frame tail is written first if flushPending, else the frame
// is skipped (the reader answering a ping must not wait for a backed-up
// socket). Nothing is written after a close frame.
func (w *writer) control(op int, payload []byte, timeout time.Duration, flushPending bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closeSent {
		return nil
	}
	if len(w.pending) > 0 {
		if !flushPending {
			return nil
		}
		if err := w.writeFrame(w.pending, timeout); err != nil {
			return err
		}
		w.pending = w.pending[:0]
	}
	if op == websocket.CloseMessage {
		w.closeSent, w.byGoroutine = true, true
	}
	b := appendFrameHeader(make([]byte, 0, 10+len(payload)), byte(op), len(payload))
	return w.writeFrame(append(b, payload...), timeout)
}

// writeFrame writes b, trying a non-blocking write first: a write
// deadline is set (and cleared) only when the socket does not take all of
// b at once, so the common write costs one system call, not three. The
// deadline is timeout after the socket last accepted bytes, not after the
// write began: a slow reader that keeps reading is not cut off mid-batch.
// mu must be held.
func (w *writer) writeFrame(b []byte, timeout time.Duration) error {
	c := w.sess.ws.NetConn()
	if !w.raw {
		c.SetWriteDeadline(time.Now().Add(timeout))
		_, err := c.Write(b)
		c.SetWriteDeadline(time.Time{})
		return err
	}
	n, err := w.sock.TryWrite(b)
	if err != nil || n == len(b) {
		return err
	}
	defer c.SetWriteDeadline(time.Time{}) // a later non-blocking write must not see an expired deadline
	for b = b[n:]; len(b) > 0; b = b[n:] {
		c.SetWriteDeadline(time.Now().Add(timeout))
		if n, err = w.sock.WaitWrite(b); err != nil {
			return err
		}
	}
	return nil
}

// appendBatch appends batch as one unmasked, final websocket text frame,
// the objects separated by '\n'.
func appendBatch(dst []byte, batch []*subscriber.Message) []byte {
	n := len(batch) - 1
	for _, m := range batch {
		n += len(m.Data)
	}
	dst = slices.Grow(dst, 10+n)
	dst = appendFrameHeader(dst, websocket.TextMessage, n)
	for i, m := range batch {
		if i > 0 {
			dst = append(dst, '\n')
		}
		dst = append(dst, m.Data...)
	}
	return dst
}

// appendFrameHeader appends the header of a final, unmasked (server to
// client) frame of op with an n-byte payload (RFC 6455, section 5.2).
func appendFrameHeader(dst []byte, op byte, n int) []byte {
	dst = append(dst, 0x80|op)
	switch {
	case n <= 125:
		return append(dst, byte(n))
	case n <= 0xffff:
		return append(dst, 126, byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, 127), uint64(n))
}

// frameHeaderLen returns the header length of a frame of frameLen bytes
// in all.
func frameHeaderLen(frameLen int) int {
	switch {
	case frameLen <= 2+125:
		return 2
	case frameLen <= 4+0xffff:
		return 4
	}
	return 10
}
