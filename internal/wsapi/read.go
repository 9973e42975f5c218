package wsapi

import (
	"encoding/binary"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/internal/rawio"
)

// The read side of a session: client frames (RFC 6455, section 5) are
// read and answered by this file's reader rather than by gorilla's, so
// that nothing of it stays with a connection between messages. A
// connection whose bytes were all consumed at a message boundary parks:
// its read buffer goes back to a pool and, with the server's poller, its
// reader goroutine ends until the socket is readable again. Without a
// poller (or where it cannot register a socket) the reader goroutine
// blocks on the socket for the connection's life, as gorilla's did.
//
// What the reader checks and answers is gorilla's: a protocol error (a
// reserved bit, an unknown opcode, an unmasked frame, a fragmented or
// longer than 125-byte control frame, a data frame inside a fragmented
// message, a bad close code) is answered with a 1002 close frame; a
// message past 16 × limits.max_message_bytes with 1009 (MessageTooLarge);
// a ping with a pong, a close with its echo; a pong, like every data
// message, moves the read deadline (two ping intervals, ReadTimeout).

// Reader states (session.rstate).
const (
	rRunning int32 = iota // a goroutine reads, or the session has not parked yet
	rParked               // registered with the poller, armed, no goroutine
	rClosed               // the socket is closing: whoever saw it parked ends the reader
)

// readBufSize is the read buffer a connection holds while it reads.
const readBufSize = 4096

// readBuf is a connection's read buffer while it reads: b[r:w] is read
// and not yet consumed.
type readBuf struct {
	b    [readBufSize]byte
	r, w int
}

var readBufPool = sync.Pool{New: func() any { return new(readBuf) }}

func (rb *readBuf) buffered() int { return rb.w - rb.r }

// need makes at least n (at most readBufSize) bytes buffered.
func (rb *readBuf) need(c net.Conn, n int) error {
	if rb.w-rb.r >= n {
		return nil
	}
	if rb.r > 0 {
		rb.w = copy(rb.b[:], rb.b[rb.r:rb.w])
		rb.r = 0
	}
	for rb.w < n {
		k, err := c.Read(rb.b[rb.w:])
		rb.w += k
		if err != nil && rb.w < n {
			return err
		}
	}
	return nil
}

// fill reads at least one more byte into an empty buffer.
func (rb *readBuf) fill(c net.Conn) error {
	rb.r, rb.w = 0, 0
	return rb.need(c, 1)
}

// frame is a parsed frame header.
type frame struct {
	op  int
	fin bool
	n   int64 // payload length
	key [4]byte
}

// message is the data message being read: its bytes up to
// limits.max_message_bytes+1 in buf, its length so far in total.
type message struct {
	bp    *[]byte // from Server.readBufs; nil until its first frame
	n     int     // bytes in *bp
	total int64   // the message's length over its frames
	open  bool    // a frame without FIN came: continuations follow
}

// errProtocol marks a protocol error already answered with 1002.
type errProtocol string

func (e errProtocol) Error() string { return "websocket: " + string(e) }

// readFrames reads and answers client frames until the connection fails
// or the session stops (it returns true), or, with park, until every byte
// read has been consumed at a message boundary (it returns false, and the
// caller parks the connection).
func (s *session) readFrames(park bool) bool {
	rb := readBufPool.Get().(*readBuf)
	var m message
	over := true
	// Woken by the poller, the socket has something to read (or to
	// fail with): the first read does not wait.
	if err := rb.fill(s.ws.NetConn()); err != nil {
		s.end(readReason(err))
	} else {
		over = s.readFramesInto(rb, &m, park)
	}
	if m.bp != nil {
		s.srv.readBufs.Put(m.bp)
	}
	rb.r, rb.w = 0, 0
	readBufPool.Put(rb)
	return over
}

func (s *session) readFramesInto(rb *readBuf, m *message, park bool) bool {
	c := s.ws.NetConn()
	for {
		if park && !m.open && rb.buffered() == 0 {
			return false
		}
		f, err := s.readHeader(c, rb, m)
		if err == nil {
			err = s.readPayload(c, rb, m, f)
		}
		if err != nil {
			s.end(readReason(err))
			return true
		}
		if isClosed(s.stop) { // the replies overflowed, or the writer ended
			return true
		}
	}
}

