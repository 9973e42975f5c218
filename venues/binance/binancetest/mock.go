// Package binancetest is a mock of Binance spot for tests: the combined
// stream endpoint with live SUBSCRIBE/UNSUBSCRIBE, the REST depth snapshot
// and exchangeInfo, a true book that changes on Step, and the faults of
// venuetest.Venue. It also serves recorded frames: Send streams a capture's
// frames to the connections subscribed to their streams, and SetDepth
// serves a recorded REST snapshot for a symbol.
package binancetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/binance"
)

// MaxStreams is how many streams Binance serves one connection; past it
// the mock refuses a SUBSCRIBE whole.
const MaxStreams = 1024

// Mock is a Binance spot mock. The zero Mock serves BTCUSDT and refuses
// NOPEUSDT; set Symbols before Start to serve others (the true book is kept
// for the first). It implements venuetest.Venue.
type Mock struct {
	// Symbols exchangeInfo lists; the first has the true book. Defaults to
	// BTCUSDT and ETHUSDT.
	Symbols []string
	// MaxMessagesPerSecond is the incoming message limit per connection past
	// which the mock disconnects, as Binance does. Defaults to 5.
	MaxMessagesPerSecond int
	// WeightLimit is the REQUEST_WEIGHT the address may spend per
	// WeightWindow over every REST request, counted with Binance's
	// weights (depth by limit: 5, 25, 50, 250; exchangeInfo 20) in fixed
	// windows, and reported on every answer as X-MBX-USED-WEIGHT-1M. Past
	// it a request is answered 429 {"code":-1003,…} with a Retry-After to
	// the window's end; a request while that runs is answered 418 (the
	// ban Binance gives a client that does not back off), with a
	// Retry-After. 0 is Binance's 6000; negative is no limit.
	WeightLimit int
	// WeightWindow is the window of WeightLimit. Defaults to a minute.
	WeightWindow time.Duration
	// OtherWeight is what another client on the address spends at the
	// start of every window.
	OtherWeight int

	srv *venuetest.Server

	mu       sync.Mutex // protects the fields below
	rng      *rand.Rand
	book     venue.Book
	lastU    int64
	trade    int64
	dropNext bool
	conns    map[*venuetest.Conn]*connState
	depth    map[string][]byte // symbol → canned REST depth body (SetDepth)
	failures []failure         // answers for the next depth requests (FailDepth)
	requests []string          // REST paths served, for tests
	reqAt    []time.Time       // when each was served

	// The weight limit.
	winStart   time.Time // the current window's start
	used       int       // weight spent in it
	limitUntil time.Time // the Retry-After of the last 429
	spendNext  int       // SpendWeight, for the next request's window
	answers    map[int]int
}

// weightOf is Binance's request weight of a REST request.
func weightOf(r *http.Request) int {
	if r.URL.Path != "/api/v3/depth" {
		return 20 // exchangeInfo
	}
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	switch {
	case err != nil || n <= 100:
		return 5
	case n <= 500:
		return 25
	case n <= 1000:
		return 50
	}
	return 250
}

