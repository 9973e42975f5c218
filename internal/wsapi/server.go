package wsapi

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/jsonw"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// Defaults of Options and Limits, which a zero field takes (WithDefaults);
// the daemon's configuration has the same (internal/daemon tests it).
const (
	DefaultWriteTimeout      = 10 * time.Second
	DefaultPingInterval      = 30 * time.Second
	DefaultSendBuffer        = 65536
	DefaultMaxBatchBytes     = 65536
	DefaultMaxBatchMessages  = 1024
	DefaultNamedTTL          = 24 * time.Hour
	DefaultMaxStreams        = 256
	DefaultMaxMessageBytes   = 16384
	DefaultMaxConnsPerToken  = 64
	DefaultCommandsPerSecond = 20
	DefaultCommandBurst      = 40
	DefaultMaxReplyBytes     = 1 << 20
	DefaultExpiringNotice    = time.Minute
	DefaultMaxNamedPerToken  = 1000
	DefaultMaxNamed          = 10000

	// DefaultWriteDelay is the daemon's write delay. It is not a zero
	// field's default: a zero WriteDelay means no write pool. See
	// docs/design.md for how it was chosen.
	DefaultWriteDelay = 10 * time.Millisecond
)

// Limits are the per-connection and per-token limits. Zero fields take
// their defaults.
type Limits struct {
	// MaxStreams is the most streams one connection may be subscribed to.
	// Defaults to DefaultMaxStreams.
	MaxStreams int
	// MaxMessageBytes is the largest client message answered; a larger one
	// is read, discarded and refused (message_too_large), and one past 16
	// times this closes the connection. Defaults to DefaultMaxMessageBytes.
	MaxMessageBytes int
	// MaxConnsPerToken is the most connections open at once under one
	// token (HTTP 429 past it). Defaults to DefaultMaxConnsPerToken.
	// Without tokens, it does not apply.
	MaxConnsPerToken int
	// CommandsPerSecond is the sustained rate of client messages of one
	// connection, commands or not; CommandBurst the messages allowed at
	// once. Defaults to DefaultCommandsPerSecond and DefaultCommandBurst.
	CommandsPerSecond float64
	CommandBurst      int
	// MaxReplyBytes bounds the replies queued for a connection and not
	// yet written: a client that sends commands and does not read their
	// replies is closed with CloseCodeUnreadReplies past it. Defaults to
	// DefaultMaxReplyBytes.
	MaxReplyBytes int
	// MaxNamedPerToken is the most named subscribers one token may hold,
	// attached or not (a detached one is kept for NamedTTL); a connection
	// for a new name past it is refused with 429 too_many_named. Without
	// tokens, it does not apply. Defaults to DefaultMaxNamedPerToken.
	MaxNamedPerToken int
	// MaxNamed is the most named subscribers of the node, every token's
	// together; past it likewise. Defaults to DefaultMaxNamed.
	MaxNamed int
}

