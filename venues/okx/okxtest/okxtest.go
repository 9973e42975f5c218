// Package okxtest is a mock of OKX's v5 public websocket for tests, replay
// and daemon tests: it answers subscribe, unsubscribe and text ping as OKX
// does, keeps a true book it changes on Step and sends as real books
// frames (seqId/prevSeqId chained, checksums valid), and injects faults.
// It implements venuetest.Venue.
package okxtest

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/okx"
)

// Mock is a mock OKX. Its zero value is not usable; call New.
type Mock struct {
	// Inst is the instrument whose book the mock keeps ("BTC-USDT").
	Inst string
	// Refused is an instrument the mock refuses with error 60018.
	Refused string
	// Checksums makes books frames carry checksums, as in the recorded
	// captures; false sends checksum 0, as OKX's live books do. Defaults to
	// true in New.
	Checksums bool

	srv *venuetest.Server

	mu          sync.Mutex // protects the fields below; held while sending book frames
	rng         *rand.Rand
	bids, asks  map[int64]int64 // price in ticks (0.1) -> size in lots (0.0001)
	seq         int64
	steps       int
	subs        map[*venuetest.Conn]map[string]bool // "channel:instId"
	dropNext    bool
	corruptNext bool
	resetNext   bool
	tradeID     int64
	limited     int                    // subscribes still to answer with 60014
	asked       map[string][]time.Time // op → when each request arrived
}

// RateLimit makes the next n subscribe requests fail as OKX fails a burst:
// {"event":"error","code":"60014","msg":"Requests too frequent."}, naming
// no request.
func (m *Mock) RateLimit(n int) {
	m.mu.Lock()
	m.limited += n
	m.mu.Unlock()
}

// Asked returns when each request of op ("subscribe", "unsubscribe")
// arrived.
func (m *Mock) Asked(op string) []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.asked[op])
}

var _ venuetest.Venue = (*Mock)(nil)
var _ venuetest.Handler = (*Mock)(nil)

// New returns a mock for BTC-USDT that refuses FOO-USDT.
func New() *Mock { return &Mock{Inst: "BTC-USDT", Refused: "FOO-USDT", Checksums: true} }

// Name returns "okx".
func (m *Mock) Name() string { return okx.Name }

// Symbol returns the instrument whose book the mock keeps.
func (m *Mock) Symbol() string { return m.Inst }

// RefusedSymbol returns the instrument the mock refuses.
func (m *Mock) RefusedSymbol() string { return m.Refused }

// Server returns the running server.
func (m *Mock) Server() *venuetest.Server { return m.srv }

// URL returns the websocket endpoint to put in venue.Config.WSURL.
func (m *Mock) URL() string { return m.srv.URL + "/ws/v5/public" }

// Start starts the mock with a fresh book; it stops when t ends.
func (m *Mock) Start(t *testing.T) { m.StartTB(t) }

// StartTB is Start for any testing.TB (benchmarks).
func (m *Mock) StartTB(t testing.TB) {
	m.mu.Lock()
	m.rng = rand.New(rand.NewPCG(6, 42))
	m.bids, m.asks = map[int64]int64{}, map[int64]int64{}
	for i := int64(1); i <= 40; i++ {
		m.bids[mid-i] = 10000 + m.rng.Int64N(50000)
		m.asks[mid+i] = 10000 + m.rng.Int64N(50000)
	}
	m.seq, m.steps = 1000, 0
	m.subs = map[*venuetest.Conn]map[string]bool{}
	m.dropNext, m.corruptNext, m.resetNext = false, false, false
	m.limited, m.asked = 0, map[string][]time.Time{}
	m.mu.Unlock()
	m.srv = venuetest.NewServer(t, m)
}

// NewDecoder implements venuetest.Venue: okx.NewDecoder, as replay builds it.
func (m *Mock) NewDecoder(cfg venue.Config) venue.Decoder { return okx.NewDecoder(cfg) }

