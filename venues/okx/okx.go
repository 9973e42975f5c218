package okx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Defaults for Config fields left zero.
const (
	// DefaultWSURL is OKX's production public endpoint.
	DefaultWSURL = "wss://ws.okx.com:8443/ws/v5/public"
	// DefaultPingInterval: OKX drops a link with no traffic for 30 s; the
	// adapter sends text "ping" once nothing has arrived for this long.
	DefaultPingInterval = 20 * time.Second
	// DefaultReadTimeout: a link silent this long (the ping unanswered for
	// 10 s) is dead.
	DefaultReadTimeout = 30 * time.Second

	// readLimit bounds one frame. A 400-level books snapshot is about
	// 40 KB; the limit leaves room for many times that.
	readLimit = 8 << 20
	// dialSpacing keeps connection attempts under OKX's 3 per second per IP.
	dialSpacing = 350 * time.Millisecond
	// outQueue is how many requests may wait for the writer; past it the
	// link is dropped (a reconnect resubscribes everything).
	outQueue = 256
	// writeTimeout bounds one websocket write.
	writeTimeout = 5 * time.Second
	// ackDeadline is how long the initial subscriptions may stay
	// unanswered before the link is declared up anyway (with the missing
	// acks named), so a venue that never acks cannot hold link_up back.
	ackDeadline = 10 * time.Second
)

// Errors New and Start return.
var (
	ErrNoSink     = errors.New("okx: config has no Sink")
	ErrStarted    = venue.ErrStarted // wrapped by a second Start
	ErrBadSymbol  = errors.New("okx: bad symbol")
	ErrNotStarted = errors.New("okx: adapter not started")
)

// Adapter is the OKX v5 public market-data adapter: one websocket, the
// books/trades/tickers channels for each symbol, books kept by a Decoder.
type Adapter struct {
	cfg venue.Config // defaults resolved
	log *slog.Logger
	cov *venue.CoverageTracker
	dec *Decoder // used only by the run goroutine

	mu      sync.Mutex // protects the fields below
	symbols []string   // wanted, in order of Subscribe
	link    *link      // the current connection, nil between connections
	life    venue.Lifecycle

	// Owned by the run goroutine.
	sess *session
}

var _ venue.Adapter = (*Adapter)(nil)

// link is what other goroutines may use of a connection: its request queue.
type link struct {
	out  chan []byte
	conn *websocket.Conn
}

// session is the run goroutine's state for one connection.
type session struct {
	l        *link
	pending  map[string]bool // initial "channel\x00instId" awaiting an ack
	up       bool            // link_up emitted
	forced   string          // a forced-disconnect notice arrived: reconnect
	start    time.Time       // when the link connected
	lastRecv atomic.Int64    // unix nanos of the last frame
}

