package coinbase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Defaults for the fields of venue.Config left zero.
const (
	// DefaultWSURL is Coinbase Advanced Trade's public market-data endpoint.
	DefaultWSURL = "wss://advanced-trade-ws.coinbase.com"
	// DefaultReadTimeout: heartbeats arrive every second, so ten seconds
	// of nothing is a dead link.
	DefaultReadTimeout = 10 * time.Second
	// ReadLimit is the largest frame read: a full-book level2 snapshot of
	// a busy product runs to megabytes.
	ReadLimit = 32 << 20

	dialTimeout  = 10 * time.Second
	writeTimeout = 5 * time.Second
	// stableAfter is how long a link must stay up for the next drop to
	// reconnect at once rather than continue the backoff.
	stableAfter = 10 * time.Second
	// Coinbase allows 8 connections and 8 unauthenticated messages per
	// second per IP: dials are spaced by minDialGap, and no more than
	// msgsPerSec subscribe/unsubscribe messages go out in any second.
	minDialGap = time.Second / 8
	msgsPerSec = 8
)

// Adapter is fanoutd's connection to Coinbase Advanced Trade. Build one
// with New; see the package doc for the protocol it speaks.
type Adapter struct {
	cfg          venue.Config
	url          string
	readTimeout  time.Duration
	pingInterval time.Duration
	log          *slog.Logger
	cov          *venue.CoverageTracker

	decMu sync.Mutex // protects dec; taken before mu, never after
	dec   *Decoder

	mu      sync.Mutex // protects the fields below
	symbols []string   // wanted symbols, in the order first asked for
	link    *link      // the connection now up, nil if none
	life    venue.Lifecycle

	// Used only by the one writer goroutine alive at a time.
	sent  [msgsPerSec]time.Time // send times of the last messages, a ring
	sentN int
}

var _ venue.Adapter = (*Adapter)(nil)

// link is one websocket connection and its goroutines.
type link struct {
	ws     *websocket.Conn
	cancel context.CancelFunc
	last   atomic.Int64 // unix nanos of the last frame or pong

	qmu   sync.Mutex // protects queue
	queue []request
	wake  chan struct{} // cap 1: the queue has requests
}

func (l *link) push(rs ...request) {
	l.qmu.Lock()
	l.queue = append(l.queue, rs...)
	l.qmu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *link) pop() (request, bool) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if len(l.queue) == 0 {
		return request{}, false
	}
	r := l.queue[0]
	l.queue = l.queue[1:]
	return r, true
}

// New returns an adapter for cfg. Sink is required; WSURL defaults to
// DefaultWSURL, ReadTimeout to DefaultReadTimeout, PingInterval to 0 (no
// websocket pings: the heartbeats channel is Coinbase's keepalive; a
// non-zero value adds pings, whose pongs also count as life).
func New(cfg venue.Config) (*Adapter, error) {
	if cfg.Sink == nil {
		return nil, errors.New("coinbase: config has no Sink")
	}
	for _, ch := range cfg.Channels {
		if !ch.Valid() {
			return nil, fmt.Errorf("coinbase: unknown channel %q", ch)
		}
	}
	a := &Adapter{cfg: cfg, url: cfg.WSURL, readTimeout: cfg.ReadTimeout, pingInterval: cfg.PingInterval,
		log: cfg.Logger}
	if a.url == "" {
		a.url = DefaultWSURL
	}
	if a.readTimeout <= 0 {
		a.readTimeout = DefaultReadTimeout
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.log = a.log.With("venue", Name)
	a.dec = NewDecoder(cfg)
	a.cov = a.dec.cov
	a.dec.onRefuse = a.refused
	if err := a.addSymbols(cfg.Symbols); err != nil {
		return nil, err
	}
	return a, nil
}

// Venue returns "coinbase".
func (a *Adapter) Venue() string { return Name }

// Coverage reports the link state and the streams observed arriving.
func (a *Adapter) Coverage() venue.Coverage { return a.cov.Snapshot() }

// Start launches the adapter's goroutines and returns at once; they run
// until ctx is done or Stop is called (venue.Lifecycle).
func (a *Adapter) Start(ctx context.Context) error {
	return a.life.Start(ctx, Name, a.run)
}

// Stop closes the link and waits for the adapter's goroutines, or until
// ctx is done (then it returns ctx.Err() and they finish on their own).
func (a *Adapter) Stop(ctx context.Context) error { return a.life.Stop(ctx) }

func (a *Adapter) addSymbols(syms []string) error {
	for _, s := range syms {
		if _, err := venue.ParseStream(string(venue.NewStream(Name, venue.Level2, s))); err != nil {
			return fmt.Errorf("coinbase: symbol %q: %w", s, err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range syms {
		if !slices.Contains(a.symbols, s) {
			a.symbols = append(a.symbols, s)
		}
	}
	return nil
}

// Subscribe adds symbols on the configured channels. A symbol Coinbase
// does not know comes back as a refusal notice.
func (a *Adapter) Subscribe(symbols ...string) error {
	if err := a.addSymbols(symbols); err != nil {
		return err
	}
	a.mu.Lock()
	l := a.link
	a.mu.Unlock()
	if l != nil && len(symbols) > 0 {
		l.push(a.requests(symbols, false)...)
	}
	return nil
}

// Unsubscribe removes symbols; their books are dropped.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.mu.Lock()
	a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return slices.Contains(symbols, s) })
	l := a.link
	a.mu.Unlock()
	a.decMu.Lock()
	for _, s := range symbols {
		a.dec.forget(s)
	}
	a.decMu.Unlock()
	if l != nil && len(symbols) > 0 {
		l.push(a.requests(symbols, true)...)
	}
	return nil
}

// refused is the decoder's callback for a refused symbol: it is not
// asked for again (no retry loop) until Subscribe names it again.
// Called with decMu held.
func (a *Adapter) refused(symbol string) {
	a.mu.Lock()
	a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return s == symbol })
	a.mu.Unlock()
}

