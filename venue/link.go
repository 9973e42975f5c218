package venue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanoutd/fanoutd/notice"
)

// Conn is one connection of a Link: the transport it reads frames from and
// writes requests to. venue/wsconn is the websocket one; tests use others.
type Conn interface {
	// Read reads the next frame into buf[:0], reusing its memory.
	Read(ctx context.Context, buf []byte) ([]byte, error)
	// Write sends one text frame.
	Write(ctx context.Context, msg []byte) error
	// Ping sends a transport-level ping and waits for its pong.
	Ping(ctx context.Context) error
	// Close closes the connection at once; a blocked Read returns.
	Close() error
}

// DialFunc connects to url. alive is called whenever the transport sees life
// that is not a frame (a ping or pong); it counts against the read timeout.
type DialFunc func(ctx context.Context, url string, alive func()) (Conn, error)

// DialError is a refused dial: the HTTP status the venue answered the
// upgrade with.
type DialError struct {
	StatusCode int
	Err        error
}

func (e *DialError) Error() string { return e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }

// Link defaults, for the fields of LinkConfig left zero.
const (
	DefaultDialTimeout  = 10 * time.Second
	DefaultWriteTimeout = 5 * time.Second
	DefaultStableAfter  = 10 * time.Second
	DefaultSendQueue    = 256
)

// LinkConfig is what an adapter gives its Link: where to connect, how to
// keep the connection alive, and where frames and notices go.
type LinkConfig struct {
	Venue string
	URL   string
	Dial  DialFunc // required
	// ReadTimeout: a connection that delivers nothing (no frame, no pong)
	// for this long is dropped. Required.
	ReadTimeout time.Duration
	// PingInterval is how often a keepalive is sent; 0 sends none.
	PingInterval time.Duration
	// Ping returns the venue's keepalive frame; nil sends transport pings.
	Ping func() []byte
	// DialSpacing is the least time between two dial attempts.
	DialSpacing time.Duration
	// MaxSendsPerSecond paces requests: one at most every
	// 1/MaxSendsPerSecond, so a burst drains evenly and no second (however
	// the venue cuts its windows) sees more than one extra. 0 is no bound.
	// Keepalives are not counted.
	MaxSendsPerSecond int
	// SendQueue bounds the requests waiting to be written; past it the
	// connection is dropped (the next one resubscribes). Defaults to
	// DefaultSendQueue.
	SendQueue int
	// StableAfter: a connection that was up this long restarts the
	// backoff. Defaults to DefaultStableAfter.
	StableAfter  time.Duration
	DialTimeout  time.Duration // Defaults to DefaultDialTimeout.
	WriteTimeout time.Duration // Defaults to DefaultWriteTimeout.

	Decoder  Decoder          // receives every frame; required
	Sink     Sink             // receives the link notices; required
	Recorder Recorder         // nil records nothing
	Coverage *CoverageTracker // the link state is kept here; required
	Logger   *slog.Logger     // Defaults to slog.Default().

	// Connected runs for each new connection before its first frame is
	// read, with the decode lock held: it resets per-connection state and
	// queues the subscriptions (Send). It returns true if the link is up
	// at once; otherwise the adapter calls Up once the venue has answered.
	Connected func(t time.Time) (up bool)
	// Tick, if set, runs every tick on the writer goroutine (without the
	// lock); a non-empty result drops the connection with that reason.
	Tick func(t time.Time) string
	// TickInterval, if set, makes ticks at least this frequent (they are
	// otherwise a quarter of ReadTimeout, or PingInterval if shorter): an
	// adapter's retries are due to the tick.
	TickInterval time.Duration

	// SendPacer and DialPacer, if set, replace MaxSendsPerSecond and
	// DialSpacing with pacers shared by several links: a venue whose
	// limits are per address, not per connection (Pool sets them).
	SendPacer *Pacer
	DialPacer *Pacer

	// Set by Pool: the decode lock shared by its connections, and the
	// pool and index of this connection (named in the link notices).
	lock *sync.Mutex
	pool *Pool
	conn int
}