// limit counts r's weight and answers it 429 or 418 past the limit
// (true: answered). m.mu must be held.
func (m *Mock) limit(w http.ResponseWriter, r *http.Request) bool {
	m.requests = append(m.requests, r.URL.RequestURI())
	now := time.Now()
	m.reqAt = append(m.reqAt, now)
	lim, win := m.WeightLimit, m.WeightWindow
	if lim == 0 {
		lim = 6000
	}
	if win <= 0 {
		win = time.Minute
	}
	if m.winStart.IsZero() || now.Sub(m.winStart) >= win {
		m.winStart = now.Truncate(win)
		m.used = m.OtherWeight
	}
	m.used += m.spendNext
	m.spendNext = 0
	retry := func(until time.Time) {
		w.Header().Set("Retry-After", strconv.Itoa(int((until.Sub(now)+time.Second-1)/time.Second)))
	}
	switch {
	case lim < 0:
	case now.Before(m.limitUntil):
		m.answers[http.StatusTeapot]++
		m.limitUntil = now.Add(2 * win)
		retry(m.limitUntil)
		apiError(w, http.StatusTeapot, -1003, "Way too much request weight used; IP banned until later.")
		return true
	case m.used+weightOf(r) > lim:
		m.answers[http.StatusTooManyRequests]++
		m.limitUntil = m.winStart.Add(win)
		retry(m.limitUntil)
		w.Header().Set("X-MBX-USED-WEIGHT-1M", strconv.Itoa(m.used))
		apiError(w, http.StatusTooManyRequests, -1003, fmt.Sprintf("Too many requests; current limit of IP is %d request weight per 1 MINUTE.", lim))
		return true
	}
	m.used += weightOf(r)
	w.Header().Set("X-MBX-USED-WEIGHT-1M", strconv.Itoa(m.used))
	return false
}

// SpendWeight spends n of the address's weight in the window of the next
// REST request, as another client on the same address would just before
// it.
func (m *Mock) SpendWeight(n int) {
	m.mu.Lock()
	m.spendNext += n
	m.mu.Unlock()
}

// Answers returns how many REST requests the weight limit answered with
// status (429, 418).
func (m *Mock) Answers(status int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.answers[status]
}

// RequestTimes returns when each REST request (Requests) was served.
func (m *Mock) RequestTimes() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqAt)
}

type failure struct {
	status     int
	body       string
	retryAfter int
}

type connState struct {
	streams  map[string]bool
	combined bool
	window   time.Time // start of the current one-second message window
	msgs     int
}

var _ venuetest.Venue = (*Mock)(nil)

// Name implements venuetest.Venue.
func (m *Mock) Name() string { return binance.Name }

// Symbol implements venuetest.Venue: the symbol with the true book.
func (m *Mock) Symbol() string { return m.symbols()[0] }

// RefusedSymbol implements venuetest.Venue: absent from exchangeInfo.
func (m *Mock) RefusedSymbol() string { return "NOPEUSDT" }

func (m *Mock) symbols() []string {
	if len(m.Symbols) == 0 {
		return []string{"BTCUSDT", "ETHUSDT"}
	}
	return m.Symbols
}

// Start implements venuetest.Venue: a fresh server and book for t.
func (m *Mock) Start(t *testing.T) { m.StartTB(t) }

// StartTB is Start for any testing.TB (benchmarks).
func (m *Mock) StartTB(t testing.TB) {
	m.mu.Lock()
	m.rng = rand.New(rand.NewPCG(1, 2))
	m.book = venue.Book{}
	m.lastU = 1000
	m.trade = 5000
	m.dropNext = false
	m.conns = map[*venuetest.Conn]*connState{}
	m.depth = map[string][]byte{}
	m.requests, m.reqAt = nil, nil
	m.failures = nil
	m.winStart, m.used, m.limitUntil, m.spendNext = time.Time{}, 0, time.Time{}, 0
	m.answers = map[int]int{}
	for i := 1; i <= 20; i++ {
		m.book.Set(venue.Bid, price(10000-i), size(i))
		m.book.Set(venue.Ask, price(10000+i), size(i))
	}
	m.mu.Unlock()
	m.srv = venuetest.NewServer(t, m)
	m.srv.HandleHTTP("/api/v3/depth", http.HandlerFunc(m.serveDepth))
	m.srv.HandleHTTP("/api/v3/exchangeInfo", http.HandlerFunc(m.serveExchangeInfo))
}

// price returns ticks/100 with Binance's eight fraction digits.
func price(ticks int) decimal.Decimal { return decimal.New(int64(ticks)*1e6, -8) }

// size returns n/1000 with eight fraction digits.
func size(n int) decimal.Decimal { return decimal.New(int64(n)*1e5, -8) }