// venueChannel is the Advanced Trade channel for one of ours.
func venueChannel(ch venue.Channel) string {
	switch ch {
	case venue.Level2:
		return "level2"
	case venue.Trades:
		return "market_trades"
	}
	return "ticker"
}

// requests builds one request per configured channel: Advanced Trade
// takes one channel per message.
func (a *Adapter) requests(symbols []string, unsub bool) []request {
	var rs []request
	for _, ch := range a.cfg.ChannelsOrAll() {
		rs = append(rs, request{unsubscribe: unsub, channel: venueChannel(ch), products: slices.Clone(symbols)})
	}
	return rs
}

func (a *Adapter) notify(kind notice.Kind, t time.Time, msg string, details map[string]any) {
	a.cfg.Sink.Notice(notice.Must(kind, Name, "", t, msg, details))
}

// run is the connection loop: connect, read until the link fails, back
// off, again. It is the only goroutine that calls the Sink.
func (a *Adapter) run(ctx context.Context) {
	var bo venue.Backoff
	var lastDial time.Time
	for ctx.Err() == nil {
		if wait := minDialGap - time.Since(lastDial); wait > 0 {
			if !sleep(ctx, wait) {
				return
			}
		}
		lastDial = time.Now()
		up, err := a.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if up >= stableAfter {
			bo.Reset()
		}
		delay := bo.Next()
		a.notify(notice.LinkReconnecting, time.Now(), fmt.Sprintf("coinbase: reconnecting in %v", delay.Round(time.Millisecond)),
			map[string]any{"attempt": bo.Attempt(), "delay_ms": delay.Milliseconds(), "error": errString(err)})
		if !sleep(ctx, delay) {
			return
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
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

// errResync is why a link is dropped on the decoder's request.
var errResync = errors.New("coinbase: resync")

// session runs one connection. It returns how long the link was up (0 if
// it never came up) and why it ended.
func (a *Adapter) session(ctx context.Context) (time.Duration, error) {
	a.cov.SetLink(venue.LinkConnecting, time.Now())
	dctx, dcancel := context.WithTimeout(ctx, dialTimeout)
	ws, _, err := websocket.Dial(dctx, a.url, nil)
	dcancel()
	if err != nil {
		a.cov.SetLink(venue.LinkDown, time.Now())
		a.log.Warn("dial failed", "err", err)
		return 0, err
	}
	ws.SetReadLimit(ReadLimit)
	lctx, lcancel := context.WithCancel(ctx)
	l := &link{ws: ws, cancel: lcancel, wake: make(chan struct{}, 1)}
	upAt := time.Now()
	l.last.Store(upAt.UnixNano())

	a.mu.Lock()
	syms := slices.Clone(a.symbols)
	a.link = l
	a.mu.Unlock()
	// Subscribe at once: heartbeats keep the link alive, and Coinbase
	// drops a connection that subscribes to nothing.
	l.push(request{channel: "heartbeats"})
	if len(syms) > 0 {
		l.push(a.requests(syms, false)...)
	}

	var wg sync.WaitGroup
	var timedOut atomic.Bool
	wg.Add(2)
	go func() { defer wg.Done(); a.writer(lctx, l) }()
	go func() { defer wg.Done(); a.watchdog(lctx, l, &timedOut) }()
	if a.pingInterval > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); a.pinger(lctx, l) }()
	}

	a.cov.SetLink(venue.LinkUp, upAt)
	a.notify(notice.LinkUp, upAt, "coinbase: connected", map[string]any{"url": a.url, "symbols": syms})
	a.log.Info("link up", "url", a.url)

	err = a.read(lctx, l)
	if timedOut.Load() {
		err = fmt.Errorf("coinbase: nothing received for %v", a.readTimeout)
	}
	lcancel()
	ws.CloseNow()
	wg.Wait()

	a.mu.Lock()
	a.link = nil
	a.mu.Unlock()
	down := time.Now()
	if a.cfg.Recorder != nil {
		a.cfg.Recorder.Disconnect(Name, down)
	}
	a.decMu.Lock()
	a.dec.LinkDown(down)
	a.decMu.Unlock()
	a.cov.SetLink(venue.LinkDown, down)
	reason := errString(err)
	if ctx.Err() != nil {
		reason = "stopped"
	}
	a.notify(notice.LinkDown, down, "coinbase: link down: "+reason, map[string]any{"reason": reason, "up_ms": down.Sub(upAt).Milliseconds()})
	a.log.Warn("link down", "reason", reason)
	return down.Sub(upAt), err
}

