// Package bybittest is a mock of Bybit's v5 public spot websocket for
// tests, replay and the daemon's end-to-end checks. It answers subscribe,
// unsubscribe and ping as Bybit does, keeps a true order book that Step
// changes and streams it as real orderbook snapshot and delta frames with
// consecutive update ids, and injects Bybit's faults on demand. Mock
// implements venuetest.Venue.
package bybittest

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/bybit"
)

// Mock is a Bybit spot venue serving one symbol. Build one with New; call
// Start before use. Safe for concurrent use.
type Mock struct {
	// Depth is the orderbook depth the mock serves as level2 and the depth
	// adapters are built with. Defaults to 50; set before Start.
	Depth int
	// ReqIDOnError makes a failure answer echo the request's req_id; by
	// default it is empty, as in the recorded failure.
	ReqIDOnError bool
	// Extra are more symbols the mock accepts subscriptions to (no data).
	Extra []string

	mu      sync.Mutex // protects the fields below; held while sending, so frames keep their order
	srv     *venuetest.Server
	rng     *rand.Rand
	book    venue.Book
	u       int64 // update id of the last book frame made
	u1      int64 // update id of orderbook.1
	seq     int64
	drop    int // book delta frames still to drop
	subs    map[*venuetest.Conn]map[string]bool
	refused map[string]bool
	cross   int // level2 snapshots still to send crossed
	reqs    []Request
	changed chan struct{} // closed and replaced when reqs grows
}

// Request is one request a client sent, as the mock read it.
type Request struct {
	Conn  int // the connection's number
	At    time.Time
	Op    string
	ReqID string
	Args  []string
}

// The symbols the mock serves and refuses.
const (
	Symbol        = "BTCUSDT"
	RefusedSymbol = "NOPEUSDT"
)

var _ venuetest.Venue = (*Mock)(nil)

// New returns a mock with a book of 20 levels a side around 30000.
func New() *Mock {
	m := &Mock{Depth: bybit.DefaultDepth, rng: rand.New(rand.NewPCG(1, 2)), u: 1000, u1: 500, seq: 7000000,
		refused: map[string]bool{RefusedSymbol: true}, changed: make(chan struct{})}
	for i := 1; i <= 20; i++ {
		m.book.Set(venue.Bid, tick(30000_0-int64(i)), decimal.New(int64(i)*1000, -3))
		m.book.Set(venue.Ask, tick(30000_0+int64(i)), decimal.New(int64(i)*2000, -3))
	}
	return m
}

// tick returns a price of t tenths (Bybit BTCUSDT's 0.1 tick).
func tick(t int64) decimal.Decimal { return decimal.New(t, -1) }

// Name returns "bybit".
func (m *Mock) Name() string { return bybit.Name }

// Symbol returns the symbol the mock serves.
func (m *Mock) Symbol() string { return Symbol }

// RefusedSymbol returns a symbol the mock refuses as Bybit does.
func (m *Mock) RefusedSymbol() string { return RefusedSymbol }

// Start starts the mock's server, bound to t.
func (m *Mock) Start(t *testing.T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs = map[*venuetest.Conn]map[string]bool{}
	m.srv = venuetest.NewServer(t, handler{m})
}

// URL is the spot endpoint of the running mock.
func (m *Mock) URL() string { return m.Server().URL + "/v5/public/spot" }

// Server returns the running server.
func (m *Mock) Server() *venuetest.Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.srv
}

// Config returns cfg pointed at the mock with short keepalive settings.
func (m *Mock) Config(cfg venue.Config) venue.Config {
	cfg.WSURL = m.URL()
	cfg.Depth = m.Depth
	cfg.ReadTimeout = 600 * time.Millisecond
	cfg.PingInterval = 150 * time.Millisecond
	return cfg
}

// NewDecoder implements venuetest.Venue: bybit.NewDecoder, as replay builds it.
func (m *Mock) NewDecoder(cfg venue.Config) venue.Decoder { return bybit.NewDecoder(cfg) }

