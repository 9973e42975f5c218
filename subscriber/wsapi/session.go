package wsapi

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

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

	numCloseReasons = iota + 1
)

var closeReasonNames = [numCloseReasons]string{"", "client_closed", "write_timeout", "write_failed", "read_timeout",
	"message_too_large", "taken_over", "shutdown", "shutdown_timeout", "removed"}

// String returns the reason's metric label.
func (r CloseReason) String() string {
	if int(r) < len(closeReasonNames) {
		return closeReasonNames[r]
	}
	return ""
}

// CloseCodeTakenOver is the websocket close code of a taken-over
// connection.
const CloseCodeTakenOver = 4001

var newline = []byte{'\n'}

// session is one websocket connection. Its reader runs on the HTTP
// handler's goroutine, its writer on its own.
type session struct {
	srv *Server
	ws  *websocket.Conn
	q   *subscriber.Conn
	sub *subscriber.Subscriber // set before run
	tok *Token

	reason     atomic.Uint32 // the CloseReason; the first one set wins
	stopOnce   sync.Once
	stop       chan struct{} // closed: the writer ends now
	flushOnce  sync.Once
	flush      chan struct{} // closed: the writer flushes, closes with 1001 and ends
	readerDone chan struct{} // closed when the reader returned
	kick       chan struct{} // capacity 1: the flusher's wake-up, with a write delay
	ctl        chan struct{} // capacity 1: stop, flush or a ping is due
	pingDue    atomic.Bool

	// reader's own state
	allowance float64   // command tokens available
	last      time.Time // when allowance was computed
}

func newSession(srv *Server, ws *websocket.Conn, tok *Token) *session {
	return &session{srv: srv, ws: ws, q: subscriber.NewConn(), tok: tok,
		stop: make(chan struct{}), flush: make(chan struct{}), readerDone: make(chan struct{}), kick: make(chan struct{}, 1), ctl: make(chan struct{}, 1),
		allowance: float64(srv.o.Limits.CommandBurst), last: time.Now()}
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
	writerDone := make(chan struct{})
	go pprof.Do(context.Background(), pprof.Labels("subscriber", s.sub.ID()), func(context.Context) {
		defer close(writerDone)
		s.writeLoop()
	})
	s.readLoop()
	close(s.readerDone)
	s.end(ClientClosed)
	<-writerDone
	s.srv.o.Hub.Detach(s.sub, s.q)
	s.ws.Close()
	return CloseReason(s.reason.Load())
}

// writeLoop is the connection's only data writer: wait for Ready, drain
// until empty, one websocket message per drain. It closes the socket when
// it returns, which ends the reader.
func (s *session) writeLoop() {
	defer s.ws.Close()
	o := &s.srv.o
	batch := make([]*subscriber.Message, 0, 64)
	// The hot wait is a two-case select (the queue, and ctl for every
	// rarer event): each case costs a channel lock per wake-up, measured
	// at a tenth of the writer's CPU with five cases. Pings are due by a
	// timer that pokes ctl rather than by a ticker channel in the select.
	ping := time.AfterFunc(o.PingInterval, func() { s.pingDue.Store(true); s.poke() })
	defer ping.Stop()
	// The writer waits on the queue's Ready signal, or, with a write
	// delay, on the server's flusher, which passes Ready on at most once
	// per WriteDelay (see Server.flusher).
	wake := s.q.Ready()
	if o.WriteDelay > 0 {
		wake = s.kick
	}
	flushing := false
	for {
		for {
			var nn int
			batch, nn = s.q.Drain(batch[:0], o.MaxBatchMessages, o.MaxBatchBytes)
			if len(batch) == 0 {
				break
			}
			err := s.writeBatch(batch, nn)
			clear(batch)
			if err != nil {
				s.end(writeReason(err))
				return
			}
			if !flushing && isClosed(s.stop) {
				s.finish()
				return
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
			return
		}
		if s.q.IsClosed() {
			s.end(Removed)
			s.finish()
			return
		}
		select {
		case <-wake:
			continue
		case <-s.ctl:
		}
		switch {
		case isClosed(s.stop):
			s.finish()
			return
		case isClosed(s.flush):
			flushing = true
		}
		if s.pingDue.Swap(false) {
			if err := s.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(o.WriteTimeout)); err != nil {
				s.end(writeReason(err))
				return
			}
			ping.Reset(o.PingInterval)
		}
	}
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
}

// finish writes what the close reason calls for before the socket closes.
func (s *session) finish() {
	if CloseReason(s.reason.Load()) == TakenOver {
		s.ws.SetWriteDeadline(time.Now().Add(s.srv.o.WriteTimeout))
		if s.ws.WriteMessage(websocket.TextMessage, appendTakenOver(nil, s.sub.ID())) == nil {
			s.closeWith(CloseCodeTakenOver, "taken over")
		}
	}
}

