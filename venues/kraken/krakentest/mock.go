// Package krakentest is a mock of Kraken's Spot WebSocket v2 for tests and
// replay: a real websocket server (venuetest.Server) that answers
// subscribe, unsubscribe and ping as Kraken does, serves the instrument
// channel, keeps a true book it changes on Step and streams it as Kraken's
// book frames with valid checksums, and injects faults on demand. It
// implements venuetest.Venue.
package krakentest

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/kraken"
)

// Mock is a Kraken v2 venue with one tradable symbol. Set the exported
// fields before Start; the zero value of each means the default.
type Mock struct {
	// Sym is the symbol served. Defaults to "BTC/USD".
	Sym string
	// Refused is a symbol refused the way Kraken refuses legacy names.
	// Defaults to "XBT/USD".
	Refused string
	// Depth is the book depth the mock serves and the adapter subscribes.
	// Defaults to 10.
	Depth int
	// PricePrec and QtyPrec are the instrument's precisions. Default 1 and 8
	// (BTC/USD's).
	PricePrec, QtyPrec int
	// Seed seeds the book's changes. Defaults to 1.
	Seed uint64

	srv  *venuetest.Server
	view atomic.Pointer[[2][]venue.Level] // the top Depth levels, bids then asks, best first

	mu      sync.Mutex      // protects the fields below and orders frames on every connection
	rng     *rand.Rand      // the book's changes
	fmtRng  *rand.Rand      // how numbers are written, apart so the book does not depend on it
	bids    map[int64]int64 // price ticks → qty units, the whole true book
	asks    map[int64]int64
	subs    map[*venuetest.Conn]map[string]bool // per connection: "book|SYM", "trade|SYM", …
	drop    bool
	corrupt bool
	avoid   int64 // a price the next change must not touch (after a dropped frame)
	clock   time.Time

	limited   map[string]int         // channel → subscribes still to be rate-limited
	limitBare bool                   // rate-limit replies name no request
	badSnaps  []string               // the next book snapshots to spoil: "crossed" or "fine"
	asked     map[string][]time.Time // "method channel" → when each request arrived
}

// RateLimit makes the next n subscribes of channel ("book", "trade",
// "ticker", "instrument") fail for the rate limit, as Kraken does:
// {"Error":"Exceeded msg rate"}, naming no request, when bare; otherwise
// a subscribe answer with success false and that error.
func (m *Mock) RateLimit(channel string, n int, bare bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.limited == nil {
		m.limited = map[string]int{}
	}
	m.limited[channel] += n
	m.limitBare = bare
}

// SpoilSnapshots makes the next book snapshots unusable, in order: kind
// "crossed" sends a crossed book, "fine" a level finer than the
// instrument's precision.
func (m *Mock) SpoilSnapshots(kinds ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.badSnaps = append(m.badSnaps, kinds...)
}

// Asked returns when each request of method ("subscribe", "unsubscribe")
// on channel arrived.
func (m *Mock) Asked(method, channel string) []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.asked[method+" "+channel])
}

var _ venuetest.Venue = (*Mock)(nil)

func (m *Mock) defaults() {
	if m.Sym == "" {
		m.Sym = "BTC/USD"
	}
	if m.Refused == "" {
		m.Refused = "XBT/USD"
	}
	if m.Depth == 0 {
		m.Depth = 10
	}
	if m.PricePrec == 0 && m.QtyPrec == 0 {
		m.PricePrec, m.QtyPrec = 1, 8
	}
	if m.Seed == 0 {
		m.Seed = 1
	}
}

// Name returns "kraken".
func (m *Mock) Name() string { return kraken.Name }

// Symbol returns the served symbol.
func (m *Mock) Symbol() string { m.defaults(); return m.Sym }

// RefusedSymbol returns the refused symbol.
func (m *Mock) RefusedSymbol() string { m.defaults(); return m.Refused }

// Server returns the running server.
func (m *Mock) Server() *venuetest.Server { return m.srv }

// Start starts a fresh mock (new server, new book) bound to t.
func (m *Mock) Start(t *testing.T) {
	m.mu.Lock()
	m.reset()
	m.mu.Unlock()
	m.srv = venuetest.NewServer(t, m)
}

