package binance

import (
	"context"
	"encoding/json"
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

// Production endpoints, the defaults of Config.WSURL and Config.RESTURL.
const (
	DefaultWSURL   = "wss://stream.binance.com:9443"
	DefaultRESTURL = "https://api.binance.com"
)

// Venue rules and the adapter's defaults (see the package doc for sources).
const (
	// DefaultReadTimeout: Binance pings every 20 s; a link that delivers no
	// frame, ping or pong for three of those is dead.
	DefaultReadTimeout = 60 * time.Second
	// DefaultPingInterval: our own ping, a liveness probe answered by a pong.
	// One every 20 s is 0.05 of the 5 messages/s a connection may send.
	DefaultPingInterval = 20 * time.Second
	// DefaultDepth is the REST snapshot's limit (Binance's maximum).
	DefaultDepth = 5000

	// readLimit is the websocket read limit. Stream frames are small; the
	// REST snapshot, the largest thing a book needs, is read over HTTP
	// (restMaxBody). 16 MiB leaves room for anything the venue adds.
	readLimit = 16 << 20
	// controlSpacing keeps our messages to at most 4 a second, under the
	// 5 incoming messages/s Binance allows a connection before it
	// disconnects (pongs and pings count too; those are rare).
	controlSpacing = 250 * time.Millisecond
	// maxRequestBytes bounds one SUBSCRIBE message; streams beyond go in the
	// next (Binance documents no byte limit; 4 KiB is conservative).
	maxRequestBytes = 4096
	// maxStreams is Binance's limit of streams per connection.
	maxStreams = 1024
	// Connection attempts: Binance allows 300 per 5 minutes per IP; we spend
	// at most a fifth of that, whatever the backoff says.
	connWindow    = 5 * time.Minute
	connPerWindow = 60
)

// Adapter is the Binance spot adapter: one websocket to the combined-stream
// endpoint, live SUBSCRIBE/UNSUBSCRIBE with ids, and REST depth snapshots
// bridged to the diff-depth stream by the official procedure. Build one with
// New; the zero Adapter is not usable.
type Adapter struct {
	cfg          venue.Config
	wsURL        string
	readTimeout  time.Duration
	pingInterval time.Duration
	depth        int
	log          *slog.Logger
	rest         *rest
	cov          *venue.CoverageTracker

	mu  sync.Mutex // serialises the decoder, the sink and the recorder; taken before smu
	dec *Decoder

	smu    sync.Mutex      // protects the fields below
	want   map[string]bool // symbols wanted, as given
	known  map[string]bool // symbols exchangeInfo confirmed
	link   *link           // the open connection, nil between connections
	epoch  uint64          // connection counter
	fetchQ map[string]uint64

	kick      chan struct{} // subscriptions changed
	fetchKick chan struct{} // fetchQ grew
	life      venue.Lifecycle
}

var _ venue.Adapter = (*Adapter)(nil)

// link is one websocket connection and its subscription state.
type link struct {
	ws       *websocket.Conn
	epoch    uint64
	activity atomic.Int64 // unix nanoseconds of the last frame, ping or pong

	// Protected by Adapter.smu:
	up     bool
	nextID int64
	subs   map[string]int64 // stream → id of its pending request, 0 once acknowledged
	reqs   map[int64]request
	reason string // why we closed it, if we did
}

type request struct {
	method  string
	streams []string
	at      time.Time
}

// New returns an adapter for cfg. cfg.Sink is required; endpoints default to
// production, ReadTimeout to DefaultReadTimeout, PingInterval to
// DefaultPingInterval, Depth (the REST snapshot's limit, 5 to 5000) to
// DefaultDepth.
func New(cfg venue.Config) (*Adapter, error) {
	if cfg.Sink == nil {
		return nil, errors.New("binance: Config.Sink is required")
	}
	if cfg.Depth < 0 || cfg.Depth > 5000 {
		return nil, fmt.Errorf("binance: Config.Depth %d: want 0 (default 5000) to 5000", cfg.Depth)
	}
	for _, ch := range cfg.ChannelsOrAll() {
		if !ch.Valid() {
			return nil, fmt.Errorf("binance: unknown channel %q", ch)
		}
	}
	a := &Adapter{
		cfg:          cfg,
		wsURL:        cfg.WSURL,
		readTimeout:  cfg.ReadTimeout,
		pingInterval: cfg.PingInterval,
		depth:        cfg.Depth,
		log:          cfg.Logger,
		cov:          venue.NewCoverageTracker(Name),
		want:         map[string]bool{},
		known:        map[string]bool{},
		fetchQ:       map[string]uint64{},
		kick:         make(chan struct{}, 1),
		fetchKick:    make(chan struct{}, 1),
	}
	if a.wsURL == "" {
		a.wsURL = DefaultWSURL
	}
	restURL := cfg.RESTURL
	if restURL == "" {
		restURL = DefaultRESTURL
	}
	if a.readTimeout <= 0 {
		a.readTimeout = DefaultReadTimeout
	}
	if a.pingInterval <= 0 {
		a.pingInterval = DefaultPingInterval
	}
	if a.depth == 0 {
		a.depth = DefaultDepth
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.log = a.log.With("venue", Name)
	a.rest = newREST(restURL)
	for _, s := range cfg.Symbols {
		if err := checkSymbol(s); err != nil {
			return nil, err
		}
		a.want[s] = true
	}
	dcfg := cfg
	dcfg.Sink = coverageSink{a}
	dcfg.Logger = a.log
	a.dec = NewDecoder(dcfg)
	a.dec.hooks = hooks{
		fetch:    a.requestSnapshot,
		response: a.onResponse,
		shutdown: a.onServerShutdown,
		resync:   a.cov.Resync,
	}
	return a, nil
}

func checkSymbol(s string) error {
	if s == "" || len(s) > 64 || strings.ContainsAny(s, " \"\\/@") {
		return fmt.Errorf("binance: bad symbol %q", s)
	}
	return nil
}

// Venue implements venue.Adapter.
func (a *Adapter) Venue() string { return Name }

// Coverage implements venue.Adapter.
func (a *Adapter) Coverage() venue.Coverage { return a.cov.Snapshot() }

// Start launches the adapter's goroutines and returns at once; they run
// until ctx is done or Stop is called (venue.Lifecycle).
func (a *Adapter) Start(ctx context.Context) error {
	return a.life.Start(ctx, Name, a.run, a.fetcher)
}

// Stop closes the link and waits for the adapter's goroutines, or until
// ctx is done (then it returns ctx.Err() and they finish on their own).
func (a *Adapter) Stop(ctx context.Context) error { return a.life.Stop(ctx) }

// Subscribe implements venue.Adapter. Symbols are checked against
// exchangeInfo before they are subscribed; an unknown one is reported as a
// Refusal notice.
func (a *Adapter) Subscribe(symbols ...string) error {
	for _, s := range symbols {
		if err := checkSymbol(s); err != nil {
			return err
		}
	}
	a.smu.Lock()
	for _, s := range symbols {
		a.want[s] = true
	}
	a.smu.Unlock()
	poke(a.kick)
	return nil
}

// Unsubscribe implements venue.Adapter.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.smu.Lock()
	for _, s := range symbols {
		delete(a.want, s)
	}
	a.smu.Unlock()
	a.mu.Lock()
	for _, s := range symbols {
		a.dec.Forget(s)
		for _, ch := range []venue.Channel{venue.Level2, venue.Trades, venue.Ticker} {
			a.cov.Forget(venue.NewStream(Name, ch, s))
		}
	}
	a.mu.Unlock()
	poke(a.kick)
	return nil
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// coverageSink observes every event for coverage before passing it on.
// Called under Adapter.mu.
type coverageSink struct{ a *Adapter }

func (s coverageSink) Event(ev *venue.Event) {
	if s.a.cov.Observe(ev.Stream, ev.RecvTime) {
		s.a.cfg.Sink.Notice(notice.Must(notice.CoverageChange, Name, string(ev.Stream), ev.RecvTime,
			"binance: "+string(ev.Stream)+" is live", map[string]any{"added": []string{string(ev.Stream)}}))
	}
	s.a.cfg.Sink.Event(ev)
}

func (s coverageSink) Notice(n notice.Notice) { s.a.cfg.Sink.Notice(n) }

// notice sends a notice to the sink, serialised with the decoder.
func (a *Adapter) notice(kind notice.Kind, stream, msg string, details map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cfg.Sink.Notice(notice.Must(kind, Name, stream, time.Now(), msg, details))
}

// run keeps a link open until ctx ends: connect, subscribe, read; on a
// drop, link_down, then reconnect after venue.Backoff's delay.
func (a *Adapter) run(ctx context.Context) {
	var (
		bo       venue.Backoff
		attempts []time.Time // recent connection attempts, oldest first
	)
	for first := true; ; first = false {
		delay := bo.Next()
		now := time.Now()
		attempts = slices.DeleteFunc(attempts, func(t time.Time) bool { return now.Sub(t) >= connWindow })
		if len(attempts) >= connPerWindow {
			wait := connWindow - now.Sub(attempts[0])
			if wait > delay {
				delay = wait
				a.notice(notice.RateLimited, "", "binance: connection attempts limited",
					map[string]any{"attempts": len(attempts), "window_s": int(connWindow / time.Second), "delay_ms": delay.Milliseconds()})
			}
		}
		if !first {
			a.notice(notice.LinkReconnecting, "", "binance: reconnecting",
				map[string]any{"attempt": bo.Attempt(), "delay_ms": delay.Milliseconds()})
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		attempts = append(attempts, time.Now())
		wasUp := a.session(ctx)
		if wasUp {
			bo.Reset() // a link that worked: the next retry is at once
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// session dials and serves one connection until it drops. It reports
// whether the link came up (subscribed).
func (a *Adapter) session(ctx context.Context) (wasUp bool) {
	u := strings.TrimRight(a.wsURL, "/")
	if !strings.HasSuffix(u, "/stream") {
		u += "/stream"
	}
	l := &link{subs: map[string]int64{}, reqs: map[int64]request{}}
	touch := func() { l.activity.Store(time.Now().UnixNano()) }
	dctx, dcancel := context.WithTimeout(ctx, max(a.readTimeout, 10*time.Second))
	ws, _, err := websocket.Dial(dctx, u, &websocket.DialOptions{
		OnPingReceived: func(context.Context, []byte) bool { touch(); return true },
		OnPongReceived: func(context.Context, []byte) { touch() },
	})
	dcancel()
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("binance: dial failed", "url", u, "err", err)
		}
		return false
	}
	ws.SetReadLimit(readLimit)
	l.ws = ws
	touch()
	a.smu.Lock()
	a.epoch++
	l.epoch = a.epoch
	a.link = l
	a.smu.Unlock()
	a.log.Info("binance: connected", "url", u)

	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		a.control(cctx, l)
	}()
	go func() {
		defer wg.Done()
		a.watchdog(cctx, l)
	}()
	err = a.read(cctx, l)
	cancel()
	ws.CloseNow()
	wg.Wait()

	now := time.Now()
	a.mu.Lock()
	a.smu.Lock()
	wasUp = l.up
	reason := l.reason
	a.link = nil
	clear(a.fetchQ)
	a.smu.Unlock()
	if reason == "" {
		reason = closeReason(ctx, err)
	}
	a.dec.LinkDown(now)
	if a.cfg.Recorder != nil {
		a.cfg.Recorder.Disconnect(Name, now)
	}
	a.cov.SetLink(venue.LinkDown, now)
	a.cfg.Sink.Notice(notice.Must(notice.LinkDown, Name, "", now, "binance: link down: "+reason,
		map[string]any{"reason": reason, "was_up": wasUp}))
	a.mu.Unlock()
	a.log.Info("binance: link down", "reason", reason)
	return wasUp
}

func closeReason(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "stopped"
	}
	if s := websocket.CloseStatus(err); s != -1 {
		var ce websocket.CloseError
		if errors.As(err, &ce) && ce.Reason != "" {
			return fmt.Sprintf("closed by venue: %d %s", s, ce.Reason)
		}
		return fmt.Sprintf("closed by venue: %d", s)
	}
	if err != nil {
		return err.Error()
	}
	return "closed"
}

// read reads frames until the connection fails, handing each to the
// recorder and the decoder. The buffer is reused: neither keeps a frame.
func (a *Adapter) read(ctx context.Context, l *link) error {
	buf := make([]byte, 0, 64<<10)
	for {
		_, r, err := l.ws.Reader(ctx)
		if err != nil {
			return err
		}
		buf, err = venue.ReadFrame(r, buf)
		if err != nil {
			return err
		}
		recv := time.Now()
		l.activity.Store(recv.UnixNano())
		a.mu.Lock()
		if a.cfg.Recorder != nil {
			a.cfg.Recorder.Frame(Name, recv, buf)
		}
		a.dec.Frame(recv, buf)
		a.mu.Unlock()
		if cap(buf) > 1<<20 {
			buf = make([]byte, 0, 64<<10) // do not hold on to one huge frame's memory
		}
	}
}

// watchdog pings every pingInterval and closes the link when nothing (no
// frame, no ping, no pong) arrived for readTimeout, or a request went
// unanswered for as long.
func (a *Adapter) watchdog(ctx context.Context, l *link) {
	tick := min(a.readTimeout/4, a.pingInterval)
	tick = max(tick, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	var pinging atomic.Bool
	var pwg sync.WaitGroup
	defer pwg.Wait()
	lastPing := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			idle := now.Sub(time.Unix(0, l.activity.Load()))
			a.smu.Lock()
			if idle > a.readTimeout {
				l.reason = fmt.Sprintf("nothing received for %v (read timeout %v)", idle.Round(time.Millisecond), a.readTimeout)
			}
			for id, r := range l.reqs {
				if l.reason == "" && now.Sub(r.at) > a.readTimeout {
					l.reason = fmt.Sprintf("no reply to %s id %d within %v", r.method, id, a.readTimeout)
				}
			}
			dead := l.reason != ""
			a.smu.Unlock()
			if dead {
				l.ws.CloseNow()
				return
			}
			if now.Sub(lastPing) >= a.pingInterval && pinging.CompareAndSwap(false, true) {
				lastPing = now
				pwg.Add(1)
				go func() {
					defer pwg.Done()
					defer pinging.Store(false)
					pctx, cancel := context.WithTimeout(ctx, a.readTimeout)
					defer cancel()
					if l.ws.Ping(pctx) == nil {
						l.activity.Store(time.Now().UnixNano())
					}
				}()
			}
		}
	}
}

// control validates symbols and keeps the link's subscriptions equal to the
// wanted set, writing at most one message per controlSpacing.
func (a *Adapter) control(ctx context.Context, l *link) {
	var lastWrite time.Time
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		if err := a.reconcile(ctx, l, &lastWrite); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("binance: subscribe", "err", err)
			retry.Reset(2 * time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		case <-retry.C:
		}
	}
}