// New builds an adapter from cfg. It dials nothing until Start.
func New(cfg venue.Config) (*Adapter, error) {
	if cfg.Sink == nil {
		return nil, ErrNoSink
	}
	if cfg.WSURL == "" {
		cfg.WSURL = DefaultWSURL
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for _, c := range cfg.Channels {
		if !c.Valid() {
			return nil, fmt.Errorf("okx: unknown channel %q", c)
		}
	}
	cfg.Channels = cfg.ChannelsOrAll()
	a := &Adapter{cfg: cfg, log: cfg.Logger.With("venue", Name), cov: venue.NewCoverageTracker(Name)}
	for _, s := range cfg.Symbols {
		if err := checkSymbol(s); err != nil {
			return nil, err
		}
		if !slices.Contains(a.symbols, s) {
			a.symbols = append(a.symbols, s)
		}
	}
	a.dec = NewDecoder(cfg)
	a.dec.cov = a.cov
	a.dec.hooks = hooks{resync: a.resync, ack: a.ack, refused: a.refused, forced: a.forced, data: a.data}
	return a, nil
}

func checkSymbol(s string) error {
	if !venue.ValidSymbol(s) {
		return fmt.Errorf("%w %q", ErrBadSymbol, s)
	}
	return nil
}

// Venue returns "okx".
func (a *Adapter) Venue() string { return Name }

// Coverage reports the link state and the streams observed on it.
func (a *Adapter) Coverage() venue.Coverage { return a.cov.Snapshot() }

// Start launches the adapter's goroutines and returns at once; they run
// until ctx is done or Stop is called (venue.Lifecycle).
func (a *Adapter) Start(ctx context.Context) error {
	return a.life.Start(ctx, Name, a.run)
}

// Stop closes the link and waits for the adapter's goroutines, or until
// ctx is done (then it returns ctx.Err() and they finish on their own).
func (a *Adapter) Stop(ctx context.Context) error { return a.life.Stop(ctx) }

// Subscribe adds symbols on the configured channels. A symbol OKX refuses
// comes back as a Refusal notice and is dropped from the wanted set.
func (a *Adapter) Subscribe(symbols ...string) error {
	for _, s := range symbols {
		if err := checkSymbol(s); err != nil {
			return err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range symbols {
		if slices.Contains(a.symbols, s) {
			continue
		}
		a.symbols = append(a.symbols, s)
		if a.link != nil {
			a.sendLocked(a.link, request("subscribe", a.cfg.Channels, s))
		}
	}
	return nil
}

// Unsubscribe removes symbols; their streams leave coverage at once.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range symbols {
		i := -1
		for j, x := range a.symbols {
			if x == s {
				i = j
			}
		}
		if i < 0 {
			continue
		}
		a.symbols = append(a.symbols[:i], a.symbols[i+1:]...)
		if a.link != nil {
			a.sendLocked(a.link, request("unsubscribe", a.cfg.Channels, s))
		}
		for _, c := range a.cfg.Channels {
			a.cov.Forget(venue.NewStream(Name, c, s))
		}
	}
	return nil
}

// request builds {"op":op,"args":[{"channel":…,"instId":sym},…]}. The
// symbol was checked to need no escaping.
func request(op string, chans []venue.Channel, sym string) []byte {
	b := make([]byte, 0, 64+48*len(chans))
	b = append(b, `{"op":"`...)
	b = append(b, op...)
	b = append(b, `","args":[`...)
	for i, c := range chans {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"channel":"`...)
		b = append(b, okxChannel(c)...)
		b = append(b, `","instId":"`...)
		b = append(b, sym...)
		b = append(b, `"}`...)
	}
	return append(b, "]}"...)
}

// sendLocked queues msg on l; a full queue drops the link (the reconnect
// resubscribes everything). a.mu must be held.
func (a *Adapter) sendLocked(l *link, msg []byte) {
	select {
	case l.out <- msg:
	default:
		a.log.Warn("okx request queue full; dropping the link")
		l.conn.CloseNow()
	}
}

func (a *Adapter) send(msg []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.link != nil {
		a.sendLocked(a.link, msg)
	}
}

// Decoder hooks, called on the run goroutine.

func (a *Adapter) resync(instID string) {
	// OKX's procedure: unsubscribe the books channel, subscribe again; the
	// subscription starts with a fresh snapshot.
	ch := []venue.Channel{venue.Level2}
	a.send(request("unsubscribe", ch, instID))
	a.send(request("subscribe", ch, instID))
}

func (a *Adapter) ack(op, channel, instID string) {
	s := a.sess
	if s == nil || op != "subscribe" {
		return
	}
	delete(s.pending, channel+"\x00"+instID)
	a.maybeUp(time.Now())
}

func (a *Adapter) refused(channel, instID string) {
	if instID == "" {
		return
	}
	a.mu.Lock()
	for i, x := range a.symbols {
		if x == instID {
			a.symbols = append(a.symbols[:i], a.symbols[i+1:]...)
			break
		}
	}
	a.mu.Unlock()
	if s := a.sess; s != nil {
		for k := range s.pending {
			if len(k) > len(instID) && k[len(k)-len(instID)-1:] == "\x00"+instID {
				delete(s.pending, k)
			}
		}
		a.maybeUp(time.Now())
	}
}

func (a *Adapter) forced(code, msg string) {
	if s := a.sess; s != nil {
		s.forced = "venue notice " + code + ": " + msg
	}
}

func (a *Adapter) data() {
	if s := a.sess; s != nil && !s.up {
		// The venue is serving pushes: whatever acks are missing, the link
		// is up.
		clear(s.pending)
		a.maybeUp(time.Now())
	}
}

// maybeUp emits link_up once every initial subscription is answered.
func (a *Adapter) maybeUp(now time.Time) {
	s := a.sess
	if s == nil || s.up || len(s.pending) > 0 {
		return
	}
	s.up = true
	a.cov.SetLink(venue.LinkUp, now)
	a.cfg.Sink.Notice(notice.Must(notice.LinkUp, Name, "", now, "connected and subscribed", nil))
}

// run connects, reads and reconnects until ctx is done.
func (a *Adapter) run(ctx context.Context) {
	var bo venue.Backoff // first retry at once, then 1 s doubling to 30 s
	var lastDial time.Time
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			delay := bo.Next()
			if wait := dialSpacing - time.Since(lastDial); delay < wait {
				delay = wait // OKX allows 3 connection attempts per second
			}
			a.cfg.Sink.Notice(notice.Must(notice.LinkReconnecting, Name, "", time.Now(),
				"reconnecting", map[string]any{"attempt": bo.Attempt(), "delay_ms": delay.Milliseconds()}))
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				a.cov.SetLink(venue.LinkIdle, time.Now())
				return
			case <-t.C:
			}
		}
		lastDial = time.Now()
		if up := a.session(ctx); up {
			bo.Reset()
		}
		if ctx.Err() != nil {
			a.cov.SetLink(venue.LinkIdle, time.Now())
			return
		}
	}
}