// NewAdapter builds an okx.Adapter against the mock, with a keepalive and
// dead-link deadline short enough to notice silence within a second.
func (m *Mock) NewAdapter(cfg venue.Config) (venue.Adapter, error) {
	cfg.WSURL = m.URL()
	if cfg.PingInterval == 0 {
		cfg.PingInterval = 150 * time.Millisecond
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 600 * time.Millisecond
	}
	return okx.New(cfg)
}

// mid is the price, in ticks, between the mock's bids and asks.
const mid = 302435

// Connected does nothing: OKX sends nothing until asked.
func (m *Mock) Connected(*venuetest.Conn) {}

// Message answers a client's request as OKX does.
func (m *Mock) Message(c *venuetest.Conn, msg []byte) {
	if string(msg) == "ping" {
		c.Send([]byte("pong"))
		return
	}
	var req struct {
		Op   string `json:"op"`
		Args []struct {
			Channel string `json:"channel"`
			InstID  string `json:"instId"`
		} `json:"args"`
	}
	if err := json.Unmarshal(msg, &req); err != nil || (req.Op != "subscribe" && req.Op != "unsubscribe") || len(req.Args) == 0 {
		c.Send([]byte(`{"event":"error","code":"60012","msg":"Invalid request: ` + jsonSafe(msg) + `","connId":"a4d3ae55"}`))
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked[req.Op] = append(m.asked[req.Op], time.Now())
	if req.Op == "subscribe" && m.limited > 0 {
		m.limited--
		c.Send([]byte(`{"event":"error","code":"60014","msg":"Requests too frequent.","connId":"a4d3ae55"}`))
		return
	}
	for _, a := range req.Args {
		if a.InstID == m.Refused {
			c.Send([]byte(`{"event":"error","code":"60018","msg":"Wrong URL or channel:` + a.Channel + `,instId:` + a.InstID +
				` doesn't exist. Please use the correct URL, channel and parameters referring to API document.","connId":"a4d3ae55"}`))
			return // unverified whether OKX serves the other args; see okx's doc
		}
	}
	for _, a := range req.Args {
		key := a.Channel + ":" + a.InstID
		c.Send([]byte(`{"event":"` + req.Op + `","arg":{"channel":"` + a.Channel + `","instId":"` + a.InstID + `"},"connId":"a4d3ae55"}`))
		if m.subs[c] == nil {
			m.subs[c] = map[string]bool{}
		}
		if req.Op == "unsubscribe" {
			delete(m.subs[c], key)
			continue
		}
		m.subs[c][key] = true
		if a.Channel == "books" && a.InstID == m.Inst {
			c.Send(m.snapshotLocked())
		}
	}
}

func jsonSafe(b []byte) string {
	q := strconv.Quote(string(b))
	return q[1 : len(q)-1]
}

// Step changes the true book n times and sends one books update per change
// (and, every few steps, a trade and a ticker) to subscribed connections.
func (m *Mock) Step(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range n {
		m.stepLocked()
	}
}

func (m *Mock) stepLocked() {
	m.steps++
	type ch struct {
		bid  bool
		tick int64
		lots int64
	}
	var changes []ch
	for range 1 + m.rng.IntN(3) {
		bid := m.rng.IntN(2) == 0
		var tick int64
		if bid {
			tick = mid - 1 - m.rng.Int64N(50)
		} else {
			tick = mid + 1 + m.rng.Int64N(50)
		}
		var lots int64
		if m.rng.IntN(3) > 0 {
			lots = 1 + m.rng.Int64N(80000)
		}
		side := m.asks
		if bid {
			side = m.bids
		}
		if lots == 0 {
			delete(side, tick)
		} else {
			side[tick] = lots
		}
		changes = append(changes, ch{bid, tick, lots})
	}
	prev := m.seq
	m.seq += 1 + m.rng.Int64N(5)
	if m.resetNext {
		m.resetNext = false
		m.seq = 3 // a reset after maintenance: seqId < prevSeqId
	}
	var bids, asks [][2]string
	for _, c := range changes {
		l := [2]string{price(c.tick), size(c.lots)}
		if c.bid {
			bids = append(bids, l)
		} else {
			asks = append(asks, l)
		}
	}
	cs := m.checksumLocked()
	if m.corruptNext {
		m.corruptNext = false
		cs ^= 0x5a5a
	}
	f := bookFrame(m.Inst, "update", asks, bids, time.Now().UnixMilli(), cs, prev, m.seq)
	if m.dropNext {
		m.dropNext = false
	} else {
		m.sendLocked("books:"+m.Inst, f)
	}
	if m.steps%7 == 0 {
		// OKX's no-change keepalive: seqId == prevSeqId, no levels.
		m.sendLocked("books:"+m.Inst, bookFrame(m.Inst, "update", nil, nil, time.Now().UnixMilli(), m.checksumLocked(), m.seq, m.seq))
	}
	if m.steps%3 == 0 {
		m.tradeID++
		c := changes[0]
		side := "buy"
		if c.bid {
			side = "sell"
		}
		m.sendLocked("trades:"+m.Inst, []byte(fmt.Sprintf(`{"arg":{"channel":"trades","instId":%q},"data":[{"instId":%q,"tradeId":"%d","px":%q,"sz":"0.0011","side":%q,"ts":"%d","count":"1","source":"0","seqId":%d}]}`,
			m.Inst, m.Inst, m.tradeID, price(c.tick), side, time.Now().UnixMilli(), m.seq)))
		bb, ba := m.bestLocked()
		m.sendLocked("tickers:"+m.Inst, []byte(fmt.Sprintf(`{"arg":{"channel":"tickers","instId":%q},"data":[{"instType":"SPOT","instId":%q,"last":%q,"lastSz":"0.0011","askPx":%q,"askSz":%q,"bidPx":%q,"bidSz":%q,"open24h":"30000","high24h":"31000","low24h":"29000","sodUtc0":"30000","sodUtc8":"30000","volCcy24h":"1","vol24h":"1","ts":"%d"}]}`,
			m.Inst, m.Inst, price(c.tick), price(ba), size(m.asks[ba]), price(bb), size(m.bids[bb]), time.Now().UnixMilli())))
	}
}

func (m *Mock) sendLocked(key string, f []byte) {
	for c, subs := range m.subs {
		if subs[key] {
			if err := c.Send(f); err != nil {
				delete(m.subs, c)
			}
		}
	}
}

func (m *Mock) bestLocked() (bid, ask int64) {
	for t := range m.bids {
		bid = max(bid, t)
	}
	ask = 1 << 62
	for t := range m.asks {
		ask = min(ask, t)
	}
	return bid, ask
}

func sortedTicks(side map[int64]int64, desc bool) []int64 {
	ts := make([]int64, 0, len(side))
	for t := range side {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	if desc {
		slices.Reverse(ts)
	}
	return ts
}

func (m *Mock) levelsLocked() (bids, asks [][2]string) {
	for _, t := range sortedTicks(m.bids, true) {
		bids = append(bids, [2]string{price(t), size(m.bids[t])})
	}
	for _, t := range sortedTicks(m.asks, false) {
		asks = append(asks, [2]string{price(t), size(m.asks[t])})
	}
	return bids, asks
}

func (m *Mock) checksumLocked() int32 {
	if !m.Checksums {
		return 0
	}
	bids, asks := m.levelsLocked()
	return ChecksumOf(bids, asks)
}

// ChecksumOf computes OKX's checksum of a book given best first, from the
// level strings: an independent implementation for tests.
func ChecksumOf(bids, asks [][2]string) int32 {
	var b []byte
	add := func(l [2]string) {
		if len(b) > 0 {
			b = append(b, ':')
		}
		b = append(b, l[0]+":"+l[1]...)
	}
	for i := 0; i < 25; i++ {
		if i < len(bids) {
			add(bids[i])
		}
		if i < len(asks) {
			add(asks[i])
		}
	}
	return int32(crc32.ChecksumIEEE(b))
}

func (m *Mock) snapshotLocked() []byte {
	bids, asks := m.levelsLocked()
	return bookFrame(m.Inst, "snapshot", asks, bids, time.Now().UnixMilli(), m.checksumLocked(), -1, m.seq)
}

// price formats ticks of 0.1 as OKX does: no trailing zeros ("30243.5",
// "30244").
func price(t int64) string {
	if t%10 == 0 {
		return strconv.FormatInt(t/10, 10)
	}
	return strconv.FormatInt(t/10, 10) + "." + strconv.FormatInt(t%10, 10)
}

// size formats lots of 0.0001 without trailing zeros.
func size(l int64) string { return decimal.New(l, -4).String() }

func bookFrame(inst, action string, asks, bids [][2]string, ts int64, cs int32, prev, seq int64) []byte {
	b := []byte(`{"arg":{"channel":"books","instId":"` + inst + `"},"action":"` + action + `","data":[{"asks":`)
	b = appendLevels(b, asks)
	b = append(b, `,"bids":`...)
	b = appendLevels(b, bids)
	b = fmt.Appendf(b, `,"ts":"%d","checksum":%d,"prevSeqId":%d,"seqId":%d}]}`, ts, cs, prev, seq)
	return b
}

func appendLevels(b []byte, ls [][2]string) []byte {
	b = append(b, '[')
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `["`+l[0]+`","`+l[1]+`","0","1"]`...)
	}
	return append(b, ']')
}

