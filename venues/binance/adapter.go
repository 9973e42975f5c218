package binance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/wsconn"
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
	// msgsPerSec keeps our messages to at most 4 a second, under the 5
	// incoming messages/s Binance allows a connection before it
	// disconnects (pongs and pings count too; those are rare).
	msgsPerSec = 4
	// maxRequestBytes bounds one SUBSCRIBE message; streams beyond go in the
	// next (Binance documents no byte limit; 4 KiB is conservative).
	maxRequestBytes = 4096
	// maxStreams is Binance's limit of streams per connection: symbols are
	// spread over connections of at most this many (venue.Pool), each
	// with its own 5 messages a second.
	maxStreams = 1024
	// maxConns bounds the connections (some 21,000 symbols on all three
	// channels); past it a symbol is refused up front.
	maxConns = 64
	// Connection attempts: Binance allows 300 per 5 minutes per IP; we spend
	// at most a fifth of that, whatever the backoff says.
	connWindow    = 5 * time.Minute
	connPerWindow = 60
)

// Adapter is the Binance spot adapter: websockets to the combined-stream
// endpoint (as many as its streams need, maxStreams each), live
// SUBSCRIBE/UNSUBSCRIBE with ids, and REST depth snapshots bridged to the
// diff-depth stream by the official procedure. Build one with New; the
// zero Adapter is not usable.
type Adapter struct {
	cfg             venue.Config
	depth           int
	log             *slog.Logger
	rest            *rest
	pool            *venue.Pool
	venue.Lifecycle // Venue, Start, Stop

	decs []*Decoder // each connection's, under the decode lock

	smu      sync.Mutex        // protects the fields below; taken after the decode lock, before Link.cmu (docs/lock-order.md)
	want     map[string]bool   // symbols wanted, as given
	instr    venue.Instruments // exchangeInfo's whole list, and the symbols it confirmed
	listedAt time.Time         // when the whole list was fetched; zero: never
	over     map[string]bool   // wanted symbols told there is no connection left for them
	conns    []*conn           // each connection's newest subscription state (nil between connections)
	epoch    uint64            // connection counter
	fetchQ   []fetchReq        // snapshots to fetch, oldest first (paced by the weight bucket)
	attempts []time.Time       // recent connection attempts, oldest first

	kick      chan struct{} // subscriptions changed
	fetchKick chan struct{} // fetchQ grew
}

var (
	_ venue.Adapter       = (*Adapter)(nil)
	_ venue.SymbolChecker = (*Adapter)(nil)
)

// listRefresh is how old the instrument list may grow before it is
// fetched again (new listings).
const listRefresh = time.Hour

// KnownSymbol reports whether sym is in Binance's exchangeInfo, fetched
// whole once the adapter runs (and hourly after).
func (a *Adapter) KnownSymbol(sym string) (known, listed bool) { return a.instr.KnownSymbol(sym) }

// confirmed reports whether exchangeInfo has sym.
func (a *Adapter) confirmed(sym string) bool {
	known, _ := a.instr.KnownSymbol(sym)
	return known
}

// conn is one connection's subscription state, guarded by Adapter.smu.
type conn struct {
	i     int // the pool's connection
	epoch uint64
	subs  venue.Subs // by stream name; its requests carry Binance's ids
	up    bool
}

// fetchReq is a depth snapshot to fetch for a lower-case symbol, for
// connection i while its epoch lasts.
type fetchReq struct {
	i     int
	lower string
	epoch uint64
}