// NewAdapter builds a bybit adapter pointed at the mock.
func (m *Mock) NewAdapter(cfg venue.Config) (venue.Adapter, error) {
	return bybit.New(m.Config(cfg))
}

// Requests returns the requests read so far.
func (m *Mock) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// WaitRequests waits until cond holds for the requests read so far,
// failing t after timeout with what.
func (m *Mock) WaitRequests(t testing.TB, timeout time.Duration, what string, cond func([]Request) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		ok, ch := cond(m.reqs), m.changed
		m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("bybittest: timed out after %v waiting for %s; requests: %+v", timeout, what, m.Requests())
		}
	}
}

// Refuse makes the mock refuse symbol.
func (m *Mock) Refuse(symbol string) {
	m.mu.Lock()
	m.refused[symbol] = true
	m.mu.Unlock()
}

func (m *Mock) l2Topic() string  { return "orderbook." + strconv.Itoa(m.Depth) + "." + Symbol }
func (m *Mock) bboTopic() string { return "orderbook.1." + Symbol }

// Step changes the true book n times, each change one delta frame (with
// its consecutive u) to every connection subscribed to the level2 topic,
// and an orderbook.1 snapshot when the top changed.
func (m *Mock) Step(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range n {
		bids, asks := m.change()
		m.u++
		m.seq += 1 + m.rng.Int64N(50)
		if m.drop > 0 {
			m.drop--
		} else {
			m.sendTopic(m.l2Topic(), m.bookFrame(m.l2Topic(), "delta", bids, asks, m.u))
		}
		if m.Depth != 1 {
			m.u1++
			b, a := m.book.Top(nil, venue.Bid, 1), m.book.Top(nil, venue.Ask, 1)
			m.sendTopic(m.bboTopic(), m.bookFrame(m.bboTopic(), "snapshot", b, a, m.u1))
		}
	}
}

// change makes one random change to the book within the depth and returns
// the levels to send (size 0 removes). The book never crosses: bids stay
// below 30000.0 and asks above.
func (m *Mock) change() (bids, asks []venue.Level) {
	side := venue.Bid
	if m.rng.IntN(2) == 1 {
		side = venue.Ask
	}
	off := 1 + m.rng.Int64N(int64(m.Depth)+10)
	var price decimal.Decimal
	if side == venue.Bid {
		price = tick(30000_0 - off)
	} else {
		price = tick(30000_0 + off)
	}
	var size decimal.Decimal
	if _, ok := m.book.Get(side, price); !ok || m.rng.IntN(3) > 0 {
		size = decimal.New(1+m.rng.Int64N(99999), -4)
	}
	out := []venue.Level{{Price: price, Size: size}}
	m.book.Set(side, price, size)
	// Bybit keeps the book at its depth and says so when a level leaves.
	out = m.book.Truncate(out, side, m.Depth)
	if side == venue.Bid {
		return out, nil
	}
	return nil, out
}

// DropNextUpdate makes the next level2 delta not be sent.
func (m *Mock) DropNextUpdate() {
	m.mu.Lock()
	m.drop++
	m.mu.Unlock()
}

// CorruptNextChecksum returns false: Bybit sends no checksum.
func (m *Mock) CorruptNextChecksum() bool { return false }

// Book returns a copy of the true book.
func (m *Mock) Book() *venue.Book {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &venue.Book{}
	b.Apply(m.book.Snapshot(""))
	return b
}

