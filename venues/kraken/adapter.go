package kraken

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// DefaultWSURL is Kraken's public Spot WebSocket v2 endpoint.
const DefaultWSURL = "wss://ws.kraken.com/v2"

// Defaults for the link's liveness. Kraken sends a heartbeat about once a
// second on a subscribed connection and answers {"method":"ping"} with a
// pong, so a link that delivers nothing for DefaultReadTimeout is dead;
// DefaultPingInterval keeps a link without subscriptions alive and well
// inside the venue's (unverified, about a minute) idle timeout.
const (
	DefaultReadTimeout  = 15 * time.Second
	DefaultPingInterval = 10 * time.Second
)

// readLimit is the websocket read limit: the instrument snapshot (every
// pair) and a 1000-level book snapshot are a few hundred KB; coder/websocket's
// 32 KiB default would cut them.
const readLimit = 32 << 20

// symbolsPerRequest bounds how many symbols one subscribe names (Kraken
// publishes no limit; this keeps requests small).
const symbolsPerRequest = 50

// ErrStarted is returned (wrapped) by a second Start.
var ErrStarted = venue.ErrStarted

// Adapter is Kraken's venue.Adapter: one websocket to Spot v2, subscribed
// to instrument (for precisions), then book, trade and ticker per symbol.
// See the package doc for the protocol rules it follows.
type Adapter struct {
	cfg          venue.Config
	log          *slog.Logger
	readTimeout  time.Duration
	pingInterval time.Duration
	sink         *serialSink
	cov          *venue.CoverageTracker
	dec          *Decoder // used by the reader goroutine, and by run once the reader has exited

	wake chan struct{} // cap 1: the session has requests to send

	mu       sync.Mutex // protects the fields below
	life     venue.Lifecycle
	symbols  []string        // wanted, in subscription order
	refused  map[string]bool // channel|symbol the venue refused: not asked again
	resub    []string        // symbols whose book must be resubscribed (resync)
	acked    []ack           // acks read since the session last looked
	instrGot bool            // the instrument snapshot arrived on this session
}

var _ venue.Adapter = (*Adapter)(nil)

// New returns an adapter for cfg. cfg.Sink is required; cfg.Depth must be
// 0 or one of Kraken's depths (10, 25, 100, 500, 1000).
func New(cfg venue.Config) (*Adapter, error) {
	if cfg.Sink == nil {
		return nil, errors.New("kraken: config has no sink")
	}
	if cfg.Depth != 0 && !validDepth(cfg.Depth) {
		return nil, fmt.Errorf("kraken: depth %d is not one of 10, 25, 100, 500, 1000", cfg.Depth)
	}
	if cfg.Depth == 0 {
		cfg.Depth = DefaultDepth
	}
	if cfg.WSURL == "" {
		cfg.WSURL = DefaultWSURL
	}
	for _, c := range cfg.ChannelsOrAll() {
		if !c.Valid() {
			return nil, fmt.Errorf("kraken: unknown channel %q", c)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Adapter{
		cfg:          cfg,
		log:          cfg.Logger.With("venue", Name),
		readTimeout:  cmp(cfg.ReadTimeout, DefaultReadTimeout),
		pingInterval: cmp(cfg.PingInterval, DefaultPingInterval),
		sink:         &serialSink{s: cfg.Sink},
		cov:          venue.NewCoverageTracker(Name),
		wake:         make(chan struct{}, 1),
		refused:      map[string]bool{},
	}
	for _, s := range cfg.Symbols {
		if !slices.Contains(a.symbols, s) {
			a.symbols = append(a.symbols, s)
		}
	}
	dcfg := cfg
	dcfg.Sink = a.sink
	a.dec = NewDecoder(dcfg)
	a.dec.cov = a.cov
	a.dec.onResync = a.queueResync
	a.dec.onAck = a.queueAck
	a.dec.onInstrument = a.instrumentArrived
	return a, nil
}

func cmp(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// serialSink makes the adapter's output one sequence, whichever goroutine
// produces it (the Sink contract: never concurrently for one adapter).
type serialSink struct {
	mu sync.Mutex // serialises calls to s
	s  venue.Sink
}

func (s *serialSink) Event(ev *venue.Event) { s.mu.Lock(); s.s.Event(ev); s.mu.Unlock() }

func (s *serialSink) Notice(n notice.Notice) { s.mu.Lock(); s.s.Notice(n); s.mu.Unlock() }

// Venue returns "kraken".
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

// Subscribe adds symbols on the configured channels. A symbol the venue
// refused before is asked for again.
func (a *Adapter) Subscribe(symbols ...string) error {
	a.mu.Lock()
	for _, s := range symbols {
		for k := range a.refused {
			if strings.HasSuffix(k, "|"+s) {
				delete(a.refused, k)
			}
		}
		if !slices.Contains(a.symbols, s) {
			a.symbols = append(a.symbols, s)
		}
	}
	a.mu.Unlock()
	a.poke()
	return nil
}

// Unsubscribe removes symbols; their streams leave coverage.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.mu.Lock()
	a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return slices.Contains(symbols, s) })
	a.mu.Unlock()
	for _, s := range symbols {
		for _, ch := range []venue.Channel{venue.Level2, venue.Trades, venue.Ticker} {
			a.cov.Forget(venue.NewStream(Name, ch, s))
		}
	}
	a.poke()
	return nil
}

