package wsapi

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"

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

// session is one websocket connection: its protocol (commands, replies,
// the token's clock) and its life. Its read side is read.go's: parked on
// the server's poller while there is nothing to read, or a goroutine of
// its own; its write side is w (writer.go), whose goroutine runs only
// while it has work when there is a write pool, so an idle connection has
// no goroutine.
type session struct {
	srv *Server
	ws  wsConn
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
	w          writer        // the write side

	// A named subscriber's connection records the last seq written per
	// stream (nil for an ephemeral one), for the cluster's record.
	connID  string
	wrMu    sync.Mutex // protects written
	written map[venue.Stream]uint64

	// reader's own state
	allowance float64   // command tokens available
	last      time.Time // when allowance was computed

	rc     syscall.RawConn          // the socket, for the poller; nil if it has none
	rstate atomic.Int32             // rRunning, rParked or rClosed (read.go)
	polled atomic.Bool              // the socket is registered with the server's poller
	pslot  uint32                   // the poller's slot and its generation
	pgen   uint32                   //
	idle   *time.Timer              // the read deadline: ends the session with ReadTimeout
	onEnd  func(reason CloseReason) // called once the session is over
}

// wsConn is a session's socket. Closing it takes it out of the poller
// first (Close), and ends a parked reader.
type wsConn struct {
	c net.Conn
	s *session
}

// NetConn returns the socket.
func (w *wsConn) NetConn() net.Conn { return w.c }

// Close closes the socket.
func (w *wsConn) Close() error {
	w.s.unpoll()
	return w.c.Close()
}

func newSession(srv *Server, nc net.Conn, tok *api.Token, lowLatency bool) *session {
	s := &session{srv: srv, q: subscriber.NewMailbox(),
		stop: make(chan struct{}), flush: make(chan struct{}), readerDone: make(chan struct{}), allowance: float64(srv.o.Limits.CommandBurst), last: time.Now()}
	s.ws = wsConn{c: nc, s: s}
	s.tok.Store(tok)
	s.exp = expiry{lead: srv.o.ExpiringNotice, expire: func() { s.end(TokenExpired) },
		// A daemon notice, on the notice path (not a reply: never dropped);
		// at most one per refresh, which the command rate bounds.
		warn: func(exp time.Time) { s.q.Notify(&subscriber.Message{Data: appendTokenExpiring(nil, exp, time.Now())}) }}
	s.w.init(s, nc, lowLatency)
	if sc, ok := nc.(syscall.Conn); ok {
		s.rc, _ = sc.SyscallConn()
	}
	return s
}

// end records r (unless a reason is already set) and stops the writer.
func (s *session) end(r CloseReason) {
	s.reason.CompareAndSwap(0, uint32(r))
	s.stopOnce.Do(func() { close(s.stop) })
	s.w.poke()
}

// beginFlush asks the writer to flush and close with 1001.
func (s *session) beginFlush() {
	s.reason.CompareAndSwap(0, uint32(Shutdown))
	s.flushOnce.Do(func() { close(s.flush) })
	s.w.poke()
}

// run starts serving the connection and returns; once it is over the
// subscriber is detached (an ephemeral one is removed everywhere; a named
// one keeps its subscriptions) and onEnd is called with why it ended.
func (s *session) run(onEnd func(CloseReason)) {
	s.onEnd = onEnd
	s.idle = time.AfterFunc(2*s.srv.o.PingInterval, func() { s.end(ReadTimeout) })
	if tok := s.tok.Load(); tok != nil {
		s.exp.set(tok.Expires)
	}
	s.w.start()
	s.startReader()
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
	s.w.fdMu.Lock()
	defer s.w.fdMu.Unlock()
	s.ws.Close()
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
		// writer drains ahead of the snapshot queued by Subscribe. The
		// queue is held until every stream is subscribed, so the ack never
		// leaves before the subscription it confirms: an event published
		// after the client read its ack reaches it.
		s.q.Hold()
		s.reply(appendAck(nil, cmd.ID, cmd.Streams))
		for _, st := range fresh {
			if err := hub.Subscribe(s.sub, st); err != nil {
				continue // checked above; a venue cannot disappear
			}
			if f := s.srv.o.OnSubscribe; f != nil {
				f(st)
			}
		}
		s.q.Release()
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