func (a *Adapter) reconcile(ctx context.Context, l *link, lastWrite *time.Time) error {
	// 1. Validate new symbols against exchangeInfo.
	a.smu.Lock()
	var unknown []string
	for s := range a.want {
		if !a.known[s] {
			unknown = append(unknown, s)
		}
	}
	a.smu.Unlock()
	if len(unknown) > 0 {
		slices.Sort(unknown)
		known, err := a.rest.symbols(ctx, unknown)
		if err != nil {
			var ae *APIError
			if errors.As(err, &ae) && ae.RateLimited() {
				a.notice(notice.RateLimited, "", "binance: exchangeInfo rate limited",
					map[string]any{"status": ae.Status, "retry_after_s": int(ae.RetryAfter / time.Second)})
			}
			return fmt.Errorf("exchangeInfo: %w", err)
		}
		var refused []string
		a.smu.Lock()
		for _, s := range unknown {
			if _, ok := known[s]; ok {
				a.known[s] = true
			} else if a.want[s] {
				delete(a.want, s)
				refused = append(refused, s)
			}
		}
		a.smu.Unlock()
		for _, s := range refused {
			a.notice(notice.Refusal, "", "binance: unknown symbol "+s+" (absent from exchangeInfo)",
				map[string]any{"symbol": s, "code": codeInvalidSymbol, "reason": "absent from exchangeInfo"})
		}
		for s, status := range known {
			if status != "TRADING" {
				a.log.Warn("binance: symbol is not trading; subscribed anyway", "symbol", s, "status", status)
			}
		}
	}

	// 2. Diff the wanted streams against the link's.
	a.smu.Lock()
	desired := map[string]bool{}
	for s := range a.want {
		if a.known[s] {
			for _, ch := range a.cfg.ChannelsOrAll() {
				desired[streamName(s, ch)] = true
			}
		}
	}
	var sub, unsub []string
	for st := range desired {
		if _, ok := l.subs[st]; !ok {
			sub = append(sub, st)
		}
	}
	for st := range l.subs {
		if !desired[st] {
			unsub = append(unsub, st)
		}
	}
	if len(l.subs)+len(sub)-len(unsub) > maxStreams {
		a.smu.Unlock()
		return fmt.Errorf("%d streams wanted, over Binance's %d per connection", len(l.subs)+len(sub)-len(unsub), maxStreams)
	}
	upNow := len(desired) == 0 && len(l.subs) == 0 && !l.up // nothing to subscribe: connected is up
	if upNow {
		l.up = true
		a.cov.SetLink(venue.LinkUp, time.Now())
	}
	a.smu.Unlock()
	if upNow {
		a.notice(notice.LinkUp, "", "binance: link up", map[string]any{"epoch": l.epoch})
	}
	slices.Sort(sub)
	slices.Sort(unsub)
	if err := a.send(ctx, l, "UNSUBSCRIBE", unsub, lastWrite); err != nil {
		return err
	}
	return a.send(ctx, l, "SUBSCRIBE", sub, lastWrite)
}