// readHeader reads a frame header and checks it as gorilla does.
func (s *session) readHeader(c net.Conn, rb *readBuf, m *message) (frame, error) {
	if err := rb.need(c, 2); err != nil {
		return frame{}, err
	}
	p := rb.b[rb.r : rb.r+2]
	f := frame{op: int(p[0] & 0xf), fin: p[0]&0x80 != 0, n: int64(p[1] & 0x7f)}
	var bad []string
	if p[0]&0x40 != 0 {
		bad = append(bad, "RSV1 set")
	}
	if p[0]&0x20 != 0 {
		bad = append(bad, "RSV2 set")
	}
	if p[0]&0x10 != 0 {
		bad = append(bad, "RSV3 set")
	}
	switch f.op {
	case websocket.CloseMessage, websocket.PingMessage, websocket.PongMessage:
		if f.n > 125 {
			bad = append(bad, "len > 125 for control")
		}
		if !f.fin {
			bad = append(bad, "FIN not set on control")
		}
	case websocket.TextMessage, websocket.BinaryMessage:
		if m.open {
			bad = append(bad, "data before FIN")
		}
	case 0: // continuation
		if !m.open {
			bad = append(bad, "continuation after FIN")
		}
	default:
		bad = append(bad, "bad opcode "+strconv.Itoa(f.op))
	}
	masked := p[1]&0x80 != 0
	if !masked {
		bad = append(bad, "bad MASK")
	}
	if len(bad) > 0 {
		return f, s.protocolError(strings.Join(bad, ", "))
	}
	hl := 2
	switch f.n {
	case 126:
		hl += 2
	case 127:
		hl += 8
	}
	if err := rb.need(c, hl+4); err != nil {
		return f, err
	}
	p = rb.b[rb.r : rb.r+hl+4]
	switch f.n {
	case 126:
		f.n = int64(binary.BigEndian.Uint16(p[2:]))
	case 127:
		f.n = int64(binary.BigEndian.Uint64(p[2:]))
		if f.n < 0 {
			return f, websocket.ErrReadLimit
		}
	}
	copy(f.key[:], p[hl:])
	rb.r += hl + 4
	if f.op == websocket.TextMessage || f.op == websocket.BinaryMessage || f.op == 0 {
		if f.op != 0 { // a message begins: the read deadline moves
			s.touch()
			m.total = 0
		}
		m.total += f.n
		if m.total < 0 {
			return f, websocket.ErrReadLimit
		}
		if m.total > int64(16*s.srv.o.Limits.MaxMessageBytes) {
			s.w.control(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseMessageTooBig, ""), time.Second, false)
			return f, websocket.ErrReadLimit
		}
		m.open = !f.fin
	}
	return f, nil
}

// readPayload reads f's payload: a data frame's into the message (past
// limits.max_message_bytes+1 bytes, discarded), answering the message once
// complete; a control frame's, answered.
func (s *session) readPayload(c net.Conn, rb *readBuf, m *message, f frame) error {
	if f.op > websocket.BinaryMessage { // a control frame: at most 125 bytes
		if err := rb.need(c, int(f.n)); err != nil {
			return err
		}
		payload := rb.b[rb.r : rb.r+int(f.n)]
		rb.r += int(f.n)
		unmask(f.key, 0, payload)
		return s.control1(f.op, payload)
	}
	lim := s.srv.o.Limits.MaxMessageBytes
	if m.bp == nil {
		m.bp, m.n = s.srv.readBufs.Get().(*[]byte), 0
	}
	buf := (*m.bp)[:lim+1]
	for pos := int64(0); pos < f.n; {
		if rb.buffered() == 0 {
			if err := rb.fill(c); err != nil {
				return err
			}
		}
		chunk := rb.b[rb.r:rb.w][:min(int64(rb.buffered()), f.n-pos)]
		rb.r += len(chunk)
		if m.n < len(buf) {
			k := copy(buf[m.n:], chunk)
			unmask(f.key, int(pos&3), buf[m.n:m.n+k])
			m.n += k
		}
		pos += int64(len(chunk))
	}
	if m.open {
		return nil
	}
	n := m.n
	defer func() {
		s.srv.readBufs.Put(m.bp)
		m.bp, m.n = nil, 0
	}()
	if n > lim {
		if !s.allow() {
			s.refuse("", api.CodeRateLimited, "message rate above limits.commands_per_second")
		} else {
			s.refuse("", api.CodeMessageTooLarge, "message longer than limits.max_message_bytes")
		}
		return nil
	}
	s.answer(buf[:n])
	return nil
}