func (a *Adapter) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Decoder hooks. They run on the reader goroutine and only queue work for
// the session goroutine, which owns the socket's writes.

func (a *Adapter) queueResync(sym string) {
	a.mu.Lock()
	if !slices.Contains(a.resub, sym) {
		a.resub = append(a.resub, sym)
	}
	a.mu.Unlock()
	a.poke()
}

func (a *Adapter) queueAck(k ack) {
	a.mu.Lock()
	a.acked = append(a.acked, k)
	a.mu.Unlock()
	a.poke()
}

func (a *Adapter) instrumentArrived() {
	a.mu.Lock()
	a.instrGot = true
	a.mu.Unlock()
	a.poke()
}

// run connects and reconnects until ctx is done.
func (a *Adapter) run(ctx context.Context) {
	var bo venue.Backoff
	for {
		healthy := a.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if healthy {
			bo.Reset()
		}
		delay := bo.Next()
		a.sink.Notice(notice.Must(notice.LinkReconnecting, Name, "", time.Now(),
			fmt.Sprintf("kraken: reconnecting in %v", delay.Round(time.Millisecond)),
			map[string]any{"attempt": bo.Attempt(), "delay_ms": delay.Milliseconds()}))
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

// session is one connection's life: dial, subscribe, read until the link
// fails or ctx is done. It reports whether the link delivered market data
// (a healthy link resets the backoff; one that is accepted and then dies
// at once does not).
func (a *Adapter) session(ctx context.Context) bool {
	dctx, dcancel := context.WithTimeout(ctx, max(a.readTimeout, 5*time.Second))
	conn, _, err := websocket.Dial(dctx, a.cfg.WSURL, nil)
	dcancel()
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("dial failed", "url", a.cfg.WSURL, "err", err)
		}
		return false
	}
	conn.SetReadLimit(readLimit)
	up := time.Now()
	a.cov.SetLink(venue.LinkUp, up)
	a.sink.Notice(notice.Must(notice.LinkUp, Name, "", up, "kraken: connected to "+a.cfg.WSURL, map[string]any{"url": a.cfg.WSURL}))

	a.mu.Lock()
	a.resub, a.acked, a.instrGot = nil, nil, false
	a.mu.Unlock()
	ss := &sessionState{a: a, conn: conn, ctx: ctx, subscribed: map[string]bool{}, pending: map[string]time.Time{}, reqChan: map[int64]string{}}
	startData := a.dec.dataFrames

	rctx, rcancel := context.WithCancel(ctx)
	var lastRead atomic.Int64
	lastRead.Store(up.UnixNano())
	readErr := make(chan error, 1)
	go pprof.Do(rctx, pprof.Labels("venue", Name, "role", "reader"), func(rctx context.Context) {
		readErr <- a.read(rctx, conn, &lastRead)
	})

	tick := max(min(a.pingInterval, a.readTimeout/4), 10*time.Millisecond)
	ticker := time.NewTicker(tick)
	reason := ""
	ss.send(ss.request("subscribe", "instrument", nil))
	ss.instrSent = up
	ss.pending["instrument|"] = up.Add(a.readTimeout)
	ss.flush(up)
	lastPing := up
loop:
	for reason == "" {
		select {
		case <-ctx.Done():
			reason = "stopped"
		case err := <-readErr:
			readErr <- err // for the wait below
			reason = "read: " + err.Error()
		case <-a.wake:
			reason = ss.flush(time.Now())
		case now := <-ticker.C:
			if idle := now.Sub(time.Unix(0, lastRead.Load())); idle > a.readTimeout {
				reason = fmt.Sprintf("nothing received for %v", idle.Round(time.Millisecond))
				break loop
			}
			if now.Sub(lastPing) >= a.pingInterval {
				ss.reqID++
				ss.send(fmt.Appendf(nil, `{"method":"ping","req_id":%d}`, ss.reqID))
				lastPing = now
			}
			if reason = ss.flush(now); reason == "" {
				reason = ss.expired(now)
			}
		}
	}
	ticker.Stop()
	rcancel()
	conn.CloseNow()
	<-readErr
	down := time.Now()
	a.cov.SetLink(venue.LinkDown, down)
	if a.cfg.Recorder != nil {
		a.cfg.Recorder.Disconnect(Name, down)
	}
	a.dec.LinkDown(down)
	a.sink.Notice(notice.Must(notice.LinkDown, Name, "", down, "kraken: link down: "+reason, map[string]any{"reason": reason}))
	return a.dec.dataFrames > startData
}

