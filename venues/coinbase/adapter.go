package coinbase

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
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
	// Past it a product gets a refusal for level2 up front, and its trades
	// and ticker as usual.
	maxL2Products = 16
	// tickInterval is how often due book resyncs are looked at.
	tickInterval = 250 * time.Millisecond
)

// Adapter is fanoutd's connection to Coinbase Advanced Trade. Build one
// with New; see the package doc for the protocol it speaks.
type Adapter struct {
	cfg  venue.Config
	link *venue.Link
	dec  *Decoder // under the link's decode lock
	life venue.Lifecycle

	mu      sync.Mutex // protects symbols and unknown
	symbols []string   // wanted symbols, in the order first asked for
	unknown map[string]bool

	// Under the link's decode lock.
	l2Cap    int             // level2 products a session may have (maxL2Products, lower if the venue said so)
	l2       []string        // wanted symbols given level2, in order
	l2Told   map[string]bool // symbols told (refusal notice) they get no level2
	resyncQ  []string        // products whose book waits for its resync's backoff
	resyncs  venue.Retry     // per product: when its book may be resubscribed again
	resynced map[string]bool // products resubscribed and not yet whole
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
	if cfg.WSURL == "" {
		cfg.WSURL = DefaultWSURL
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Adapter{cfg: cfg, dec: NewDecoder(cfg), unknown: map[string]bool{}, l2Cap: maxL2Products,
		l2Told: map[string]bool{}, resynced: map[string]bool{}}
	a.dec.onRefuse = a.refused
	a.dec.onBook = a.resyncBook
	a.dec.onWhole = a.whole
	a.dec.onL2Full = a.l2Full
	a.addSymbols(cfg.Symbols)
	var err error
	a.link, err = venue.NewLink(venue.LinkConfig{
		Venue: Name, URL: cfg.WSURL, Dial: wsconn.Dialer(ReadLimit),
		ReadTimeout: cfg.ReadTimeout, PingInterval: cfg.PingInterval,
		DialSpacing: minDialGap, MaxSendsPerSecond: msgsPerSec,
		Decoder: a.dec, Sink: cfg.Sink, Recorder: cfg.Recorder, Coverage: a.dec.Coverage(),
		Logger: cfg.Logger.With("venue", Name), Connected: a.connected,
		Tick: a.tick, TickInterval: tickInterval,
	})
	if err != nil {
		return nil, err
	}
	a.dec.onResync = func(reason string) { a.link.Drop("resync: " + reason) }
	return a, nil
}

// Venue returns "coinbase".
func (a *Adapter) Venue() string { return Name }

// Coverage reports the link state and the streams observed arriving.
func (a *Adapter) Coverage() venue.Coverage { return a.dec.Coverage().Snapshot() }

// Start launches the adapter's goroutines and returns at once; they run
// until ctx is done or Stop is called (venue.Lifecycle).
func (a *Adapter) Start(ctx context.Context) error {
	return a.life.Start(ctx, Name, a.link.Run)
}

// Stop closes the link and waits for the adapter's goroutines, or until
// ctx is done (then it returns ctx.Err() and they finish on their own).
func (a *Adapter) Stop(ctx context.Context) error { return a.life.Stop(ctx) }

func (a *Adapter) addSymbols(syms []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range syms {
		if !slices.Contains(a.symbols, s) {
			a.symbols = append(a.symbols, s)
		}
	}
}

// Subscribe adds symbols on the configured channels. A symbol Coinbase
// does not know comes back as a refusal notice.
func (a *Adapter) Subscribe(symbols ...string) error {
	for _, s := range symbols {
		if !venue.ValidSymbol(s) {
			return fmt.Errorf("coinbase: bad symbol %q", s)
		}
	}
	// Under the decode lock, so a connection opening meanwhile subscribes
	// each symbol once: here or in connected.
	a.link.Do(func() {
		a.mu.Lock()
		var add []string
		for _, s := range symbols {
			delete(a.unknown, s)
			if !slices.Contains(a.symbols, s) && !slices.Contains(add, s) {
				add = append(add, s)
			}
		}
		a.mu.Unlock()
		a.addSymbols(add)
		if len(add) > 0 {
			a.send(a.requests(add, a.admit(time.Now(), add), false)...)
		}
	})
	return nil
}

// Unsubscribe removes symbols; their books are dropped.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.link.Do(func() {
		a.mu.Lock()
		a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return slices.Contains(symbols, s) })
		a.mu.Unlock()
		now := time.Now()
		var l2 []string
		for _, s := range symbols {
			a.dec.forget(s, now)
			if slices.Contains(a.l2, s) {
				l2 = append(l2, s)
			}
			delete(a.l2Told, s)
		}
		a.l2 = slices.DeleteFunc(a.l2, func(s string) bool { return slices.Contains(symbols, s) })
		if len(symbols) > 0 {
			a.send(a.requests(symbols, l2, true)...)
		}
		// Freed level2 places go to wanted symbols that had none.
		a.mu.Lock()
		var waiting []string
		for _, s := range a.symbols {
			if !slices.Contains(a.l2, s) {
				waiting = append(waiting, s)
			}
		}
		a.mu.Unlock()
		if n := min(len(waiting), a.l2Cap-len(a.l2)); n > 0 && a.l2Wanted() {
			waiting = waiting[:n]
			a.l2 = append(a.l2, waiting...)
			for _, s := range waiting {
				delete(a.l2Told, s)
			}
			a.send(request{channel: "level2", products: waiting})
		}
	})
	return nil
}