// control1 answers a control frame: a pong moves the read deadline, a
// ping is answered with a pong, a close with its echo (and ends the
// read).
func (s *session) control1(op int, payload []byte) error {
	switch op {
	case websocket.PongMessage:
		s.touch()
	case websocket.PingMessage:
		// Skipped while a frame's tail is pending (the socket is backed
		// up): the client's ping is answered by the next one.
		s.w.control(websocket.PongMessage, payload, time.Second, false)
	case websocket.CloseMessage:
		code, text := websocket.CloseNoStatusReceived, ""
		if len(payload) >= 2 {
			code = int(binary.BigEndian.Uint16(payload))
			if !validCloseCode(code) {
				return s.protocolError("bad close code " + strconv.Itoa(code))
			}
			text = string(payload[2:])
			if !utf8.ValidString(text) {
				return s.protocolError("invalid utf8 payload in close frame")
			}
		}
		s.w.control(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Second, false)
		return &websocket.CloseError{Code: code, Text: text}
	}
	return nil
}

// validCloseCode is whether a client may send code (RFC 6455, 7.4).
func validCloseCode(code int) bool {
	switch code {
	case websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseProtocolError, websocket.CloseUnsupportedData,
		websocket.CloseInvalidFramePayloadData, websocket.ClosePolicyViolation, websocket.CloseMessageTooBig,
		websocket.CloseMandatoryExtension, websocket.CloseInternalServerErr, websocket.CloseServiceRestart, websocket.CloseTryAgainLater:
		return true
	}
	return code >= 3000 && code <= 4999
}

// protocolError answers a protocol error with a 1002 close frame.
func (s *session) protocolError(msg string) error {
	data := websocket.FormatCloseMessage(websocket.CloseProtocolError, msg)
	s.w.control(websocket.CloseMessage, data[:min(len(data), 125)], time.Second, false)
	return errProtocol(msg)
}

// unmask XORs b with key, b starting at byte pos of the key.
func unmask(key [4]byte, pos int, b []byte) {
	for i := range b {
		b[i] ^= key[(pos+i)&3]
	}
}

// touch moves the read deadline: two ping intervals from now.
func (s *session) touch() {
	s.idle.Reset(2 * s.srv.o.PingInterval)
}

// answer answers one client message. A parked reader's goroutine ends
// with its read, so the command runs on it; a reader that blocks for the
// connection's life answers on a goroutine that ends with the command,
// since parsing and subscribing need a deep stack and the reader's would
// stay that deep once grown.
func (s *session) answer(b []byte) {
	if s.polled.Load() {
		s.handle(b)
		return
	}
	done := make(chan *commandPanic, 1)
	go func() {
		defer func() {
			var p *commandPanic
			if r := recover(); r != nil {
				p = &commandPanic{r, debug.Stack()}
			}
			done <- p
		}()
		s.handle(b)
	}()
	if p := <-done; p != nil {
		panic(*p) // to the reader's recovery
	}
}

// readRecovered runs readFrames. A panic while serving the client's
// messages ends this connection, logged with its stack, not the daemon.
func (s *session) readRecovered(park bool) (over bool) {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			if p, ok := r.(commandPanic); ok {
				r, stack = p.value, p.stack
			}
			s.srv.log.Error("wsapi: panic serving a connection; closing it", "panic", r, "stack", string(stack))
			s.end(InternalError)
			over = true
		}
	}()
	return s.readFrames(park)
}

// startReader starts reading the connection: parked with the server's
// poller if it takes the socket, else on a goroutine of its own.
func (s *session) startReader() {
	if p := s.srv.readPoller(); p != nil && s.rc != nil {
		if !s.rstate.CompareAndSwap(rRunning, rParked) {
			go s.readerEnded() // closed already
			return
		}
		s.polled.Store(true)
		if p.add(s) == nil {
			return
		}
		s.polled.Store(false)
		if !s.rstate.CompareAndSwap(rParked, rRunning) {
			return // closed meanwhile: closeSocket ends the reader
		}
	}
	go s.readBlocking()
}

// readBlocking is the reader goroutine without a poller.
func (s *session) readBlocking() {
	s.readRecovered(false)
	s.readerEnded()
}

// readable is the poller's event: the parked connection's socket has
// bytes (or an error, or the client's FIN) to read.
func (s *session) readable() {
	if s.rstate.CompareAndSwap(rParked, rRunning) {
		go s.readPolled()
	}
}