// Options configure a Server.
type Options struct {
	// Hub is the fanout hub subscriptions go through. Required.
	Hub *fanout.Hub
	// Check decides whether this daemon serves st; an error is answered as
	// unknown_stream with its text (or an *api.Refusal's code). nil
	// accepts any stream whose venue has a feed. It must not ask anything
	// of another node: that is Want's.
	Check func(st venue.Stream) error
	// Want, if set, is asked for each stream of a command once the token's
	// scopes, Check and every limit of the command have passed (an edge
	// asks its ingest for the stream's symbol), so that a refused command
	// makes no other node spend anything. An error refuses the command as
	// Check's does.
	Want func(st venue.Stream) error
	// OnSubscribe is called after a subscription to st was added (the
	// daemon has the venue adapter subscribe the symbol). It may be nil.
	OnSubscribe func(st venue.Stream)
	// Auth authenticates connections; nil accepts everyone.
	Auth *api.Auth
	// Origins is the allow-list for the Origin header of browser clients:
	// exact origins ("https://desk.example.com") or "*". A request without
	// an Origin header (not a browser) is always accepted; with an empty
	// list only origins whose host Hosts allows are, or, without Hosts,
	// same-host origins.
	Origins []string
	// Hosts, if set, is the Host names answered (api.Hosts, against DNS
	// rebinding; the daemon sets it when no tokens are configured): any
	// other Host is refused with 403 host_not_allowed, and with no Origins
	// an Origin is checked against it rather than against Host, which the
	// page sets.
	Hosts *api.Hosts
	// WriteTimeout is the write deadline: a socket that accepts no bytes
	// for this long is closed. Defaults to DefaultWriteTimeout.
	WriteTimeout time.Duration
	// SendBuffer is the kernel send buffer of each subscriber socket
	// (SO_SNDBUF), so the backlog the fanout core measures is the backlog
	// there is. Defaults to DefaultSendBuffer; negative leaves the
	// kernel's default.
	SendBuffer int
	// MaxBatchBytes bounds one batched websocket message: a batch is
	// larger only when it is a single message. Defaults to
	// DefaultMaxBatchBytes.
	MaxBatchBytes int
	// WriteDelay is the longest writes are coalesced: with it, a pool of
	// GOMAXPROCS write workers writes each connection (but those that ask
	// for low latency) at once if it was not written within the last age,
	// else age after its last write, so that under load what arrived
	// meanwhile goes out in one write; the age grows with the connection's
	// event rate from WriteDelay/4 to WriteDelay, scaled down while the
	// worker spends less than busyTarget of its time writing (writeShard,
	// ageFor, adjust, flushAt). 0 has each connection's writer write at
	// once. Under load it trades up to WriteDelay of latency for CPU
	// (DefaultWriteDelay is the daemon's).
	WriteDelay time.Duration
	// Uring makes the write pool (WriteDelay > 0) hand each round's writes
	// to the kernel through io_uring, one system call for all of a
	// worker's connections, where the kernel allows it (else the pool
	// falls back to one write(2) per connection, logged once).
	Uring bool
	// MaxBatchMessages bounds the messages of one batch. Defaults to
	// DefaultMaxBatchMessages.
	MaxBatchMessages int
	// NamedTTL is how long a named subscriber is kept with no connection
	// attached; it is then forgotten (fanout.Hub.ExpireAfter). Defaults to
	// DefaultNamedTTL; negative keeps them for as long as the process runs.
	NamedTTL time.Duration
	// PingInterval is how often the server pings an idle client; a client
	// silent for two intervals is closed. Defaults to DefaultPingInterval.
	PingInterval time.Duration
	// Limits are the per-connection limits.
	Limits Limits
	// Metrics, if not nil, records connections, closes, refusals, latency.
	Metrics *Metrics
	// Logger defaults to slog.Default(). Tokens are never logged.
	Logger *slog.Logger
	// Names, if set, is the cluster's record of named subscribers (an
	// edge): a name is claimed there on attach, adopted from another node
	// that held it last, and its last written seqs recorded.
	Names Names
	// Node names this server's node in the connection ids it gives Names.
	Node string
	// Backfill, if set, fills this node's recovery window of st from seq
	// from, from another node (an edge asks its ingest), and returns when
	// done: a named subscriber's reattach calls it for every stream whose
	// last seq read it knows, so that a loss that began before this node
	// followed the stream is recovered.
	Backfill func(st venue.Stream, from uint64)
	// ExpiringNotice is how long before a JWT's exp its connection is sent
	// a token_expiring notice (at once if the token expires sooner).
	// Defaults to DefaultExpiringNotice.
	ExpiringNotice time.Duration
	// SnapshotClaim, if set, returns the claim check (a JSON object) the
	// reply to a snapshot op of st carries as "claim", or nil; see
	// snapshotAck.
	SnapshotClaim func(st venue.Stream) []byte
}

