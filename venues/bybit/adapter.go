package bybit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/pprof"
	"slices"
	"strconv"
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
	// DefaultWSURL is Bybit's v5 public spot endpoint.
	DefaultWSURL = "wss://stream.bybit.com/v5/public/spot"
	// DefaultDepth is the level2 depth: orderbook.50.
	DefaultDepth = 50
	// DefaultPingInterval is Bybit's recommended keepalive interval.
	DefaultPingInterval = 20 * time.Second
	// DefaultReadTimeout is how long a link may deliver nothing (no data,
	// no pong) before it is dead: two missed pongs and some slack.
	DefaultReadTimeout = 45 * time.Second
)

const (
	readLimit   = 32 << 20         // orderbook.1000 snapshots are ~70 KB; leave room
	dialTimeout = 10 * time.Second // connect and upgrade
	// writeTimeout bounds one request write.
	writeTimeout = 5 * time.Second
	// stableAfter is how long a link must stay up for the next drop to
	// retry at once again (the backoff restarts).
	stableAfter = 30 * time.Second
	// maxArgs is Bybit spot's limit of args per subscribe request.
	maxArgs = 10
)

// ErrStarted is returned (wrapped) by a second call to Start.
var ErrStarted = venue.ErrStarted

// spotDepths are the orderbook depths Bybit serves for spot.
var spotDepths = []int{1, 50, 200, 1000}

// Adapter is a link to Bybit's v5 public spot websocket. Build one with
// New; it does nothing until Start.
type Adapter struct {
	cfg  venue.Config
	log  *slog.Logger
	cov  *venue.CoverageTracker
	dec  *Decoder
	ping time.Duration
	read time.Duration

	kick chan struct{} // has a value when ops has work for the writer

	mu      sync.Mutex // protects the fields below
	symbols []string   // wanted, in the order asked
	ops     []request
	pending map[string]request // requests sent, by req_id, awaiting their answer
	nextReq uint64
	initial int // initial subscribe requests of this session not yet answered

	life     venue.Lifecycle
	lastRead atomic.Int64    // unix nanos of the newest frame on the current link
	linkUp   bool            // run goroutine only
	conn     *websocket.Conn // the current link; run goroutine only
}

var _ venue.Adapter = (*Adapter)(nil)

// request is one op the adapter sends to Bybit.
type request struct {
	op      string // "subscribe" or "unsubscribe"
	symbol  string
	args    []string
	initial bool // part of a session's first subscriptions
	resync  bool // part of a book resync
}

