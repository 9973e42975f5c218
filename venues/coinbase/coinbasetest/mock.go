// Package coinbasetest is a mock of Coinbase Advanced Trade's public
// websocket, for the coinbase adapter's tests and for anyone who wants to
// stream Coinbase frames through a real socket (replay, the daemon).
//
// The mock answers subscribe and unsubscribe as the venue does (one
// channel per request; a snapshot first, then a subscriptions ack listing
// the whole subscription set; an unknown product answered with an error
// frame), numbers every frame of a connection with sequence_num from 0
// across all channels, sends heartbeats to connections subscribed to
// them, keeps a true book for its symbol that Step changes, and injects the
// faults of venuetest.Venue.
package coinbasetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/coinbase"
)

// Mock is a Coinbase Advanced Trade mock that implements venuetest.Venue.
// The zero Mock is ready to use; Start runs it for one test.
type Mock struct {
	// HeartbeatInterval is how often heartbeats go out. Defaults to 50 ms
	// (the venue sends one a second; tests want silence found fast).
	HeartbeatInterval time.Duration
	// Products are more products the mock serves (with empty books),
	// besides Symbol and Other; set before Start, then AddProducts.
	Products []string
	// MaxL2 is how many products one connection may have on level2; past
	// it a level2 subscribe is answered, as Coinbase does, with
	// {"type":"error","message":"too many L2 streams requested in a single session"}
	// and subscribes nothing. 0 is the venue's own, DefaultMaxL2; negative
	// is no limit.
	MaxL2 int

	srv  *venuetest.Server
	stop chan struct{}
	wg   sync.WaitGroup

	sendMu sync.Mutex // serialises book changes with the frames that carry them; taken before mu

	mu       sync.Mutex // protects the fields below
	book     venue.Book
	rng      *rand.Rand
	dropNext bool
	trades   int
	conns    map[*venuetest.Conn]*conn
	books    map[string]*venue.Book // the true books of Other and Products
}

type conn struct {
	c   *venuetest.Conn
	mu  sync.Mutex // protects the fields below; held while a frame is numbered and written
	seq int64      // the last sequence_num sent
	sub map[string][]string
}

var _ venuetest.Venue = (*Mock)(nil)

// DefaultMaxL2 is the level2 products Coinbase serves one session (16
// work and 32 fail, as another client reports).
const DefaultMaxL2 = 16

// The symbols the mock serves and refuses.
const (
	Symbol        = "BTC-USD"
	Other         = "ETH-USD"
	RefusedSymbol = "NOPE-USD"
)

// Name returns "coinbase".
func (m *Mock) Name() string { return coinbase.Name }

// Symbol returns the symbol whose book the mock keeps.
func (m *Mock) Symbol() string { return Symbol }

// Serve makes the mock serve n products, Symbol and n-1 more named
// P00-USD, P01-USD…, before Start, and returns them all.
func (m *Mock) Serve(n int) []string {
	syms := []string{Symbol}
	for i := range n - 1 {
		p := fmt.Sprintf("P%02d-USD", i)
		m.Products = append(m.Products, p)
		syms = append(syms, p)
	}
	return syms
}

// AddProducts makes the running mock serve ids too.
func (m *Mock) AddProducts(ids ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Products = append(m.Products, ids...)
}

// serves reports whether the mock serves product id.
func (m *Mock) serves(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return id == Symbol || id == Other || slices.Contains(m.Products, id)
}

// RefusedSymbol returns a product the mock does not know.
func (m *Mock) RefusedSymbol() string { return RefusedSymbol }

// Server returns the running server.
func (m *Mock) Server() *venuetest.Server { return m.srv }

// Start runs the mock until t ends, with a fresh true book.
func (m *Mock) Start(t *testing.T) {
	m.mu.Lock()
	m.rng = rand.New(rand.NewPCG(1, 2))
	m.book = venue.Book{}
	for i := 1; i <= 50; i++ {
		m.book.Set(venue.Bid, price(50000, -i), size(m.rng))
		m.book.Set(venue.Ask, price(50000, i), size(m.rng))
	}
	m.dropNext = false
	m.conns = map[*venuetest.Conn]*conn{}
	m.books = map[string]*venue.Book{}
	m.stop = make(chan struct{})
	m.mu.Unlock()
	m.srv = venuetest.NewServer(t, m)
	every := m.HeartbeatInterval
	if every <= 0 {
		every = 50 * time.Millisecond
	}
	m.wg.Add(1)
	go m.heartbeats(every)
	t.Cleanup(func() {
		close(m.stop)
		m.wg.Wait()
	})
}