// reset makes a fresh book. Caller holds m.mu.
func (m *Mock) reset() {
	m.defaults()
	m.rng = rand.New(rand.NewPCG(m.Seed, 7))
	m.fmtRng = rand.New(rand.NewPCG(m.Seed, 8))
	m.bids, m.asks = map[int64]int64{}, map[int64]int64{}
	m.subs = map[*venuetest.Conn]map[string]bool{}
	m.drop, m.corrupt, m.avoid = false, false, 0
	m.limited, m.badSnaps, m.asked = map[string]int{}, nil, map[string][]time.Time{}
	m.clock = time.Date(2026, 10, 6, 17, 35, 55, 0, time.UTC)
	mid := int64(45000) * pow(m.PricePrec)
	for i := int64(0); i < int64(m.Depth)+20; i++ {
		m.bids[mid-1-2*i] = m.qty()
		m.asks[mid+1+2*i] = m.qty()
	}
	m.publishView()
}

// Frames generates, without a server, the instrument snapshot, a book
// snapshot and n update frames for a fresh book, as the mock would send
// them: a level2 stream for benchmarks, fuzzing and replay tests. It
// resets the mock's book.
func (m *Mock) Frames(n int) (instrument, snapshot []byte, updates [][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reset()
	instrument = m.instrumentFrame()
	snapshot = m.bookFrame("snapshot", m.top(m.bids, true), m.top(m.asks, false))
	for range n {
		bids0, asks0 := m.top(m.bids, true), m.top(m.asks, false)
		m.change(bids0, asks0)
		m.publishView()
		updates = append(updates, m.bookFrame("update", diff(bids0, m.top(m.bids, true), m.bids), diff(asks0, m.top(m.asks, false), m.asks)))
	}
	return instrument, snapshot, updates
}

func (m *Mock) instrumentFrame() []byte {
	return fmt.Appendf(nil, `{"channel":"instrument","type":"snapshot","data":{"assets":[],"pairs":[{"symbol":%q,"base":"BTC","quote":"USD","status":"online","qty_precision":%d,"qty_increment":0.00000001,"price_precision":%d,"cost_precision":5,"marginable":true,"has_index":true,"cost_min":0.5,"tick_size":0.1,"price_increment":0.1,"qty_min":0.00005}]}}`,
		m.Sym, m.QtyPrec, m.PricePrec)
}

// NewDecoder implements venuetest.Venue: kraken.NewDecoder, as replay builds it.
func (m *Mock) NewDecoder(cfg venue.Config) venue.Decoder { return kraken.NewDecoder(cfg) }

// NewAdapter builds a kraken adapter pointed at the mock, with liveness
// short enough that silence is noticed within about a second.
func (m *Mock) NewAdapter(cfg venue.Config) (venue.Adapter, error) {
	cfg.WSURL = m.srv.URL
	cfg.Depth = m.Depth
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 800 * time.Millisecond
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = 100 * time.Millisecond
	}
	return kraken.New(cfg)
}

