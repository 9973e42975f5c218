package okx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/wsconn"
)

// Defaults for Config fields left zero.
const (
	// DefaultWSURL is OKX's production public endpoint.
	DefaultWSURL = "wss://ws.okx.com:8443/ws/v5/public"
	// DefaultPingInterval: OKX drops a link with no traffic for 30 s; the
	// adapter sends text "ping" this often.
	DefaultPingInterval = 20 * time.Second
	// DefaultReadTimeout: a link silent this long (the ping unanswered for
	// 10 s) is dead.
	DefaultReadTimeout = 30 * time.Second

	// readLimit bounds one frame. A 400-level books snapshot is about
	// 40 KB; the limit leaves room for many times that.
	readLimit = 8 << 20
	// dialSpacing keeps connection attempts under OKX's 3 per second per IP.
	dialSpacing = 350 * time.Millisecond
	// ackDeadline is how long the initial subscriptions may stay
	// unanswered before the link is declared up anyway (with the missing
	// acks named), so a venue that never acks cannot hold link_up back.
	ackDeadline = 10 * time.Second
)

// Errors New and Start return.
var (
	ErrStarted    = venue.ErrStarted // wrapped by a second Start
	ErrBadSymbol  = errors.New("okx: bad symbol")
	ErrNotStarted = errors.New("okx: adapter not started")
)

// Request pacing and retries.
const (
	// maxSendsPerSecond paces requests. OKX answers subscribe bursts with
	// 60014 "Requests too frequent" and publishes no per-second figure;
	// 3 a second is its connection rate and, with symbolsPerRequest,
	// subscribes 500 symbols in about 8 s.
	maxSendsPerSecond = 3
	// symbolsPerRequest bounds the symbols (three args each) one subscribe
	// names, so that 500 symbols cost 25 of OKX's 480 subscribe operations
	// an hour per connection.
	symbolsPerRequest = 20
	// maxResyncs bounds the books being resynced at once (unsubscribe and
	// subscribe sent, no snapshot yet); more wait their turn.
	maxResyncs = 4
	// tickInterval is how often due retries are looked at.
	tickInterval = 250 * time.Millisecond
)

// rateKey is the one key of Adapter.limits: OKX limits the connection,
// not a stream, so every request waits out the same backoff.
const rateKey = "rate"

// Adapter is the OKX v5 public market-data adapter: one websocket, the
// books/trades/tickers channels for each symbol, books kept by a Decoder.
type Adapter struct {
	cfg  venue.Config // defaults resolved
	log  *slog.Logger
	link *venue.Link
	dec  *Decoder // under the link's decode lock
	life venue.Lifecycle

	mu      sync.Mutex      // protects symbols and unknown
	symbols []string        // wanted, in order of Subscribe
	unknown map[string]bool // instIds OKX refused as not existing (60018)

	// Under the link's decode lock: the current connection's requests.
	start     time.Time
	pending   map[string]time.Time // "channel\x00instId" subscribed, not yet acked → when asked
	later     map[string]bool      // keys to ask again once limits allows (rate-limited, unanswered)
	limits    venue.Retry          // the connection's backoff after a rate limit (key rateKey)
	resyncQ   []string             // instIds whose book awaits a resync request
	resyncing map[string]bool      // instIds resynced and not yet whole again
	resyncs   venue.Retry          // per instId: when its resync may be asked again
}

var (
	_ venue.Adapter       = (*Adapter)(nil)
	_ venue.SymbolChecker = (*Adapter)(nil)
)