// Link is the one venue link lifecycle every adapter runs: dial, subscribe
// (through the adapter's Connected hook), read frames into the decoder,
// keep alive, watch for silence, and reconnect with backoff, emitting the
// link_up, link_down and link_reconnecting notices. Build one with NewLink.
type Link struct {
	cfg LinkConfig
	log *slog.Logger

	// mu is the decode lock: it serialises the decoder, the recorder and
	// the sink (shared by the connections of a Pool). Taken before cmu.
	mu *sync.Mutex

	cmu  sync.Mutex // protects conn
	conn *linkConn  // the current connection, nil between connections
}

// linkConn is one connection and what the Link knows of it.
type linkConn struct {
	c      Conn
	out    chan []byte
	last   atomic.Int64 // unix nanos of the last frame or pong
	cancel context.CancelFunc
	reason string // why it was dropped on purpose; guarded by Link.cmu
	up     bool   // link_up emitted; guarded by Link.mu
	upAt   time.Time
}

// NewLink checks cfg and resolves its defaults.
func NewLink(cfg LinkConfig) (*Link, error) {
	if cfg.Dial == nil || cfg.Decoder == nil || cfg.Sink == nil || cfg.Coverage == nil || cfg.ReadTimeout <= 0 {
		return nil, fmt.Errorf("venue: %s: link config lacks Dial, Decoder, Sink, Coverage or ReadTimeout", cfg.Venue)
	}
	if cfg.SendQueue <= 0 {
		cfg.SendQueue = DefaultSendQueue
	}
	if cfg.StableAfter <= 0 {
		cfg.StableAfter = DefaultStableAfter
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SendPacer == nil && cfg.MaxSendsPerSecond > 0 {
		cfg.SendPacer = &Pacer{Every: time.Second / time.Duration(cfg.MaxSendsPerSecond)}
	}
	if cfg.DialPacer == nil {
		cfg.DialPacer = &Pacer{Every: cfg.DialSpacing}
	}
	mu := cfg.lock
	if mu == nil {
		mu = new(sync.Mutex)
	}
	return &Link{cfg: cfg, log: cfg.Logger, mu: mu}, nil
}

// Run connects and reconnects until ctx is done. It is the adapter's main
// goroutine (started through Lifecycle).
func (l *Link) Run(ctx context.Context) {
	var bo Backoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			delay := bo.Next()
			if wait := l.cfg.DialPacer.Pending(); delay < wait {
				delay = wait
			}
			l.mu.Lock()
			l.notify(notice.LinkReconnecting, time.Now(), fmt.Sprintf("reconnecting in %v", delay.Round(time.Millisecond)),
				map[string]any{"attempt": bo.Attempt(), "delay_ms": delay.Milliseconds()})
			l.mu.Unlock()
			if !sleep(ctx, delay) {
				return
			}
		}
		if !l.cfg.DialPacer.Wait(ctx) {
			return
		}
		if upFor := l.session(ctx); upFor >= l.cfg.StableAfter {
			bo.Reset()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// Do runs f with the decode lock held, so that f may use the decoder and
// emit to the sink in order with the frames.
func (l *Link) Do(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

// Frame records and decodes a frame that did not come from the socket (a
// REST response a book depends on), in order with the socket's frames.
// The decode lock must be held (call it inside Do).
func (l *Link) Frame(recv time.Time, frame []byte) { l.frame(recv, frame) }

func (l *Link) frame(recv time.Time, frame []byte) {
	if l.cfg.Recorder != nil {
		l.cfg.Recorder.Frame(l.cfg.Venue, recv, frame)
	}
	l.cfg.Decoder.Frame(recv, frame)
}

// Send queues msg for the current connection. It returns false when there
// is none (the next one resubscribes through Connected). A full queue drops
// the connection.
func (l *Link) Send(msg []byte) bool {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	c := l.conn
	if c == nil {
		return false
	}
	select {
	case c.out <- msg:
		return true
	default:
		l.dropLocked(c, "request queue full")
		return false
	}
}

// Connected reports whether a connection is open (up or not).
func (l *Link) Connected() bool {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	return l.conn != nil
}

// Drop closes the current connection with reason; Run reconnects.
func (l *Link) Drop(reason string) {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if l.conn != nil {
		l.dropLocked(l.conn, reason)
	}
}

func (l *Link) dropLocked(c *linkConn, reason string) {
	if c.reason == "" {
		c.reason = reason
	}
	c.cancel()
	c.c.Close()
}

// Up marks the current connection up and emits link_up, once per
// connection. The decode lock must be held (a decoder hook, or Do).
func (l *Link) Up(t time.Time) {
	l.cmu.Lock()
	c := l.conn
	l.cmu.Unlock()
	if c != nil {
		l.up(c, t)
	}
}

func (l *Link) up(c *linkConn, t time.Time) {
	if c.up {
		return
	}
	c.up, c.upAt = true, t
	l.cfg.Coverage.SetLink(LinkUp, t)
	l.notify(notice.LinkUp, t, "connected to "+l.cfg.URL, map[string]any{"url": l.cfg.URL})
	l.log.Info("link up", "url", l.cfg.URL)
}

// IsUp reports whether the current connection is up. The decode lock must
// be held.
func (l *Link) IsUp() bool {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	return l.conn != nil && l.conn.up
}

func (l *Link) notify(kind notice.Kind, t time.Time, msg string, details map[string]any) {
	if l.cfg.pool != nil {
		details["connection"] = l.cfg.conn
		msg = fmt.Sprintf("connection %d: %s", l.cfg.conn, msg)
	}
	l.cfg.Sink.Notice(notice.Must(kind, l.cfg.Venue, "", t, l.cfg.Venue+": "+msg, details))
}

// session runs one connection to its end and returns how long it was up.
func (l *Link) session(ctx context.Context) time.Duration {
	cov := l.cfg.Coverage
	cov.SetLink(LinkConnecting, time.Now())
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &linkConn{out: make(chan []byte, l.cfg.SendQueue), cancel: cancel}
	alive := func() { c.last.Store(time.Now().UnixNano()) }
	dctx, dcancel := context.WithTimeout(sctx, l.cfg.DialTimeout)
	conn, err := l.cfg.Dial(dctx, l.cfg.URL, alive)
	dcancel()
	if err != nil {
		now := time.Now()
		cov.Failed(now, err)
		if ctx.Err() == nil {
			l.log.Warn("dial failed", "url", l.cfg.URL, "err", err)
		}
		var de *DialError
		if errors.As(err, &de) && (de.StatusCode == 429 || de.StatusCode == 403) {
			// The backoff slows the next attempts.
			l.mu.Lock()
			l.notify(notice.RateLimited, now, fmt.Sprintf("the venue refused the connection: HTTP %d", de.StatusCode),
				map[string]any{"message": err.Error(), "status": de.StatusCode})
			l.mu.Unlock()
		}
		return 0
	}
	c.c = conn
	alive()

	l.mu.Lock()
	l.cmu.Lock()
	l.conn = c
	l.cmu.Unlock()
	if l.cfg.Connected == nil || l.cfg.Connected(time.Now()) {
		l.up(c, time.Now())
	}
	l.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.writer(sctx, c)
	}()
	err = l.read(sctx, c)
	l.cmu.Lock()
	l.dropLocked(c, "")
	l.conn = nil
	reason := c.reason
	l.cmu.Unlock()
	wg.Wait()
	switch {
	case ctx.Err() != nil:
		reason = "stopped"
	case reason == "" && err != nil:
		reason = err.Error()
	case reason == "":
		reason = "closed"
	}

	down := time.Now()
	var upFor time.Duration
	l.mu.Lock()
	if c.up {
		upFor = down.Sub(c.upAt)
	}
	if l.cfg.Recorder != nil {
		l.cfg.Recorder.Disconnect(l.cfg.Venue, down)
	}
	details := map[string]any{"reason": reason, "up_ms": upFor.Milliseconds()}
	if l.cfg.pool != nil && l.cfg.pool.Len() > 1 {
		// One connection of several: its streams alone stop.
		streams := []string{}
		for _, sc := range cov.Snapshot().Streams {
			streams = append(streams, string(sc.Stream))
		}
		details["streams"] = streams
	}
	l.cfg.Decoder.LinkDown(down)
	cov.SetLink(LinkDown, down) // before the notice: coverage is clear when it arrives
	l.notify(notice.LinkDown, down, "link down: "+reason, details)
	l.mu.Unlock()
	l.log.Warn("link down", "reason", reason)
	return upFor
}

// read reads frames into the decoder until the connection fails. One
// buffer is reused; a huge one is let go after use.
func (l *Link) read(ctx context.Context, c *linkConn) error {
	buf := make([]byte, 0, 64<<10)
	for {
		var err error
		if buf, err = c.c.Read(ctx, buf); err != nil {
			return err
		}
		recv := time.Now()
		c.last.Store(recv.UnixNano())
		l.mu.Lock()
		l.frame(recv, buf)
		l.mu.Unlock()
		if cap(buf) > 4<<20 {
			buf = make([]byte, 0, 64<<10)
		}
	}
}

// writer writes queued requests (evenly paced at MaxSendsPerSecond),
// sends keepalives, runs the Tick hook and drops a silent connection.
func (l *Link) writer(ctx context.Context, c *linkConn) {
	tick := l.cfg.ReadTimeout / 4
	if p := l.cfg.PingInterval; p > 0 {
		tick = min(tick, p)
	}
	if ti := l.cfg.TickInterval; ti > 0 {
		tick = min(tick, ti)
	}
	t := time.NewTicker(max(tick, 10*time.Millisecond))
	defer t.Stop()
	lastPing := time.Now()
	var pinging atomic.Bool
	var pwg sync.WaitGroup
	defer pwg.Wait()
	write := func(msg []byte) bool {
		wctx, cancel := context.WithTimeout(ctx, l.cfg.WriteTimeout)
		defer cancel()
		if err := c.c.Write(wctx, msg); err != nil {
			l.cmu.Lock()
			l.dropLocked(c, "write: "+err.Error())
			l.cmu.Unlock()
			return false
		}
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case msg := <-c.out:
			if p := l.cfg.SendPacer; p != nil && !p.Wait(ctx) {
				return
			}
			if !write(msg) {
				return
			}
		case now := <-t.C:
			if idle := now.Sub(time.Unix(0, c.last.Load())); idle > l.cfg.ReadTimeout {
				l.cmu.Lock()
				l.dropLocked(c, fmt.Sprintf("nothing received for %v", idle.Round(time.Millisecond)))
				l.cmu.Unlock()
				return
			}
			if l.cfg.Tick != nil {
				if reason := l.cfg.Tick(now); reason != "" {
					l.cmu.Lock()
					l.dropLocked(c, reason)
					l.cmu.Unlock()
					return
				}
			}
			if p := l.cfg.PingInterval; p > 0 && now.Sub(lastPing) >= p {
				lastPing = now
				if l.cfg.Ping != nil {
					if !write(l.cfg.Ping()) {
						return
					}
				} else if pinging.CompareAndSwap(false, true) {
					pwg.Add(1)
					go func() {
						defer pwg.Done()
						defer pinging.Store(false)
						pctx, cancel := context.WithTimeout(ctx, l.cfg.ReadTimeout)
						defer cancel()
						if c.c.Ping(pctx) == nil {
							c.last.Store(time.Now().UnixNano())
						}
					}()
				}
			}
		}
	}
}

// Pacer spaces events at least Every apart, however many goroutines
// share it: a venue's requests or dials, per connection or per address.
// The zero Pacer (or a nil one) never waits. Safe for concurrent use.
type Pacer struct {
	Every time.Duration

	mu   sync.Mutex // protects next
	next time.Time  // the earliest time of the next event
}

// Wait takes the next turn and sleeps until it comes; false if ctx ended
// first (the turn is spent).
func (p *Pacer) Wait(ctx context.Context) bool {
	if p == nil || p.Every <= 0 {
		return ctx.Err() == nil
	}
	p.mu.Lock()
	now := time.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(p.Every)
	p.mu.Unlock()
	return sleep(ctx, at.Sub(now))
}

// Pending returns how long a Wait now would sleep.
func (p *Pacer) Pending() time.Duration {
	if p == nil || p.Every <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(time.Until(p.next), 0)
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
