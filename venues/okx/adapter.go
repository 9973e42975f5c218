package okx

import (
	"errors"
	"log/slog"
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
	ErrStarted    = venue.ErrStarted   // wrapped by a second Start
	ErrBadSymbol  = venue.ErrBadSymbol // wrapped by Subscribe for a symbol it cannot ask for
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

// Adapter is the OKX v5 public market-data adapter: one websocket, the
// books/trades/tickers channels for each symbol, books kept by a Decoder.
type Adapter struct {
	cfg             venue.Config // defaults resolved
	log             *slog.Logger
	link            *venue.Link
	dec             *Decoder // under the link's decode lock
	venue.Lifecycle          // Venue, Start, Stop

	mu      sync.Mutex        // protects symbols
	symbols []string          // wanted, in order of Subscribe
	instr   venue.Instruments // instIds OKX refused as not existing (60018)

	// Under the link's decode lock: the current connection's requests.
	start time.Time
	subs  venue.Subs // "channel\x00instId" keys; OKX limits the connection, so one backoff (Shared)
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
	cfg.SetDefaults(venue.Defaults{WSURL: DefaultWSURL, ReadTimeout: DefaultReadTimeout, PingInterval: DefaultPingInterval})
	cfg.Channels = cfg.ChannelsOrAll()
	a := &Adapter{cfg: cfg, log: cfg.Logger.With("venue", Name),
		subs: venue.Subs{Deadline: ackDeadline, Shared: true,
			Limits:  venue.SubLimits{MaxKeys: symbolsPerRequest * len(cfg.Channels)},
			Resyncs: venue.Resyncs{Max: maxResyncs, Retry: venue.Retry{Base: resyncRetry, Max: resyncRetry << 5}}}}
	a.symbols, _ = venue.AddSymbols(nil, cfg.Symbols...)
	a.subs.Want(a.keys(a.symbols)...)
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
	a.Init(Name, a.link.Run)
	return a, nil
}

// Coverage reports the link state and the streams observed on it.
func (a *Adapter) Coverage() venue.Coverage { return a.dec.Coverage().Snapshot() }

// Subscribe adds symbols on the configured channels. A symbol OKX refuses
// comes back as a Refusal notice and is dropped from the wanted set.
func (a *Adapter) Subscribe(symbols ...string) error {
	if err := venue.CheckSymbols(Name, "", symbols...); err != nil {
		return err
	}
	// Under the decode lock, so a connection opening meanwhile subscribes
	// each symbol once: here or in connected.
	a.link.Do(func() {
		a.instr.Forget(symbols...)
		a.mu.Lock()
		var add []string
		a.symbols, add = venue.AddSymbols(a.symbols, symbols...)
		a.mu.Unlock()
		a.subs.Want(a.keys(add)...)
		if a.link.Connected() {
			a.flush(time.Now())
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
			a.subs.Unwant(a.keys([]string{s})...)
			a.dec.forget(s, now)
		}
		if a.link.Connected() {
			a.flush(now)
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

// bookKey is the ledger key of instID's book.
func bookKey(instID string) string { return okxChannel(venue.Level2) + "\x00" + instID }

// KnownSymbol reports a symbol OKX refused as not existing (60018) as
// unknown until Subscribe names it again; OKX's instrument list is not
// fetched, so any other is accepted.
func (a *Adapter) KnownSymbol(sym string) (known, listed bool) { return a.instr.KnownSymbol(sym) }

// Link hooks.

// connected subscribes every wanted symbol on a new connection; the link is
// up once every subscription is answered (or data flows).
func (a *Adapter) connected(now time.Time) bool {
	a.subs.Reset()
	a.start = now
	a.flush(now)
	return a.subs.Answered()
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
		for _, k := range a.subs.WantedKeys() {
			if st := a.subs.State(k); st != venue.SubAcked && st != venue.SubRefused {
				missing = append(missing, strings.Replace(k, "\x00", ":", 1))
			}
		}
		a.log.Warn("okx subscriptions not acknowledged; asking again", "args", missing)
		a.link.Up(now)
	})
	return ""
}

// flush sends the ledger's plan: new, rate-limited and expired
// subscriptions, drops, and resyncs (an unsubscribe and a subscribe of
// the book: OKX's way to a fresh snapshot). The decode lock must be held.
func (a *Adapter) flush(now time.Time) {
	for _, r := range a.subs.Flush(now, nil) {
		a.link.Send(request(r.Op, r.Keys))
	}
}

// Decoder hooks, called under the link's decode lock.

func (a *Adapter) resync(instID string) {
	if a.subs.Resyncs.Pending(bookKey(instID)) {
		return // asked for already; flush asks again if it stays broken
	}
	if a.subs.Resync(bookKey(instID)) && a.link.Connected() {
		a.flush(time.Now())
	}
}

func (a *Adapter) whole(instID string) { a.subs.Whole(bookKey(instID)) }

func (a *Adapter) ack(op, channel, instID string) {
	if op != "subscribe" {
		return
	}
	a.subs.Ack(channel + "\x00" + instID)
	a.maybeUp(time.Now())
}

// limited takes back every unanswered subscription after a rate-limit
// error (which names none): they are asked again after the connection's
// backoff.
func (a *Adapter) limited() { a.subs.LimitAsked(time.Now()) }

func (a *Adapter) refused(channel, instID string) {
	if instID == "" {
		return
	}
	a.mu.Lock()
	a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return s == instID })
	a.instr.Refuse(instID)
	a.mu.Unlock()
	now := time.Now()
	a.subs.Forget(a.keys([]string{instID})...)
	// Whether OKX serves the other args of a request with a refused one is
	// unverified: ask again at once for what is still unanswered (a
	// subscription it did serve is acked again).
	a.subs.Again(a.subs.Pending()...)
	a.flush(now)
	a.maybeUp(now)
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
	if a.subs.Answered() && a.link.Connected() {
		a.link.Up(now)
	}
}
