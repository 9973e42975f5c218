package kraken

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/wsconn"
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

// maxSendsPerSecond paces requests. Kraken publishes no number for its
// message rate ("Exceeded msg rate" past it); 10 a second is well under
// what other clients report and subscribes 500 symbols on three channels
// in 3 s.
const maxSendsPerSecond = 10

// maxResyncs bounds the book resyncs in flight (unsubscribe sent, new
// subscription not yet answered): a bad frame that touches every book
// resyncs them a few at a time instead of in one burst.
const maxResyncs = 8

// ErrStarted is returned (wrapped) by a second Start.
var ErrStarted = venue.ErrStarted

// Adapter is Kraken's venue.Adapter: one websocket to Spot v2, subscribed
// to instrument (for precisions), then book, trade and ticker per symbol.
// See the package doc for the protocol rules it follows.
type Adapter struct {
	cfg             venue.Config
	log             *slog.Logger
	link            *venue.Link
	dec             *Decoder // under the link's decode lock
	venue.Lifecycle          // Venue, Start, Stop

	smu  sync.Mutex    // protects ss and subs; taken after the decode lock, before mu and Link.cmu (docs/lock-order.md)
	ss   *sessionState // the current connection's instrument and send state
	subs venue.Subs    // "channel|symbol" keys and "instrument|"; requests carry its ids as req_id (Track)

	mu       sync.Mutex // protects the fields below
	symbols  []string   // wanted, in subscription order
	resub    []string   // symbols whose book must be resubscribed (resync)
	whole    []string   // symbols whose book a snapshot made whole since the session last looked
	acked    []ack      // acks read since the session last looked
	limited  bool       // a rate-limit error naming no request arrived
	instrGot bool       // the instrument snapshot arrived on this connection

	instr venue.Instruments // the instrument snapshot's pairs, and those refused as not supported
}

var (
	_ venue.Adapter       = (*Adapter)(nil)
	_ venue.SymbolChecker = (*Adapter)(nil)
)

// New returns an adapter for cfg. cfg.Sink is required; cfg.Depth must be
// 0 or one of Kraken's depths (10, 25, 100, 500, 1000).
func New(cfg venue.Config) (*Adapter, error) {
	if err := cfg.Validate(Name, 10, 25, 100, 500, 1000); err != nil {
		return nil, err
	}
	cfg.SetDefaults(venue.Defaults{WSURL: DefaultWSURL,
		ReadTimeout: DefaultReadTimeout, PingInterval: DefaultPingInterval, Depth: DefaultDepth})
	a := &Adapter{cfg: cfg, log: cfg.Logger.With("venue", Name),
		subs: venue.Subs{Track: true, KeepExpired: true, // an unanswered subscribe drops the link (tick)
			Limits:  venue.SubLimits{MaxKeys: symbolsPerRequest, Group: keyChannel},
			Resyncs: venue.Resyncs{Max: maxResyncs}}}
	a.subs.Want(instrumentKey)
	a.symbols, _ = venue.AddSymbols(nil, cfg.Symbols...)
	a.dec = NewDecoder(cfg)
	a.dec.onResync = a.queueResync
	a.dec.onWhole = a.bookWhole
	a.dec.onAck = a.queueAck
	a.dec.onRateLimit = a.rateLimited
	a.dec.onInstrument = a.instrumentArrived
	var err error
	a.link, err = venue.NewLink(venue.LinkConfig{
		Venue: Name, URL: cfg.WSURL, Dial: wsconn.Dialer(readLimit),
		ReadTimeout: cfg.ReadTimeout, PingInterval: cfg.PingInterval, Ping: a.pingFrame,
		MaxSendsPerSecond: maxSendsPerSecond,
		Decoder:           a.dec, Sink: cfg.Sink, Recorder: cfg.Recorder, Coverage: a.dec.Coverage(), Logger: a.log,
		Connected: a.connected, Tick: a.tick,
	})
	if err != nil {
		return nil, err
	}
	a.Init(Name, a.link.Run)
	return a, nil
}

// Coverage reports the streams observed arriving on the current link.
func (a *Adapter) Coverage() venue.Coverage { return a.dec.Coverage().Snapshot() }