func pow(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

func (m *Mock) qty() int64 { return 1 + m.rng.Int64N(5*pow(m.QtyPrec)) }

// Connected sends Kraken's status greeting.
func (m *Mock) Connected(c *venuetest.Conn) {
	c.Send([]byte(`{"channel":"status","data":[{"api_version":"v2","connection_id":14949390454975033707,"system":"online","version":"2.0.8"}],"type":"update"}`))
}

type request struct {
	Method string `json:"method"`
	Params struct {
		Channel  string   `json:"channel"`
		Symbol   []string `json:"symbol"`
		Depth    int      `json:"depth"`
		Snapshot *bool    `json:"snapshot"`
	} `json:"params"`
	ReqID *int64 `json:"req_id"`
}

// Message answers a client request as Kraken does.
func (m *Mock) Message(c *venuetest.Conn, msg []byte) {
	var r request
	if err := json.Unmarshal(msg, &r); err != nil {
		c.Send(m.answer("", false, nil, "", "Malformed request", nil))
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch r.Method {
	case "ping":
		c.Send(m.answer("pong", true, nil, "", "", r.ReqID))
	case "subscribe", "unsubscribe":
		m.subscribe(c, &r)
	default:
		c.Send(m.answer(r.Method, false, nil, "", "Method not found", r.ReqID))
	}
}

// answer builds a method response; result nil omits it, errText "" means
// success.
func (m *Mock) answer(method string, ok bool, result map[string]any, sym, errText string, reqID *int64) []byte {
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	a := map[string]any{"method": method, "success": ok, "time_in": now, "time_out": now}
	if result != nil {
		a["result"] = result
	}
	if errText != "" {
		a["error"] = errText
	}
	if sym != "" {
		a["symbol"] = sym
	}
	if reqID != nil {
		a["req_id"] = *reqID
	}
	b, _ := json.Marshal(a)
	return b
}

func (m *Mock) subscribe(c *venuetest.Conn, r *request) {
	subs := m.subs[c]
	if subs == nil {
		subs = map[string]bool{}
		m.subs[c] = subs
	}
	ch := r.Params.Channel
	m.asked[r.Method+" "+ch] = append(m.asked[r.Method+" "+ch], time.Now())
	if r.Method == "subscribe" && m.limited[ch] > 0 {
		m.limited[ch]--
		if m.limitBare {
			c.Send([]byte(`{"Error":"Exceeded msg rate"}`))
		} else {
			c.Send(m.answer(r.Method, false, nil, "", "Exceeded msg rate", r.ReqID))
		}
		return
	}
	if ch == "instrument" {
		c.Send(m.answer(r.Method, true, map[string]any{"channel": "instrument", "snapshot": true}, "", "", r.ReqID))
		if r.Method == "subscribe" {
			c.Send(m.instrumentFrame())
		}
		return
	}
	if ch != "book" && ch != "trade" && ch != "ticker" {
		c.Send(m.answer(r.Method, false, nil, "", "Channel not found", r.ReqID))
		return
	}
	for _, sym := range r.Params.Symbol {
		key := ch + "|" + sym
		res := map[string]any{"channel": ch, "symbol": sym}
		if ch == "book" {
			res["depth"] = m.Depth
			res["snapshot"] = true
		}
		switch {
		case sym != m.Sym:
			c.Send(m.answer(r.Method, false, nil, sym, "Currency pair not supported "+sym, r.ReqID))
		case r.Method == "unsubscribe" && !subs[key]:
			c.Send(m.answer(r.Method, false, nil, sym, "Subscription Not Found", r.ReqID))
		case r.Method == "unsubscribe":
			delete(subs, key)
			c.Send(m.answer(r.Method, true, res, "", "", r.ReqID))
		case subs[key]:
			c.Send(m.answer(r.Method, false, nil, sym, "Already subscribed", r.ReqID))
		default:
			subs[key] = true
			c.Send(m.answer(r.Method, true, res, "", "", r.ReqID))
			switch ch {
			case "book":
				c.Send(m.snapshotFrame())
			case "ticker":
				c.Send(m.tickerFrame("snapshot"))
			}
		}
	}
}

type lvl struct{ p, q int64 }

// top returns the best Depth levels of a side, best first.
func (m *Mock) top(side map[int64]int64, bid bool) []lvl {
	out := make([]lvl, 0, len(side))
	for p, q := range side {
		out = append(out, lvl{p, q})
	}
	slices.SortFunc(out, func(a, b lvl) int {
		if bid {
			return int(b.p - a.p)
		}
		return int(a.p - b.p)
	})
	return out[:min(len(out), m.Depth)]
}

// publishView stores the top levels for Book. Caller holds m.mu.
func (m *Mock) publishView() {
	var v [2][]venue.Level
	for i, side := range [2][]lvl{m.top(m.bids, true), m.top(m.asks, false)} {
		for _, l := range side {
			v[i] = append(v[i], venue.Level{Price: decimal.New(l.p, int32(-m.PricePrec)), Size: decimal.New(l.q, int32(-m.QtyPrec))})
		}
	}
	m.view.Store(&v)
}

// Book returns the true book as a correct adapter holds it: the top Depth
// levels. It takes no lock the adapter's path could wait on.
func (m *Mock) Book() *venue.Book {
	v := m.view.Load()
	b := &venue.Book{}
	if v != nil {
		b.Replace(v[0], v[1])
	}
	return b
}

// format writes a value of prec decimals as Kraken writes a JSON number,
// sometimes in full ("0.10000000"), sometimes as a float printer would
// ("0.1"), so the adapter's rescaling is exercised.
func (m *Mock) format(v int64, prec int) string {
	s := decimal.New(v, int32(-prec)).StringFixed(int32(prec))
	if m.fmtRng.IntN(3) == 0 && strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
		if !strings.Contains(s, ".") && m.fmtRng.IntN(2) == 0 {
			s += ".0"
		}
	}
	return s
}

// Checksum computes Kraken's v2 checksum over the best 10 asks then bids
// (best first), written with the precisions, points removed, leading zeros
// stripped. It is written independently of the adapter's (through
// decimal.StringFixed) so each checks the other.
func Checksum(bids, asks []venue.Level, pricePrec, qtyPrec int) uint32 {
	var sb strings.Builder
	f := func(d decimal.Decimal, prec int) {
		s := strings.Replace(d.StringFixed(int32(prec)), ".", "", 1)
		sb.WriteString(strings.TrimLeft(s, "0"))
	}
	for _, side := range [][]venue.Level{asks, bids} {
		for _, l := range side[:min(10, len(side))] {
			f(l.Price, pricePrec)
			f(l.Size, qtyPrec)
		}
	}
	return crc32.ChecksumIEEE([]byte(sb.String()))
}

func (m *Mock) checksum() uint32 {
	v := m.view.Load()
	return Checksum(v[0], v[1], m.PricePrec, m.QtyPrec)
}

// snapshotFrame is the book snapshot for a new subscription, spoilt if
// SpoilSnapshots asked for it. Caller holds m.mu.
func (m *Mock) snapshotFrame() []byte {
	bids, asks := m.top(m.bids, true), m.top(m.asks, false)
	if len(m.badSnaps) > 0 {
		kind := m.badSnaps[0]
		m.badSnaps = m.badSnaps[1:]
		bids = slices.Clone(bids)
		switch kind {
		case "crossed":
			bids[0].p = asks[0].p + 1
		case "fine":
			// The best bid's price with one more digit than the precision.
			b := string(m.bookFrame("snapshot", bids, asks))
			i := strings.Index(b, `"bids":[{"price":`) + len(`"bids":[{"price":`)
			j := i + strings.IndexByte(b[i:], ',')
			fine := decimal.New(bids[0].p*10+5, int32(-m.PricePrec-1)).String()
			return []byte(b[:i] + fine + b[j:])
		}
	}
	return m.bookFrame("snapshot", bids, asks)
}

// bookFrame builds a book frame carrying the given levels and the checksum
// of the current view. Caller holds m.mu and has published the view.
func (m *Mock) bookFrame(typ string, bids, asks []lvl) []byte {
	b := fmt.Appendf(nil, `{"channel":"book","type":%q,"data":[{"symbol":%q,"bids":[`, typ, m.Sym)
	for i, side := range [2][]lvl{bids, asks} {
		if i == 1 {
			b = append(b, `],"asks":[`...)
		}
		for j, l := range side {
			if j > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `{"price":%s,"qty":%s}`, m.format(l.p, m.PricePrec), m.format(l.q, m.QtyPrec))
		}
	}
	ck := m.checksum()
	if typ == "update" && m.corrupt {
		ck ^= 0x5a5a
		m.corrupt = false
	}
	m.clock = m.clock.Add(time.Millisecond)
	return fmt.Appendf(b, `],"checksum":%d,"timestamp":%q}]}`, ck, m.clock.Format("2006-01-02T15:04:05.000000Z"))
}