// New returns an adapter for cfg. cfg.Sink is required; endpoints default to
// production, ReadTimeout to DefaultReadTimeout, PingInterval to
// DefaultPingInterval, Depth (the REST snapshot's limit, 5 to 5000) to
// DefaultDepth.
func New(cfg venue.Config) (*Adapter, error) {
	if err := cfg.Validate(Name); err != nil {
		return nil, err
	}
	if cfg.Depth > 5000 {
		return nil, fmt.Errorf("binance: config: depth: %d is over Binance's 5000", cfg.Depth)
	}
	if err := venue.CheckSymbols(Name, reserved, cfg.Symbols...); err != nil {
		return nil, err
	}
	cfg.SetDefaults(venue.Defaults{WSURL: DefaultWSURL, RESTURL: DefaultRESTURL,
		ReadTimeout: DefaultReadTimeout, PingInterval: DefaultPingInterval, Depth: DefaultDepth})
	a := &Adapter{
		cfg:       cfg,
		depth:     cfg.Depth,
		log:       cfg.Logger.With("venue", Name),
		rest:      newREST(cfg.RESTURL),
		want:      map[string]bool{},
		over:      map[string]bool{},
		kick:      make(chan struct{}, 1),
		fetchKick: make(chan struct{}, 1),
	}
	for _, s := range cfg.Symbols {
		a.want[s] = true
	}
	u := strings.TrimRight(cfg.WSURL, "/")
	if !strings.HasSuffix(u, "/stream") {
		u += "/stream"
	}
	var err error
	a.pool, err = venue.NewPool(venue.PoolConfig{
		Link: venue.LinkConfig{
			Venue: Name, URL: u, Dial: a.dial,
			ReadTimeout: cfg.ReadTimeout, PingInterval: cfg.PingInterval, MaxSendsPerSecond: msgsPerSec,
			Sink: cfg.Sink, Recorder: cfg.Recorder, Logger: a.log,
		},
		Capacity: maxStreams,
		MaxConns: maxConns,
		Conn:     a.newConn,
	})
	if err != nil {
		return nil, err
	}
	a.Init(Name, a.pool.Run, a.control, a.fetcher)
	return a, nil
}

// newConn makes connection i's decoder and hooks (venue.PoolConfig.Conn).
func (a *Adapter) newConn(i int, lc *venue.LinkConfig) {
	dcfg := a.cfg
	dcfg.Logger = a.log
	dec := NewDecoder(dcfg)
	dec.badFrames.Conn = i
	dec.hooks = hooks{
		fetch:    func(lower string) { a.requestSnapshot(i, lower) },
		response: func(id, code int64, msg string) { a.onResponse(i, id, code, msg) },
		shutdown: func() { a.pool.Link(i).Drop("serverShutdown") },
	}
	a.decs = append(a.decs, dec)
	lc.Decoder, lc.Coverage = dec, dec.Coverage()
	lc.Connected = func(time.Time) bool { return a.connected(i) }
	lc.Tick = func(t time.Time) string { return a.tick(i, t) }
}

// reserved are the characters a symbol cannot hold: they separate the
// parts of Binance's stream names and its combined-stream URL.
const reserved = "/@"

// Coverage implements venue.Adapter: over every connection.
func (a *Adapter) Coverage() venue.Coverage { return a.pool.Coverage() }