// Subscribe adds symbols on the configured channels. A symbol the venue
// refused before is asked for again.
func (a *Adapter) Subscribe(symbols ...string) error {
	if err := venue.CheckSymbols(Name, "", symbols...); err != nil {
		return err
	}
	a.smu.Lock()
	a.subs.Want(a.keys(symbols)...) // a refused key is asked again
	a.smu.Unlock()
	a.instr.Forget(symbols...)
	a.mu.Lock()
	a.symbols, _ = venue.AddSymbols(a.symbols, symbols...)
	a.mu.Unlock()
	a.poke()
	return nil
}

// Unsubscribe removes symbols; their streams leave coverage.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.mu.Lock()
	a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return slices.Contains(symbols, s) })
	a.mu.Unlock()
	a.link.Do(func() {
		now := time.Now()
		for _, s := range symbols {
			a.dec.forget(s, now)
		}
	})
	a.poke()
	return nil
}

// poke brings the connection's subscriptions up to date at once.
func (a *Adapter) poke() {
	a.smu.Lock()
	defer a.smu.Unlock()
	if a.ss == nil {
		return
	}
	if reason := a.ss.flush(time.Now()); reason != "" {
		a.link.Drop(reason)
	}
}

// Decoder hooks. They run under the link's decode lock.

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

func (a *Adapter) bookWhole(sym string) {
	a.mu.Lock()
	a.whole = append(a.whole, sym)
	a.mu.Unlock()
}

func (a *Adapter) rateLimited() {
	a.mu.Lock()
	a.limited = true
	a.mu.Unlock()
	a.poke()
}

func (a *Adapter) instrumentArrived(syms []string) {
	a.mu.Lock()
	a.instrGot = true
	a.mu.Unlock()
	if syms == nil {
		syms = []string{} // a snapshot with no pairs is a list still
	}
	a.instr.SetList(syms)
	a.poke()
}

// KnownSymbol reports whether sym is one of Kraken's pairs, from the
// instrument snapshot; a pair Kraken refused as not supported is unknown
// until Subscribe names it again (venue.Instruments).
func (a *Adapter) KnownSymbol(sym string) (known, listed bool) { return a.instr.KnownSymbol(sym) }

// Link hooks.

// connected starts a connection's requests with the instrument channel
// (for precisions); books follow once it answered.
func (a *Adapter) connected(now time.Time) bool {
	a.mu.Lock()
	a.resub, a.whole, a.acked, a.instrGot, a.limited = nil, nil, nil, false, false
	a.mu.Unlock()
	a.smu.Lock()
	defer a.smu.Unlock()
	ss := &sessionState{a: a, instrSent: now}
	a.ss = ss
	a.subs.Reset()
	a.subs.Deadline = a.cfg.ReadTimeout
	ss.flush(now)
	return true
}

// tick retries what is due and drops a link whose requests went unanswered.
func (a *Adapter) tick(now time.Time) string {
	a.smu.Lock()
	defer a.smu.Unlock()
	if a.ss == nil {
		return ""
	}
	reason := a.ss.flush(now)
	if reason == "" {
		reason = a.ss.expired(now)
	}
	return reason
}

// pingFrame is a ping whose req_id is the ledger's next id, so no two
// requests on a connection share one.
func (a *Adapter) pingFrame() []byte {
	a.smu.Lock()
	defer a.smu.Unlock()
	return fmt.Appendf(nil, `{"method":"ping","req_id":%d}`, a.subs.NextID())
}

// instrumentKey is the ledger key of the instrument channel, asked first
// on every connection.
const instrumentKey = "instrument|"

// keys returns the ledger keys of syms on the configured channels, symbol
// by symbol.
func (a *Adapter) keys(syms []string) []string {
	var out []string
	for _, s := range syms {
		for _, ch := range a.cfg.ChannelsOrAll() {
			out = append(out, kchannels[ch]+"|"+s)
		}
	}
	return out
}

// sessionState is one connection's state beyond the ledger (Adapter.subs):
// whether books may be asked yet, and whether a send failed; guarded by
// Adapter.smu.
type sessionState struct {
	a         *Adapter
	instrSent time.Time
	booksOK   bool // instrument precisions arrived (or will not): books may be subscribed
	failed    string
}

func (ss *sessionState) send(msg []byte) {
	if ss.failed != "" {
		return
	}
	if !ss.a.link.Send(msg) {
		ss.failed = "request queue full or link closed"
	}
}

type reqParams struct {
	Channel      string   `json:"channel"`
	Symbol       []string `json:"symbol,omitempty"`
	Depth        int      `json:"depth,omitempty"`
	Snapshot     *bool    `json:"snapshot,omitempty"`
	EventTrigger string   `json:"event_trigger,omitempty"`
}