// Garbage returns frames a correct adapter reports as bad: not JSON,
// truncated, a level that is not a decimal, a negative size, a crossing
// update, and an orderbook frame of unknown type.
func (m *Mock) Garbage() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.l2Topic()
	best, _ := m.book.Best(venue.Ask)
	cross := best.Price.Add(decimal.New(5, 0))
	return [][]byte{
		[]byte("not json at all"),
		[]byte(`{"topic":"` + t + `","ts":1,"type":"delta","data":{"s":"BTCUSDT","b":[["3000`),
		[]byte(`{"topic":"` + t + `","ts":1,"type":"delta","data":{"s":"BTCUSDT","b":[["abc","1"]],"a":[],"u":` + strconv.FormatInt(m.u+1, 10) + `,"seq":1},"cts":1}`),
		[]byte(`{"topic":"` + t + `","ts":1,"type":"delta","data":{"s":"BTCUSDT","b":[["29999.0","-1"]],"a":[],"u":` + strconv.FormatInt(m.u+1, 10) + `,"seq":1},"cts":1}`),
		[]byte(`{"topic":"` + t + `","ts":1,"type":"delta","data":{"s":"BTCUSDT","b":[["` + cross.StringFixed(1) + `","1"]],"a":[],"u":` + strconv.FormatInt(m.u+1, 10) + `,"seq":1},"cts":1}`),
		[]byte(`{"topic":"` + t + `","ts":1,"type":"weird","data":{"s":"BTCUSDT","b":[],"a":[],"u":1,"seq":1}}`),
		{0xff, 0xfe, '{'},
	}
}

// Trade sends one publicTrade frame to every connection subscribed to it.
func (m *Mock) Trade(id string, price, size string, buy bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	side := "Sell"
	if buy {
		side = "Buy"
	}
	now := time.Now().UnixMilli()
	m.seq++
	f := `{"topic":"publicTrade.` + Symbol + `","ts":` + strconv.FormatInt(now, 10) +
		`,"type":"snapshot","data":[{"i":"` + id + `","T":` + strconv.FormatInt(now, 10) +
		`,"p":"` + price + `","v":"` + size + `","S":"` + side + `","seq":` + strconv.FormatInt(m.seq, 10) +
		`,"s":"` + Symbol + `","BT":false,"RPI":false}]}`
	m.sendTopic("publicTrade."+Symbol, []byte(f))
}

// SendTopic sends frame, as written, to every connection subscribed to
// topic: a capture streamed through the mock.
func (m *Mock) SendTopic(topic string, frame []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sendTopic(topic, frame)
}

func (m *Mock) sendTopic(topic string, frame []byte) {
	for c, subs := range m.subs {
		if subs[topic] {
			c.Send(frame)
		}
	}
}

// bookFrame writes an orderbook frame the way Bybit spot does (ts before
// type, prices at the tick's precision, cts last).
func (m *Mock) bookFrame(topic, typ string, bids, asks []venue.Level, u int64) []byte {
	now := time.Now().UnixMilli()
	f := make([]byte, 0, 256+40*(len(bids)+len(asks)))
	f = append(f, `{"topic":"`...)
	f = append(f, topic...)
	f = append(f, `","ts":`...)
	f = strconv.AppendInt(f, now, 10)
	f = append(f, `,"type":"`...)
	f = append(f, typ...)
	f = append(f, `","data":{"s":"`...)
	f = append(f, Symbol...)
	f = append(f, `","b":`...)
	f = appendLevels(f, bids)
	f = append(f, `,"a":`...)
	f = appendLevels(f, asks)
	f = append(f, `,"u":`...)
	f = strconv.AppendInt(f, u, 10)
	f = append(f, `,"seq":`...)
	f = strconv.AppendInt(f, m.seq, 10)
	f = append(f, `},"cts":`...)
	f = strconv.AppendInt(f, now-1, 10)
	return append(f, '}')
}

func appendLevels(f []byte, ls []venue.Level) []byte {
	f = append(f, '[')
	for i, l := range ls {
		if i > 0 {
			f = append(f, ',')
		}
		f = append(f, `["`...)
		f = append(f, l.Price.StringFixed(1)...)
		f = append(f, `","`...)
		if l.Size.IsZero() {
			f = append(f, '0')
		} else {
			f = append(f, l.Size.StringFixed(4)...)
		}
		f = append(f, `"]`...)
	}
	return append(f, ']')
}

// CrossSnapshots makes the next n level2 snapshots crossed (the best bid
// above the best ask); the true book is unchanged.
func (m *Mock) CrossSnapshots(n int) {
	m.mu.Lock()
	m.cross += n
	m.mu.Unlock()
}

