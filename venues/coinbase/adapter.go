package coinbase

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/wsconn"
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

	// Coinbase allows 8 connections and 8 unauthenticated messages per
	// second per IP: dials are spaced by minDialGap, and no more than
	// msgsPerSec subscribe/unsubscribe messages go out in any second.
	minDialGap = time.Second / 8
	msgsPerSec = 8

	// maxL2Products is how many products get level2 in one session:
	// Coinbase refuses more ("too many L2 streams requested in a single
	// session", naming none); another client saw 16 work and 32 fail.
	// Products are spread over connections of at most this many each
	// (venue.Pool); a lower limit the venue shows lowers that connection's.
	maxL2Products = 16
	// maxConns bounds the connections (1,024 level2 products); past it a
	// product gets a refusal for level2 and its trades and ticker as usual.
	maxConns = 64
	// tickInterval is how often due book resyncs are looked at.
	tickInterval = 250 * time.Millisecond
)

// Adapter is fanoutd's connection to Coinbase Advanced Trade. Build one
// with New; see the package doc for the protocol it speaks.
type Adapter struct {
	cfg             venue.Config
	pool            *venue.Pool
	venue.Lifecycle // Venue, Start, Stop

	mu      sync.Mutex        // protects symbols
	symbols []string          // wanted symbols, in the order first asked for
	instr   venue.Instruments // products Coinbase refused as not valid

	// Under the decode lock.
	conns []*conn         // one per connection of the pool
	l2off map[string]bool // products placed without level2 (no connection left for it)
}

// conn is what the adapter keeps for one connection; each has its own
// decoder (sequence_num counts per connection). Under the decode lock.
type conn struct {
	i    int
	dec  *Decoder
	subs venue.Subs // "channel|product" keys; the decoder matches the venue's acks to the requests
}

// subLimits: Advanced Trade takes one channel a message, naming any
// number of products.
var subLimits = venue.SubLimits{Group: keyChannel}

// keyChannel is the Advanced Trade channel of a ledger key
// ("level2|BTC-USD").
func keyChannel(key string) string { ch, _, _ := strings.Cut(key, "|"); return ch }

// l2Key is the ledger key of product id's level2.
func l2Key(id string) string { return "level2|" + id }

// keys returns the ledger keys of products ps on the configured channels,
// product by product; level2 only for those that have it (unless all).
func (a *Adapter) keys(ps []string, all bool) []string {
	var out []string
	for _, s := range ps {
		for _, ch := range a.cfg.ChannelsOrAll() {
			if ch != venue.Level2 || all || !a.l2off[s] {
				out = append(out, venueChannel(ch)+"|"+s)
			}
		}
	}
	return out
}

var (
	_ venue.Adapter       = (*Adapter)(nil)
	_ venue.SymbolChecker = (*Adapter)(nil)
)

// New returns an adapter for cfg. Sink is required; WSURL defaults to
// DefaultWSURL, ReadTimeout to DefaultReadTimeout, PingInterval to 0 (no
// websocket pings: the heartbeats channel is Coinbase's keepalive; a
// non-zero value adds pings, whose pongs also count as life).
func New(cfg venue.Config) (*Adapter, error) {
	if err := cfg.Validate(Name); err != nil {
		return nil, err
	}
	cfg.SetDefaults(venue.Defaults{WSURL: DefaultWSURL, ReadTimeout: DefaultReadTimeout})
	a := &Adapter{cfg: cfg, l2off: map[string]bool{}}
	capacity := 0
	if a.l2Wanted() {
		capacity = maxL2Products
	}
	var err error
	a.pool, err = venue.NewPool(venue.PoolConfig{
		Link: venue.LinkConfig{
			Venue: Name, URL: cfg.WSURL, Dial: wsconn.Dialer(ReadLimit),
			ReadTimeout: cfg.ReadTimeout, PingInterval: cfg.PingInterval,
			DialSpacing: minDialGap, MaxSendsPerSecond: msgsPerSec,
			Sink: cfg.Sink, Recorder: cfg.Recorder,
			Logger: cfg.Logger.With("venue", Name), TickInterval: tickInterval,
		},
		PerAddress: true, // 8 connections and 8 messages a second per IP
		Capacity:   capacity,
		MaxConns:   maxConns,
		Conn:       a.newConn,
	})
	if err != nil {
		return nil, err
	}
	a.pool.Do(func() {
		syms, _ := venue.AddSymbols(nil, cfg.Symbols...)
		a.symbols = syms
		now := time.Now()
		for _, s := range syms {
			a.place(now, s)
		}
	})
	a.Init(Name, a.pool.Run)
	return a, nil
}