// Subscribe implements venue.Adapter. Symbols are checked against
// exchangeInfo before they are subscribed; an unknown one is reported as a
// Refusal notice.
func (a *Adapter) Subscribe(symbols ...string) error {
	if err := venue.CheckSymbols(Name, reserved, symbols...); err != nil {
		return err
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
	a.pool.Do(func() {
		now := time.Now()
		for _, s := range symbols {
			i, ok := a.pool.Where(s)
			if !ok {
				continue
			}
			a.decs[i].Forget(s)
			a.decs[i].sink.Forget(now, venue.NewStream(Name, venue.Level2, s), venue.NewStream(Name, venue.Trades, s),
				venue.NewStream(Name, venue.Ticker, s))
			// Unsubscribed at once, so that a Subscribe right after asks
			// again (and the book gets a new snapshot).
			a.smu.Lock()
			if l := a.connAt(i); l != nil && a.pool.Link(i).Connected() {
				for _, ch := range a.cfg.ChannelsOrAll() {
					l.subs.Unwant(streamName(s, ch))
				}
				a.send(l, l.subs.Flush(now, nil))
			}
			a.smu.Unlock()
		}
	})
	poke(a.kick)
	return nil
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// notice sends a notice to the sink, in order with the decoders'.
func (a *Adapter) notice(kind notice.Kind, stream, msg string, details map[string]any) {
	a.pool.Do(func() {
		a.cfg.Sink.Notice(notice.Must(kind, Name, stream, time.Now(), msg, details))
	})
}

// dial connects, spending at most connPerWindow attempts per connWindow;
// past that it fails, and the link backs off.
func (a *Adapter) dial(ctx context.Context, url string, alive func()) (venue.Conn, error) {
	now := time.Now()
	a.smu.Lock()
	a.attempts = slices.DeleteFunc(a.attempts, func(t time.Time) bool { return now.Sub(t) >= connWindow })
	limited := len(a.attempts) >= connPerWindow
	if !limited {
		a.attempts = append(a.attempts, now)
	}
	n := len(a.attempts)
	a.smu.Unlock()
	if limited {
		a.notice(notice.RateLimited, "", "binance: connection attempts limited",
			map[string]any{"message": "connection attempts limited", "attempts": n, "window_s": int(connWindow / time.Second)})
		return nil, errors.New("binance: connection attempts limited")
	}
	return wsconn.Dialer(readLimit)(ctx, url, alive)
}

// connected starts connection i's subscription state; the control
// goroutine subscribes, and the connection is up at the first answer.
func (a *Adapter) connected(i int) bool {
	a.smu.Lock()
	a.epoch++
	for len(a.conns) <= i {
		a.conns = append(a.conns, nil)
	}
	a.conns[i] = &conn{i: i, epoch: a.epoch, subs: venue.Subs{Track: true, Limits: subLimits}}
	a.fetchQ = slices.DeleteFunc(a.fetchQ, func(f fetchReq) bool { return f.i == i })
	a.smu.Unlock()
	poke(a.kick)
	return false
}

// tick drops connection i when a request went unanswered for the read
// timeout.
func (a *Adapter) tick(i int, now time.Time) string {
	a.smu.Lock()
	defer a.smu.Unlock()
	c := a.connAt(i)
	if c == nil {
		return ""
	}
	if late := c.subs.Unanswered(now, a.cfg.ReadTimeout); len(late) > 0 {
		r, _ := c.subs.Sent(late[0])
		return fmt.Sprintf("no reply to %s id %d within %v", strings.ToUpper(r.Op), late[0], a.cfg.ReadTimeout)
	}
	return ""
}

// control validates symbols and keeps the connection's subscriptions equal
// to the wanted set.
func (a *Adapter) control(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		case <-retry.C:
		}
		if err := a.reconcile(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("binance: subscribe", "err", err)
			retry.Reset(2 * time.Second)
		}
	}
}

func (a *Adapter) reconcile(ctx context.Context) error {
	// 1. Validate new symbols against exchangeInfo: the whole list (one
	// request, weight 20), then alone those it lacks (a listing newer
	// than the list).
	a.smu.Lock()
	stale := a.listedAt.IsZero() || time.Since(a.listedAt) > listRefresh
	a.smu.Unlock()
	if stale {
		if all, err := a.rest.symbols(ctx, nil); err == nil {
			a.instr.SetList(slices.Collect(maps.Keys(all)))
			a.smu.Lock()
			a.listedAt = time.Now()
			a.smu.Unlock()
		} else {
			a.log.Warn("binance: exchangeInfo list", "err", err)
		}
	}
	a.smu.Lock()
	var unknown []string
	for s := range a.want {
		if a.confirmed(s) {
			a.instr.Confirm(s) // it stays known when a newer list lacks it
			continue
		}
		unknown = append(unknown, s)
	}
	a.smu.Unlock()
	if len(unknown) > 0 {
		slices.Sort(unknown)
		known, err := a.rest.symbols(ctx, unknown)
		if err != nil {
			var ae *APIError
			if errors.As(err, &ae) && ae.RateLimited() {
				a.notice(notice.RateLimited, "", "binance: exchangeInfo rate limited",
					map[string]any{"message": "exchangeInfo rate limited", "status": ae.Status, "retry_after_s": int(ae.RetryAfter / time.Second)})
			}
			return fmt.Errorf("exchangeInfo: %w", err)
		}
		var refused []string
		a.smu.Lock()
		for _, s := range unknown {
			if _, ok := known[s]; ok {
				a.instr.Confirm(s)
			} else if a.want[s] {
				delete(a.want, s)
				refused = append(refused, s)
			}
		}
		a.smu.Unlock()
		for _, s := range refused {
			a.notice(notice.Refusal, "", "binance: unknown symbol "+s+" (absent from exchangeInfo)",
				map[string]any{"symbol": s, "code": strconv.Itoa(codeInvalidSymbol), "message": "absent from exchangeInfo"})
		}
		for s, status := range known {
			if status != "TRADING" {
				a.log.Warn("binance: symbol is not trading; subscribed anyway", "symbol", s, "status", status)
			}
		}
	}

	// 2. Place the wanted symbols on connections (those placed keep their
	// place; new ones go in name order where maxStreams leaves room) and
	// diff each open connection's streams against its symbols'.
	chans := a.cfg.ChannelsOrAll()
	var over []string
	a.pool.Do(func() {
		var ups []int
		defer func() {
			for _, i := range ups {
				a.pool.Link(i).Up(time.Now())
			}
		}()
		a.smu.Lock()
		defer a.smu.Unlock()
		var syms []string
		for s := range a.want {
			if a.confirmed(s) {
				syms = append(syms, s)
			}
		}
		slices.Sort(syms)
		for i := range a.pool.Len() {
			for _, s := range a.pool.Keys(i) {
				if !a.want[s] {
					a.pool.Remove(s)
				}
			}
		}
		for _, s := range syms {
			if _, _, ok := a.pool.Place(s, len(chans)); ok {
				delete(a.over, s)
			} else if !a.over[s] {
				a.over[s] = true
				over = append(over, s)
			}
		}
		for s := range a.over {
			if !a.want[s] {
				delete(a.over, s)
			}
		}
		for i, l := range a.conns {
			if l == nil || !a.pool.Link(i).Connected() {
				continue
			}
			desired := map[string]bool{}
			for _, s := range a.pool.Keys(i) {
				for _, ch := range chans {
					desired[streamName(s, ch)] = true
				}
			}
			l.subs.WantOnly(slices.Sorted(maps.Keys(desired))...)
			a.send(l, l.subs.Flush(time.Now(), nil))
			if len(desired) == 0 && !l.up {
				l.up = true // nothing to subscribe: connected is up
				ups = append(ups, i)
			}
		}
	})
	for _, s := range over {
		a.notice(notice.Refusal, "", fmt.Sprintf("binance: %s not subscribed: over Binance's %d streams per connection on each of %d connections", s, maxStreams, maxConns),
			map[string]any{"symbol": s, "message": fmt.Sprintf("over Binance's %d streams per connection on each of %d connections", maxStreams, maxConns)})
	}
	return nil
}