// Book returns the true book as a correct adapter holds it.
func (m *Mock) Book() *venue.Book {
	m.mu.Lock()
	defer m.mu.Unlock()
	bids, asks := m.levelsLocked()
	conv := func(ls [][2]string) []venue.Level {
		out := make([]venue.Level, len(ls))
		for i, l := range ls {
			out[i] = venue.Level{Price: decimal.RequireFromString(l[0]), Size: decimal.RequireFromString(l[1])}
		}
		return out
	}
	b := &venue.Book{}
	b.Replace(conv(bids), conv(asks))
	return b
}

// DropNextUpdate makes the next books update not be sent; the book still
// changes.
func (m *Mock) DropNextUpdate() {
	m.mu.Lock()
	m.dropNext = true
	m.mu.Unlock()
}

// CorruptNextChecksum makes the next books update carry a wrong checksum.
// It reports false when the mock sends no checksums.
func (m *Mock) CorruptNextChecksum() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.Checksums {
		return false
	}
	m.corruptNext = true
	return true
}

// ResetSeqNext makes the next update carry a smaller seqId than its
// prevSeqId, as after OKX maintenance.
func (m *Mock) ResetSeqNext() {
	m.mu.Lock()
	m.resetNext = true
	m.mu.Unlock()
}

// ForceDisconnectNotice sends OKX's upgrade notice (code 64008) to every
// connection, as OKX does about 60 s before it closes them.
func (m *Mock) ForceDisconnectNotice() {
	m.srv.Broadcast([]byte(`{"event":"notice","code":"64008","msg":"The connection will soon be closed for a service upgrade. Please reconnect.","connId":"a4d3ae55"}`))
}

// SendError sends an OKX error frame to every connection.
func (m *Mock) SendError(code, msg string) {
	m.srv.Broadcast([]byte(`{"event":"error","code":"` + code + `","msg":"` + jsonSafe([]byte(msg)) + `","connId":"a4d3ae55"}`))
}

// Stream sends recorded frames, in order, to every connection: the way
// replay and daemon tests feed captures through a real socket.
func (m *Mock) Stream(frames [][]byte) {
	for _, f := range frames {
		m.srv.Broadcast(f)
	}
}

// Garbage returns frames that do not parse or make an impossible book.
func (m *Mock) Garbage() [][]byte {
	return [][]byte{
		[]byte(`{"arg":{"channel":"books","instId":"` + m.Inst + `"},"action":"update","data":[{"asks":[["abc","1","0","1"]]`),
		[]byte(`not json at all`),
		[]byte(`{"arg":{"channel":"books","instId":"` + m.Inst + `"},"action":"update","data":[{"asks":[["30250","-1","0","1"]],"bids":[],"ts":"1","checksum":0}]}`),
		{0xff, 0xfe, '{'},
	}
}