// WithDefaults returns o with every zero field that has a default set to
// it. NewServer resolves its options with it.
func (o Options) WithDefaults() Options {
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.SendBuffer == 0 {
		o.SendBuffer = DefaultSendBuffer
	}
	set(&o.MaxBatchBytes, DefaultMaxBatchBytes)
	set(&o.MaxBatchMessages, DefaultMaxBatchMessages)
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.NamedTTL == 0 {
		o.NamedTTL = DefaultNamedTTL
	}
	if o.ExpiringNotice <= 0 {
		o.ExpiringNotice = DefaultExpiringNotice
	}
	l := &o.Limits
	set(&l.MaxStreams, DefaultMaxStreams)
	set(&l.MaxMessageBytes, DefaultMaxMessageBytes)
	set(&l.MaxConnsPerToken, DefaultMaxConnsPerToken)
	if l.CommandsPerSecond <= 0 {
		l.CommandsPerSecond = DefaultCommandsPerSecond
	}
	set(&l.CommandBurst, DefaultCommandBurst)
	set(&l.MaxReplyBytes, DefaultMaxReplyBytes)
	set(&l.MaxNamedPerToken, DefaultMaxNamedPerToken)
	set(&l.MaxNamed, DefaultMaxNamed)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Server serves GET /v1/stream. Build one with NewServer; it is an
// http.Handler.
type Server struct {
	o   Options
	up  websocket.Upgrader
	log *slog.Logger

	wg sync.WaitGroup // one per session: its reader and writer both done

	shards    []*writeShard  // the write pool; nil without a write delay
	nextShard atomic.Uint32  // round-robin assignment of sessions to shards
	poolStop  chan struct{}  // closed to stop the write pool
	poolWG    sync.WaitGroup // one per write-pool worker
	stopOnce  sync.Once
	aborted   atomic.Bool // Abort: sessions end as in a crash, nothing is released

	connSeq atomic.Uint64 // numbers the named connections (connection ids)

	readBufs sync.Pool // *[]byte of MaxMessageBytes+1: a client message being read
	release  burstRelease

	pollOnce sync.Once
	poll     *readPoller // the parked connections' sockets; nil: a reader goroutine each

	mu       sync.Mutex // protects the fields below
	closed   bool
	sessions map[*subscriber.Mailbox]*session
	perToken map[string]int
}

// usePoller says whether connections park on the server's poller
// (where there is one); tests turn it off to run the reader goroutines.
var usePoller = true

// ErrServerClosed is returned by Shutdown when called twice.
var ErrServerClosed = errors.New("wsapi: server closed")

// NewServer returns a server with o's defaults resolved.
func NewServer(o Options) *Server {
	o = o.WithDefaults()
	s := &Server{o: o, log: o.Logger, sessions: map[*subscriber.Mailbox]*session{}, perToken: map[string]int{}}
	if o.WriteDelay > 0 {
		s.startPool(runtime.GOMAXPROCS(0))
	}
	s.readBufs.New = func() any { b := make([]byte, o.Limits.MaxMessageBytes+1); return &b }
	perToken := 0
	if o.Auth.Enabled() {
		perToken = o.Limits.MaxNamedPerToken
	}
	o.Hub.Registry().LimitNamed(o.Limits.MaxNamed, perToken)
	s.up = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		// gorilla reads only the handshake (the session reads the frames,
		// read.go): it keeps net/http's reader, which is then dropped.
		ReadBufferSize: 0,
		// Frames are written by this package (writer.writeFrame), not
		// through gorilla's write buffer, which then only serves the
		// rare write gorilla makes itself (a close frame on a protocol
		// error); pooled, so no connection holds one.
		WriteBufferSize: 256,
		WriteBufferPool: &sync.Pool{},
		CheckOrigin:     s.checkOrigin,
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			api.WriteError(w, status, api.CodeBadRequest, reason.Error())
		},
	}
	return s
}

// Sessions returns the number of open connections.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	for _, o := range s.o.Origins {
		if o == "*" || strings.EqualFold(o, origin) {
			return true
		}
	}
	if len(s.o.Origins) > 0 {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if s.o.Hosts != nil {
		return s.o.Hosts.Allows(u.Host)
	}
	return strings.EqualFold(u.Host, r.Host)
}