// send writes method requests for streams, in chunks of at most
// maxRequestBytes, spaced by controlSpacing.
func (a *Adapter) send(ctx context.Context, l *link, method string, streams []string, lastWrite *time.Time) error {
	for len(streams) > 0 {
		n, size := 0, 64
		for n < len(streams) && (n == 0 || size+len(streams[n])+3 <= maxRequestBytes) {
			size += len(streams[n]) + 3
			n++
		}
		chunk := streams[:n]
		streams = streams[n:]
		if wait := controlSpacing - time.Since(*lastWrite); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		a.smu.Lock()
		l.nextID++
		id := l.nextID
		l.reqs[id] = request{method: method, streams: chunk, at: time.Now()}
		for _, st := range chunk {
			if method == "SUBSCRIBE" {
				l.subs[st] = id
			} else {
				delete(l.subs, st)
			}
		}
		a.smu.Unlock()
		msg, _ := json.Marshal(struct {
			Method string   `json:"method"`
			Params []string `json:"params"`
			ID     int64    `json:"id"`
		}{method, chunk, id})
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := l.ws.Write(wctx, websocket.MessageText, msg)
		cancel()
		*lastWrite = time.Now()
		if err != nil {
			return err
		}
	}
	return nil
}

// streamName is Binance's stream name for a symbol's channel.
func streamName(symbol string, ch venue.Channel) string {
	lower := strings.ToLower(symbol)
	switch ch {
	case venue.Level2:
		return lower + "@depth@100ms"
	case venue.Trades:
		return lower + "@trade"
	}
	return lower + "@bookTicker"
}

