package wsapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/internal/rawio"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// CloseReason says why a connection ended. The zero CloseReason means
// "not closed".
type CloseReason uint8

// Close reasons, as they appear in metrics (fanoutd_closes_total{reason})
// and logs.
const (
	ClientClosed    CloseReason = iota + 1 // the client closed, or its socket failed on read
	WriteTimeout                           // the socket accepted nothing for the write deadline
	WriteFailed                            // a write failed for another reason
	ReadTimeout                            // nothing from the client (not even a pong) for two ping intervals
	MessageTooLarge                        // a client message past 16 × limits.max_message_bytes (closed with 1009)
	TakenOver                              // another connection attached under the name (closed with 4001)
	Shutdown                               // the daemon shut down: flushed, closed with 1001
	ShutdownTimeout                        // the daemon shut down before the flush finished
	Removed                                // the daemon removed the subscriber
	UnreadReplies                          // replies past limits.max_reply_bytes queued unread (closed with 4002)
	InternalError                          // serving the connection panicked (logged with the stack); the daemon goes on
	TokenExpired                           // the connection's token (a JWT) passed its exp unrefreshed (closed with 4003)
	TokenRevoked                           // a reload removed the connection's token or key, or narrowed its scopes (closed with 4004)

	numCloseReasons = iota + 1
)

var closeReasonNames = [numCloseReasons]string{"", "client_closed", "write_timeout", "write_failed", "read_timeout",
	"message_too_large", "taken_over", "shutdown", "shutdown_timeout", "removed", "unread_replies", "internal_error",
	"token_expired", "token_revoked"}

// String returns the reason's metric label.
func (r CloseReason) String() string {
	if int(r) < len(closeReasonNames) {
		return closeReasonNames[r]
	}
	return ""
}

// Websocket close codes of this server's own.
const (
	CloseCodeTakenOver     = 4001 // another connection attached under the name
	CloseCodeUnreadReplies = 4002 // the client does not read the replies to its commands
	CloseCodeTokenExpired  = 4003 // the token's exp passed without a refresh
	CloseCodeTokenRevoked  = 4004 // a configuration reload removed the token (or its key), or narrowed its scopes
)

// session is one websocket connection. Its reader runs on a goroutine of
// its own. Its writer goroutine runs for the connection's life without a
// write pool; with one, it runs only while it has work (a backed-up socket
// to finish, a ping, a close), so an idle connection has one goroutine.
type session struct {
	srv *Server
	ws  *websocket.Conn
	q   *subscriber.Mailbox
	sub *subscriber.Subscriber    // set before run, under Server.mu (TakeOver reads it from another goroutine)
	tok atomic.Pointer[api.Token] // replaced by a refresh or a reload
	exp expiry                    // the token's clock (a JWT's exp)

	reason     atomic.Uint32 // the CloseReason; the first one set wins
	stopOnce   sync.Once
	stop       chan struct{} // closed: the writer ends now
	flushOnce  sync.Once
	flush      chan struct{} // closed: the writer flushes, closes with 1001 and ends
	readerDone chan struct{} // closed when the reader returned
	kick       chan struct{} // capacity 1: a write-pool worker hands the connection to its writer goroutine
	ctl        chan struct{} // capacity 1: stop, flush or a ping is due
	pingDue    atomic.Bool
	ping       *time.Timer   // sets pingDue and pokes; stopped until run
	writerDone chan struct{} // closed when the writer's work is over for good

	// With a write pool, a writer goroutine is started by a token on kick
	// or ctl when none runs (startWriter), and ends when it finds neither
	// (park). writing says whether one runs, and stays true once the
	// writer's work is over; none starts before run (started).
	wstateMu sync.Mutex
	writing  bool
	started  bool
	raw      bool         // sock is set: the socket has a descriptor for non-blocking writes (else every write blocks)
	fdMu     sync.RWMutex // read-locked by a write-pool worker while an io_uring send names sock's descriptor; closeSocket write-locks it
	pool     *writeShard  // the write-pool shard serving this connection; nil without a write delay

	// wmu is held for every write to the socket and for Drain+write
	// together, so batches go out in queue order whoever writes them (the
	// connection's writer goroutine, a write-pool worker, or the reader
	// answering a ping or a close).
	wmu       sync.Mutex
	pending   []byte       // unsent tail of a frame a non-blocking write left; guarded by wmu
	owned     bool         // the writer goroutine is writing (pending bytes, or ending); the pool leaves the connection alone; guarded by wmu
	closeSent bool         // a close frame was written: nothing more may be; guarded by wmu
	sock      rawio.Socket // the socket's descriptor, written under wmu
	shardIdx  int          // index in pool.sessions; guarded by pool.mu

	// A named subscriber's connection records the last seq written per
	// stream (nil for an ephemeral one), for the cluster's record.
	connID  string
	wrMu    sync.Mutex // protects written
	written map[venue.Stream]uint64

	// reader's own state
	allowance float64   // command tokens available
	last      time.Time // when allowance was computed
}