// ServeHTTP upgrades the request to a websocket session. It refuses with
// 400 (a query that does not parse, a bad name), 401 (unauthenticated),
// 403 (host, origin), 409 (a name another token created), 429
// (connections per token, or a new name past the named limits) or 503
// (shutting down) before upgrading.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, code api.Code, msg string) {
		s.o.Metrics.refused(code)
		api.WriteError(w, status, code, msg)
	}
	if !s.o.Hosts.Allows(r.Host) {
		refuse(http.StatusForbidden, api.CodeHostNotAllowed, "without tokens only a loopback name or the listen address is answered as Host")
		return
	}
	// The whole query or nothing: url.Values drops what follows a
	// parameter that does not parse, and every parameter past Go's
	// 10,000, which would turn a reattach into a new connection.
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		refuse(http.StatusBadRequest, api.CodeBadRequest, "query: "+err.Error())
		return
	}
	gen := s.o.Auth.Generation()
	tok, aerr := s.o.Auth.CheckUpgrade(r)
	if aerr != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="fanoutd"`)
		refuse(http.StatusUnauthorized, api.CodeUnauthenticated, api.RefusalMessage(aerr))
		return
	}
	if !s.checkOrigin(r) {
		refuse(http.StatusForbidden, api.CodeOriginNotAllowed, "origin not allowed")
		return
	}
	name := query.Get("name")
	if query.Has("name") && !subscriber.ValidName(name) {
		refuse(http.StatusBadRequest, api.CodeBadName, "name must match [A-Za-z0-9_.-]{1,64}")
		return
	}
	last, err := parseLast(query, s.o.Limits.MaxStreams)
	if err == nil && last != nil && name == "" {
		err = errors.New("last= needs ?name=: only a named subscriber reattaches")
	}
	if err != nil {
		refuse(http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	lowLatency := tok != nil && tok.LowLatency
	switch query.Get("latency") {
	case "", api.LatencyBatched:
	case api.LatencyLow:
		lowLatency = true
	default:
		refuse(http.StatusBadRequest, api.CodeBadRequest, "latency must be low or batched")
		return
	}
	tokName := owner(tok)
	if name != "" {
		reg := s.o.Hub.Registry()
		sub := reg.Named(name)
		if sub != nil && sub.Owner() != tokName {
			refuse(http.StatusConflict, api.CodeNameTaken, "the name belongs to another token")
			return
		}
		if sub == nil {
			if err := reg.NamedRoom(tokName); err != nil {
				refuse(http.StatusTooManyRequests, api.CodeTooManyNamed, namedLimitMessage(err))
				return
			}
		}
	}
	var connID string
	var rec *NameRecord
	if name != "" {
		connID = s.o.Node + "/" + strconv.FormatUint(s.connSeq.Add(1), 10)
		if s.o.Names != nil {
			if rec, err = s.o.Names.Claim(name, tokName, connID); errors.Is(err, ErrNameOwned) {
				refuse(http.StatusConflict, api.CodeNameTaken, "the name belongs to another token")
				return
			} else if err != nil {
				s.log.Warn("wsapi: the cluster's record of names is unavailable; the name is held on this node only", "name", name, "err", err)
			}
		}
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		refuse(http.StatusServiceUnavailable, api.CodeShuttingDown, "shutting down")
		return
	case tok != nil && s.perToken[tokName] >= s.maxConns(tok):
		s.mu.Unlock()
		refuse(http.StatusTooManyRequests, api.CodeTooManyConnections, "too many connections for this token")
		return
	}
	s.perToken[tokName]++
	s.wg.Add(1)
	s.mu.Unlock()
	spawned := false // the session's goroutine calls s.wg.Done
	defer func() {
		if !spawned {
			s.wg.Done()
		}
	}()
	releaseSlot := func() { // the token's connection slot
		s.mu.Lock()
		if s.perToken[tokName]--; s.perToken[tokName] <= 0 {
			delete(s.perToken, tokName)
		}
		s.mu.Unlock()
	}

	// The query (which may hold the token) is dropped from the request
	// before anything below can log it.
	r.URL.RawQuery = ""
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		releaseSlot()
		return // the upgrader answered the client
	}
	if s.o.SendBuffer > 0 {
		if tc, ok := ws.NetConn().(*net.TCPConn); ok {
			tc.SetWriteBuffer(s.o.SendBuffer)
		}
	}
	s.release.accepted()
	sess := newSession(s, ws.NetConn(), tok, lowLatency)
	if name != "" {
		sess.connID, sess.written = connID, map[venue.Stream]uint64{}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		releaseSlot()
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "shutting down"), time.Now().Add(time.Second))
		ws.Close()
		return
	}
	s.sessions[sess.q] = sess
	s.mu.Unlock()
	s.o.Metrics.opened()
	if name != "" {
		if rec != nil && (rec.Node != s.o.Node || s.o.Hub.Registry().Named(name) == nil) {
			s.adopt(name, tokName, tok, rec)
		} else {
			rec = nil // this node's own state is the newer
		}
		from := mergeLast(last, rec)
		s.backfill(from)
		sub, existed, err := s.o.Hub.AttachFrom(name, tokName, sess.q, from, s.takeover)
		if err != nil { // another token created the name, or others filled the limits, since the checks above
			code := api.CodeNameTaken
			if _, ok := errors.AsType[*subscriber.NamedLimitError](err); ok {
				code = api.CodeTooManyNamed
			}
			s.o.Metrics.refused(code)
			ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, string(code)), time.Now().Add(time.Second))
			s.mu.Lock()
			delete(s.sessions, sess.q)
			s.mu.Unlock()
			releaseSlot()
			s.o.Metrics.closed(Removed)
			ws.Close()
			return
		}
		s.setSub(sess, sub)
		s.log.Info("wsapi: named subscriber attached", "name", name, "reattach", existed, "remote", r.RemoteAddr, "token", tokName)
	} else {
		s.setSub(sess, s.o.Hub.NewOwnedEphemeral(sess.q, tokName))
	}
	if s.o.Auth.Generation() != gen {
		s.recheck(sess) // a reload since Authenticate that Reauthenticate did not see sess in
	}
	// The session's reader runs on a goroutine of its own and this handler
	// returns, so that net/http's connection state (its buffers, the
	// request, the handler goroutine's deep stack) is freed rather than
	// held for the connection's life.
	spawned = true
	sess.run(func(reason CloseReason) {
		defer s.wg.Done()
		s.sessionEnded(sess, reason, name, connID, tokName, releaseSlot)
	})
}

// sessionEnded releases what sess held once it is over.
func (s *Server) sessionEnded(sess *session, reason CloseReason, name, connID, tokName string, releaseSlot func()) {
	s.mu.Lock()
	delete(s.sessions, sess.q)
	s.mu.Unlock()
	if name != "" && s.o.Names != nil && reason != TakenOver && !s.aborted.Load() {
		s.o.Names.Release(name, connID, sess.namedState())
	}
	releaseSlot()
	s.o.Metrics.closed(reason)
	level := slog.LevelInfo
	if reason == ClientClosed || reason == Shutdown {
		level = slog.LevelDebug
	}
	s.log.Log(context.Background(), level, "wsapi: connection closed", "subscriber", sess.sub.ID(), "kind", sess.sub.Kind().String(),
		"reason", reason.String(), "token", tokName)
}

// Reauthenticate checks every connection's token again against
// Options.Auth, whose tokens and keys a reload has just replaced
// (api.Auth.Replace): a connection whose static token is gone, whose JWT
// no longer verifies (its key removed, say), or whose reloaded scopes no
// longer cover a stream it is subscribed to is closed with
// CloseCodeTokenRevoked; the others go on under the token as reloaded.
// It returns how many it closed.
func (s *Server) Reauthenticate() int {
	if !s.o.Auth.Enabled() {
		return 0
	}
	s.mu.Lock()
	list := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		if sess.sub != nil {
			list = append(list, sess)
		}
	}
	s.mu.Unlock()
	closed := 0
	for _, sess := range list {
		if !s.recheck(sess) {
			closed++
		}
	}
	return closed
}

// recheck is Reauthenticate for one connection, whose sub is set: it
// returns false if it closed it.
func (s *Server) recheck(sess *session) bool {
	old := sess.tok.Load()
	nt, err := s.o.Auth.Recheck(old)
	if err == nil {
		for _, st := range sess.sub.Streams() {
			if !nt.Allows(st) {
				err = errors.New(string(st) + " is outside the reloaded token's scopes")
				break
			}
		}
	}
	if err != nil {
		s.log.Info("wsapi: closing a connection whose token the reload revoked", "subscriber", sess.sub.ID(), "token", owner(old), "why", err.Error())
		sess.end(TokenRevoked)
		return false
	}
	sess.tok.CompareAndSwap(old, nt) // a refresh meanwhile is newer
	return true
}

// setSub records the subscriber of sess, which s.sessions already lists:
// under s.mu, which TakeOver holds to read it.
func (s *Server) setSub(sess *session, sub *subscriber.Subscriber) {
	s.mu.Lock()
	sess.sub = sub
	s.mu.Unlock()
}

// maxConns is the connections tok may hold open at once: its own cap (a
// JWT's max_connections claim) if lower than limits.max_connections_per_token.
func (s *Server) maxConns(tok *api.Token) int {
	if tok.MaxConns > 0 {
		return min(tok.MaxConns, s.o.Limits.MaxConnsPerToken)
	}
	return s.o.Limits.MaxConnsPerToken
}

// namedLimitMessage is the refusal's message for a NamedLimitError.
func namedLimitMessage(err error) string {
	if le, ok := errors.AsType[*subscriber.NamedLimitError](err); ok && le.PerOwner {
		return "this token already holds limits.max_named_per_token (" + strconv.Itoa(le.Limit) + ") named subscribers: reattach one, or wait for one to expire (websocket.named_ttl)"
	} else if ok {
		return "the node already holds limits.max_named (" + strconv.Itoa(le.Limit) + ") named subscribers"
	}
	return err.Error()
}

// owner is the subscriber owner a connection with tok creates: the
// token's name, or "" without authentication.
func owner(tok *api.Token) string {
	if tok == nil {
		return ""
	}
	return tok.Name
}

// Subscribers returns the subscribers tok owns (created under it), named
// first, each group sorted by id; without authentication (tok nil), every
// subscriber. It is what GET /v1/subscribers may list to tok.
func (s *Server) Subscribers(tok *api.Token) []*subscriber.Subscriber {
	return s.o.Hub.Registry().OwnedBy(owner(tok))
}

// takeover is Hub.Attach's callback: prev's session is told it was taken
// over; the hub closes prev's queues right after.
func (s *Server) takeover(prev *subscriber.Mailbox) {
	s.mu.Lock()
	old := s.sessions[prev]
	s.mu.Unlock()
	if old != nil {
		old.end(TakenOver)
	}
}

// Shutdown stops the server: new connections are refused (503), every
// writer flushes what is queued (the caller has queued the shutdown notice
// with fanout.Hub.Broadcast), closes its connection with 1001 and ends.
// Shutdown waits for every session to end or for ctx to be done; then it
// closes the remaining sockets at once, waits for their goroutines and
// returns ctx.Err(). It does not stop the feeds: events published during
// the flush are written if they make it in time.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.closed = true
	list := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		list = append(list, sess)
	}
	s.mu.Unlock()
	for _, sess := range list {
		sess.beginFlush()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	defer s.stopPool()
	select {
	case <-done:
		s.stopPoller()
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for _, sess := range s.sessions {
		sess.end(ShutdownTimeout)
		sess.closeSocket()
	}
	s.mu.Unlock()
	<-done
	s.stopPoller()
	return ctx.Err()
}

// Abort ends every session at once, as a crash would: nothing is flushed
// and no name is released in the cluster's record (a test's stand-in for
// a killed process).
func (s *Server) Abort() {
	s.aborted.Store(true)
	s.Close()
}

// Close ends every session at once, without flushing.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for _, sess := range s.sessions {
		sess.end(ShutdownTimeout)
		sess.closeSocket()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.release.stop()
	s.stopPool()
	s.stopPoller()
}

// appendTakenOver is the last message a taken-over connection receives.
func appendTakenOver(dst []byte, name string) []byte {
	return appendError(dst, "", api.CodeTakenOver, "another connection attached under the name "+string(jsonw.AppendString(nil, name)))
}