// onResponse handles a reply to SUBSCRIBE/UNSUBSCRIBE (decoder hook, under
// a.mu).
func (a *Adapter) onResponse(id int64, code int64, msg string) {
	a.smu.Lock()
	l := a.link
	if l == nil {
		a.smu.Unlock()
		return
	}
	req, ok := l.reqs[id]
	if !ok {
		a.smu.Unlock()
		a.log.Warn("binance: reply to an unknown request", "id", id, "code", code, "msg", msg)
		return
	}
	delete(l.reqs, id)
	var depth, refused []string
	for _, st := range req.streams {
		if req.method != "SUBSCRIBE" {
			continue
		}
		if code != 0 {
			if l.subs[st] == id {
				delete(l.subs, st)
			}
			sym, _, _ := strings.Cut(st, "@")
			for s := range a.want {
				if strings.ToLower(s) == sym && !slices.Contains(refused, s) {
					refused = append(refused, s)
					delete(a.want, s)
				}
			}
			continue
		}
		if l.subs[st] == id {
			l.subs[st] = 0
			if sym, kind, _ := strings.Cut(st, "@"); strings.HasPrefix(kind, "depth") {
				depth = append(depth, sym)
			}
		}
	}
	becameUp := !l.up
	if becameUp {
		l.up = true
		a.cov.SetLink(venue.LinkUp, time.Now())
	}
	epoch := l.epoch
	a.smu.Unlock()
	now := time.Now()
	if becameUp {
		a.cfg.Sink.Notice(notice.Must(notice.LinkUp, Name, "", now, "binance: link up", map[string]any{"epoch": epoch}))
	}
	for _, s := range refused {
		a.cfg.Sink.Notice(notice.Must(notice.Refusal, Name, "", now, "binance: subscription refused: "+msg,
			map[string]any{"symbol": s, "code": code, "msg": msg}))
	}
	for _, sym := range depth {
		a.dec.Want(sym)
	}
}

