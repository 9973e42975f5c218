package bybit

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/wsconn"
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
	readLimit = 32 << 20 // orderbook.1000 snapshots are ~70 KB; leave room
	// stableAfter is how long a link must stay up for the next drop to
	// retry at once again (the backoff restarts).
	stableAfter = 30 * time.Second
	// maxArgs is Bybit spot's limit of args per subscribe request.
	maxArgs = 10
	// maxArgsChars is Bybit's limit on the characters of args one
	// connection may subscribe (21,000); a topic counts its length plus 3
	// (quotes and comma). Symbols past it are refused up front.
	maxArgsChars = 21000
	// sendQueue holds a connection's first subscriptions: at most one
	// request per symbol, and maxArgsChars admits at most ~1,400 symbols.
	sendQueue = 2048
	// tickInterval is how often due book resyncs are looked at.
	tickInterval = 250 * time.Millisecond
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
	link *venue.Link
	dec  *Decoder // under the link's decode lock
	life venue.Lifecycle
	ping atomic.Uint64 // keepalives sent

	mu      sync.Mutex         // protects the fields below; taken after the decode lock
	symbols []string           // wanted, in the order asked
	pending map[string]request // requests sent, by req_id, awaiting their answer
	nextReq uint64
	initial int // initial subscribe requests of this connection not yet answered

	// Under the decode lock.
	chars   int             // args characters subscribed on this connection
	over    map[string]bool // wanted symbols told they do not fit in maxArgsChars
	resyncs venue.Retry     // per topic: when its book may be resubscribed again
	resyncQ []string        // topics waiting for their backoff
}

var _ venue.Adapter = (*Adapter)(nil)

// request is one op the adapter sends to Bybit.
type request struct {
	op      string // "subscribe" or "unsubscribe"
	symbol  string
	args    []string
	initial bool      // part of a connection's first subscriptions
	resync  bool      // part of a book resync
	sent    time.Time // when it was queued, for unansweredAfter
}

// unansweredAfter: a request Bybit has not answered for this long is
// asked again (a venue that stalled swallows what it was sent meanwhile).
const unansweredAfter = 10 * time.Second