// ArgsChars returns, per connection, the characters of args subscribed
// (each topic's length plus 3).
func (m *Mock) ArgsChars() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for _, subs := range m.subs {
		n := 0
		for a := range subs {
			n += len(a) + 3
		}
		out = append(out, n)
	}
	return out
}

func (m *Mock) crossedSnapshot(topic string) []byte {
	bids := m.book.Top(nil, venue.Bid, m.Depth)
	asks := m.book.Top(nil, venue.Ask, m.Depth)
	bids[0].Price = asks[0].Price.Add(tick(1))
	return m.bookFrame(topic, "snapshot", bids, asks, m.u)
}

// snapshot returns the snapshot frame of topic now.
func (m *Mock) snapshot(topic string) []byte {
	switch topic {
	case m.l2Topic():
		return m.bookFrame(topic, "snapshot", m.book.Top(nil, venue.Bid, m.Depth), m.book.Top(nil, venue.Ask, m.Depth), m.u)
	case m.bboTopic():
		return m.bookFrame(topic, "snapshot", m.book.Top(nil, venue.Bid, 1), m.book.Top(nil, venue.Ask, 1), m.u1)
	}
	return nil
}

type handler struct{ m *Mock }

func (h handler) Connected(*venuetest.Conn) {}

func (h handler) Message(c *venuetest.Conn, msg []byte) {
	m := h.m
	var req struct {
		ReqID json.RawMessage `json:"req_id"`
		Op    string          `json:"op"`
		Args  []string        `json:"args"`
	}
	connID := "mock-" + strconv.Itoa(c.N)
	if err := json.Unmarshal(msg, &req); err != nil {
		c.Send([]byte(`{"success":false,"ret_msg":"error:request not json","conn_id":"` + connID + `","op":""}`))
		return
	}
	reqID := strings.Trim(string(req.ReqID), `"`)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, Request{Conn: c.N, At: time.Now(), Op: req.Op, ReqID: reqID, Args: req.Args})
	close(m.changed)
	m.changed = make(chan struct{})
	subs := m.subs[c]
	if subs == nil {
		subs = map[string]bool{}
		m.subs[c] = subs
	}
	ack := func(ok bool, retMsg string) {
		id := reqID
		if !ok && !m.ReqIDOnError {
			id = ""
		}
		c.Send([]byte(`{"success":` + strconv.FormatBool(ok) + `,"ret_msg":` + strconv.Quote(retMsg) +
			`,"conn_id":"` + connID + `","req_id":"` + id + `","op":"` + req.Op + `"}`))
	}
	switch req.Op {
	case "ping":
		c.Send([]byte(`{"success":true,"ret_msg":"pong","conn_id":"` + connID + `","op":"ping"}`))
	case "subscribe":
		if len(req.Args) > 10 {
			ack(false, "args size >10")
			return
		}
		var bad []string
		for _, a := range req.Args {
			sym := a[strings.LastIndexByte(a, '.')+1:]
			if m.refused[sym] || sym != Symbol && !slices.Contains(m.Extra, sym) {
				bad = append(bad, a)
			} else if subs[a] {
				ack(false, "error:already subscribed,topic:"+a)
				return
			}
		}
		if len(bad) > 0 {
			ack(false, "Invalid symbol :["+strings.Join(bad, ",")+"]")
			return
		}
		chars := 0
		for a := range subs {
			chars += len(a) + 3
		}
		for _, a := range req.Args {
			chars += len(a) + 3
		}
		if chars > 21000 {
			ack(false, "args length exceeds 21000") // wording unverified
			return
		}
		ack(true, "subscribe")
		for _, a := range req.Args {
			subs[a] = true
			if f := m.snapshot(a); f != nil {
				if m.cross > 0 && a == m.l2Topic() {
					m.cross--
					f = m.crossedSnapshot(a)
				}
				c.Send(f)
			}
		}
	case "unsubscribe":
		for _, a := range req.Args {
			delete(subs, a)
		}
		ack(true, "")
	default:
		c.Send([]byte(`{"success":false,"ret_msg":"error:handler not found","conn_id":"` + connID + `","req_id":"` + reqID + `","op":"` + req.Op + `"}`))
	}
}