// New builds an adapter from cfg. It dials nothing until Start.
func New(cfg venue.Config) (*Adapter, error) {
	if err := cfg.Validate(Name); err != nil {
		return nil, err
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
	cfg.Channels = cfg.ChannelsOrAll()
	a := &Adapter{cfg: cfg, log: cfg.Logger.With("venue", Name), unknown: map[string]bool{},
		pending: map[string]time.Time{}, later: map[string]bool{}, resyncing: map[string]bool{},
		resyncs: venue.Retry{Base: resyncRetry, Max: resyncRetry << 5}}
	for _, s := range cfg.Symbols {
		if !slices.Contains(a.symbols, s) {
			a.symbols = append(a.symbols, s)
		}
	}
	a.dec = NewDecoder(cfg)
	a.dec.hooks = hooks{resync: a.resync, ack: a.ack, refused: a.refused, forced: a.forced, data: a.data,
		limited: a.limited, whole: a.whole}
	ping := []byte("ping")
	var err error
	a.link, err = venue.NewLink(venue.LinkConfig{
		Venue: Name, URL: cfg.WSURL, Dial: wsconn.Dialer(readLimit),
		ReadTimeout: cfg.ReadTimeout, PingInterval: cfg.PingInterval, Ping: func() []byte { return ping },
		DialSpacing: dialSpacing, MaxSendsPerSecond: maxSendsPerSecond, TickInterval: tickInterval,
		Decoder: a.dec, Sink: cfg.Sink, Recorder: cfg.Recorder, Coverage: a.dec.Coverage(), Logger: a.log,
		Connected: a.connected, Tick: a.tick,
	})
	if err != nil {
		return nil, err
	}
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
func (a *Adapter) Coverage() venue.Coverage { return a.dec.Coverage().Snapshot() }

// Start launches the adapter's goroutines and returns at once; they run
// until ctx is done or Stop is called (venue.Lifecycle).
func (a *Adapter) Start(ctx context.Context) error {
	return a.life.Start(ctx, Name, a.link.Run)
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
	// Under the decode lock, so a connection opening meanwhile subscribes
	// each symbol once: here or in connected.
	a.link.Do(func() {
		a.mu.Lock()
		var add []string
		for _, s := range symbols {
			delete(a.unknown, s)
			if !slices.Contains(a.symbols, s) {
				a.symbols = append(a.symbols, s)
				add = append(add, s)
			}
		}
		a.mu.Unlock()
		if a.link.Connected() {
			a.subscribe(time.Now(), a.keys(add))
		}
	})
	return nil
}

// Unsubscribe removes symbols; their streams leave coverage at once.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.link.Do(func() {
		now := time.Now()
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, s := range symbols {
			i := slices.Index(a.symbols, s)
			if i < 0 {
				continue
			}
			a.symbols = slices.Delete(a.symbols, i, i+1)
			a.link.Send(request("unsubscribe", a.keys([]string{s})))
			a.dec.forget(s, now)
			a.forgetKeys(s)
		}
	})
	return nil
}

// request builds {"op":op,"args":[{"channel":…,"instId":…},…]} from
// "channel\x00instId" keys. The symbols were checked to need no escaping.
func request(op string, keys []string) []byte {
	b := make([]byte, 0, 32+48*len(keys))
	b = append(b, `{"op":"`...)
	b = append(b, op...)
	b = append(b, `","args":[`...)
	for i, k := range keys {
		ch, sym, _ := strings.Cut(k, "\x00")
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"channel":"`...)
		b = append(b, ch...)
		b = append(b, `","instId":"`...)
		b = append(b, sym...)
		b = append(b, `"}`...)
	}
	return append(b, "]}"...)
}

// keys returns the "channel\x00instId" keys of syms on the configured
// channels, symbol by symbol.
func (a *Adapter) keys(syms []string) []string {
	out := make([]string, 0, len(syms)*len(a.cfg.Channels))
	for _, s := range syms {
		for _, c := range a.cfg.Channels {
			out = append(out, okxChannel(c)+"\x00"+s)
		}
	}
	return out
}

// subscribe asks for keys (grouped by symbol, symbolsPerRequest symbols a
// request) and expects their acks. The decode lock must be held.
func (a *Adapter) subscribe(now time.Time, keys []string) {
	per := symbolsPerRequest * len(a.cfg.Channels)
	for c := range slices.Chunk(keys, per) {
		for _, k := range c {
			a.pending[k] = now
			delete(a.later, k)
		}
		a.link.Send(request("subscribe", c))
	}
}

// forgetKeys drops every request state of instID (unsubscribed, refused).
// The decode lock must be held.
func (a *Adapter) forgetKeys(instID string) {
	for k := range a.later {
		if strings.HasSuffix(k, "\x00"+instID) {
			delete(a.later, k)
		}
	}
	for k := range a.pending {
		if strings.HasSuffix(k, "\x00"+instID) {
			delete(a.pending, k)
		}
	}
	delete(a.resyncing, instID)
	a.resyncs.Done(instID)
	a.resyncQ = slices.DeleteFunc(a.resyncQ, func(s string) bool { return s == instID })
}

// wanted reports whether instID is still wanted.
func (a *Adapter) wanted(instID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.symbols, instID)
}

// KnownSymbol reports a symbol OKX refused as not existing (60018) as
// unknown; OKX's instrument list is not fetched, so any other is accepted.
func (a *Adapter) KnownSymbol(sym string) (known, listed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.unknown[sym] {
		return false, true
	}
	return false, false
}

// Link hooks.

// connected subscribes every wanted symbol on a new connection; the link is
// up once every subscription is answered (or data flows).
func (a *Adapter) connected(now time.Time) bool {
	clear(a.pending)
	clear(a.later)
	clear(a.resyncing)
	a.limits.Reset()
	a.resyncs.Reset()
	a.resyncQ = a.resyncQ[:0]
	a.start = now
	a.mu.Lock()
	syms := slices.Clone(a.symbols)
	a.mu.Unlock()
	a.subscribe(now, a.keys(syms))
	return len(a.pending) == 0
}