// New returns an adapter for cfg. Zero fields take the defaults above;
// Depth must be one of Bybit spot's depths (1, 50, 200, 1000).
func New(cfg venue.Config) (*Adapter, error) {
	if cfg.Sink == nil {
		return nil, errors.New("bybit: config has no Sink")
	}
	if cfg.WSURL == "" {
		cfg.WSURL = DefaultWSURL
	}
	if cfg.Depth == 0 {
		cfg.Depth = DefaultDepth
	}
	if !slices.Contains(spotDepths, cfg.Depth) {
		return nil, fmt.Errorf("bybit: depth %d is not one of Bybit spot's depths %v", cfg.Depth, spotDepths)
	}
	for _, ch := range cfg.Channels {
		if !ch.Valid() {
			return nil, fmt.Errorf("bybit: unknown channel %q", ch)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Adapter{
		cfg:     cfg,
		log:     cfg.Logger.With("venue", Name),
		cov:     venue.NewCoverageTracker(Name),
		ping:    cfg.PingInterval,
		read:    cfg.ReadTimeout,
		kick:    make(chan struct{}, 1),
		pending: make(map[string]request),
	}
	if a.ping <= 0 {
		a.ping = DefaultPingInterval
	}
	if a.read <= 0 {
		a.read = DefaultReadTimeout
	}
	if a.ping*2 > a.read {
		// A quiet link (trades of an idle symbol) lives on pongs alone: at
		// least two pings must fit in the read timeout.
		a.ping = a.read / 3
	}
	for _, s := range cfg.Symbols {
		if err := checkSymbol(s); err != nil {
			return nil, err
		}
		if !slices.Contains(a.symbols, s) {
			a.symbols = append(a.symbols, s)
		}
	}
	dcfg := cfg
	dcfg.Sink = coverageSink{a}
	a.dec = NewDecoder(dcfg)
	a.dec.resync = a.resync
	a.dec.control = a.answer
	return a, nil
}

func checkSymbol(s string) error {
	if !venue.ValidSymbol(s) {
		return fmt.Errorf("bybit: symbol %q is not 1 to 64 printable ASCII characters without space, '\"' or '\\'", s)
	}
	return nil
}

// Venue returns "bybit".
func (a *Adapter) Venue() string { return Name }

// Coverage reports the streams observed arriving on the current link.
func (a *Adapter) Coverage() venue.Coverage { return a.cov.Snapshot() }

// Start launches the adapter's goroutines and returns at once; they run
// until ctx is done or Stop is called (venue.Lifecycle).
func (a *Adapter) Start(ctx context.Context) error {
	return a.life.Start(ctx, Name, a.run)
}

// Stop closes the link and waits for the adapter's goroutines, or until
// ctx is done (then it returns ctx.Err() and they finish on their own).
func (a *Adapter) Stop(ctx context.Context) error { return a.life.Stop(ctx) }

// Subscribe adds symbols on the configured channels. On a live link the
// subscribe requests are queued at once; otherwise they go out when the
// link comes up. A symbol Bybit refuses is reported as a Refusal notice
// and dropped. Subscribe returns an error only for a malformed symbol.
func (a *Adapter) Subscribe(symbols ...string) error {
	for _, s := range symbols {
		if err := checkSymbol(s); err != nil {
			return err
		}
	}
	a.mu.Lock()
	for _, s := range symbols {
		if slices.Contains(a.symbols, s) {
			continue
		}
		a.symbols = append(a.symbols, s)
		a.ops = append(a.ops, request{op: "subscribe", symbol: s, args: a.topics(s)})
	}
	a.mu.Unlock()
	a.wake()
	return nil
}

// Unsubscribe removes symbols. Their streams leave coverage when Bybit
// confirms.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.mu.Lock()
	for _, s := range symbols {
		i := slices.Index(a.symbols, s)
		if i < 0 {
			continue
		}
		a.symbols = slices.Delete(a.symbols, i, i+1)
		a.ops = append(a.ops, request{op: "unsubscribe", symbol: s, args: a.topics(s)})
	}
	a.mu.Unlock()
	a.wake()
	return nil
}

func (a *Adapter) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// topics returns the Bybit topics for symbol on the configured channels.
func (a *Adapter) topics(symbol string) []string {
	var out []string
	add := func(t string) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	for _, ch := range a.cfg.ChannelsOrAll() {
		switch ch {
		case venue.Level2:
			add("orderbook." + strconv.Itoa(a.cfg.Depth) + "." + symbol)
		case venue.Trades:
			add("publicTrade." + symbol)
		case venue.Ticker:
			add("orderbook.1." + symbol)
		}
	}
	return out
}

// streams returns the fanoutd streams of symbol on the configured channels.
func (a *Adapter) streams(symbol string) []venue.Stream {
	var out []venue.Stream
	for _, ch := range a.cfg.ChannelsOrAll() {
		out = append(out, venue.NewStream(Name, ch, symbol))
	}
	return out
}

// coverageSink records observed arrival, then hands events to the sink.
// It runs on the adapter's goroutine.
type coverageSink struct{ a *Adapter }

func (c coverageSink) Event(ev *venue.Event) {
	st, at := ev.Stream, ev.RecvTime // the sink owns ev once handed over
	first := c.a.cov.Observe(st, at)
	c.a.cfg.Sink.Event(ev)
	if first {
		c.a.cfg.Sink.Notice(notice.Must(notice.CoverageChange, Name, string(st), at,
			"bybit: "+string(st)+" is live", map[string]any{"state": "live"}))
	}
}

func (c coverageSink) Notice(n notice.Notice) {
	if n.Kind == notice.BookResync {
		c.a.cov.Resync()
	}
	c.a.cfg.Sink.Notice(n)
}

// run is the adapter's goroutine: connect, serve the link, and reconnect
// with backoff until ctx is done.
func (a *Adapter) run(ctx context.Context) {
	var bo venue.Backoff
	for ctx.Err() == nil {
		upFor, err := a.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if upFor >= stableAfter {
			bo.Reset()
		}
		delay := bo.Next()
		now := time.Now()
		a.cov.SetLink(venue.LinkConnecting, now)
		a.cfg.Sink.Notice(notice.Must(notice.LinkReconnecting, Name, "", now,
			"bybit: reconnecting in "+delay.String(),
			map[string]any{"attempt": bo.Attempt(), "delay_ms": delay.Milliseconds(), "error": errString(err)}))
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// session dials, subscribes and reads until the link fails or ctx is done.
// It returns how long the link was up (zero if it never came up).
func (a *Adapter) session(ctx context.Context) (time.Duration, error) {
	a.cov.SetLink(venue.LinkConnecting, time.Now())
	dctx, dcancel := context.WithTimeout(ctx, dialTimeout)
	conn, resp, err := websocket.Dial(dctx, a.cfg.WSURL, nil)
	dcancel()
	if err != nil {
		a.log.Warn("dial failed", "url", a.cfg.WSURL, "err", err)
		if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusForbidden) {
			// Bybit limits connections per IP (500 per 5 minutes); the
			// backoff slows the next attempts.
			a.cfg.Sink.Notice(notice.Must(notice.RateLimited, Name, "", time.Now(),
				"bybit refused the connection: "+resp.Status, map[string]any{"status": resp.StatusCode}))
		}
		return 0, err
	}
	conn.SetReadLimit(readLimit)
	a.conn = conn
	connected := time.Now()
	a.lastRead.Store(connected.UnixNano())

	sctx, scancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		scancel()
		conn.CloseNow()
		wg.Wait()
		a.conn = nil
	}()

	// The first subscriptions go out before reading starts, so link_up can
	// wait for exactly their answers.
	a.mu.Lock()
	a.ops = a.ops[:0]
	clear(a.pending)
	var first []request
	for _, s := range a.symbols {
		first = append(first, request{op: "subscribe", symbol: s, args: a.topics(s), initial: true})
	}
	a.initial = len(first)
	a.mu.Unlock()
	for _, r := range first {
		if err := a.send(sctx, conn, r); err != nil {
			a.linkDown(err)
			return 0, err
		}
	}
	if len(first) == 0 {
		a.up(time.Now())
	}

	wg.Add(1)
	go func() {
		defer wg.Done()
		pprof.Do(sctx, pprof.Labels("venue", Name, "role", "writer"), func(ctx context.Context) {
			a.writer(ctx, conn)
		})
	}()

	err = a.readLoop(sctx, conn)
	upFor := time.Duration(0)
	if a.linkUp {
		upFor = time.Since(connected)
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	a.linkDown(err)
	return upFor, err
}

// up reports the link up once per session.
func (a *Adapter) up(t time.Time) {
	if a.linkUp {
		return
	}
	a.linkUp = true
	a.cov.SetLink(venue.LinkUp, t)
	a.cfg.Sink.Notice(notice.Must(notice.LinkUp, Name, "", t, "bybit: connected and subscribed",
		map[string]any{"url": a.cfg.WSURL}))
}

// linkDown reports the end of a session that had connected.
func (a *Adapter) linkDown(err error) {
	now := time.Now()
	a.dec.LinkDown(now)
	a.cov.SetLink(venue.LinkDown, now)
	if a.cfg.Recorder != nil {
		a.cfg.Recorder.Disconnect(Name, now)
	}
	a.linkUp = false
	a.cfg.Sink.Notice(notice.Must(notice.LinkDown, Name, "", now, "bybit: link down: "+errString(err),
		map[string]any{"error": errString(err)}))
}

// readLoop reads frames into one reused buffer and decodes them.
func (a *Adapter) readLoop(ctx context.Context, conn *websocket.Conn) error {
	buf := make([]byte, 0, 64<<10)
	for {
		_, r, err := conn.Reader(ctx)
		if err != nil {
			return err
		}
		if cap(buf) > 4<<20 {
			buf = make([]byte, 0, 64<<10) // do not keep a huge snapshot's buffer
		}
		if buf, err = venue.ReadFrame(r, buf); err != nil {
			return err
		}
		recv := time.Now()
		a.lastRead.Store(recv.UnixNano())
		if a.cfg.Recorder != nil {
			a.cfg.Recorder.Frame(Name, recv, buf)
		}
		a.dec.Frame(recv, buf)
	}
}

// writer sends keepalives and queued requests, and closes the link when it
// has been silent past the read timeout.
func (a *Adapter) writer(ctx context.Context, conn *websocket.Conn) {
	ping := time.NewTicker(a.ping)
	defer ping.Stop()
	watch := time.NewTicker(max(a.read/4, time.Millisecond))
	defer watch.Stop()
	var n uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			n++
			msg := `{"req_id":"ping-` + strconv.FormatUint(n, 10) + `","op":"ping"}`
			if err := a.write(ctx, conn, []byte(msg)); err != nil {
				a.log.Warn("ping failed", "err", err)
				conn.CloseNow()
				return
			}
		case <-watch.C:
			if idle := time.Since(time.Unix(0, a.lastRead.Load())); idle > a.read {
				a.log.Warn("link silent past its deadline", "idle", idle, "deadline", a.read)
				conn.CloseNow()
				return
			}
		case <-a.kick:
			a.mu.Lock()
			ops := a.ops
			a.ops = nil
			a.mu.Unlock()
			for _, r := range ops {
				if err := a.send(ctx, conn, r); err != nil {
					a.log.Warn("request failed", "op", r.op, "err", err)
					conn.CloseNow()
					return
				}
			}
		}
	}
}