// onServerShutdown closes the link at once (decoder hook, under a.mu): the
// venue is going away, and run reconnects.
func (a *Adapter) onServerShutdown() {
	a.smu.Lock()
	l := a.link
	if l != nil {
		l.reason = "serverShutdown"
	}
	a.smu.Unlock()
	if l != nil {
		l.ws.CloseNow()
	}
}

// requestSnapshot queues a REST snapshot for a lower-case symbol (decoder
// hook, under a.mu; must not block).
func (a *Adapter) requestSnapshot(lower string) {
	a.smu.Lock()
	if a.link != nil {
		a.fetchQ[lower] = a.link.epoch
	}
	a.smu.Unlock()
	poke(a.fetchKick)
}

// fetcher fetches the REST snapshots the decoder asks for and feeds them to
// it as generated frames, recorded like any other.
func (a *Adapter) fetcher(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.fetchKick:
		}
		for {
			a.smu.Lock()
			var lower string
			var epoch uint64
			for s, e := range a.fetchQ {
				lower, epoch = s, e
				break
			}
			if lower != "" {
				delete(a.fetchQ, lower)
			}
			a.smu.Unlock()
			if lower == "" || ctx.Err() != nil {
				break
			}
			a.fetch(ctx, lower, epoch)
		}
	}
}