// session runs one connection to its end and reports whether it came up.
func (a *Adapter) session(ctx context.Context) bool {
	a.cov.SetLink(venue.LinkConnecting, time.Now())
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, _, err := websocket.Dial(dctx, a.cfg.WSURL, nil)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("okx dial failed", "err", err)
		}
		a.cov.SetLink(venue.LinkDown, time.Now())
		return false
	}
	conn.SetReadLimit(readLimit)
	sctx, scancel := context.WithCancel(ctx)
	l := &link{out: make(chan []byte, outQueue), conn: conn}
	s := &session{l: l, pending: map[string]bool{}, start: time.Now()}
	s.lastRecv.Store(time.Now().UnixNano())
	a.sess = s

	a.mu.Lock()
	a.link = l
	for _, sym := range a.symbols {
		for _, c := range a.cfg.Channels {
			s.pending[okxChannel(c)+"\x00"+sym] = true
		}
		a.sendLocked(l, request("subscribe", a.cfg.Channels, sym))
	}
	a.mu.Unlock()
	a.maybeUp(time.Now()) // nothing to subscribe: up at once

	var wg sync.WaitGroup
	wg.Add(1)
	dead := make(chan string, 1)
	go func() {
		defer wg.Done()
		a.writer(sctx, s, dead)
	}()

	reason := a.read(sctx, s)
	select {
	case r := <-dead:
		reason = r
	default:
	}
	scancel()
	conn.CloseNow()
	wg.Wait()

	a.mu.Lock()
	a.link = nil
	a.mu.Unlock()
	a.sess = nil

	now := time.Now()
	a.dec.LinkDown(now)
	if a.cfg.Recorder != nil {
		a.cfg.Recorder.Disconnect(Name, now)
	}
	a.cov.SetLink(venue.LinkDown, now) // before the notice: coverage is clear when it arrives
	a.cfg.Sink.Notice(notice.Must(notice.LinkDown, Name, "", now, "link down: "+reason,
		map[string]any{"reason": reason}))
	return s.up
}

// read reads frames into the decoder until the link fails; it returns why.
func (a *Adapter) read(ctx context.Context, s *session) string {
	var buf []byte
	for {
		_, r, err := s.l.conn.Reader(ctx)
		if err == nil {
			buf, err = venue.ReadFrame(r, buf)
		}
		if err != nil {
			if ctx.Err() != nil {
				return "stopped"
			}
			return "read: " + err.Error()
		}
		recv := time.Now()
		s.lastRecv.Store(recv.UnixNano())
		if a.cfg.Recorder != nil {
			a.cfg.Recorder.Frame(Name, recv, buf)
		}
		a.dec.Frame(recv, buf)
		if s.forced != "" {
			return s.forced
		}
		if !s.up && recv.Sub(s.start) > ackDeadline {
			// Frames (at least pongs) arrive but some acks never did.
			var missing []string
			for k := range s.pending {
				missing = append(missing, strings.Replace(k, "\x00", ":", 1))
			}
			a.log.Warn("okx subscriptions not acknowledged", "args", missing)
			clear(s.pending)
			a.maybeUp(recv)
		}
	}
}

// writer sends queued requests and the keepalive, and declares the link
// dead when nothing has arrived for ReadTimeout.
func (a *Adapter) writer(ctx context.Context, s *session, dead chan<- string) {
	tick := min(a.cfg.PingInterval, a.cfg.ReadTimeout) / 4
	tick = max(tick, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	var lastPing time.Time
	write := func(msg []byte) bool {
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		defer cancel()
		if err := s.l.conn.Write(wctx, websocket.MessageText, msg); err != nil {
			if ctx.Err() == nil {
				dead <- "write: " + err.Error()
			}
			s.l.conn.CloseNow()
			return false
		}
		return true
	}
	ping := []byte("ping")
	for {
		select {
		case <-ctx.Done():
			return
		case msg := <-s.l.out:
			if !write(msg) {
				return
			}
		case now := <-t.C:
			idle := now.Sub(time.Unix(0, s.lastRecv.Load()))
			if idle >= a.cfg.ReadTimeout {
				dead <- fmt.Sprintf("nothing received for %v", idle.Round(time.Millisecond))
				s.l.conn.CloseNow()
				return
			}
			if idle >= a.cfg.PingInterval && now.Sub(lastPing) >= a.cfg.PingInterval {
				lastPing = now
				if !write(ping) {
					return
				}
			}
		}
	}
}