// l2Wanted reports whether level2 is among the configured channels.
func (a *Adapter) l2Wanted() bool { return slices.Contains(a.cfg.ChannelsOrAll(), venue.Level2) }

// admit gives level2 to as many of syms as the session's limit allows and
// returns them; the others get a refusal notice for level2, once. The
// decode lock must be held.
func (a *Adapter) admit(now time.Time, syms []string) []string {
	if !a.l2Wanted() {
		return nil
	}
	var in []string
	for _, s := range syms {
		switch {
		case slices.Contains(a.l2, s):
			in = append(in, s)
		case len(a.l2) < a.l2Cap:
			a.l2 = append(a.l2, s)
			in = append(in, s)
		case !a.l2Told[s]:
			a.l2Told[s] = true
			a.dec.refuseL2(now, s, fmt.Sprintf("coinbase serves at most %d level2 products per session; not subscribed", a.l2Cap))
		}
	}
	return in
}

// l2Full is the decoder's callback for the venue's "too many L2 streams":
// the session's limit is lower than thought; ids lose level2 (already
// told) and the limit is what was served.
func (a *Adapter) l2Full(ids []string) {
	a.l2 = slices.DeleteFunc(a.l2, func(s string) bool { return slices.Contains(ids, s) })
	a.l2Cap = max(len(a.l2), 1)
	for _, s := range ids {
		a.l2Told[s] = true
	}
}

// resyncBook resubscribes id's level2 for a new snapshot, on the same
// link; a book that was resubscribed and is not whole yet waits its
// backoff first. Under the decode lock (a decoder callback).
func (a *Adapter) resyncBook(id string) {
	if !slices.Contains(a.l2, id) {
		return
	}
	if a.resyncs.Waiting(id, time.Now()) {
		if !slices.Contains(a.resyncQ, id) {
			a.resyncQ = append(a.resyncQ, id)
		}
		return
	}
	a.resyncs.Fail(id, time.Now())
	a.resynced[id] = true
	a.send(request{unsubscribe: true, channel: "level2", products: []string{id}},
		request{channel: "level2", products: []string{id}})
}

func (a *Adapter) whole(id string) {
	if a.resynced[id] {
		delete(a.resynced, id)
		a.resyncs.Done(id)
	}
}

// tick resubscribes the books whose backoff is over.
func (a *Adapter) tick(now time.Time) string {
	a.link.Do(func() {
		q := a.resyncQ
		a.resyncQ = nil
		for _, id := range q {
			a.resyncBook(id)
		}
	})
	return ""
}

// KnownSymbol reports a product Coinbase refused ("… is not a valid
// product") as unknown; the product list is not fetched, so any other is
// accepted.
func (a *Adapter) KnownSymbol(sym string) (known, listed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.unknown[sym] {
		return false, true
	}
	return false, false
}

// refused is the decoder's callback for a refused symbol: it is not
// asked for again (no retry loop) until Subscribe names it again.
func (a *Adapter) refused(symbol string) {
	a.mu.Lock()
	a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return s == symbol })
	a.unknown[symbol] = true
	a.mu.Unlock()
	a.l2 = slices.DeleteFunc(a.l2, func(s string) bool { return s == symbol })
}

// connected subscribes a new connection at once: heartbeats keep the link
// alive, and Coinbase drops a connection that subscribes to nothing.
func (a *Adapter) connected(time.Time) bool {
	a.mu.Lock()
	syms := slices.Clone(a.symbols)
	a.mu.Unlock()
	a.l2 = a.l2[:0]
	a.resyncQ = a.resyncQ[:0]
	clear(a.resynced)
	a.resyncs.Reset()
	a.send(request{channel: "heartbeats"})
	if len(syms) > 0 {
		a.send(a.requests(syms, a.admit(time.Now(), syms), false)...)
	}
	return true
}

type wireRequest struct {
	Type       string   `json:"type"`
	ProductIDs []string `json:"product_ids,omitempty"`
	Channel    string   `json:"channel"`
}

// send queues requests on the link, telling the decoder to expect their
// answers. The decode lock must be held.
func (a *Adapter) send(rs ...request) {
	for _, r := range rs {
		if !a.link.Connected() {
			return // the next connection subscribes everything
		}
		typ := "subscribe"
		if r.unsubscribe {
			typ = "unsubscribe"
		}
		msg, _ := json.Marshal(wireRequest{Type: typ, ProductIDs: r.products, Channel: r.channel})
		a.dec.expect(r)
		a.link.Send(msg)
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

// requests builds one request per configured channel (Advanced Trade
// takes one channel per message); level2 names only l2.
func (a *Adapter) requests(symbols, l2 []string, unsub bool) []request {
	var rs []request
	for _, ch := range a.cfg.ChannelsOrAll() {
		ps := symbols
		if ch == venue.Level2 {
			ps = l2
		}
		if len(ps) > 0 {
			rs = append(rs, request{unsubscribe: unsub, channel: venueChannel(ch), products: slices.Clone(ps)})
		}
	}
	return rs
}