// NewDecoder implements venuetest.Venue: binance.NewDecoder, as replay builds it.
func (m *Mock) NewDecoder(cfg venue.Config) venue.Decoder { return binance.NewDecoder(cfg) }

// NewAdapter implements venuetest.Venue.
func (m *Mock) NewAdapter(cfg venue.Config) (venue.Adapter, error) {
	cfg.WSURL, cfg.RESTURL = m.srv.URL, m.srv.HTTPURL
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = time.Second
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = 250 * time.Millisecond
	}
	return binance.New(cfg)
}

// Server implements venuetest.Venue.
func (m *Mock) Server() *venuetest.Server { return m.srv }

// CorruptNextChecksum implements venuetest.Venue: Binance sends none.
func (m *Mock) CorruptNextChecksum() bool { return false }

// DropNextUpdate implements venuetest.Venue.
func (m *Mock) DropNextUpdate() {
	m.mu.Lock()
	m.dropNext = true
	m.mu.Unlock()
}

// Book implements venuetest.Venue: a copy of the true book.
func (m *Mock) Book() *venue.Book {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &venue.Book{}
	b.Apply(m.book.Snapshot(""))
	return b
}

// LastUpdateID returns the update id of the true book.
func (m *Mock) LastUpdateID() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastU
}

// Step implements venuetest.Venue: n changes to the true book, each sent as
// one depthUpdate spanning one to three update ids, with a trade and a
// bookTicker to their subscribers.
func (m *Mock) Step(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sym := m.Symbol()
	lower := strings.ToLower(sym)
	for range n {
		side := venue.Bid
		if m.rng.IntN(2) == 1 {
			side = venue.Ask
		}
		off := 1 + m.rng.IntN(30)
		ticks := 10000 - off
		if side == venue.Ask {
			ticks = 10000 + off
		}
		p := price(ticks)
		sz := size(m.rng.IntN(50))
		if _, ok := m.book.Get(side, p); !ok && sz.IsZero() {
			sz = size(1 + m.rng.IntN(50))
		}
		m.book.Set(side, p, sz)
		first := m.lastU + 1
		m.lastU += int64(1 + m.rng.IntN(3))
		now := time.Now().UnixMilli()
		lv := fmt.Sprintf(`[["%s","%s"]]`, p.StringFixed(8), sz.StringFixed(8))
		b, a := lv, "[]"
		if side == venue.Ask {
			b, a = "[]", lv
		}
		data := fmt.Sprintf(`{"e":"depthUpdate","E":%d,"s":"%s","U":%d,"u":%d,"b":%s,"a":%s}`, now, sym, first, m.lastU, b, a)
		if m.dropNext {
			m.dropNext = false
		} else {
			m.sendLocked(lower+"@depth@100ms", data)
			m.sendLocked(lower+"@depth", data)
		}
		m.trade++
		m.sendLocked(lower+"@trade", fmt.Sprintf(`{"e":"trade","E":%d,"s":"%s","t":%d,"p":"%s","q":"1.00000000","T":%d,"m":%t,"M":true}`,
			now, sym, m.trade, p.StringFixed(8), now, side == venue.Bid))
		bid, _ := m.book.Best(venue.Bid)
		ask, _ := m.book.Best(venue.Ask)
		m.sendLocked(lower+"@bookTicker", fmt.Sprintf(`{"u":%d,"s":"%s","b":"%s","B":"%s","a":"%s","A":"%s"}`,
			m.lastU, sym, bid.Price.StringFixed(8), bid.Size.StringFixed(8), ask.Price.StringFixed(8), ask.Size.StringFixed(8)))
	}
}

// sendLocked sends data on stream to every connection subscribed to it.
// m.mu must be held: sending under the lock orders frames against the REST
// snapshot, as the venue's update ids do.
func (m *Mock) sendLocked(stream, data string) {
	for c, st := range m.conns {
		if !st.streams[stream] {
			continue
		}
		frame := []byte(data)
		if st.combined {
			frame = []byte(`{"stream":"` + stream + `","data":` + data + `}`)
		}
		if c.Send(frame) != nil {
			delete(m.conns, c) // closed
		}
	}
}