// readPolled reads what the socket has, then parks the connection again.
func (s *session) readPolled() {
	if !s.readRecovered(true) {
		for {
			if !s.rstate.CompareAndSwap(rRunning, rParked) {
				break // the socket is closing: this goroutine ends the reader
			}
			err := s.srv.poll.rearm(s)
			if err == nil || !s.rstate.CompareAndSwap(rParked, rRunning) {
				return // parked; or closing, and closeSocket saw it parked
			}
			// The socket is open but could not be re-armed: read on.
			s.srv.log.Warn("wsapi: epoll re-arm failed; reading the connection on a goroutine", "err", err)
			s.readRecovered(false)
			break
		}
	}
	s.readerEnded()
}

// unpoll is called as the socket closes (closeSocket): it takes the
// socket out of the poller and ends a parked reader.
func (s *session) unpoll() {
	if s.rstate.Swap(rClosed) == rParked {
		go s.readerEnded()
	}
	if s.polled.Load() {
		s.srv.poll.p.Del(s.rc)
	}
}

// readerEnded is what follows the reader's end: the writer's, the
// subscriber's detach, the socket's close, and the server's account.
func (s *session) readerEnded() {
	close(s.readerDone)
	s.end(ClientClosed)
	s.idle.Stop()
	if CloseReason(s.reason.Load()) == UnreadReplies {
		// The writer may be blocked on a socket the client does not
		// read: it has a second for the close frame, not the write
		// deadline.
		t := time.AfterFunc(time.Second, s.closeSocket)
		defer t.Stop()
	}
	<-s.w.done
	s.w.stop()
	s.exp.stop()
	if s.srv.o.Hub.Detach(s.sub, s.q) && s.srv.o.NamedTTL > 0 {
		s.srv.o.Hub.ExpireAfter(s.sub, s.srv.o.NamedTTL)
	}
	s.closeSocket()
	if s.polled.Load() {
		s.srv.poll.remove(s)
	}
	s.onEnd(CloseReason(s.reason.Load()))
}

// readPoller is the server's poller and the sessions it watches, by
// slot: an event names its session by slot and the slot's generation, so
// one for a session that has gone is dropped.
type readPoller struct {
	p *rawio.Poller

	mu    sync.Mutex // protects slots and free
	slots []pollSlot
	free  []uint32
}

type pollSlot struct {
	s   *session
	gen uint32
}

// readPoller returns the server's poller, started on first use, or nil
// if connections read on goroutines of their own.
func (srv *Server) readPoller() *readPoller {
	srv.pollOnce.Do(func() {
		if !usePoller {
			return
		}
		rp := &readPoller{}
		p, err := rawio.NewPoller(rp.ready)
		if err != nil {
			srv.log.Info("wsapi: no epoll poller, each connection has a reader goroutine", "err", err)
			return
		}
		rp.p, srv.poll = p, rp
	})
	return srv.poll
}

// stopPoller stops the poller, once every session ended.
func (srv *Server) stopPoller() {
	srv.pollOnce.Do(func() {})
	if srv.poll != nil {
		srv.poll.p.Close()
	}
}

// ready is the poller's event for id.
func (rp *readPoller) ready(id uint64) {
	i, gen := uint32(id), uint32(id>>32)
	rp.mu.Lock()
	var s *session
	if int(i) < len(rp.slots) && rp.slots[i].gen == gen {
		s = rp.slots[i].s
	}
	rp.mu.Unlock()
	if s != nil {
		s.readable()
	}
}

func (s *session) pollID() uint64 { return uint64(s.pslot) | uint64(s.pgen)<<32 }

// add gives s a slot and registers its socket, armed: s must be parked.
func (rp *readPoller) add(s *session) error {
	rp.mu.Lock()
	var i uint32
	if k := len(rp.free); k > 0 {
		i, rp.free = rp.free[k-1], rp.free[:k-1]
	} else {
		i = uint32(len(rp.slots))
		rp.slots = append(rp.slots, pollSlot{})
	}
	rp.slots[i].s = s
	s.pslot, s.pgen = i, rp.slots[i].gen
	rp.mu.Unlock()
	err := rp.p.Add(s.rc, s.pollID())
	if err != nil {
		rp.remove(s)
	}
	return err
}

// rearm asks for one more event for s, which has parked.
func (rp *readPoller) rearm(s *session) error { return rp.p.Rearm(s.rc, s.pollID()) }

// remove frees s's slot: an event still naming it is dropped.
func (rp *readPoller) remove(s *session) {
	rp.mu.Lock()
	if sl := &rp.slots[s.pslot]; sl.s == s {
		sl.s = nil
		sl.gen++
		rp.free = append(rp.free, s.pslot)
	}
	rp.mu.Unlock()
}