func newSession(srv *Server, ws *websocket.Conn, tok *api.Token) *session {
	s := &session{srv: srv, ws: ws, q: subscriber.NewMailbox(),
		stop: make(chan struct{}), flush: make(chan struct{}), readerDone: make(chan struct{}), kick: make(chan struct{}, 1), ctl: make(chan struct{}, 1),
		writerDone: make(chan struct{}), allowance: float64(srv.o.Limits.CommandBurst), last: time.Now()}
	s.tok.Store(tok)
	s.exp = expiry{lead: srv.o.ExpiringNotice, expire: func() { s.end(TokenExpired) },
		// A daemon notice, on the notice path (not a reply: never dropped);
		// at most one per refresh, which the command rate bounds.
		warn: func(exp time.Time) { s.q.Notify(&subscriber.Message{Data: appendTokenExpiring(nil, exp, time.Now())}) }}
	s.ping = time.AfterFunc(time.Hour, func() { s.pingDue.Store(true); s.poke() })
	s.ping.Stop()
	s.raw = s.sock.Init(ws.NetConn())
	// Every frame is written by this package under wmu (see writeFrame),
	// so gorilla's default handlers, which write through gorilla's own
	// lock, are replaced by ones that write under wmu. A pong or a close
	// echo is skipped while a frame's tail is pending (the socket is
	// backed up): the client's ping is answered by the next one.
	ws.SetPingHandler(func(data string) error {
		s.control(websocket.PongMessage, []byte(data), time.Second, false)
		return nil
	})
	ws.SetCloseHandler(func(code int, _ string) error {
		s.control(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Second, false)
		return nil
	})
	return s
}

// end records r (unless a reason is already set) and stops the writer.
func (s *session) end(r CloseReason) {
	s.reason.CompareAndSwap(0, uint32(r))
	s.stopOnce.Do(func() { close(s.stop) })
	s.poke()
}

// beginFlush asks the writer to flush and close with 1001.
func (s *session) beginFlush() {
	s.reason.CompareAndSwap(0, uint32(Shutdown))
	s.flushOnce.Do(func() { close(s.flush) })
	s.poke()
}

// run serves the connection until it ends, then detaches the subscriber
// (an ephemeral one is removed everywhere; a named one keeps its
// subscriptions) and returns why it ended.
func (s *session) run() CloseReason {
	s.ping.Reset(s.srv.o.PingInterval)
	if tok := s.tok.Load(); tok != nil {
		s.exp.set(tok.Expires)
	}
	if s.srv.shards != nil {
		s.srv.addToShard(s)
	}
	// Without a pool the writer runs from now on; with one, only if a
	// token came before run (a takeover, a shutdown).
	s.wstateMu.Lock()
	s.started = true
	s.writing = s.srv.shards == nil || len(s.kick) > 0 || len(s.ctl) > 0
	start := s.writing
	s.wstateMu.Unlock()
	if start {
		go s.writer()
	}
	s.readLoopRecovered()
	close(s.readerDone)
	s.end(ClientClosed)
	if CloseReason(s.reason.Load()) == UnreadReplies {
		// The writer may be blocked on a socket the client does not
		// read: it has a second for the close frame, not the write
		// deadline.
		t := time.AfterFunc(time.Second, s.closeSocket)
		defer t.Stop()
	}
	<-s.writerDone
	s.ping.Stop()
	s.exp.stop()
	if s.pool != nil {
		s.pool.remove(s)
	}
	if s.srv.o.Hub.Detach(s.sub, s.q) && s.srv.o.NamedTTL > 0 {
		s.srv.o.Hub.ExpireAfter(s.sub, s.srv.o.NamedTTL)
	}
	s.closeSocket()
	return CloseReason(s.reason.Load())
}