// Send sends a recorded frame to every connection subscribed to its stream
// (the frame's "stream" field; a frame without one goes to every
// connection). The frame is sent as recorded: a raw-stream connection gets
// combined frames too.
func (m *Mock) Send(frame []byte) {
	var f struct {
		Stream string `json:"stream"`
	}
	json.Unmarshal(frame, &f)
	m.mu.Lock()
	defer m.mu.Unlock()
	for c, st := range m.conns {
		if f.Stream == "" || st.streams[f.Stream] {
			c.Send(frame)
		}
	}
}

// SetDepth makes REST /api/v3/depth answer body for symbol (a recorded
// snapshot) instead of the true book.
func (m *Mock) SetDepth(symbol string, body []byte) {
	m.mu.Lock()
	m.depth[symbol] = body
	m.mu.Unlock()
}

// FailDepth makes the next n REST depth requests fail with status and
// body (Binance's error JSON), with a Retry-After of retryAfter seconds if
// it is positive: 429 {"code":-1003,"msg":"Too many requests."} for
// example.
func (m *Mock) FailDepth(n, status int, body string, retryAfter int) {
	m.mu.Lock()
	for range n {
		m.failures = append(m.failures, failure{status, body, retryAfter})
	}
	m.mu.Unlock()
}

// ServerShutdown sends the serverShutdown event to every connection, as
// Binance does before it goes away.
func (m *Mock) ServerShutdown() {
	now := time.Now().UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	for c, st := range m.conns {
		if st.combined {
			c.Send(fmt.Appendf(nil, `{"stream":"!serverShutdown","data":{"e":"serverShutdown","E":%d}}`, now))
		} else {
			c.Send(fmt.Appendf(nil, `{"e":"serverShutdown","E":%d}`, now))
		}
	}
}

// CloseConnOf closes, with a close frame, the connection subscribed to
// stream, and returns how many streams it had.
func (m *Mock) CloseConnOf(stream string) int {
	m.mu.Lock()
	var conn *venuetest.Conn
	n := 0
	for c, st := range m.conns {
		if st.streams[stream] {
			conn, n = c, len(st.streams)
			delete(m.conns, c)
			break
		}
	}
	m.mu.Unlock()
	if conn != nil {
		conn.Close(websocket.StatusGoingAway, "test")
	}
	return n
}

// Streams returns how many streams the mock's connections are subscribed
// to, in all.
func (m *Mock) Streams() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.conns {
		n += len(c.streams)
	}
	return n
}

// Requests returns the REST requests served so far ("/api/v3/depth?…").
func (m *Mock) Requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// Garbage implements venuetest.Venue: frames that do not parse, and frames
// that parse into something impossible for the book's symbol.
func (m *Mock) Garbage() [][]byte {
	l := strings.ToLower(m.Symbol())
	return [][]byte{
		[]byte("\x00\x01 not json"),
		[]byte(`{"stream":"` + l + `@depth@100ms","data":{"e":"depthUpdate","E":1,"s":"` + m.Symbol() + `","U":5,"u":`),
		[]byte(`{"stream":"` + l + `@depth@100ms","data":{"e":"depthUpdate","E":1,"s":"` + m.Symbol() + `","U":"x","u":1,"b":[],"a":[]}}`),
		[]byte(`{"stream":"` + l + `@depth@100ms","data":{"e":"depthUpdate","E":1,"s":"` + m.Symbol() + `","U":1,"u":1,"b":[["100.00000000","-1.00000000"]],"a":[]}}`),
		[]byte(`[1,2,3]`),
	}
}