// read reads frames until the connection fails, handing each to the
// recorder and the decoder. It reuses one buffer: frames are only valid
// during those calls.
func (a *Adapter) read(ctx context.Context, conn *websocket.Conn, lastRead *atomic.Int64) error {
	buf := make([]byte, 0, 64<<10)
	for {
		_, r, err := conn.Reader(ctx)
		if err != nil {
			return err
		}
		if buf, err = venue.ReadFrame(r, buf); err != nil {
			return err
		}
		recv := time.Now()
		lastRead.Store(recv.UnixNano())
		if a.cfg.Recorder != nil {
			a.cfg.Recorder.Frame(Name, recv, buf)
		}
		a.dec.Frame(recv, buf)
		if cap(buf) > 4<<20 { // do not keep a huge snapshot's buffer forever
			buf = make([]byte, 0, 64<<10)
		}
	}
}

// sessionState is what one connection has asked for; only the session
// goroutine touches it.
type sessionState struct {
	a          *Adapter
	conn       *websocket.Conn
	ctx        context.Context
	reqID      int64
	subscribed map[string]bool      // channel|symbol requested on this link
	pending    map[string]time.Time // channel|symbol (or "instrument|") → ack deadline
	reqChan    map[int64]string     // req_id → Kraken channel, to name refusals
	instrSent  time.Time
	booksOK    bool // instrument precisions arrived (or will not): books may be subscribed
	failed     string
}

func (ss *sessionState) send(msg []byte) {
	if ss.failed != "" {
		return
	}
	ctx, cancel := context.WithTimeout(ss.ctx, 5*time.Second)
	defer cancel()
	if err := ss.conn.Write(ctx, websocket.MessageText, msg); err != nil {
		ss.failed = "write: " + err.Error()
	}
}

type reqParams struct {
	Channel      string   `json:"channel"`
	Symbol       []string `json:"symbol,omitempty"`
	Depth        int      `json:"depth,omitempty"`
	Snapshot     *bool    `json:"snapshot,omitempty"`
	EventTrigger string   `json:"event_trigger,omitempty"`
}