// readLoopRecovered runs readLoop. A panic while serving the client's
// messages ends this connection, logged with its stack, not the daemon
// (the reader runs outside net/http's handler, whose recover does not
// cover it).
func (s *session) readLoopRecovered() {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			if p, ok := r.(commandPanic); ok {
				r, stack = p.value, p.stack
			}
			s.srv.log.Error("wsapi: panic serving a connection; closing it", "panic", r, "stack", string(stack))
			s.end(InternalError)
		}
	}()
	s.readLoop()
}

// commandPanic carries a panic of a command's goroutine, with its stack,
// to the reader's recovery.
type commandPanic struct {
	value any
	stack []byte
}

// closeSocket closes the connection's socket, once no io_uring send that
// names its descriptor is in flight (a descriptor number closed under a
// queued send could be reused by another connection's socket before the
// kernel reads it).
func (s *session) closeSocket() {
	s.fdMu.Lock()
	defer s.fdMu.Unlock()
	s.ws.Close()
}

// writer is the writer goroutine: writeLoop, and once the writer's work
// is over, closing the socket, which ends the reader.
func (s *session) writer() {
	pprof.Do(context.Background(), pprof.Labels("subscriber", s.sub.ID()), func(context.Context) {
		if s.writeLoop() {
			s.release()
			s.closeSocket()
			close(s.writerDone)
		}
	})
}

// startWriter starts a writer goroutine, with a write pool, if none runs
// and run has begun. A token is on kick or ctl: the writer running or
// started (here or by run) meets it.
func (s *session) startWriter() {
	if s.srv.shards == nil {
		return // the writer runs for the connection's life
	}
	s.wstateMu.Lock()
	start := s.started && !s.writing
	s.writing = s.writing || start
	s.wstateMu.Unlock()
	if start {
		go s.writer()
	}
}