// keyChannel is the Kraken channel of a ledger key ("book|BTC/USD").
func keyChannel(key string) string { ch, _, _ := strings.Cut(key, "|"); return ch }

// request encodes a planned request, its req_id the ledger's (Track): its
// keys are of one Kraken channel (the ledger's Limits.Group).
func (ss *sessionState) request(r venue.SubRequest) []byte {
	kch := keyChannel(r.Keys[0])
	p := reqParams{Channel: kch}
	if kch != "instrument" {
		for _, k := range r.Keys {
			p.Symbol = append(p.Symbol, k[len(kch)+1:])
		}
	}
	yes, no := true, false
	if r.Op == venue.OpSubscribe {
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
	b, _ := json.Marshal(struct {
		Method string    `json:"method"`
		Params reqParams `json:"params"`
		ReqID  int64     `json:"req_id"`
	}{r.Op, p, r.ID})
	return b
}

var kchannels = map[venue.Channel]string{venue.Level2: "book", venue.Trades: "trade", venue.Ticker: "ticker"}

// flush reads the acks that arrived, then sends the ledger's plan for the
// wanted symbols, resyncs and instrument state. It returns a reason to
// drop the link, or "".
func (ss *sessionState) flush(now time.Time) string {
	a := ss.a
	a.mu.Lock()
	acked, resub, whole, limited := a.acked, a.resub, a.whole, a.limited
	a.acked, a.resub, a.whole, a.limited = nil, nil, nil, false
	if a.instrGot {
		ss.booksOK = true
	}
	subs := &a.subs
	for _, sym := range whole {
		subs.Whole("book|" + sym)
	}
	if limited {
		// Kraken's rate-limit error names no request: every unanswered
		// one may have been refused. Ask them all again later; one that
		// did succeed answers "already subscribed".
		subs.LimitAsked(now)
	}
	for _, k := range acked {
		// The request the ack answers names its channel when the ack
		// does not (a refusal).
		r, sent := subs.Sent(k.reqID)
		ch := k.channel
		if ch == "" && sent {
			ch = keyChannel(r.Keys[0])
		}
		key := ch + "|" + k.symbol
		if ch == "instrument" {
			key = instrumentKey
			if !k.success && !k.limited {
				ss.booksOK = true // no precisions: books infer them from snapshots
			}
		}
		if k.method != venue.OpSubscribe {
			if sent {
				subs.Answer(k.reqID)
			}
			continue
		}
		switch {
		case k.limited && k.symbol == "" && ch != "instrument":
			subs.LimitAsked(now)
		case k.limited:
			subs.Limit(key, now)
		case k.success || isAlready(k.err) || ch == "instrument":
			// "Already subscribed" to a book being resynced: the
			// unsubscribe did not take and the book is still the broken
			// one; the ledger asks again after the resync's backoff.
			subs.Ack(key)
		default:
			subs.Refuse(key)
			if strings.Contains(strings.ToLower(k.err), "not supported") {
				a.instr.Refuse(k.symbol)
			}
		}
		if sent && !slices.ContainsFunc(r.Keys, func(key string) bool { return subs.AskedIn(key) == k.reqID }) {
			subs.Answer(k.reqID) // every key it asked is answered (one ack per symbol)
		}
	}
	want := slices.Clone(a.symbols)
	a.mu.Unlock()

	// The ledger wants the instrument channel and what a.symbols holds,
	// on every configured channel.
	subs.WantOnly(append([]string{instrumentKey}, a.keys(want)...)...)
	if !ss.booksOK && now.Sub(ss.instrSent) > a.cfg.ReadTimeout {
		ss.booksOK = true
	}
	for _, sym := range resub {
		subs.Resync("book|" + sym)
	}
	for _, r := range subs.Flush(now, func(k string) bool { return !ss.booksOK && keyChannel(k) == "book" }) {
		ss.send(ss.request(r))
	}
	return ss.failed
}

// expired returns a reason to drop the link if a subscription went
// unanswered past its deadline, or "".
func (ss *sessionState) expired(now time.Time) string {
	if keys := ss.a.subs.Overdue(now); len(keys) > 0 {
		return "no answer to subscribe " + keys[0]
	}
	return ""
}

func isAlready(e string) bool { return strings.Contains(strings.ToLower(e), "already subscribed") }