// request builds a subscribe or unsubscribe for a Kraken channel.
func (ss *sessionState) request(method, kch string, symbols []string) []byte {
	ss.reqID++
	p := reqParams{Channel: kch, Symbol: symbols}
	yes, no := true, false
	if method == "subscribe" {
		switch kch {
		case "book", "instrument":
			p.Snapshot = &yes
		case "ticker":
			p.Snapshot, p.EventTrigger = &yes, "bbo"
		case "trade":
			p.Snapshot = &no // history would duplicate trades on every reconnect
		}
	}
	if kch == "book" {
		p.Depth = ss.a.cfg.Depth
	}
	ss.reqChan[ss.reqID] = kch
	b, _ := json.Marshal(struct {
		Method string    `json:"method"`
		Params reqParams `json:"params"`
		ReqID  int64     `json:"req_id"`
	}{method, p, ss.reqID})
	return b
}

var kchannels = map[venue.Channel]string{venue.Level2: "book", venue.Trades: "trade", venue.Ticker: "ticker"}

// flush reads the acks that arrived, then sends what the wanted symbols,
// resyncs and instrument state call for. It returns a reason to drop the
// link, or "".
func (ss *sessionState) flush(now time.Time) string {
	a := ss.a
	a.mu.Lock()
	acked := a.acked
	a.acked = nil
	resub := a.resub
	a.resub = nil
	if a.instrGot {
		ss.booksOK = true
	}
	for _, k := range acked {
		ch := k.channel
		if ch == "" {
			ch = ss.reqChan[k.reqID]
		}
		key := ch + "|" + k.symbol
		if ch == "instrument" {
			key = "instrument|"
			if !k.success {
				ss.booksOK = true // no precisions: books infer them from snapshots
			}
		}
		if k.method != "subscribe" {
			continue
		}
		delete(ss.pending, key)
		if !k.success && ch != "instrument" && !isAlready(k.err) {
			a.refused[key] = true
			delete(ss.subscribed, key)
		}
	}
	want := slices.Clone(a.symbols)
	refused := make(map[string]bool, len(a.refused))
	for k := range a.refused {
		refused[k] = true
	}
	a.mu.Unlock()

	if !ss.booksOK && now.Sub(ss.instrSent) > a.readTimeout {
		ss.booksOK = true
	}
	// Resyncs: unsubscribe and subscribe the book again, for a fresh snapshot.
	for _, sym := range resub {
		key := "book|" + sym
		if !ss.subscribed[key] {
			continue
		}
		ss.send(ss.request("unsubscribe", "book", []string{sym}))
		ss.send(ss.request("subscribe", "book", []string{sym}))
		ss.pending[key] = now.Add(a.readTimeout)
	}
	for _, ch := range a.cfg.ChannelsOrAll() {
		kch := kchannels[ch]
		if kch == "book" && !ss.booksOK {
			continue
		}
		var add, drop []string
		for _, sym := range want {
			key := kch + "|" + sym
			if !ss.subscribed[key] && !refused[key] {
				add = append(add, sym)
			}
		}
		for key := range ss.subscribed {
			if sym, ok := strings.CutPrefix(key, kch+"|"); ok && !slices.Contains(want, sym) {
				drop = append(drop, sym)
			}
		}
		for c := range slices.Chunk(add, symbolsPerRequest) {
			ss.send(ss.request("subscribe", kch, c))
			for _, sym := range c {
				ss.subscribed[kch+"|"+sym] = true
				ss.pending[kch+"|"+sym] = now.Add(a.readTimeout)
			}
		}
		slices.Sort(drop)
		for c := range slices.Chunk(drop, symbolsPerRequest) {
			ss.send(ss.request("unsubscribe", kch, c))
			for _, sym := range c {
				delete(ss.subscribed, kch+"|"+sym)
				delete(ss.pending, kch+"|"+sym)
			}
		}
	}
	return ss.failed
}

// expired returns a reason to drop the link if a subscription went
// unanswered past its deadline, or "".
func (ss *sessionState) expired(now time.Time) string {
	for key, dl := range ss.pending {
		if now.After(dl) {
			return "no answer to subscribe " + key
		}
	}
	return ""
}

func isAlready(e string) bool { return strings.Contains(strings.ToLower(e), "already subscribed") }