// read reads frames until the link fails or the decoder asks for a
// resync. One buffer is reused for every frame.
func (a *Adapter) read(ctx context.Context, l *link) error {
	buf := make([]byte, 0, 64<<10)
	for {
		_, r, err := l.ws.Reader(ctx)
		if err != nil {
			return err
		}
		if buf, err = venue.ReadFrame(r, buf); err != nil {
			return err
		}
		recv := time.Now()
		l.last.Store(recv.UnixNano())
		if a.cfg.Recorder != nil {
			a.cfg.Recorder.Frame(Name, recv, buf)
		}
		a.decMu.Lock()
		a.dec.Frame(recv, buf)
		why := a.dec.resync
		a.decMu.Unlock()
		if why != "" {
			return fmt.Errorf("%w: %s", errResync, why)
		}
		if cap(buf) > 4<<20 && len(buf) < 64<<10 {
			buf = make([]byte, 0, 64<<10) // let a huge snapshot's buffer go
		}
	}
}

type wireRequest struct {
	Type       string   `json:"type"`
	ProductIDs []string `json:"product_ids,omitempty"`
	Channel    string   `json:"channel"`
}

// writer sends queued requests in order, at most msgsPerSec in any second.
func (a *Adapter) writer(ctx context.Context, l *link) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		for {
			r, ok := l.pop()
			if !ok {
				break
			}
			if !sleep(ctx, time.Until(a.sent[a.sentN%msgsPerSec].Add(time.Second))) {
				return
			}
			typ := "subscribe"
			if r.unsubscribe {
				typ = "unsubscribe"
			}
			msg, _ := json.Marshal(wireRequest{Type: typ, ProductIDs: r.products, Channel: r.channel})
			a.decMu.Lock()
			a.dec.expect(r)
			a.decMu.Unlock()
			wctx, cancel := context.WithTimeout(ctx, writeTimeout)
			err := l.ws.Write(wctx, websocket.MessageText, msg)
			cancel()
			a.sent[a.sentN%msgsPerSec] = time.Now()
			a.sentN++
			if err != nil {
				a.log.Warn("write failed", "err", err)
				l.cancel()
				return
			}
		}
	}
}

// watchdog drops a link that has delivered nothing (no frame, no pong) for
// the read timeout.
func (a *Adapter) watchdog(ctx context.Context, l *link, timedOut *atomic.Bool) {
	t := time.NewTicker(max(a.readTimeout/8, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.Sub(time.Unix(0, l.last.Load())) > a.readTimeout {
				timedOut.Store(true)
				l.cancel()
				return
			}
		}
	}
}

// pinger sends websocket pings every PingInterval; a pong counts as life.
func (a *Adapter) pinger(ctx context.Context, l *link) {
	t := time.NewTicker(a.pingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, a.readTimeout)
			err := l.ws.Ping(pctx)
			cancel()
			if err == nil {
				l.last.Store(time.Now().UnixNano())
			}
		}
	}
}