// tick asks again what is due (rate-limited or unanswered subscriptions,
// resyncs whose book is not whole yet), and declares the link up when acks
// are overdue.
func (a *Adapter) tick(now time.Time) string {
	a.link.Do(func() {
		if !a.link.Connected() {
			return
		}
		a.flush(now)
		if a.link.IsUp() || now.Sub(a.start) <= ackDeadline {
			return
		}
		var missing []string
		for k := range a.pending {
			missing = append(missing, strings.Replace(k, "\x00", ":", 1))
		}
		slices.Sort(missing)
		a.log.Warn("okx subscriptions not acknowledged; asking again", "args", missing)
		a.link.Up(now)
	})
	return ""
}

// flush sends what is due. The decode lock must be held.
func (a *Adapter) flush(now time.Time) {
	// Subscriptions unanswered for ackDeadline are asked again.
	expired := false
	for k, at := range a.pending {
		if now.Sub(at) > ackDeadline {
			delete(a.pending, k)
			a.later[k] = true
			expired = true
		}
	}
	if expired {
		a.limits.Fail(rateKey, now)
	}
	if len(a.later) > 0 && !a.limits.Waiting(rateKey, now) {
		var again []string
		for k := range a.later {
			if _, sym, _ := strings.Cut(k, "\x00"); a.wanted(sym) {
				again = append(again, k)
			}
		}
		clear(a.later)
		slices.Sort(again)
		a.subscribe(now, again)
	}
	// Resyncs: those whose book is still not whole are asked again after
	// their backoff; new ones start while fewer than maxResyncs run.
	for _, id := range slices.Sorted(maps.Keys(a.resyncing)) {
		if !a.resyncs.Waiting(id, now) {
			a.sendResync(id, now)
		}
	}
	for len(a.resyncQ) > 0 && len(a.resyncing) < maxResyncs {
		id := a.resyncQ[0]
		a.resyncQ = a.resyncQ[1:]
		if a.wanted(id) {
			a.sendResync(id, now)
		}
	}
}

// sendResync unsubscribes and subscribes instID's book: OKX's way to a
// fresh snapshot.
func (a *Adapter) sendResync(instID string, now time.Time) {
	k := okxChannel(venue.Level2) + "\x00" + instID
	a.resyncing[instID] = true
	a.resyncs.Fail(instID, now) // asked again unless whole before then
	delete(a.later, k)
	a.pending[k] = now
	a.link.Send(request("unsubscribe", []string{k}))
	a.link.Send(request("subscribe", []string{k}))
}

// Decoder hooks, called under the link's decode lock.

func (a *Adapter) resync(instID string) {
	if a.resyncing[instID] || slices.Contains(a.resyncQ, instID) {
		return // asked for already; flush asks again if it stays broken
	}
	a.resyncQ = append(a.resyncQ, instID)
	if a.link.Connected() {
		a.flush(time.Now())
	}
}

func (a *Adapter) whole(instID string) {
	delete(a.resyncing, instID)
	a.resyncs.Done(instID)
}

func (a *Adapter) ack(op, channel, instID string) {
	if op != "subscribe" {
		return
	}
	delete(a.pending, channel+"\x00"+instID)
	if len(a.later) == 0 {
		a.limits.Done(rateKey)
	}
	a.maybeUp(time.Now())
}

// limited takes back every unanswered subscription after a rate-limit
// error (which names none): each is asked again after its backoff.
func (a *Adapter) limited() {
	for k := range a.pending {
		delete(a.pending, k)
		a.later[k] = true
	}
	a.limits.Fail(rateKey, time.Now())
}

func (a *Adapter) refused(channel, instID string) {
	if instID == "" {
		return
	}
	a.mu.Lock()
	a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return s == instID })
	a.unknown[instID] = true
	a.mu.Unlock()
	a.forgetKeys(instID)
	// Whether OKX serves the other args of a request with a refused one is
	// unverified: ask again at once for what is still unanswered (a
	// subscription it did serve is acked again).
	if len(a.pending) > 0 {
		a.subscribe(time.Now(), slices.Sorted(maps.Keys(a.pending)))
	}
	a.maybeUp(time.Now())
}

func (a *Adapter) forced(code, msg string) {
	a.link.Drop("venue notice " + code + ": " + msg)
}

func (a *Adapter) data() {
	// The venue is serving pushes: the link is up, whatever acks are
	// still missing (they are asked again if they stay missing).
	if a.link.Connected() {
		a.link.Up(time.Now())
	}
}

// maybeUp marks the link up once every initial subscription is answered.
func (a *Adapter) maybeUp(now time.Time) {
	if len(a.pending) == 0 && len(a.later) == 0 && a.link.Connected() {
		a.link.Up(now)
	}
}