// send writes r in requests of at most maxArgs args, each under its own
// req_id so its answer can be matched.
func (a *Adapter) send(ctx context.Context, conn *websocket.Conn, r request) error {
	for args := range slices.Chunk(r.args, maxArgs) {
		part := r
		part.args = args
		a.mu.Lock()
		a.nextReq++
		id := strconv.FormatUint(a.nextReq, 10)
		a.pending[id] = part
		a.mu.Unlock()
		msg := make([]byte, 0, 64+32*len(args))
		msg = append(msg, `{"req_id":"`...)
		msg = append(msg, id...)
		msg = append(msg, `","op":"`...)
		msg = append(msg, part.op...)
		msg = append(msg, `","args":[`...)
		for i, t := range args {
			if i > 0 {
				msg = append(msg, ',')
			}
			msg = strconv.AppendQuote(msg, t)
		}
		msg = append(msg, "]}"...)
		if err := a.write(ctx, conn, msg); err != nil {
			return err
		}
	}
	return nil
}

func (a *Adapter) write(ctx context.Context, conn *websocket.Conn, msg []byte) error {
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return conn.Write(wctx, websocket.MessageText, msg)
}

// resync is the decoder's hook: unsubscribe and subscribe topic again, and
// Bybit sends a fresh snapshot. It runs on the read goroutine.
func (a *Adapter) resync(topic string) {
	sym := topic[strings.LastIndexByte(topic, '.')+1:]
	a.mu.Lock()
	a.ops = append(a.ops,
		request{op: "unsubscribe", symbol: sym, args: []string{topic}, resync: true},
		request{op: "subscribe", symbol: sym, args: []string{topic}, resync: true})
	a.mu.Unlock()
	a.wake()
}