func (m *Mock) tickerFrame(typ string) []byte {
	bb, ba := m.top(m.bids, true)[0], m.top(m.asks, false)[0]
	return fmt.Appendf(nil, `{"channel":"ticker","type":%q,"data":[{"symbol":%q,"bid":%s,"bid_qty":%s,"ask":%s,"ask_qty":%s,"last":%s,"volume":1234.5,"vwap":45000.1,"low":44000.0,"high":46000.0,"change":-12.5,"change_pct":-0.03,"timestamp":%q}]}`,
		typ, m.Sym, m.format(bb.p, m.PricePrec), m.format(bb.q, m.QtyPrec), m.format(ba.p, m.PricePrec), m.format(ba.q, m.QtyPrec),
		m.format(bb.p, m.PricePrec), m.clock.Format("2006-01-02T15:04:05.000000Z"))
}

// Step changes the true book n times, within the top Depth levels, and
// sends each change as a Kraken update frame: the levels that changed in
// view, removals as qty 0, levels that came into view after a removal —
// and, as Kraken does, nothing for a level pushed out of view by an insert.
func (m *Mock) Step(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range n {
		bids0, asks0 := m.top(m.bids, true), m.top(m.asks, false)
		price := m.change(bids0, asks0)
		m.publishView()
		ub := diff(bids0, m.top(m.bids, true), m.bids)
		ua := diff(asks0, m.top(m.asks, false), m.asks)
		frame := m.bookFrame("update", ub, ua)
		if m.drop {
			m.drop, m.avoid = false, price
			continue
		}
		m.avoid = 0
		m.sendBook(frame)
	}
}

func (m *Mock) sendBook(frame []byte) {
	for c, subs := range m.subs {
		if subs["book|"+m.Sym] {
			if err := c.Send(frame); err != nil {
				delete(m.subs, c)
			}
		}
	}
}