// current reports whether l is the open state of its connection. The
// decode lock must be held.
func (a *Adapter) current(l *conn) bool {
	a.smu.Lock()
	defer a.smu.Unlock()
	return a.connAt(l.i) == l && a.pool.Link(l.i).Connected()
}

// connAt returns connection i's state, nil if it has none. a.smu must be
// held.
func (a *Adapter) connAt(i int) *conn {
	if i < len(a.conns) {
		return a.conns[i]
	}
	return nil
}

// send queues the ledger's planned requests on l's connection as
// SUBSCRIBE and UNSUBSCRIBE messages under the ledger's ids. a.smu must be
// held.
func (a *Adapter) send(l *conn, rs []venue.SubRequest) {
	for _, r := range rs {
		msg, _ := json.Marshal(struct {
			Method string   `json:"method"`
			Params []string `json:"params"`
			ID     int64    `json:"id"`
		}{strings.ToUpper(r.Op), r.Keys, r.ID})
		a.pool.Link(l.i).Send(msg)
	}
}

// subLimits are Binance's limits on a SUBSCRIBE: maxRequestBytes a
// message (about 64 bytes of envelope, a stream its name, quotes and
// comma), sent msgsPerSec a second by the link's pacer.
var subLimits = venue.SubLimits{MaxBytes: maxRequestBytes, Overhead: 64, KeyOverhead: 3, Interval: time.Second / msgsPerSec}

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