// answer is the decoder's hook for control frames: pongs, and the acks of
// subscribe and unsubscribe requests. It runs on the read goroutine.
func (a *Adapter) answer(c *controlMsg) {
	op := string(c.Op)
	if op == "pong" || op == "ping" || string(c.RetMsg) == "pong" {
		return // any frame already counts as life
	}
	id := string(c.ReqID)
	a.mu.Lock()
	r, ok := a.pending[id]
	if ok {
		delete(a.pending, id)
	}
	a.mu.Unlock()
	if !ok && c.HasSuccess && !c.Success {
		// Bybit may answer a failure with an empty req_id; the ret_msg
		// names the topics ("Invalid symbol :[tickers.NOPEUSDT]").
		r, ok = a.matchFailure(string(c.RetMsg))
	}
	if !ok {
		a.log.Info("answer to no request of ours", "op", op, "success", c.Success, "ret_msg", string(c.RetMsg))
		return
	}
	now := time.Now()
	if c.HasSuccess && !c.Success && r.resync {
		// The symbol was fine a moment ago; a new link is the sure way to
		// fresh snapshots.
		a.log.Warn("resync request refused; reconnecting", "op", r.op, "args", r.args, "ret_msg", string(c.RetMsg))
		if a.conn != nil {
			a.conn.CloseNow()
		}
	} else if c.HasSuccess && !c.Success {
		a.refused(now, r, string(c.RetMsg))
	} else {
		a.log.Debug("request confirmed", "op", r.op, "args", r.args)
		if r.op == "unsubscribe" && !r.resync {
			a.dec.forget(r.symbol)
			a.forget(now, r.symbol)
		}
	}
	if r.initial {
		a.mu.Lock()
		a.initial--
		done := a.initial == 0
		a.mu.Unlock()
		if done {
			a.up(now)
		}
	}
}