// price is mid + ticks cents, written as Coinbase writes prices (no
// trailing zeros: "50000", "50000.5", "49999.99").
func price(mid int64, ticks int) decimal.Decimal {
	return decimal.New(mid*100+int64(ticks), -2)
}

func size(r *rand.Rand) decimal.Decimal {
	return decimal.New(int64(1+r.IntN(500000)), -4)
}

// NewDecoder implements venuetest.Venue: coinbase.NewDecoder, as replay builds it.
func (m *Mock) NewDecoder(cfg venue.Config) venue.Decoder { return coinbase.NewDecoder(cfg) }

// NewAdapter builds the coinbase adapter pointed at the mock, with a read
// timeout short enough that silence is found within a second.
func (m *Mock) NewAdapter(cfg venue.Config) (venue.Adapter, error) {
	cfg.WSURL = m.srv.URL
	cfg.ReadTimeout = 750 * time.Millisecond
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return coinbase.New(cfg)
}

// Book returns a copy of the true book for Symbol.
func (m *Mock) Book() *venue.Book {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &venue.Book{}
	b.Apply(m.book.Snapshot(""))
	return b
}

// productBook returns the true book of a product other than Symbol: two
// levels until StepProducts changes it. m.mu must be held.
func (m *Mock) productBook(id string) *venue.Book {
	b := m.books[id]
	if b == nil {
		b = &venue.Book{}
		b.Set(venue.Bid, decimal.RequireFromString("3000.1"), decimal.RequireFromString("1"))
		b.Set(venue.Ask, decimal.RequireFromString("3000.2"), decimal.RequireFromString("2"))
		m.books[id] = b
	}
	return b
}

// ProductBook returns a copy of the true book of product id (Other or
// one of Products).
func (m *Mock) ProductBook(id string) *venue.Book {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &venue.Book{}
	b.Apply(m.productBook(id).Snapshot(""))
	return b
}

// StepProducts changes the true book of each of ids once per round, n
// rounds, with one l2_data update frame per change to every connection
// subscribed to that product's level2.
func (m *Mock) StepProducts(n int, ids ...string) {
	for range n {
		for _, id := range ids {
			m.sendMu.Lock()
			m.mu.Lock()
			b := m.productBook(id)
			side, sideName := venue.Bid, "bid"
			p := decimal.New(300000-int64(1+m.rng.IntN(20)), -2)
			if m.rng.IntN(2) == 0 {
				side, sideName = venue.Ask, "offer"
				p = decimal.New(300020+int64(1+m.rng.IntN(20)), -2)
			}
			sz := size(m.rng)
			if _, ok := b.Get(side, p); ok && m.rng.IntN(3) == 0 {
				sz = decimal.Decimal{}
			}
			b.Set(side, p, sz)
			conns := m.subscribed("level2", id)
			m.mu.Unlock()
			upd := fmt.Sprintf(`[{"type":"update","product_id":%q,"updates":[{"side":%q,"event_time":%q,"price_level":%q,"new_quantity":%q}]}]`,
				id, sideName, now(), p.String(), sz.String())
			for _, c := range conns {
				c.send("l2_data", upd, false)
			}
			m.sendMu.Unlock()
		}
	}
}

// Level2 returns, for each open connection, the products it has on
// level2.
func (m *Mock) Level2() [][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out [][]string
	for _, vc := range m.srv.Conns() {
		if c := m.conns[vc]; c != nil {
			c.mu.Lock()
			out = append(out, slices.Clone(c.sub["level2"]))
			c.mu.Unlock()
		}
	}
	return out
}