// onResponse handles a reply to SUBSCRIBE/UNSUBSCRIBE on connection i
// (decoder hook, under the decode lock).
func (a *Adapter) onResponse(i int, id int64, code int64, msg string) {
	a.smu.Lock()
	l := a.connAt(i)
	if l == nil {
		a.smu.Unlock()
		return
	}
	req, ok := l.subs.Answer(id)
	if !ok {
		a.smu.Unlock()
		a.log.Warn("binance: reply to an unknown request", "id", id, "code", code, "msg", msg)
		return
	}
	var depth, refused []string
	for _, st := range req.Keys {
		if req.Op != venue.OpSubscribe {
			continue
		}
		if code != 0 {
			if l.subs.AskedIn(st) == id {
				l.subs.Refuse(st)
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
		if l.subs.AskedIn(st) == id {
			l.subs.Ack(st)
			if sym, kind, _ := strings.Cut(st, "@"); strings.HasPrefix(kind, "depth") {
				depth = append(depth, sym)
			}
		}
	}
	l.up = true
	a.smu.Unlock()
	now := time.Now()
	a.pool.Link(i).Up(now)
	for _, s := range refused {
		a.cfg.Sink.Notice(notice.Must(notice.Refusal, Name, "", now, "binance: subscription refused: "+msg,
			map[string]any{"symbol": s, "code": strconv.FormatInt(code, 10), "message": msg}))
	}
	for _, sym := range depth {
		a.decs[i].Want(sym)
	}
}

// requestSnapshot queues a REST snapshot for a lower-case symbol (decoder
// hook, under the decode lock; must not block). The queue is first come
// first served; the weight bucket paces it, so after a reconnect the
// books come back a few at a time and the rest wait (announced by the
// link_down or their book_resync until their snapshot:true).
func (a *Adapter) requestSnapshot(i int, lower string) {
	a.smu.Lock()
	if c := a.connAt(i); c != nil {
		a.queueFetch(fetchReq{i, lower, c.epoch}, false)
	}
	a.smu.Unlock()
	poke(a.fetchKick)
}

// queueFetch queues f unless it is queued; front puts it first (a fetch
// the venue rate-limited keeps its turn). a.smu must be held.
func (a *Adapter) queueFetch(f fetchReq, front bool) {
	if slices.Contains(a.fetchQ, f) {
		return
	}
	if front {
		a.fetchQ = slices.Insert(a.fetchQ, 0, f)
	} else {
		a.fetchQ = append(a.fetchQ, f)
	}
}

// fetcher fetches the REST snapshots the decoder asks for, one at a time
// in order, and feeds them to it as generated frames, recorded like any
// other.
func (a *Adapter) fetcher(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.fetchKick:
		}
		for ctx.Err() == nil {
			a.smu.Lock()
			var f fetchReq
			if len(a.fetchQ) > 0 {
				f = a.fetchQ[0]
				a.fetchQ = a.fetchQ[1:]
			}
			a.smu.Unlock()
			if f.lower == "" {
				break
			}
			a.fetch(ctx, f)
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

func (a *Adapter) fetch(ctx context.Context, f fetchReq) {
	lower := f.lower
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
				map[string]any{"symbol": sym, "code": strconv.FormatInt(ae.Code, 10), "message": ae.Msg})
			return
		case errors.As(err, &ae) && ae.RateLimited():
			// Every REST request waits out the Retry-After (rest.observe);
			// this one keeps its turn.
			a.notice(notice.RateLimited, string(venue.NewStream(Name, venue.Level2, sym)), "binance: depth snapshot rate limited",
				map[string]any{"message": "depth snapshot rate limited", "status": ae.Status, "retry_after_s": int(ae.RetryAfter / time.Second)})
			a.smu.Lock()
			if c := a.connAt(f.i); c != nil && c.epoch == f.epoch {
				a.queueFetch(f, true)
			}
			a.smu.Unlock()
		default:
			a.log.Warn("binance: depth snapshot", "symbol", sym, "err", err)
			a.retryFetch(ctx, f, 2*time.Second)
		}
		return
	}
	frame := make([]byte, 0, len(body)+64)
	frame = append(frame, `{"stream":"`...)
	frame = append(frame, lower...)
	frame = append(frame, `@depthSnapshot","generated":true,"data":`...)
	frame = append(frame, body...)
	frame = append(frame, '}')
	a.pool.Do(func() {
		a.smu.Lock()
		l := a.connAt(f.i)
		a.smu.Unlock()
		if l == nil || l.epoch != f.epoch || !a.current(l) {
			return // the connection dropped meanwhile: the new one asks again
		}
		a.pool.Link(f.i).Frame(recv, frame)
	})
}

// retryFetch waits and queues f again, unless ctx ends first.
func (a *Adapter) retryFetch(ctx context.Context, f fetchReq, wait time.Duration) {
	t := time.NewTimer(wait)
	select {
	case <-ctx.Done():
		t.Stop()
		return
	case <-t.C:
	}
	a.smu.Lock()
	if c := a.connAt(f.i); c != nil && c.epoch == f.epoch {
		a.queueFetch(f, false)
	}
	a.smu.Unlock()
	poke(a.fetchKick)
}