// newConn makes connection i's decoder and hooks (venue.PoolConfig.Conn).
func (a *Adapter) newConn(i int, lc *venue.LinkConfig) {
	c := &conn{i: i, dec: NewDecoder(a.cfg), subs: venue.Subs{Limits: subLimits}}
	c.dec.bad.Conn = i
	c.dec.onRefuse = func(s string) { a.refused(c, s) }
	c.dec.onBook = func(id string) { a.resyncBook(c, id) }
	c.dec.onWhole = func(id string) { a.whole(c, id) }
	c.dec.onL2Full = func(recv time.Time, ids []string, text string) { a.l2Full(c, recv, ids, text) }
	c.dec.onResync = func(reason string) { a.pool.Link(i).Drop("resync: " + reason) }
	a.conns = append(a.conns, c)
	lc.Decoder, lc.Coverage = c.dec, c.dec.Coverage()
	lc.Connected = func(t time.Time) bool { return a.connected(c, t) }
	lc.Tick = func(t time.Time) string { return a.tick(c, t) }
}

// Coverage reports the link state and the streams observed arriving, over
// every connection.
func (a *Adapter) Coverage() venue.Coverage { return a.pool.Coverage() }

// Subscribe adds symbols on the configured channels. A symbol Coinbase
// does not know comes back as a refusal notice.
func (a *Adapter) Subscribe(symbols ...string) error {
	if err := venue.CheckSymbols(Name, "", symbols...); err != nil {
		return err
	}
	// Under the decode lock, so a connection opening meanwhile subscribes
	// each symbol once: here or in connected.
	a.pool.Do(func() {
		a.instr.Forget(symbols...)
		a.mu.Lock()
		var add []string
		a.symbols, add = venue.AddSymbols(a.symbols, symbols...)
		a.mu.Unlock()
		a.subscribe(time.Now(), add)
	})
	return nil
}

// subscribe places syms on connections and asks for them on those already
// open (a new connection asks in connected). The decode lock must be held.
func (a *Adapter) subscribe(now time.Time, syms []string) {
	by := map[int][]string{}
	for _, s := range syms {
		if i, opened, ok := a.place(now, s); ok && !opened {
			by[i] = append(by[i], s)
		}
	}
	for i, c := range a.conns {
		if ps := by[i]; len(ps) > 0 {
			c.subs.Want(a.keys(ps, false)...)
			a.flush(c, now)
		}
	}
}

// place puts s on a connection with a level2 place for it; past maxConns
// it gets a refusal for level2 and goes where its trades and ticker fit.
// The decode lock must be held.
func (a *Adapter) place(now time.Time, s string) (i int, opened, ok bool) {
	if !a.l2Wanted() {
		return a.pool.Place(s, 0)
	}
	if i, opened, ok = a.pool.Place(s, 1); ok {
		return i, opened, ok
	}
	if i, opened, ok = a.pool.Place(s, 0); ok && !a.l2off[s] {
		a.l2off[s] = true
		a.conns[i].dec.refuseL2(now, s, fmt.Sprintf("coinbase serves at most %d level2 products per session and fanoutd opens at most %d sessions; not subscribed", maxL2Products, maxConns))
	}
	return i, opened, ok
}

// Unsubscribe removes symbols; their books are dropped.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.pool.Do(func() {
		a.mu.Lock()
		a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return slices.Contains(symbols, s) })
		a.mu.Unlock()
		now := time.Now()
		by := map[int][]string{}
		for _, s := range symbols {
			if i, ok := a.pool.Where(s); ok && !slices.Contains(by[i], s) {
				a.conns[i].dec.forget(s, now)
				by[i] = append(by[i], s)
			}
		}
		for i, c := range a.conns {
			if ps := by[i]; len(ps) > 0 {
				c.subs.Unwant(a.keys(ps, true)...)
				a.flush(c, now)
			}
		}
		for _, s := range symbols {
			a.pool.Remove(s)
			delete(a.l2off, s)
		}
	})
	return nil
}

// l2Wanted reports whether level2 is among the configured channels.
func (a *Adapter) l2Wanted() bool { return slices.Contains(a.cfg.ChannelsOrAll(), venue.Level2) }