// Connected implements venuetest.Handler: /stream?streams=a/b subscribes at
// once (no reply), /ws/<stream> is a raw stream.
func (m *Mock) Connected(c *venuetest.Conn) {
	st := &connState{streams: map[string]bool{}}
	path := c.Request.URL.Path
	switch {
	case path == "/stream":
		st.combined = true
		for _, s := range strings.Split(c.Request.URL.Query().Get("streams"), "/") {
			if s != "" {
				st.streams[s] = true
			}
		}
	case strings.HasPrefix(path, "/ws"):
		if s := strings.TrimPrefix(strings.TrimPrefix(path, "/ws"), "/"); s != "" {
			st.streams[s] = true
		}
	default:
		c.Close(websocket.StatusPolicyViolation, "unknown path")
		return
	}
	m.mu.Lock()
	m.conns[c] = st
	m.mu.Unlock()
}

// Message implements venuetest.Handler: SUBSCRIBE, UNSUBSCRIBE and
// LIST_SUBSCRIPTIONS with ids, Binance's error replies, and its message
// rate limit.
func (m *Mock) Message(c *venuetest.Conn, msg []byte) {
	m.mu.Lock()
	st := m.conns[c]
	if st == nil {
		m.mu.Unlock()
		return
	}
	now := time.Now()
	if now.Sub(st.window) >= time.Second {
		st.window, st.msgs = now, 0
	}
	st.msgs++
	limit := m.MaxMessagesPerSecond
	if limit == 0 {
		limit = 5
	}
	if st.msgs > limit {
		delete(m.conns, c)
		m.mu.Unlock()
		c.Close(websocket.StatusPolicyViolation, "Too many requests")
		return
	}
	m.mu.Unlock()

	var req struct {
		Method string          `json:"method"`
		Params []string        `json:"params"`
		ID     json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(msg, &req); err != nil {
		c.Send([]byte(`{"error":{"code":3,"msg":"Invalid JSON: expected value at line 1 column 1"},"id":null}`))
		return
	}
	id := string(req.ID)
	if id == "" {
		id = "null"
	}
	reply := func(result string) { c.Send([]byte(`{"result":` + result + `,"id":` + id + `}`)) }
	fail := func(code int, text string) {
		c.Send(fmt.Appendf(nil, `{"error":{"code":%d,"msg":%q},"id":%s}`, code, text, id))
	}
	switch req.Method {
	case "SUBSCRIBE", "UNSUBSCRIBE":
		for _, p := range req.Params {
			if !validStream(p) {
				fail(2, "Invalid request: invalid stream")
				return
			}
		}
		m.mu.Lock()
		if req.Method == "SUBSCRIBE" {
			n := len(st.streams)
			for _, p := range req.Params {
				if !st.streams[p] {
					n++
				}
			}
			if n > MaxStreams {
				m.mu.Unlock()
				// Binance allows 1,024 streams a connection; the wording
				// of its refusal is unverified.
				fail(2, "Invalid request: too many streams")
				return
			}
		}
		for _, p := range req.Params {
			if req.Method == "SUBSCRIBE" {
				st.streams[p] = true // a well-formed unknown symbol is accepted silently, as Binance does
			} else {
				delete(st.streams, p)
			}
		}
		m.mu.Unlock()
		reply("null")
	case "LIST_SUBSCRIPTIONS":
		m.mu.Lock()
		var list []string
		for s := range st.streams {
			list = append(list, s)
		}
		m.mu.Unlock()
		slices.Sort(list)
		b, _ := json.Marshal(list)
		if list == nil {
			b = []byte("[]")
		}
		reply(string(b))
	default:
		fail(2, "Invalid request: unknown method")
	}
}

// validStream reports whether s is a well-formed stream name of the kinds
// the mock serves.
func validStream(s string) bool {
	sym, kind, ok := strings.Cut(s, "@")
	if !ok || sym == "" || sym != strings.ToLower(sym) {
		return false
	}
	switch kind {
	case "depth", "depth@100ms", "trade", "aggTrade", "bookTicker":
		return true
	}
	return false
}

func (m *Mock) known(sym string) bool { return slices.Contains(m.symbols(), sym) }

func apiError(w http.ResponseWriter, status int, code int, msg string) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"code":%d,"msg":%q}`, code, msg)
}

// serveDepth is GET /api/v3/depth?symbol=X&limit=N.
func (m *Mock) serveDepth(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	limited := m.limit(w, r)
	m.mu.Unlock()
	if limited {
		return
	}
	sym := r.URL.Query().Get("symbol")
	if sym == "" {
		apiError(w, http.StatusBadRequest, -1102, "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed.")
		return
	}
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 5000 {
			apiError(w, http.StatusBadRequest, -1100, "Illegal characters found in parameter 'limit'; legal range is '1-5000'.")
			return
		}
		limit = n
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.failures) > 0 {
		f := m.failures[0]
		m.failures = m.failures[1:]
		if f.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
			if f.status == http.StatusTooManyRequests || f.status == http.StatusTeapot {
				// A request before it passes is banned (418), as at Binance.
				m.limitUntil = time.Now().Add(time.Duration(f.retryAfter) * time.Second)
			}
		}
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		w.WriteHeader(f.status)
		w.Write([]byte(f.body))
		return
	}
	if body, ok := m.depth[sym]; ok {
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		w.Write(body)
		return
	}
	if !m.known(sym) {
		apiError(w, http.StatusBadRequest, -1121, "Invalid symbol.")
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"lastUpdateId":%d,"bids":`, m.lastU)
	if sym == m.Symbol() {
		writeLevels(&b, m.book.Top(nil, venue.Bid, limit))
		b.WriteString(`,"asks":`)
		writeLevels(&b, m.book.Top(nil, venue.Ask, limit))
	} else {
		b.WriteString(`[],"asks":[]`)
	}
	b.WriteString("}")
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Write([]byte(b.String()))
}