// New returns an adapter for cfg. Zero fields take the defaults above;
// Depth must be one of Bybit spot's depths (1, 50, 200, 1000).
func New(cfg venue.Config) (*Adapter, error) {
	if err := cfg.Validate(Name, spotDepths...); err != nil {
		return nil, err
	}
	if cfg.WSURL == "" {
		cfg.WSURL = DefaultWSURL
	}
	if cfg.Depth == 0 {
		cfg.Depth = DefaultDepth
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.PingInterval*2 > cfg.ReadTimeout {
		// A quiet link (trades of an idle symbol) lives on pongs alone: at
		// least two pings must fit in the read timeout.
		cfg.PingInterval = cfg.ReadTimeout / 3
	}
	a := &Adapter{cfg: cfg, log: cfg.Logger.With("venue", Name), pending: make(map[string]request), over: map[string]bool{}}
	for _, s := range cfg.Symbols {
		if !slices.Contains(a.symbols, s) {
			a.symbols = append(a.symbols, s)
		}
	}
	a.dec = NewDecoder(cfg)
	a.dec.resync = a.resync
	a.dec.whole = a.whole
	a.dec.control = a.answer
	var err error
	a.link, err = venue.NewLink(venue.LinkConfig{
		Venue: Name, URL: cfg.WSURL, Dial: wsconn.Dialer(readLimit),
		ReadTimeout: cfg.ReadTimeout, PingInterval: cfg.PingInterval, Ping: a.pingFrame,
		StableAfter: stableAfter, SendQueue: sendQueue, Tick: a.tick, TickInterval: tickInterval,
		Decoder: a.dec, Sink: cfg.Sink, Recorder: cfg.Recorder, Coverage: a.dec.Coverage(), Logger: a.log,
		Connected: a.connected,
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Venue returns "bybit".
func (a *Adapter) Venue() string { return Name }

// Coverage reports the streams observed arriving on the current link.
func (a *Adapter) Coverage() venue.Coverage { return a.dec.Coverage().Snapshot() }

// Start launches the adapter's goroutines and returns at once; they run
// until ctx is done or Stop is called (venue.Lifecycle).
func (a *Adapter) Start(ctx context.Context) error {
	return a.life.Start(ctx, Name, a.link.Run)
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
		if !venue.ValidSymbol(s) {
			return fmt.Errorf("bybit: bad symbol %q", s)
		}
	}
	a.link.Do(func() {
		for _, s := range symbols {
			a.mu.Lock()
			known := slices.Contains(a.symbols, s)
			if !known {
				a.symbols = append(a.symbols, s)
			}
			a.mu.Unlock()
			if !known && a.fits(time.Now(), s) {
				a.send(request{op: "subscribe", symbol: s, args: a.topics(s)})
			}
		}
	})
	return nil
}

// Unsubscribe removes symbols. Their streams leave coverage when Bybit
// confirms.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.link.Do(func() {
		for _, s := range symbols {
			a.mu.Lock()
			i := slices.Index(a.symbols, s)
			if i >= 0 {
				a.symbols = slices.Delete(a.symbols, i, i+1)
			}
			a.mu.Unlock()
			if i >= 0 && !a.over[s] {
				a.chars -= argsChars(a.topics(s))
				a.send(request{op: "unsubscribe", symbol: s, args: a.topics(s)})
			}
			delete(a.over, s)
		}
	})
	return nil
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

// connected sends a new connection's first subscriptions; the link is up
// once Bybit has answered each of them.
func (a *Adapter) connected(time.Time) bool {
	a.chars = 0
	a.resyncs.Reset()
	a.resyncQ = a.resyncQ[:0]
	a.mu.Lock()
	clear(a.pending)
	syms := slices.Clone(a.symbols)
	a.mu.Unlock()
	var first []request
	for _, s := range syms {
		if a.fits(time.Now(), s) {
			first = append(first, request{op: "subscribe", symbol: s, args: a.topics(s), initial: true})
		}
	}
	a.mu.Lock()
	a.initial = len(first)
	a.mu.Unlock()
	for _, r := range first {
		a.send(r)
	}
	return len(first) == 0
}

func (a *Adapter) pingFrame() []byte {
	return []byte(`{"req_id":"ping-` + strconv.FormatUint(a.ping.Add(1), 10) + `","op":"ping"}`)
}

// send queues r in requests of at most maxArgs args, each under its own
// req_id so its answer can be matched.
func (a *Adapter) send(r request) {
	for args := range slices.Chunk(r.args, maxArgs) {
		part := r
		part.args, part.sent = args, time.Now()
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
		a.link.Send(msg)
	}
}

// resync is the decoder's hook: unsubscribe and subscribe topic again, and
// Bybit sends a fresh snapshot.
func (a *Adapter) resync(topic string) {
	now := time.Now()
	if a.resyncs.Waiting(topic, now) {
		// Its last resync did not make it whole yet (a crossed snapshot
		// again): wait the backoff, not a resubscribe loop.
		if !slices.Contains(a.resyncQ, topic) {
			a.resyncQ = append(a.resyncQ, topic)
		}
		return
	}
	a.resyncs.Fail(topic, now)
	sym := topic[strings.LastIndexByte(topic, '.')+1:]
	a.send(request{op: "unsubscribe", symbol: sym, args: []string{topic}, resync: true})
	a.send(request{op: "subscribe", symbol: sym, args: []string{topic}, resync: true})
}

// whole is the decoder's callback for a snapshot that made topic's book
// whole: its resync backoff starts over.
func (a *Adapter) whole(topic string) { a.resyncs.Done(topic) }

// tick resubscribes the books whose backoff is over, and asks again what
// Bybit left unanswered for unansweredAfter.
func (a *Adapter) tick(now time.Time) string {
	a.link.Do(func() {
		q := a.resyncQ
		a.resyncQ = nil
		for _, t := range q {
			a.resync(t)
		}
		a.mu.Lock()
		var stale []string
		for id, r := range a.pending {
			if now.Sub(r.sent) >= unansweredAfter {
				stale = append(stale, id)
			}
		}
		slices.SortFunc(stale, func(x, y string) int { // req_ids are counters: ask again in their order
			if len(x) != len(y) {
				return len(x) - len(y)
			}
			return strings.Compare(x, y)
		})
		var again []request
		for _, id := range stale {
			again = append(again, a.pending[id])
			delete(a.pending, id)
		}
		a.mu.Unlock()
		for _, r := range again {
			a.log.Warn("request unanswered; asking again", "op", r.op, "args", r.args)
			a.send(r)
		}
	})
	return ""
}

// argsChars is what topics count against maxArgsChars.
func argsChars(topics []string) int {
	n := 0
	for _, t := range topics {
		n += len(t) + 3
	}
	return n
}

// fits reports whether symbol's topics fit in what the connection may
// still subscribe, and counts them if so; a symbol that does not is told
// so once, with a refusal. The decode lock must be held.
func (a *Adapter) fits(now time.Time, symbol string) bool {
	n := argsChars(a.topics(symbol))
	if a.chars+n <= maxArgsChars {
		a.chars += n
		delete(a.over, symbol)
		return true
	}
	if !a.over[symbol] {
		a.over[symbol] = true
		msg := fmt.Sprintf("over Bybit's %d characters of args per connection; not subscribed", maxArgsChars)
		a.dec.sink.Notice(notice.Must(notice.Refusal, Name, "", now, "bybit: "+symbol+" "+msg,
			map[string]any{"symbol": symbol, "message": msg}))
	}
	return false
}

// answer is the decoder's hook for control frames: pongs, and the acks of
// subscribe and unsubscribe requests.
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
		a.link.Drop("resync refused: " + string(c.RetMsg))
	} else if c.HasSuccess && !c.Success {
		a.refused(now, r, string(c.RetMsg))
	} else {
		a.log.Debug("request confirmed", "op", r.op, "args", r.args)
		if r.op == "unsubscribe" && !r.resync {
			a.dec.forget(r.symbol, now)
		}
	}
	if r.initial {
		a.mu.Lock()
		a.initial--
		done := a.initial == 0
		a.mu.Unlock()
		if done {
			a.link.Up(now)
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

// refused reports a request Bybit refused. A refused subscribe drops the
// symbol: it is not retried, on this link or the next.
func (a *Adapter) refused(now time.Time, r request, msg string) {
	if r.op == "subscribe" {
		a.chars -= argsChars(r.args)
		a.mu.Lock()
		if i := slices.Index(a.symbols, r.symbol); i >= 0 {
			a.symbols = slices.Delete(a.symbols, i, i+1)
		}
		a.mu.Unlock()
		a.dec.forget(r.symbol, now)
	}
	a.log.Warn("request refused", "op", r.op, "symbol", r.symbol, "ret_msg", msg)
	a.dec.sink.Notice(notice.Must(notice.Refusal, Name, "", now,
		"bybit refused "+r.op+" of "+r.symbol+": "+msg,
		map[string]any{"symbol": r.symbol, "message": msg}))
}