// CloseConnOf closes, with a close frame, the connection that has
// product id on level2, and returns the products it had there.
func (m *Mock) CloseConnOf(id string) []string {
	m.mu.Lock()
	conns := m.subscribed("level2", id)
	m.mu.Unlock()
	if len(conns) == 0 {
		return nil
	}
	c := conns[0]
	c.mu.Lock()
	had := slices.Clone(c.sub["level2"])
	c.mu.Unlock()
	c.c.Close(websocket.StatusGoingAway, "test")
	return had
}

// DropNextUpdate makes the next update frame go unsent; its sequence_num
// is still used, so the client sees a gap.
func (m *Mock) DropNextUpdate() {
	m.mu.Lock()
	m.dropNext = true
	m.mu.Unlock()
}

// CorruptNextChecksum returns false: Coinbase sends no checksum.
func (m *Mock) CorruptNextChecksum() bool { return false }

// Garbage returns frames that do not parse or describe an impossible book.
func (m *Mock) Garbage() [][]byte {
	return [][]byte{
		[]byte(`not json`),
		[]byte(`{"channel":"l2_data","client_id":"","timestamp":"2026-09-07T01:57:58.894355Z","sequence_num":`),
		[]byte(`[1,2,3]`),
		[]byte(`{"channel":"l2_data","events":[{"type":"update","product_id":"BTC-USD","updates":[{"side":"bid","price_level":"1","new_quantity":"-5"}]}]}`),
	}
}