func writeLevels(b *strings.Builder, levels []venue.Level) {
	b.WriteByte('[')
	for i, l := range levels {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(b, `["%s","%s"]`, l.Price.StringFixed(8), l.Size.StringFixed(8))
	}
	b.WriteByte(']')
}

// serveExchangeInfo is GET /api/v3/exchangeInfo[?symbol=X|?symbols=["X","Y"]]:
// any unknown symbol fails the whole request with -1121, as Binance does.
func (m *Mock) serveExchangeInfo(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	limited := m.limit(w, r)
	m.mu.Unlock()
	if limited {
		return
	}
	q := r.URL.Query()
	var syms []string
	switch {
	case q.Get("symbol") != "":
		syms = []string{q.Get("symbol")}
	case q.Get("symbols") != "":
		if err := json.Unmarshal([]byte(q.Get("symbols")), &syms); err != nil {
			apiError(w, http.StatusBadRequest, -1100, "Illegal characters found in parameter 'symbols'.")
			return
		}
	default:
		syms = m.symbols()
	}
	for _, s := range syms {
		if !m.known(s) {
			apiError(w, http.StatusBadRequest, -1121, "Invalid symbol.")
			return
		}
	}
	type sym struct {
		Symbol     string `json:"symbol"`
		Status     string `json:"status"`
		BaseAsset  string `json:"baseAsset"`
		QuoteAsset string `json:"quoteAsset"`
	}
	out := struct {
		Timezone   string `json:"timezone"`
		ServerTime int64  `json:"serverTime"`
		RateLimits []any  `json:"rateLimits"`
		Symbols    []sym  `json:"symbols"`
	}{Timezone: "UTC", ServerTime: time.Now().UnixMilli(), RateLimits: []any{}}
	for _, s := range syms {
		out.Symbols = append(out.Symbols, sym{Symbol: s, Status: "TRADING", BaseAsset: strings.TrimSuffix(s, "USDT"), QuoteAsset: "USDT"})
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	json.NewEncoder(w).Encode(out)
}