// matchFailure finds the pending request whose topics a failure message
// names, and removes it.
func (a *Adapter) matchFailure(msg string) (request, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, r := range a.pending {
		for _, t := range r.args {
			if strings.Contains(msg, t) {
				delete(a.pending, id)
				return r, true
			}
		}
	}
	return request{}, false
}

// forget drops symbol's streams from coverage, with a coverage_change
// notice for each that was live.
func (a *Adapter) forget(now time.Time, symbol string) {
	cov := a.cov.Snapshot()
	for _, st := range a.streams(symbol) {
		if slices.ContainsFunc(cov.Streams, func(sc venue.StreamCoverage) bool { return sc.Stream == st }) {
			a.cov.Forget(st)
			a.cfg.Sink.Notice(notice.Must(notice.CoverageChange, Name, string(st), now,
				"bybit: "+string(st)+" is no longer live", map[string]any{"state": "gone"}))
		}
	}
}

// refused reports a request Bybit refused. A refused subscribe drops the
// symbol: it is not retried, on this link or the next.
func (a *Adapter) refused(now time.Time, r request, msg string) {
	if r.op == "subscribe" {
		a.mu.Lock()
		if i := slices.Index(a.symbols, r.symbol); i >= 0 {
			a.symbols = slices.Delete(a.symbols, i, i+1)
		}
		a.mu.Unlock()
		a.forget(now, r.symbol)
	}
	a.log.Warn("request refused", "op", r.op, "symbol", r.symbol, "ret_msg", msg)
	a.cfg.Sink.Notice(notice.Must(notice.Refusal, Name, "", now,
		"bybit refused "+r.op+" of "+r.symbol+": "+msg,
		map[string]any{"symbol": r.symbol, "op": r.op, "topics": slices.Clone(r.args), "ret_msg": msg}))
}