func (a *Adapter) symbolOf(lower string) string {
	a.smu.Lock()
	defer a.smu.Unlock()
	for s := range a.want {
		if strings.ToLower(s) == lower {
			return s
		}
	}
	return ""
}

func (a *Adapter) fetch(ctx context.Context, lower string, epoch uint64) {
	sym := a.symbolOf(lower)
	if sym == "" {
		return // unsubscribed meanwhile
	}
	body, err := a.rest.depth(ctx, sym, a.depth)
	recv := time.Now()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		var ae *APIError
		switch {
		case errors.As(err, &ae) && ae.InvalidSymbol():
			a.smu.Lock()
			delete(a.want, sym)
			a.smu.Unlock()
			poke(a.kick)
			a.notice(notice.Refusal, "", "binance: depth snapshot refused: "+ae.Msg,
				map[string]any{"symbol": sym, "code": ae.Code, "msg": ae.Msg})
			return
		case errors.As(err, &ae) && ae.RateLimited():
			wait := max(ae.RetryAfter, time.Second)
			a.notice(notice.RateLimited, string(venue.NewStream(Name, venue.Level2, sym)), "binance: depth snapshot rate limited",
				map[string]any{"status": ae.Status, "retry_after_s": int(wait / time.Second)})
			a.retryFetch(ctx, lower, epoch, wait)
		default:
			a.log.Warn("binance: depth snapshot", "symbol", sym, "err", err)
			a.retryFetch(ctx, lower, epoch, 2*time.Second)
		}
		return
	}
	frame := make([]byte, 0, len(body)+64)
	frame = append(frame, `{"stream":"`...)
	frame = append(frame, lower...)
	frame = append(frame, `@depthSnapshot","generated":true,"data":`...)
	frame = append(frame, body...)
	frame = append(frame, '}')
	a.mu.Lock()
	defer a.mu.Unlock()
	a.smu.Lock()
	current := a.link != nil && a.link.epoch == epoch
	a.smu.Unlock()
	if !current {
		return // the link dropped meanwhile: the new one asks again
	}
	if a.cfg.Recorder != nil {
		a.cfg.Recorder.Frame(Name, recv, frame)
	}
	a.dec.Frame(recv, frame)
}

// retryFetch waits and queues lower again, unless ctx ends first.
func (a *Adapter) retryFetch(ctx context.Context, lower string, epoch uint64, wait time.Duration) {
	t := time.NewTimer(wait)
	select {
	case <-ctx.Done():
		t.Stop()
		return
	case <-t.C:
	}
	a.smu.Lock()
	if a.link != nil && a.link.epoch == epoch {
		if _, ok := a.fetchQ[lower]; !ok {
			a.fetchQ[lower] = epoch
		}
	}
	a.smu.Unlock()
	poke(a.fetchKick)
}