// change makes one random change in view and returns the price it touched.
func (m *Mock) change(bids, asks []lvl) int64 {
	for {
		bid := m.rng.IntN(2) == 0
		side, view := m.asks, asks
		if bid {
			side, view = m.bids, bids
		}
		// Change only the levels the checksum covers (the top 10), so that
		// a dropped frame always shows in the next message's checksum, as it
		// would on Kraken for changes at the top of the book.
		view = view[:min(len(view), 10)]
		r := m.rng.IntN(10)
		if m.avoid != 0 {
			r = 0 // right after a dropped frame, change another level in view: the loss must show in the next checksum
		}
		switch {
		case r < 5: // new size for a level in view
			l := view[m.rng.IntN(len(view))]
			if l.p == m.avoid {
				continue
			}
			side[l.p] = m.qty()
			return l.p
		case r < 8: // a new level in view, possibly a better price
			best, worst := view[0].p, view[len(view)-1].p
			var p int64
			if bid {
				p = worst + m.rng.Int64N(min(best+4, asks[0].p-1)-worst+1)
			} else {
				p = max(best-4, bids[0].p+1) + m.rng.Int64N(worst-max(best-4, bids[0].p+1)+1)
			}
			if _, ok := side[p]; ok || p == m.avoid {
				continue
			}
			side[p] = m.qty()
			return p
		default: // remove a level in view; keep the book deep enough to refill
			if len(side) <= m.Depth+2 {
				continue
			}
			l := view[m.rng.IntN(len(view))]
			if l.p == m.avoid {
				continue
			}
			delete(side, l.p)
			return l.p
		}
	}
}

// diff returns what a Kraken update says for one side: levels new or
// changed in view, and levels gone from view that left the book.
func diff(before, after []lvl, side map[int64]int64) []lvl {
	var out []lvl
	for _, a := range after {
		if i := slices.IndexFunc(before, func(b lvl) bool { return b.p == a.p }); i < 0 || before[i].q != a.q {
			out = append(out, a)
		}
	}
	for _, b := range before {
		if _, ok := side[b.p]; !ok {
			out = append(out, lvl{b.p, 0})
		}
	}
	return out
}

// DropNextUpdate makes the next update frame not be sent.
func (m *Mock) DropNextUpdate() { m.mu.Lock(); m.drop = true; m.mu.Unlock() }

// CorruptNextChecksum makes the next update frame's checksum wrong.
func (m *Mock) CorruptNextChecksum() bool { m.mu.Lock(); m.corrupt = true; m.mu.Unlock(); return true }

// Heartbeat sends Kraken's heartbeat to every connection.
func (m *Mock) Heartbeat() { m.srv.Broadcast([]byte(`{"channel":"heartbeat"}`)) }

// Trade sends a trade update for Sym to subscribed connections.
func (m *Mock) Trade(id int64, side string, price, qty string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clock = m.clock.Add(time.Millisecond)
	f := fmt.Appendf(nil, `{"channel":"trade","type":"update","data":[{"symbol":%q,"side":%q,"price":%s,"qty":%s,"ord_type":"market","trade_id":%d,"timestamp":%q}]}`,
		m.Sym, side, price, qty, id, m.clock.Format("2006-01-02T15:04:05.000000Z"))
	for c, subs := range m.subs {
		if subs["trade|"+m.Sym] {
			c.Send(f)
		}
	}
}

// Garbage returns frames that do not parse or parse into an impossible
// book.
func (m *Mock) Garbage() [][]byte {
	m.defaults()
	s := strconv.Quote(m.Sym)
	return [][]byte{
		[]byte(`this is not json`),
		[]byte(`{"channel":"book","type":"update","data":[{"symbol":` + s[:len(s)-2]),
		[]byte(`{"channel":"book","type":"update","data":[{"symbol":` + s + `,"bids":[{"price":45000.0,"qty":-1.5}],"asks":[],"checksum":1,"timestamp":"2026-10-06T17:35:55.000000Z"}]}`),
		[]byte(`{"channel":"book","type":"update","data":[{"symbol":` + s + `,"bids":[{"price":"abc","qty":1}],"asks":[],"checksum":1}]}`),
		{0x00, 0xff, '{'},
		[]byte(`[1,2,3]`),
	}
}

// VenueErrors returns Kraken's own error frames: the recorded refusal of a
// legacy symbol and a rate-limit error (wording unverified).
func (m *Mock) VenueErrors() [][]byte {
	return [][]byte{
		[]byte(`{"error":"Currency pair not supported XBT/USD","method":"subscribe","success":false,"symbol":"XBT/USD","time_in":"2026-09-25T17:48:54.701041Z","time_out":"2026-09-25T17:48:54.701062Z"}`),
		[]byte(`{"error":"Exceeded msg rate","method":"subscribe","success":false,"time_in":"2026-09-25T17:48:54.701041Z","time_out":"2026-09-25T17:48:54.701062Z"}`),
	}
}