// l2Full is c's decoder's callback for the venue's "too many L2 streams":
// the session's limit is lower than thought. c keeps what it was serving,
// its limit becomes that, and ids move to another connection (trades and
// ticker with them). A connection serving none refuses them. Under the
// decode lock.
func (a *Adapter) l2Full(c *conn, recv time.Time, ids []string, text string) {
	served := 0
	for _, s := range a.pool.Keys(c.i) {
		if !a.l2off[s] && !slices.Contains(ids, s) {
			served++
		}
	}
	if served == 0 && len(ids) == 1 {
		a.l2off[ids[0]] = true
		c.subs.Forget(l2Key(ids[0]))
		c.dec.refuseL2(recv, ids[0], text)
		return
	}
	if served == 0 {
		// Not one of the request was served: keep one, ask again.
		served = 1
		c.subs.Again(l2Key(ids[0]))
		ids = ids[1:]
	}
	a.pool.Limit(c.i, served)
	for _, id := range ids {
		c.dec.forget(id, recv)
		a.pool.Remove(id)
		c.subs.Forget(l2Key(id)) // refused: its trades and ticker are dropped
		c.subs.Unwant(a.keys([]string{id}, false)...)
	}
	a.flush(c, recv)
	a.cfg.Logger.Warn("coinbase: the venue serves fewer level2 products a session; moving them", "connection", c.i, "served", served, "moved", ids)
	a.subscribe(recv, ids)
}

// resyncBook resubscribes id's level2 for a new snapshot, on c (if it is
// subscribed there); a book that was resubscribed and is not whole yet is
// asked again after its backoff. Under the decode lock (a decoder
// callback).
func (a *Adapter) resyncBook(c *conn, id string) {
	if c.subs.Resync(l2Key(id)) {
		a.flush(c, time.Now())
	}
}

func (a *Adapter) whole(c *conn, id string) { c.subs.Whole(l2Key(id)) }

// tick sends what is due on c: resyncs whose backoff is over.
func (a *Adapter) tick(c *conn, now time.Time) string {
	a.pool.Do(func() { a.flush(c, now) })
	return ""
}

// KnownSymbol reports a product Coinbase refused ("… is not a valid
// product") as unknown until Subscribe names it again; the product list is
// not fetched, so any other is accepted.
func (a *Adapter) KnownSymbol(sym string) (known, listed bool) { return a.instr.KnownSymbol(sym) }

// refused is c's decoder's callback for a refused symbol: it is not asked
// for again (no retry loop) until Subscribe names it again.
func (a *Adapter) refused(c *conn, symbol string) {
	a.mu.Lock()
	a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return s == symbol })
	a.instr.Refuse(symbol)
	a.mu.Unlock()
	c.subs.Forget(a.keys([]string{symbol}, true)...)
	a.pool.Remove(symbol)
	delete(a.l2off, symbol)
}

// connected subscribes a new connection at once to the products placed
// on it: heartbeats keep the link alive, and Coinbase drops a connection
// that subscribes to nothing.
func (a *Adapter) connected(c *conn, now time.Time) bool {
	c.subs.Reset()
	a.send(c, request{channel: "heartbeats"})
	c.subs.WantOnly(a.keys(a.pool.Keys(c.i), false)...)
	a.flush(c, now)
	return true
}

// flush sends c's ledger's plan: new and dropped subscriptions, and the
// resyncs due. The decode lock must be held.
func (a *Adapter) flush(c *conn, now time.Time) {
	for _, r := range c.subs.Flush(now, nil) {
		ps := make([]string, len(r.Keys))
		for i, k := range r.Keys {
			_, ps[i], _ = strings.Cut(k, "|")
		}
		a.send(c, request{unsubscribe: r.Op == venue.OpUnsubscribe, channel: keyChannel(r.Keys[0]), products: ps})
	}
}

type wireRequest struct {
	Type       string   `json:"type"`
	ProductIDs []string `json:"product_ids,omitempty"`
	Channel    string   `json:"channel"`
}

// send queues requests on c's link, telling its decoder to expect their
// answers. The decode lock must be held.
func (a *Adapter) send(c *conn, rs ...request) {
	l := a.pool.Link(c.i)
	for _, r := range rs {
		if !l.Connected() {
			return // the next connection subscribes everything
		}
		typ := "subscribe"
		if r.unsubscribe {
			typ = "unsubscribe"
		}
		msg, _ := json.Marshal(wireRequest{Type: typ, ProductIDs: r.products, Channel: r.channel})
		c.dec.expect(r)
		l.Send(msg)
	}
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
