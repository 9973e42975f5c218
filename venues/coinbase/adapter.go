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
)

// Adapter is fanoutd's connection to Coinbase Advanced Trade. Build one
// with New; see the package doc for the protocol it speaks.
type Adapter struct {
	cfg  venue.Config
	link *venue.Link
	dec  *Decoder // under the link's decode lock
	life venue.Lifecycle

	mu      sync.Mutex // protects symbols
	symbols []string   // wanted symbols, in the order first asked for
}

var _ venue.Adapter = (*Adapter)(nil)

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
	a := &Adapter{cfg: cfg, dec: NewDecoder(cfg)}
	a.dec.onRefuse = a.refused
	a.addSymbols(cfg.Symbols)
	var err error
	a.link, err = venue.NewLink(venue.LinkConfig{
		Venue: Name, URL: cfg.WSURL, Dial: wsconn.Dialer(ReadLimit),
		ReadTimeout: cfg.ReadTimeout, PingInterval: cfg.PingInterval,
		DialSpacing: minDialGap, MaxSendsPerSecond: msgsPerSec,
		Decoder: a.dec, Sink: cfg.Sink, Recorder: cfg.Recorder, Coverage: a.dec.Coverage(),
		Logger: cfg.Logger.With("venue", Name), Connected: a.connected,
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
		a.addSymbols(symbols)
		if len(symbols) > 0 {
			a.send(a.requests(symbols, false)...)
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
		for _, s := range symbols {
			a.dec.forget(s, now)
		}
		if len(symbols) > 0 {
			a.send(a.requests(symbols, true)...)
		}
	})
	return nil
}

// refused is the decoder's callback for a refused symbol: it is not
// asked for again (no retry loop) until Subscribe names it again.
func (a *Adapter) refused(symbol string) {
	a.mu.Lock()
	a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return s == symbol })
	a.mu.Unlock()
}

// connected subscribes a new connection at once: heartbeats keep the link
// alive, and Coinbase drops a connection that subscribes to nothing.
func (a *Adapter) connected(time.Time) bool {
	a.mu.Lock()
	syms := slices.Clone(a.symbols)
	a.mu.Unlock()
	a.send(request{channel: "heartbeats"})
	if len(syms) > 0 {
		a.send(a.requests(syms, false)...)
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

// requests builds one request per configured channel: Advanced Trade
// takes one channel per message.
func (a *Adapter) requests(symbols []string, unsub bool) []request {
	var rs []request
	for _, ch := range a.cfg.ChannelsOrAll() {
		rs = append(rs, request{unsubscribe: unsub, channel: venueChannel(ch), products: slices.Clone(symbols)})
	}
	return rs
}