func (s *session) closeWith(code int, text string) {
	s.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(s.srv.o.WriteTimeout))
}

func writeReason(err error) CloseReason {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return WriteTimeout
	}
	return WriteFailed
}

// writeBatch writes batch (nn notices first, then data) as one websocket
// text message, objects separated by '\n', under the write deadline.
func (s *session) writeBatch(batch []*subscriber.Message, nn int) error {
	o := &s.srv.o
	s.ws.SetWriteDeadline(time.Now().Add(o.WriteTimeout))
	w, err := s.ws.NextWriter(websocket.TextMessage)
	if err != nil {
		return err
	}
	size := 0
	for i, m := range batch {
		if i > 0 {
			w.Write(newline)
		}
		w.Write(m.Data)
		size += len(m.Data) + 1
	}
	if err := w.Close(); err != nil {
		return err
	}
	if m := o.Metrics; m != nil {
		m.queueLen.Observe(float64(len(batch) - nn))
		m.batchBytes.Observe(float64(size))
		for _, msg := range batch[nn:] {
			if !msg.Published.IsZero() {
				m.latency.Observe(time.Since(msg.Published).Seconds())
				break
			}
		}
	}
	return nil
}

// readLoop reads and answers commands until the connection fails.
func (s *session) readLoop() {
	o := &s.srv.o
	lim := o.Limits.MaxMessageBytes
	s.ws.SetReadLimit(int64(16 * lim))
	idle := 2 * o.PingInterval
	s.ws.SetReadDeadline(time.Now().Add(idle))
	s.ws.SetPongHandler(func(string) error { return s.ws.SetReadDeadline(time.Now().Add(idle)) })
	buf := make([]byte, lim+1)
	for {
		_, rd, err := s.ws.NextReader()
		if err != nil {
			s.end(readReason(err))
			return
		}
		s.ws.SetReadDeadline(time.Now().Add(idle))
		n, err := io.ReadFull(rd, buf)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
		case err != nil:
			s.end(readReason(err))
			return
		default: // lim+1 bytes: too large
			if _, err := io.Copy(io.Discard, rd); err != nil {
				s.end(readReason(err))
				return
			}
			s.refuse("", CodeMessageTooLarge, "message longer than limits.max_message_bytes")
			continue
		}
		s.handle(buf[:n])
	}
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

// reply queues a reply on the notice queue: replies are never dropped,
// and the command rate limit bounds them.
func (s *session) reply(b []byte) { s.q.Notify(&subscriber.Message{Data: b}) }

func (s *session) refuse(id string, code Code, msg string) {
	s.srv.o.Metrics.refused(code)
	s.reply(appendError(nil, id, code, msg))
}

// allow takes one command token: CommandsPerSecond sustained, CommandBurst
// at once.
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

// check answers whether the connection may subscribe to st.
func (s *session) check(id string, st venue.Stream) bool {
	o := &s.srv.o
	var err error
	if o.Check != nil {
		err = o.Check(st)
	} else if o.Hub.Feed(st.Venue()) == nil {
		err = errors.New("no such venue")
	}
	if err != nil {
		s.refuse(id, CodeUnknownStream, string(st)+": "+err.Error())
		return false
	}
	if !s.tok.Allows(st) {
		s.refuse(id, CodeUnauthorized, string(st)+": outside this token's scopes")
		return false
	}
	return true
}

// handle answers one client message.
func (s *session) handle(b []byte) {
	cmd, cerr := ParseCommand(b)
	if cerr != nil {
		s.refuse(cerr.ID, cerr.Code, cerr.Message)
		return
	}
	if !s.allow() {
		s.refuse(cmd.ID, CodeRateLimited, "command rate above limits.commands_per_second")
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
			s.refuse(cmd.ID, CodeTooManyStreams, "subscription would pass limits.max_streams_per_connection")
			return
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
	case OpUnsubscribe:
		for _, st := range cmd.Streams {
			hub.Unsubscribe(s.sub, st)
		}
		s.reply(appendAck(nil, cmd.ID, cmd.Streams))
	case OpSnapshot:
		st := cmd.Streams[0]
		if !s.check(cmd.ID, st) {
			return
		}
		if st.Channel() != venue.Level2 {
			s.refuse(cmd.ID, CodeNotLevel2, string(st)+" is not a level2 stream")
			return
		}
		if _, ok := slices.BinarySearch(s.sub.Streams(), st); !ok {
			s.refuse(cmd.ID, CodeNotSubscribed, "not subscribed to "+string(st))
			return
		}
		if !hub.Snapshot(s.sub, st) {
			s.refuse(cmd.ID, CodeNoBook, string(st)+": no book yet")
			return
		}
		s.reply(s.srv.o.snapshotAck(cmd.ID, st))
	}
}