// park ends a write pool's writer goroutine that found no token, unless
// one came meanwhile (then it returns false and the writer goes on): a
// token sent before startWriter took wstateMu is seen here, and one sent
// after it finds writing false and starts a writer.
func (s *session) park() bool {
	s.wstateMu.Lock()
	defer s.wstateMu.Unlock()
	if len(s.kick) > 0 || len(s.ctl) > 0 {
		return false
	}
	s.writing = false
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
func (s *session) writeLoop() bool {
	o := &s.srv.o
	batch := make([]*subscriber.Message, 0, 64)
	// The hot wait is a two-case select (the queue, and ctl for every
	// rarer event), since each case costs a channel lock per wake-up; pings
	// poke ctl from a timer rather than adding a ticker case.
	pooled := s.srv.shards != nil
	wake := s.q.Ready()
	if pooled {
		wake = s.kick
	}
	flushing := false
	for {
		for {
			var n int
			var err error
			batch, n, err = s.writeNext(batch)
			if err != nil {
				s.end(writeReason(err))
				return true
			}
			if n == 0 {
				break
			}
			if !flushing && isClosed(s.stop) {
				s.finish()
				return true
			}
			// A reader that never quite catches up keeps this loop busy:
			// its pings go out between batches, not only once it is idle.
			if s.pingDue.Swap(false) {
				if err := s.control(websocket.PingMessage, nil, o.WriteTimeout, true); err != nil {
					s.end(writeReason(err))
					return true
				}
				s.ping.Reset(o.PingInterval)
			}
		}
		if flushing {
			s.closeWith(websocket.CloseGoingAway, "shutting down")
			// Wait for the client's close frame (or give up) so that
			// closing the socket does not reset what is still in flight.
			t := time.NewTimer(time.Second)
			select {
			case <-s.readerDone:
			case <-s.stop:
			case <-t.C:
			}
			t.Stop()
			return true
		}
		if s.q.IsClosed() {
			s.end(Removed)
			s.finish()
			return true
		}
		if pooled {
			select {
			case <-wake:
				continue
			case <-s.ctl:
			default:
				if s.park() {
					return false
				}
				continue
			}
		} else {
			select {
			case <-wake:
				continue
			case <-s.ctl:
			}
		}
		switch {
		case isClosed(s.stop):
			s.finish()
			return true
		case isClosed(s.flush):
			flushing = true
		}
		if s.pingDue.Swap(false) {
			if err := s.control(websocket.PingMessage, nil, o.WriteTimeout, true); err != nil {
				s.end(writeReason(err))
				return true
			}
			s.ping.Reset(o.PingInterval)
		}
	}
}

// release keeps the write pool away from the connection once its writer
// goroutine has returned.
func (s *session) release() {
	s.wmu.Lock()
	s.owned = true
	s.wmu.Unlock()
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
func (s *session) poke() {
	select {
	case s.ctl <- struct{}{}:
	default:
	}
	s.startWriter()
}

// handOff wakes the writer goroutine to write what the pool could not.
func (s *session) handOff() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
	s.startWriter()
}

// finish writes what the close reason calls for before the socket closes.
func (s *session) finish() {
	switch CloseReason(s.reason.Load()) {
	case TakenOver:
		if s.control(websocket.TextMessage, appendTakenOver(nil, s.sub.ID()), s.srv.o.WriteTimeout, true) == nil {
			s.closeWith(CloseCodeTakenOver, "taken over")
		}
	case TokenExpired:
		s.closeWith(CloseCodeTokenExpired, "token expired")
	case TokenRevoked:
		s.closeWith(CloseCodeTokenRevoked, "token revoked")
	case UnreadReplies:
		// The socket is likely backed up: the close frame goes out only
		// if it is taken within a second and no frame is half written.
		s.control(websocket.CloseMessage, websocket.FormatCloseMessage(CloseCodeUnreadReplies, "replies not read"), time.Second, false)
	}
}

func (s *session) closeWith(code int, text string) {
	s.control(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), s.srv.o.WriteTimeout, true)
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
func (s *session) writeNext(batch []*subscriber.Message) ([]*subscriber.Message, int, error) {
	o := &s.srv.o
	s.wmu.Lock()
	if len(s.pending) > 0 {
		if err := s.writeFrame(s.pending, o.WriteTimeout); err != nil {
			s.wmu.Unlock()
			return batch, 0, err
		}
		s.pending = s.pending[:0]
	}
	if s.closeSent {
		s.wmu.Unlock()
		return batch, 0, nil
	}
	batch, nn := s.q.Drain(batch[:0], o.MaxBatchMessages, o.MaxBatchBytes)
	if len(batch) == 0 {
		s.owned = false
		s.wmu.Unlock()
		return batch, 0, nil
	}
	bp := bufPool.Get().(*[]byte)
	buf := appendBatch((*bp)[:0], batch)
	err := s.writeFrame(buf, o.WriteTimeout)
	s.wmu.Unlock()
	*bp = buf
	bufPool.Put(bp)
	n := len(batch)
	if err == nil {
		s.observe(len(batch), nn, len(buf), firstPublished(batch[nn:]))
		s.noteWritten(batch[nn:])
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
func (s *session) poolWrite(batch []*subscriber.Message, buf []byte) ([]*subscriber.Message, []byte) {
	if !s.wmu.TryLock() {
		s.handOff()
		return batch, buf
	}
	if s.owned || s.closeSent || !s.raw {
		s.wmu.Unlock()
		s.handOff()
		return batch, buf
	}
	o := &s.srv.o
	for {
		var nn int
		batch, nn = s.q.Drain(batch[:0], o.MaxBatchMessages, o.MaxBatchBytes)
		if len(batch) == 0 {
			break
		}
		buf = appendBatch(buf[:0], batch)
		n, err := s.sock.TryWrite(buf)
		if err != nil {
			s.owned = true
			s.wmu.Unlock()
			clear(batch)
			s.end(writeReason(err))
			return batch, buf
		}
		s.observe(len(batch), nn, len(buf), firstPublished(batch[nn:]))
		s.noteWritten(batch[nn:])
		clear(batch)
		if n < len(buf) {
			s.pending = append(s.pending[:0], buf[n:]...)
			s.owned = true
			s.wmu.Unlock()
			s.handOff()
			return batch, buf
		}
	}
	s.wmu.Unlock()
	return batch, buf
}

// ringPrep is a write-pool worker's turn at the connection with an
// io_uring: it drains one batch into slot and queues its send on r, as
// poolWrite would write it, and keeps wmu (and fdMu read-locked) until
// ringDone. It returns false, with nothing queued and no lock kept, if
// the queues were empty or the connection is its writer goroutine's.
func (s *session) ringPrep(r *rawio.Ring, slot *ringSlot, userData uint64) bool {
	if !s.wmu.TryLock() {
		s.handOff()
		return false
	}
	if s.owned || s.closeSent || !s.raw || !s.fdMu.TryRLock() {
		s.wmu.Unlock()
		s.handOff()
		return false
	}
	o := &s.srv.o
	var nn int
	slot.batch, nn = s.q.Drain(slot.batch[:0], o.MaxBatchMessages, o.MaxBatchBytes)
	if len(slot.batch) == 0 {
		s.fdMu.RUnlock()
		s.wmu.Unlock()
		return false
	}
	slot.buf = appendBatch(slot.buf[:0], slot.batch)
	slot.sess, slot.msgs, slot.notices = s, len(slot.batch), nn
	slot.published = firstPublished(slot.batch[nn:])
	// What Drain left (it stopped at a bound) is written in another round:
	// no Ready signal comes for a queue that never went empty. (Anything
	// queued after Drain emptied the queue also signalled Ready, and is
	// then met by an empty Drain next tick.)
	slot.more = s.q.Queued() > 0
	s.noteWritten(slot.batch[nn:])
	clear(slot.batch)
	r.Send(s.sock.FD(), slot.buf, userData)
	return true
}

// ringDone completes ringPrep's send, which took res bytes (or failed
// with errno -res), the way poolWrite completes a write(2). It releases
// the locks and returns whether the connection has more queued for
// another turn.
func (s *session) ringDone(slot *ringSlot, res int32) bool {
	s.fdMu.RUnlock()
	n := int(res)
	if res < 0 {
		n = 0
		if errno := syscall.Errno(-res); errno != syscall.EAGAIN && errno != syscall.EINTR {
			s.owned = true
			s.wmu.Unlock()
			s.end(writeReason(&net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("send", errno)}))
			return false
		}
	}
	s.observe(slot.msgs, slot.notices, len(slot.buf), slot.published)
	if n < len(slot.buf) {
		s.pending = append(s.pending[:0], slot.buf[n:]...)
		s.owned = true
		s.wmu.Unlock()
		s.handOff()
		return false
	}
	s.wmu.Unlock()
	return slot.more
}

// ringSlot is one connection's send in a write-pool worker's ring.
type ringSlot struct {
	sess          *session
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

// observe records a written batch of msgs messages (nn of them notices)
// in a frame of frameLen bytes in the metrics.
func (s *session) observe(msgs, nn, frameLen int, published time.Time) {
	m := s.srv.o.Metrics
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
// taken-over text message) under wmu, with timeout as the write deadline.
// A pending frame tail is written first if flushPending, else the frame
// is skipped (the reader answering a ping must not wait for a backed-up
// socket). Nothing is written after a close frame.
func (s *session) control(op int, payload []byte, timeout time.Duration, flushPending bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closeSent {
		return nil
	}
	if len(s.pending) > 0 {
		if !flushPending {
			return nil
		}
		if err := s.writeFrame(s.pending, timeout); err != nil {
			return err
		}
		s.pending = s.pending[:0]
	}
	if op == websocket.CloseMessage {
		s.closeSent, s.owned = true, true
	}
	b := appendFrameHeader(make([]byte, 0, 10+len(payload)), byte(op), len(payload))
	return s.writeFrame(append(b, payload...), timeout)
}

// writeFrame writes b, trying a non-blocking write first: a write
// deadline is set (and cleared) only when the socket does not take all of
// b at once, so the common write costs one system call, not three. The
// deadline is timeout after the socket last accepted bytes, not after the
// write began: a slow reader that keeps reading is not cut off mid-batch.
// wmu must be held.
func (s *session) writeFrame(b []byte, timeout time.Duration) error {
	c := s.ws.NetConn()
	if !s.raw {
		c.SetWriteDeadline(time.Now().Add(timeout))
		_, err := c.Write(b)
		c.SetWriteDeadline(time.Time{})
		return err
	}
	n, err := s.sock.TryWrite(b)
	if err != nil || n == len(b) {
		return err
	}
	defer c.SetWriteDeadline(time.Time{}) // a later non-blocking write must not see an expired deadline
	for b = b[n:]; len(b) > 0; b = b[n:] {
		c.SetWriteDeadline(time.Now().Add(timeout))
		if n, err = s.sock.WaitWrite(b); err != nil {
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

// readLoop reads and answers commands until the connection fails.
func (s *session) readLoop() {
	o := &s.srv.o
	lim := o.Limits.MaxMessageBytes
	s.ws.SetReadLimit(int64(16 * lim))
	idle := 2 * o.PingInterval
	s.ws.SetReadDeadline(time.Now().Add(idle))
	s.ws.SetPongHandler(func(string) error { return s.ws.SetReadDeadline(time.Now().Add(idle)) })
	for {
		_, rd, err := s.ws.NextReader()
		if err != nil {
			s.end(readReason(err))
			return
		}
		s.ws.SetReadDeadline(time.Now().Add(idle))
		// The message buffer is the server's, taken for one message: an
		// idle connection holds none.
		bp := s.srv.readBufs.Get().(*[]byte)
		err = s.readMessage(rd, (*bp)[:lim+1])
		s.srv.readBufs.Put(bp)
		if err != nil {
			s.end(readReason(err))
			return
		}
		if isClosed(s.stop) { // the replies overflowed, or the writer ended
			return
		}
	}
}

// readMessage reads one client message into buf (limits.max_message_bytes
// plus one) and answers it, or refuses it if it does not fit. It returns
// the read's error.
func (s *session) readMessage(rd io.Reader, buf []byte) error {
	n, err := io.ReadFull(rd, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		// Answered on a goroutine of its own, which ends with it: parsing
		// and subscribing need a deep stack, and the reader's would stay
		// that deep for the connection's life once grown.
		done := make(chan *commandPanic, 1)
		go func() {
			defer func() {
				var p *commandPanic
				if r := recover(); r != nil {
					p = &commandPanic{r, debug.Stack()}
				}
				done <- p
			}()
			s.handle(buf[:n])
		}()
		if p := <-done; p != nil {
			panic(*p) // to the reader's recovery
		}
	case err != nil:
		return err
	default: // lim+1 bytes: too large
		if _, err := io.Copy(io.Discard, rd); err != nil {
			return err
		}
		if !s.allow() {
			s.refuse("", api.CodeRateLimited, "message rate above limits.commands_per_second")
		} else {
			s.refuse("", api.CodeMessageTooLarge, "message longer than limits.max_message_bytes")
		}
	}
	return nil
}

func readReason(err error) CloseReason {
	var ne net.Error
	switch {
	case errors.Is(err, websocket.ErrReadLimit):
		return MessageTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		return ReadTimeout
	}
	return ClientClosed
}

// reply queues a reply. Replies share the notice queue, to keep their
// order with notices and go ahead of data, but are bounded: a client that
// leaves limits.max_reply_bytes of them unread is closed.
func (s *session) reply(b []byte) {
	if s.q.Reply(&subscriber.Message{Data: b}, s.srv.o.Limits.MaxReplyBytes) == subscriber.Full {
		s.end(UnreadReplies)
	}
}

func (s *session) refuse(id string, code api.Code, msg string) {
	s.srv.o.Metrics.refused(code)
	s.reply(appendError(nil, id, code, msg))
}

// allow takes one token for a client message, a command or not:
// CommandsPerSecond sustained, CommandBurst at once.
func (s *session) allow() bool {
	l := &s.srv.o.Limits
	now := time.Now()
	s.allowance = min(float64(l.CommandBurst), s.allowance+now.Sub(s.last).Seconds()*l.CommandsPerSecond)
	s.last = now
	if s.allowance < 1 {
		return false
	}
	s.allowance--
	return true
}

// check answers whether the connection may subscribe to st, on this node:
// the token's scopes, then Options.Check.
func (s *session) check(id string, st venue.Stream) bool {
	if !s.tok.Load().Allows(st) {
		s.refuse(id, api.CodeUnauthorized, string(st)+": outside this token's scopes")
		return false
	}
	return s.refuseErr(id, st, s.srv.o.check(st))
}

// want asks Options.Want for st, once every check and limit passed.
func (s *session) want(id string, st venue.Stream) bool {
	if s.srv.o.Want == nil {
		return true
	}
	return s.refuseErr(id, st, s.srv.o.Want(st))
}

// refuseErr refuses the command id for st with err's code (unknown_stream
// unless it is an *api.Refusal) and reports whether err was nil.
func (s *session) refuseErr(id string, st venue.Stream, err error) bool {
	if err == nil {
		return true
	}
	code := api.CodeUnknownStream
	if r, ok := errors.AsType[*api.Refusal](err); ok {
		code = r.Code
	}
	s.refuse(id, code, string(st)+": "+err.Error())
	return false
}

// check is Check, or without one whether st's venue has a feed.
func (o *Options) check(st venue.Stream) error {
	if o.Check != nil {
		return o.Check(st)
	}
	if o.Hub.Feed(st.Venue()) == nil {
		return errors.New("no such venue")
	}
	return nil
}

// admits is check and then Want, for a stream taken on its own (an adopted
// name's, a snapshot's).
func (o *Options) admits(st venue.Stream) error {
	if err := o.check(st); err != nil {
		return err
	}
	if o.Want != nil {
		return o.Want(st)
	}
	return nil
}

// derivedKeys are the configuration keys of the derived streams' caps.
var derivedKeys = map[fanout.Cap]string{
	fanout.CapPerToken:  "limits.max_derived_per_token",
	fanout.CapPerSource: "limits.max_derived_per_source",
	fanout.CapWeight:    "limits.max_derived_weight",
}

// refuseDerived refuses a subscription the hub's budget of derived
// streams did not admit (too_many_derived), naming the cap's key.
func (s *session) refuseDerived(id string, err error) {
	msg := err.Error()
	if be, ok := errors.AsType[*fanout.BudgetError](err); ok {
		msg = fmt.Sprintf("%s: subscription would pass %s (%d)", be.Stream, derivedKeys[be.Cap], be.Limit)
	}
	s.refuse(id, api.CodeTooManyDerived, msg)
}

// namesChanged tells the cluster's record of names that a named
// subscriber's subscriptions changed.
func (s *session) namesChanged(changed bool) {
	if changed && s.written != nil && s.srv.o.Names != nil {
		s.srv.o.Names.Changed()
	}
}

// handle answers one client message.
func (s *session) handle(b []byte) {
	cmd, cerr := ParseCommand(b)
	if !s.allow() {
		id := cmd.ID
		if cerr != nil {
			id = cerr.ID
		}
		s.refuse(id, api.CodeRateLimited, "message rate above limits.commands_per_second")
		return
	}
	if cerr != nil {
		s.refuse(cerr.ID, cerr.Code, cerr.Message)
		return
	}
	hub := s.srv.o.Hub
	switch cmd.Op {
	case OpPing:
		s.reply(appendPong(nil, cmd.ID))
	case OpSubscribe:
		have := s.sub.Streams()
		var fresh []venue.Stream
		for _, st := range cmd.Streams {
			if !s.check(cmd.ID, st) {
				return
			}
			if _, ok := slices.BinarySearch(have, st); !ok && !slices.Contains(fresh, st) {
				fresh = append(fresh, st)
			}
		}
		if len(have)+len(fresh) > s.srv.o.Limits.MaxStreams {
			s.refuse(cmd.ID, api.CodeTooManyStreams, "subscription would pass limits.max_streams_per_connection")
			return
		}
		if err := hub.Admit(s.sub, fresh); err != nil {
			s.refuseDerived(cmd.ID, err)
			return
		}
		// Only a command that passed every check and limit asks another
		// node for anything.
		for _, st := range cmd.Streams {
			if !s.want(cmd.ID, st) {
				hub.Release(s.sub, fresh)
				return
			}
		}
		// The ack goes first: it is on the notice queue, which the
		// writer drains ahead of the snapshot queued by Subscribe.
		s.reply(appendAck(nil, cmd.ID, cmd.Streams))
		for _, st := range fresh {
			if err := hub.Subscribe(s.sub, st); err != nil {
				continue // checked above; a venue cannot disappear
			}
			if f := s.srv.o.OnSubscribe; f != nil {
				f(st)
			}
		}
		s.namesChanged(len(fresh) > 0)
	case OpUnsubscribe:
		for _, st := range cmd.Streams {
			hub.Unsubscribe(s.sub, st)
		}
		s.namesChanged(true)
		s.reply(appendAck(nil, cmd.ID, cmd.Streams))
	case OpSnapshot:
		st := cmd.Streams[0]
		if !s.check(cmd.ID, st) || !s.want(cmd.ID, st) {
			return
		}
		if st.Channel() != venue.Level2 {
			s.refuse(cmd.ID, api.CodeNotLevel2, string(st)+" is not a level2 stream")
			return
		}
		if _, ok := slices.BinarySearch(s.sub.Streams(), st); !ok {
			s.refuse(cmd.ID, api.CodeNotSubscribed, "not subscribed to "+string(st))
			return
		}
		if !hub.Snapshot(s.sub, st) {
			s.refuse(cmd.ID, api.CodeNoBook, string(st)+": no book yet")
			return
		}
		s.reply(s.srv.o.snapshotAck(cmd.ID, st))
	case OpRefresh:
		s.refresh(cmd.ID, cmd.Token)
	case OpRecover:
		s.recover(cmd)
	}
}

// refresh replaces the connection's token with secret, which must verify,
// be the same owner's (a JWT's sub; a static token's name) and cover
// every stream subscribed. A refused refresh is an error reply: the
// connection goes on with its token until that one's exp.
func (s *session) refresh(id, secret string) {
	a := s.srv.o.Auth
	if !a.Enabled() {
		s.refuse(id, api.CodeBadRequest, "no tokens are configured: there is nothing to refresh")
		return
	}
	nt, err := a.Verify(secret)
	if err != nil {
		s.refuse(id, api.CodeUnauthenticated, "refresh refused: "+err.Error())
		return
	}
	old := s.tok.Load()
	if owner(nt) != owner(old) {
		s.refuse(id, api.CodeUnauthorized, "refresh refused: the token is not "+owner(old)+"'s")
		return
	}
	for _, st := range s.sub.Streams() {
		if !nt.Allows(st) {
			s.refuse(id, api.CodeUnauthorized, "refresh refused: "+string(st)+" is outside the new token's scopes")
			return
		}
	}
	s.tok.Store(nt)
	s.exp.set(nt.Expires)
	s.reply(appendRefreshed(nil, id, nt.Expires))
}
