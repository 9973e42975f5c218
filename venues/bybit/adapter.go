package bybit

import (
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
	// (quotes and comma). Symbols are spread over connections of at most
	// this many (venue.Pool).
	maxArgsChars = 21000
	// maxConns bounds the connections (Bybit allows 1,000 per IP; 64 hold
	// some 25,000 symbols); past it a symbol is refused up front.
	maxConns = 64
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

// Adapter is a link to Bybit's v5 public spot websocket, over as many
// connections as its symbols' args need. Build one with New; it does
// nothing until Start.
type Adapter struct {
	cfg             venue.Config
	log             *slog.Logger
	pool            *venue.Pool
	venue.Lifecycle               // Venue, Start, Stop
	ping            atomic.Uint64 // keepalives sent

	mu      sync.Mutex // protects the fields below and each conn's subs; taken after the decode lock
	symbols []string   // wanted, in the order asked

	// Under the decode lock.
	conns []*conn         // one per connection of the pool
	over  map[string]bool // wanted symbols told there is no connection left for them
}

// conn is what the adapter keeps for one connection, with its own decoder.
type conn struct {
	i   int
	dec *Decoder

	subs venue.Subs // by topic; its requests carry Bybit's req_ids. Guarded by Adapter.mu.
}

var _ venue.Adapter = (*Adapter)(nil)

// symbolOf returns the symbol a topic names ("orderbook.50.BTCUSDT").
func symbolOf(topic string) string { return topic[strings.LastIndexByte(topic, '.')+1:] }

// unansweredAfter: a request Bybit has not answered for this long is
// asked again (a venue that stalled swallows what it was sent meanwhile).
const unansweredAfter = 10 * time.Second

// newSubs is a connection's ledger: Bybit answers by req_id and takes at
// most maxArgs args a request; a request names one symbol's topics, so a
// refusal names its symbol; a request unanswered for unansweredAfter is
// asked again.
func newSubs() venue.Subs {
	return venue.Subs{Track: true, Deadline: unansweredAfter, Limits: venue.SubLimits{MaxKeys: maxArgs, Group: symbolOf}}
}

// New returns an adapter for cfg. Zero fields take the defaults above;
// Depth must be one of Bybit spot's depths (1, 50, 200, 1000).
func New(cfg venue.Config) (*Adapter, error) {
	if err := cfg.Validate(Name, spotDepths...); err != nil {
		return nil, err
	}
	cfg.SetDefaults(venue.Defaults{WSURL: DefaultWSURL,
		ReadTimeout: DefaultReadTimeout, PingInterval: DefaultPingInterval, Depth: DefaultDepth})
	if cfg.PingInterval*2 > cfg.ReadTimeout {
		// A quiet link (trades of an idle symbol) lives on pongs alone: at
		// least two pings must fit in the read timeout.
		cfg.PingInterval = cfg.ReadTimeout / 3
	}
	a := &Adapter{cfg: cfg, log: cfg.Logger.With("venue", Name), over: map[string]bool{}}
	var err error
	a.pool, err = venue.NewPool(venue.PoolConfig{
		Link: venue.LinkConfig{
			Venue: Name, URL: cfg.WSURL, Dial: wsconn.Dialer(readLimit),
			ReadTimeout: cfg.ReadTimeout, PingInterval: cfg.PingInterval, Ping: a.pingFrame,
			StableAfter: stableAfter, SendQueue: sendQueue, TickInterval: tickInterval,
			Sink: cfg.Sink, Recorder: cfg.Recorder, Logger: a.log,
		},
		Capacity: maxArgsChars,
		MaxConns: maxConns,
		Conn:     a.newConn,
	})
	if err != nil {
		return nil, err
	}
	a.pool.Do(func() {
		now := time.Now()
		for _, s := range cfg.Symbols {
			if !slices.Contains(a.symbols, s) {
				a.symbols = append(a.symbols, s)
				a.place(now, s)
			}
		}
	})
	a.Init(Name, a.pool.Run)
	return a, nil
}

// newConn makes connection i's decoder and hooks (venue.PoolConfig.Conn).
func (a *Adapter) newConn(i int, lc *venue.LinkConfig) {
	c := &conn{i: i, dec: NewDecoder(a.cfg), subs: newSubs()}
	c.dec.bad.Conn = i
	c.dec.resync = func(topic string) { a.resync(c, topic) }
	c.dec.whole = func(topic string) { a.mu.Lock(); c.subs.Whole(topic); a.mu.Unlock() }
	c.dec.control = func(m *controlMsg) { a.answer(c, m) }
	a.conns = append(a.conns, c)
	lc.Decoder, lc.Coverage = c.dec, c.dec.Coverage()
	lc.Connected = func(t time.Time) bool { return a.connected(c, t) }
	lc.Tick = func(t time.Time) string { return a.tick(c, t) }
}

// Coverage reports the streams observed arriving, over every connection.
func (a *Adapter) Coverage() venue.Coverage { return a.pool.Coverage() }

// Subscribe adds symbols on the configured channels. On a live connection
// the subscribe requests are queued at once; otherwise they go out when
// the connection comes up. A symbol Bybit refuses is reported as a
// Refusal notice and dropped. Subscribe returns an error only for a
// malformed symbol.
func (a *Adapter) Subscribe(symbols ...string) error {
	if err := venue.CheckSymbols(Name, "", symbols...); err != nil {
		return err
	}
	a.pool.Do(func() {
		for _, s := range symbols {
			a.mu.Lock()
			known := slices.Contains(a.symbols, s)
			if !known {
				a.symbols = append(a.symbols, s)
			}
			a.mu.Unlock()
			if known {
				continue
			}
			if i, opened, ok := a.place(time.Now(), s); ok && !opened {
				a.mu.Lock()
				a.conns[i].subs.Want(a.topics(s)...)
				a.mu.Unlock()
				a.flush(a.conns[i], time.Now())
			}
		}
	})
	return nil
}

// Unsubscribe removes symbols. Their streams leave coverage when Bybit
// confirms.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.pool.Do(func() {
		for _, s := range symbols {
			a.mu.Lock()
			a.symbols = slices.DeleteFunc(a.symbols, func(x string) bool { return x == s })
			a.mu.Unlock()
			if i, ok := a.pool.Where(s); ok {
				c := a.conns[i]
				a.mu.Lock()
				c.subs.Unwant(a.topics(s)...)
				a.mu.Unlock()
				a.flush(c, time.Now())
				a.pool.Remove(s)
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

// connected sends a new connection's first subscriptions: the symbols
// placed on it. The connection is up once Bybit has answered each.
func (a *Adapter) connected(c *conn, now time.Time) bool {
	syms := a.pool.Keys(c.i)
	a.mu.Lock()
	c.subs.Reset()
	var topics []string
	for _, s := range syms {
		topics = append(topics, a.topics(s)...)
	}
	c.subs.WantOnly(topics...)
	a.mu.Unlock()
	a.flush(c, now)
	return len(syms) == 0
}

func (a *Adapter) pingFrame() []byte {
	return []byte(`{"req_id":"ping-` + strconv.FormatUint(a.ping.Add(1), 10) + `","op":"ping"}`)
}

// flush sends c's ledger's plan: new, expired and dropped topics, and the
// resyncs due. The decode lock must be held.
func (a *Adapter) flush(c *conn, now time.Time) {
	a.mu.Lock()
	rs := c.subs.Flush(now, nil)
	a.mu.Unlock()
	l := a.pool.Link(c.i)
	for _, r := range rs {
		msg := make([]byte, 0, 64+32*len(r.Keys))
		msg = append(msg, `{"req_id":"`...)
		msg = strconv.AppendInt(msg, r.ID, 10)
		msg = append(msg, `","op":"`...)
		msg = append(msg, r.Op...)
		msg = append(msg, `","args":[`...)
		for i, t := range r.Keys {
			if i > 0 {
				msg = append(msg, ',')
			}
			msg = strconv.AppendQuote(msg, t)
		}
		msg = append(msg, "]}"...)
		l.Send(msg)
	}
}

// resync is c's decoder's hook: unsubscribe and subscribe topic again on
// c, and Bybit sends a fresh snapshot; a book its last resync did not make
// whole (a crossed snapshot again) waits the backoff, not a resubscribe
// loop.
func (a *Adapter) resync(c *conn, topic string) {
	a.mu.Lock()
	ok := c.subs.Resync(topic)
	a.mu.Unlock()
	if ok {
		a.flush(c, time.Now())
	}
}

// tick sends what is due on c: resyncs whose backoff is over, and what
// Bybit left unanswered for unansweredAfter.
func (a *Adapter) tick(c *conn, now time.Time) string {
	a.pool.Do(func() { a.flush(c, now) })
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

// place puts symbol on a connection whose args have room for its topics,
// opening one if none has; past maxConns the symbol is told so once, with
// a refusal. The decode lock must be held.
func (a *Adapter) place(now time.Time, symbol string) (i int, opened, ok bool) {
	i, opened, ok = a.pool.Place(symbol, argsChars(a.topics(symbol)))
	if ok {
		delete(a.over, symbol)
		return i, opened, ok
	}
	if !a.over[symbol] {
		a.over[symbol] = true
		msg := fmt.Sprintf("over Bybit's %d characters of args per connection on each of %d connections; not subscribed", maxArgsChars, maxConns)
		a.conns[0].dec.sink.Notice(notice.Must(notice.Refusal, Name, "", now, "bybit: "+symbol+" "+msg,
			map[string]any{"symbol": symbol, "message": msg}))
	}
	return i, opened, ok
}

// answer is c's decoder's hook for control frames: pongs, and the acks of
// subscribe and unsubscribe requests.
func (a *Adapter) answer(c *conn, m *controlMsg) {
	op := string(m.Op)
	if op == "pong" || op == "ping" || string(m.RetMsg) == "pong" {
		return // any frame already counts as life
	}
	var r venue.SubRequest
	id, err := strconv.ParseInt(string(m.ReqID), 10, 64)
	ok := err == nil
	a.mu.Lock()
	if ok {
		r, ok = c.subs.Answer(id)
	}
	a.mu.Unlock()
	if !ok && m.HasSuccess && !m.Success {
		// Bybit may answer a failure with an empty req_id; the ret_msg
		// names the topics ("Invalid symbol :[tickers.NOPEUSDT]").
		r, ok = a.matchFailure(c, string(m.RetMsg))
	}
	if !ok {
		a.log.Info("answer to no request of ours", "op", op, "success", m.Success, "ret_msg", string(m.RetMsg))
		return
	}
	now := time.Now()
	if m.HasSuccess && !m.Success && r.Resync {
		// The symbol was fine a moment ago; a new link is the sure way to
		// fresh snapshots.
		a.log.Warn("resync request refused; reconnecting", "op", r.Op, "args", r.Keys, "ret_msg", string(m.RetMsg))
		a.pool.Link(c.i).Drop("resync refused: " + string(m.RetMsg))
	} else if m.HasSuccess && !m.Success {
		a.refused(c, now, r, string(m.RetMsg))
	} else {
		a.log.Debug("request confirmed", "op", r.Op, "args", r.Keys)
		switch {
		case r.Op == "subscribe":
			a.mu.Lock()
			for _, t := range r.Keys {
				if c.subs.AskedIn(t) == id {
					c.subs.Ack(t)
				}
			}
			a.mu.Unlock()
		case r.Op == "unsubscribe" && !r.Resync && len(r.Keys) > 0:
			c.dec.forget(symbolOf(r.Keys[0]), now)
		}
	}
	a.mu.Lock()
	answered := c.subs.Answered()
	a.mu.Unlock()
	if answered {
		a.pool.Link(c.i).Up(now)
	}
}

// matchFailure finds c's pending request whose topics a failure message
// names, and removes it.
func (a *Adapter) matchFailure(c *conn, msg string) (venue.SubRequest, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range c.subs.Out() {
		r, _ := c.subs.Sent(id)
		for _, t := range r.Keys {
			if strings.Contains(msg, t) {
				c.subs.Answer(id)
				return r, true
			}
		}
	}
	return venue.SubRequest{}, false
}

// refused reports a request Bybit refused. A refused subscribe drops the
// symbol: it is not retried, on this link or the next.
func (a *Adapter) refused(c *conn, now time.Time, r venue.SubRequest, msg string) {
	var symbol string
	if len(r.Keys) > 0 {
		symbol = symbolOf(r.Keys[0])
	}
	if r.Op == "subscribe" {
		a.mu.Lock()
		a.symbols = slices.DeleteFunc(a.symbols, func(x string) bool { return x == symbol })
		c.subs.Forget(a.topics(symbol)...)
		a.mu.Unlock()
		if i, ok := a.pool.Where(symbol); ok && i == c.i {
			a.pool.Remove(symbol)
		}
		c.dec.forget(symbol, now)
	}
	a.log.Warn("request refused", "op", r.Op, "symbol", symbol, "ret_msg", msg)
	c.dec.sink.Notice(notice.Must(notice.Refusal, Name, "", now,
		"bybit refused "+r.Op+" of "+symbol+": "+msg,
		map[string]any{"symbol": symbol, "message": msg}))
}