// Step changes the true book n times, one l2_data update frame per change
// to every connection subscribed to Symbol's level2.
func (m *Mock) Step(n int) {
	for range n {
		m.sendMu.Lock()
		m.mu.Lock()
		side, sideName := venue.Bid, "bid"
		ticks := -(1 + m.rng.IntN(60))
		if m.rng.IntN(2) == 0 {
			side, sideName, ticks = venue.Ask, "offer", -ticks
		}
		p := price(50000, ticks)
		sz := size(m.rng)
		if _, ok := m.book.Get(side, p); ok && m.rng.IntN(3) == 0 {
			sz = decimal.Decimal{}
		}
		m.book.Set(side, p, sz)
		drop := m.dropNext
		m.dropNext = false
		conns := m.subscribed("level2", Symbol)
		m.mu.Unlock()
		upd := fmt.Sprintf(`[{"type":"update","product_id":%q,"updates":[{"side":%q,"event_time":%q,"price_level":%q,"new_quantity":%q}]}]`,
			Symbol, sideName, now(), p.String(), sz.String())
		for _, c := range conns {
			c.send("l2_data", upd, drop)
		}
		m.sendMu.Unlock()
	}
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// subscribed returns the connections subscribed to channel for product.
// m.mu must be held.
func (m *Mock) subscribed(channel, product string) []*conn {
	var out []*conn
	for _, vc := range m.srv.Conns() {
		c := m.conns[vc]
		if c == nil {
			continue
		}
		c.mu.Lock()
		ok := slices.Contains(c.sub[channel], product)
		c.mu.Unlock()
		if ok {
			out = append(out, c)
		}
	}
	return out
}

// send numbers and writes one envelope frame; drop uses the number but
// sends nothing.
func (c *conn) send(channel, events string, drop bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	if drop {
		return
	}
	c.c.Send(fmt.Appendf(nil, `{"channel":%q,"client_id":"","timestamp":%q,"sequence_num":%d,"events":%s}`,
		channel, now(), c.seq, events))
}

// Connected registers a connection; its first frame is sequence_num 0.
func (m *Mock) Connected(vc *venuetest.Conn) {
	m.mu.Lock()
	m.conns[vc] = &conn{c: vc, seq: -1, sub: map[string][]string{}}
	m.mu.Unlock()
}

// Message answers a client request as Advanced Trade does.
func (m *Mock) Message(vc *venuetest.Conn, msg []byte) {
	m.mu.Lock()
	c := m.conns[vc]
	m.mu.Unlock()
	var req struct {
		Type       string   `json:"type"`
		ProductIDs []string `json:"product_ids"`
		Channel    string   `json:"channel"`
	}
	if err := json.Unmarshal(msg, &req); err != nil || c == nil {
		vc.Send([]byte(`{"type":"error","message":"failure to parse request"}`))
		return
	}
	switch req.Channel {
	case "heartbeats", "level2", "market_trades", "ticker":
	default:
		vc.Send([]byte(`{"type":"error","message":"authentication failure"}`)) // what the live venue said to an unknown channel
		return
	}
	if req.Type != "subscribe" && req.Type != "unsubscribe" {
		vc.Send([]byte(`{"type":"error","message":"unknown message type"}`))
		return
	}
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	maxL2 := m.MaxL2
	if maxL2 == 0 {
		maxL2 = DefaultMaxL2
	}
	if req.Type == "subscribe" && req.Channel == "level2" && maxL2 > 0 {
		c.mu.Lock()
		n := len(c.sub["level2"])
		for _, id := range req.ProductIDs {
			if !slices.Contains(c.sub["level2"], id) {
				n++
			}
		}
		c.mu.Unlock()
		if n > maxL2 {
			vc.Send([]byte(`{"type":"error","message":"too many L2 streams requested in a single session"}`))
			return
		}
	}
	for _, id := range req.ProductIDs {
		if req.Type == "subscribe" && !m.serves(id) {
			vc.Send(fmt.Appendf(nil, `{"type":"error","message":"Failed to subscribe","reason":"%s is not a valid product"}`, id))
			continue
		}
		c.mu.Lock()
		had := slices.Contains(c.sub[req.Channel], id)
		if req.Type == "subscribe" && !had {
			c.sub[req.Channel] = append(c.sub[req.Channel], id)
		}
		if req.Type == "unsubscribe" {
			c.sub[req.Channel] = slices.DeleteFunc(c.sub[req.Channel], func(s string) bool { return s == id })
		}
		c.mu.Unlock()
		if req.Type == "subscribe" {
			m.snapshot(c, req.Channel, id)
		}
	}
	if req.Channel == "heartbeats" {
		c.mu.Lock()
		if req.Type == "subscribe" {
			c.sub["heartbeats"] = []string{"heartbeats"}
		} else {
			delete(c.sub, "heartbeats")
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	set, _ := json.Marshal(c.sub)
	c.mu.Unlock()
	c.send("subscriptions", `[{"subscriptions":`+string(set)+`}]`, false)
}

// snapshot sends what a new subscription to channel for id gets first.
// sendMu must be held.
func (m *Mock) snapshot(c *conn, channel, id string) {
	switch channel {
	case "level2":
		var b bytes.Buffer
		m.mu.Lock()
		book := &m.book
		if id != Symbol {
			book = m.productBook(id)
		}
		// Interleave the sides, as the live venue does.
		bids, asks := book.Top(nil, venue.Bid, 0), book.Top(nil, venue.Ask, 0)
		m.mu.Unlock()
		fmt.Fprintf(&b, `[{"type":"snapshot","product_id":%q,"updates":[`, id)
		ts := now()
		n := 0
		for i := 0; i < max(len(bids), len(asks)); i++ {
			for _, l := range []struct {
				side string
				ls   []venue.Level
			}{{"offer", asks}, {"bid", bids}} {
				if i >= len(l.ls) {
					continue
				}
				if n > 0 {
					b.WriteByte(',')
				}
				n++
				fmt.Fprintf(&b, `{"side":%q,"event_time":%q,"price_level":%q,"new_quantity":%q}`, l.side, ts, l.ls[i].Price, l.ls[i].Size)
			}
		}
		b.WriteString(`]}]`)
		c.send("l2_data", b.String(), false)
	case "market_trades":
		m.mu.Lock()
		m.trades++
		tid := 1000 + m.trades
		m.mu.Unlock()
		c.send("market_trades", fmt.Sprintf(`[{"type":"snapshot","trades":[{"product_id":%q,"trade_id":"%d","price":"50000.01","size":"0.5","time":%q,"side":"BUY"}]}]`,
			id, tid, now()), false)
	case "ticker":
		c.send("ticker", fmt.Sprintf(`[{"type":"snapshot","tickers":[{"type":"ticker","product_id":%q,"price":"50000.01","volume_24_h":"1","low_24_h":"1","high_24_h":"1","low_52_w":"1","high_52_w":"1","price_percent_chg_24_h":"0","best_bid":"49999.99","best_ask":"50000.01","best_bid_quantity":"1.5","best_ask_quantity":"2"}]}]`,
			id), false)
	}
}

// Trade sends one market_trades update for Symbol to every subscriber,
// and a ticker update, as a match does.
func (m *Mock) Trade(p, sz, side string) {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	m.mu.Lock()
	m.trades++
	tid := 1000 + m.trades
	tconns := m.subscribed("market_trades", Symbol)
	kconns := m.subscribed("ticker", Symbol)
	bid, _ := m.book.Best(venue.Bid)
	ask, _ := m.book.Best(venue.Ask)
	m.mu.Unlock()
	for _, c := range tconns {
		c.send("market_trades", fmt.Sprintf(`[{"type":"update","trades":[{"product_id":%q,"trade_id":"%d","price":%q,"size":%q,"time":%q,"side":%q}]}]`,
			Symbol, tid, p, sz, now(), side), false)
	}
	for _, c := range kconns {
		c.send("ticker", fmt.Sprintf(`[{"type":"update","tickers":[{"type":"ticker","product_id":%q,"price":%q,"best_bid":%q,"best_bid_quantity":%q,"best_ask":%q,"best_ask_quantity":%q}]}]`,
			Symbol, p, bid.Price, bid.Size, ask.Price, ask.Size), false)
	}
}

// BadTicker sends every connection a ticker frame whose price does not
// parse (in sequence: it names no book).
func (m *Mock) BadTicker() {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	m.mu.Lock()
	conns := m.subscribed("heartbeats", "heartbeats")
	m.mu.Unlock()
	for _, c := range conns {
		c.send("ticker", fmt.Sprintf(`[{"type":"update","tickers":[{"type":"ticker","product_id":%q,"price":"x1","best_bid":"y","best_bid_quantity":"1","best_ask":"2","best_ask_quantity":"1"}]}]`, Symbol), false)
	}
}

// CrossNextUpdate sends, in place of the next change, an update that
// crosses Symbol's book (a bad frame naming the product); the true book
// is unchanged.
func (m *Mock) CrossNextUpdate() {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	m.mu.Lock()
	conns := m.subscribed("level2", Symbol)
	ask, _ := m.book.Best(venue.Ask)
	m.mu.Unlock()
	for _, c := range conns {
		c.send("l2_data", fmt.Sprintf(`[{"type":"update","product_id":%q,"updates":[{"side":"bid","event_time":%q,"price_level":%q,"new_quantity":"1"}]}]`,
			Symbol, now(), ask.Price.Add(decimal.New(1, 0)).String()), false)
	}
}

// SendError sends the venue's error frame to every connection.
func (m *Mock) SendError(message string) {
	b, _ := json.Marshal(map[string]string{"type": "error", "message": message})
	m.srv.Broadcast(b)
}

// Disconnect closes every connection with a close frame, as the venue
// does when it drops a client (Coinbase has no in-band disconnect notice).
func (m *Mock) Disconnect(reason string) {
	for _, c := range m.srv.Conns() {
		c.Close(websocket.StatusGoingAway, reason)
	}
}

var seqRE = regexp.MustCompile(`"sequence_num":\s*\d+`)

// Stream sends recorded frames to every connection in order. A frame's
// sequence_num is rewritten to the connection's own numbering, so a
// capture streams through as a gap-free connection would carry it.
func (m *Mock) Stream(frames [][]byte) {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	m.mu.Lock()
	var conns []*conn
	for _, vc := range m.srv.Conns() {
		if c := m.conns[vc]; c != nil {
			conns = append(conns, c)
		}
	}
	m.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		for _, f := range frames {
			if seqRE.Match(f) {
				c.seq++
				f = seqRE.ReplaceAll(f, []byte(`"sequence_num":`+strconv.FormatInt(c.seq, 10)))
			}
			c.c.Send(f)
		}
		c.mu.Unlock()
	}
}

func (m *Mock) heartbeats(every time.Duration) {
	defer m.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	var n int64
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		n++
		m.mu.Lock()
		conns := m.subscribed("heartbeats", "heartbeats")
		m.mu.Unlock()
		for _, c := range conns {
			c.send("heartbeats", fmt.Sprintf(`[{"current_time":%q,"heartbeat_counter":%d}]`, time.Now().UTC().String(), n), false)
		}
	}
}
