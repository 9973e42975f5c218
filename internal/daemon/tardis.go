package daemon

// tardis-machine's HTTP interface over the recorded history:
// GET /replay?options= (raw frames) and GET /replay-normalized?options=
// (trade, book_change, book_snapshot_<d>_<i>, quote, trade_bar_<i>,
// disconnect), NDJSON in tardis-machine's framing and message shapes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/derive"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/internal/history"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
)

// tardisExchanges maps tardis-machine's exchange names to fanoutd's venues.
var tardisExchanges = map[string]string{
	"binance":    "binance",
	"okex":       "okx",
	"bybit-spot": "bybit",
	"coinbase":   "coinbase",
	"kraken":     "kraken",
}

// tardisOptions are the options of /replay and /replay-normalized.
type tardisOptions struct {
	Exchange               string         `json:"exchange"`
	Symbols                []string       `json:"symbols"`
	From                   string         `json:"from"`
	To                     string         `json:"to"`
	DataTypes              []string       `json:"dataTypes"`
	WithDisconnectMessages bool           `json:"withDisconnectMessages"`
	Filters                []tardisFilter `json:"filters"`
	WithDisconnects        *bool          `json:"withDisconnects"`
}

type tardisFilter struct {
	Channel string   `json:"channel"`
	Symbols []string `json:"symbols"`
}

// parseTardisTime takes tardis's from/to: a date (2019-10-01) or an ISO
// 8601 time (UTC when it names no zone).
func parseTardisTime(key, s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "options.%s=%q is not a date or ISO 8601 time", key, s)
}

// tardisQuery is a checked tardis request.
type tardisQuery struct {
	o        tardisOptions
	venue    string
	from, to time.Time
	symbols  map[string]string // fanoutd symbol → tardis symbol; nil: all
	entries  []history.Entry
}

// parseTardis reads ?options= and checks it against the index, the
// range bounds and the token.
func (d *Daemon) parseTardis(r *http.Request, tok *api.Token, normalized bool) (*tardisQuery, error) {
	raw := r.URL.Query().Get("options")
	if raw == "" {
		return nil, badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "options is required (JSON: exchange, from, to, …)")
	}
	var o tardisOptions
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&o); err != nil {
		return nil, badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "options is not a JSON object of tardis-machine's options: %v", err)
	}
	v, ok := tardisExchanges[o.Exchange]
	if !ok {
		return nil, badQuery(http.StatusNotFound, api.CodeUnknownStream, "options.exchange %q: want binance, okex, bybit-spot, coinbase or kraken", o.Exchange)
	}
	from, err := parseTardisTime("from", o.From)
	if err != nil {
		return nil, err
	}
	to, err := parseTardisTime("to", o.To)
	if err != nil {
		return nil, err
	}
	if err := d.checkRange(from, to); err != nil {
		return nil, err
	}
	if normalized {
		if len(o.DataTypes) == 0 {
			return nil, badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "options.dataTypes is required (trade, book_change, book_snapshot_10_100ms, quote, trade_bar_1s, …)")
		}
		for _, dt := range o.DataTypes {
			if _, err := tardisChannel(dt); err != nil {
				return nil, err
			}
		}
	}
	es, err := d.hist.Entries(r.Context())
	if err != nil {
		return nil, err
	}
	recorded := map[string]string{} // upper-case symbol → fanoutd symbol
	for _, e := range es {
		if e.Venue == v {
			for _, s := range e.Symbols {
				recorded[strings.ToUpper(s)] = s
			}
		}
	}
	if len(recorded) == 0 {
		return nil, badQuery(http.StatusNotFound, api.CodeUnknownStream, "exchange %s has no recorded history", o.Exchange)
	}
	want := o.Symbols
	for _, f := range o.Filters {
		want = append(want, f.Symbols...)
	}
	q := &tardisQuery{o: o, venue: v, from: from, to: to, entries: es}
	check := func(sym string) error {
		chans := []venue.Channel{venue.Level2, venue.Trades, venue.Ticker}
		if normalized {
			chans = chans[:0]
			for _, dt := range o.DataTypes {
				ch, _ := tardisChannel(dt)
				chans = append(chans, ch)
			}
		}
		for _, ch := range chans {
			if st := venue.NewStream(v, ch, sym); !tok.Allows(st) {
				return badQuery(http.StatusForbidden, api.CodeUnauthorized, "%s: outside this token's scopes", st)
			}
		}
		return nil
	}
	if len(want) > 0 {
		q.symbols = map[string]string{}
		for _, s := range want {
			fs, ok := recorded[strings.ToUpper(s)]
			if !ok {
				return nil, badQuery(http.StatusNotFound, api.CodeUnknownSymbol, "%s has no recorded history of %q", o.Exchange, s)
			}
			if err := check(fs); err != nil {
				return nil, err
			}
			q.symbols[fs] = strings.ToUpper(s)
		}
	} else {
		for _, fs := range recorded {
			if err := check(fs); err != nil {
				return nil, err
			}
		}
	}
	return q, nil
}

// tardisChannel is the fanoutd channel a tardis data type is computed
// from: trade and book_change are the raw trades and level2, the others
// the derived channel of the same name.
func tardisChannel(dt string) (venue.Channel, error) {
	switch dt {
	case "trade":
		return venue.Trades, nil
	case "book_change":
		return venue.Level2, nil
	}
	ch := venue.Channel(dt)
	if ch.Derived() {
		if _, err := ch.Derivation(); err == nil {
			return ch, nil
		}
	}
	return "", badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "options.dataTypes: %q is not trade, book_change, book_snapshot_<depth>_<interval>, quote or trade_bar_<interval>", dt)
}

func (q *tardisQuery) chains() [][]history.Entry {
	var syms map[string]bool
	if q.symbols != nil {
		syms = map[string]bool{}
		for s := range q.symbols {
			syms[s] = true
		}
	}
	return history.Chains(q.entries, map[string]map[string]bool{q.venue: syms}, q.from, q.to)
}

// tardisRoutes mounts tardis-machine's HTTP routes on mux.
func (d *Daemon) tardisRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /replay", d.authed(d.tardisRaw))
	mux.HandleFunc("GET /replay-normalized", d.authed(d.tardisNormalized))
	mux.HandleFunc("GET /ws-replay-normalized", d.authed(d.tardisWS))
}

// tardisStart checks admission and reads the first segments; ok false:
// the answer is written.
func (d *Daemon) tardisStart(w http.ResponseWriter, r *http.Request, chains [][]history.Entry) (history.Fetch, func(), bool) {
	w.Header().Set("Content-Type", "application/x-json-stream")
	w.Header().Set("Cache-Control", "no-store")
	if len(chains) == 0 {
		w.Header().Set(HistoryHeader, "empty")
		w.WriteHeader(http.StatusOK)
		return nil, nil, false
	}
	done, ok := d.admitQuery(w, r)
	if !ok {
		return nil, nil, false
	}
	fetch, err := d.prefetch(r.Context(), chains)
	if err != nil {
		done()
		d.historyFail(w, err)
		return nil, nil, false
	}
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush() // the status and headers leave now
	return fetch, done, true
}

// tardisRaw answers GET /replay: every recorded frame of the exchange's
// connections that carry the symbols, within [from, to), as
// {"localTimestamp":…,"message":…} lines in receive-time order; a
// disconnect is an empty line.
func (d *Daemon) tardisRaw(w http.ResponseWriter, r *http.Request, tok *api.Token) {
	d.tardisAnswer(w, r, tok, "/replay", false, func(ctx context.Context, w io.Writer, q *tardisQuery, chains [][]history.Entry, fetch history.Fetch) error {
		return writeRaw(ctx, w, chains, fetch, q.from, q.to, q.o.WithDisconnects == nil || *q.o.WithDisconnects)
	})
}

// tardisNormalized answers GET /replay-normalized.
func (d *Daemon) tardisNormalized(w http.ResponseWriter, r *http.Request, tok *api.Token) {
	d.tardisAnswer(w, r, tok, "/replay-normalized", true, d.playNormalized)
}

// tardisAnswer parses and admits a tardis HTTP request, reads its first
// segments and streams what play writes; a failure after the answer
// started ends it with one error line.
func (d *Daemon) tardisAnswer(w http.ResponseWriter, r *http.Request, tok *api.Token, route string, normalized bool,
	play func(context.Context, io.Writer, *tardisQuery, [][]history.Entry, history.Fetch) error) {
	q, err := d.parseTardis(r, tok, normalized)
	if err != nil {
		if !writeQueryError(w, err) {
			d.historyFail(w, err)
		}
		return
	}
	chains := q.chains()
	fetch, done, ok := d.tardisStart(w, r, chains)
	if !ok {
		return
	}
	defer done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	fw := &flushWriter{w: w, rc: http.NewResponseController(w), cancel: cancel}
	if err := play(ctx, fw, q, chains, fetch); err != nil && fw.err == nil && ctx.Err() == nil {
		_, code, _ := claimcheck.ErrorStatus(err)
		d.log.Warn("history: "+route+" ended early", "err", err)
		w.Write(api.AppendError(nil, code, "history: "+historyMessage(code)))
	}
}

// writeRaw merges the chains' records by receive time into w.
func writeRaw(ctx context.Context, w io.Writer, chains [][]history.Entry, fetch history.Fetch, from, to time.Time, disconnects bool) error {
	type cur struct {
		f   *replay.File
		rec replay.Record
		ok  bool
	}
	cs := make([]*cur, len(chains))
	next := func(c *cur) error {
		for {
			rec, err := c.f.Next()
			if errors.Is(err, io.EOF) {
				c.ok = false
				return nil
			}
			if err != nil {
				return err
			}
			if rec.Time.IsZero() && rec.Disconnect {
				// A bare disconnect line takes the time of the line before.
				rec.Time = c.rec.Time
			}
			c.rec, c.ok = rec, true
			return nil
		}
	}
	for i, ch := range chains {
		f, err := history.Source(ctx, ch, fetch).Open()
		if err != nil {
			return err
		}
		cs[i] = &cur{f: f}
		if err := next(cs[i]); err != nil {
			return err
		}
	}
	buf := make([]byte, 0, 256<<10)
	for {
		var best *cur
		for _, c := range cs {
			if c.ok && (best == nil || c.rec.Time.Before(best.rec.Time)) {
				best = c
			}
		}
		if best == nil || !best.rec.Time.Before(to) {
			break
		}
		if !best.rec.Time.Before(from) {
			switch {
			case best.rec.Disconnect:
				if disconnects {
					buf = append(buf, '\n')
				}
			default:
				buf = append(buf, `{"localTimestamp":"`...)
				buf = replay.AppendTime(buf, best.rec.Time)
				buf = append(buf, `","message":`...)
				buf = append(buf, best.rec.Frame...)
				buf = append(buf, "}\n"...)
			}
			if len(buf) >= 256<<10 {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
		if err := next(best); err != nil {
			return err
		}
	}
	if len(buf) > 0 {
		_, err := w.Write(buf)
		return err
	}
	return nil
}

// playNormalized plays q's chains into w as tardis normalized messages,
// one a line.
func (d *Daemon) playNormalized(ctx context.Context, w io.Writer, q *tardisQuery, chains [][]history.Entry, fetch history.Fetch) error {
	srcs := make([]replay.Source, len(chains))
	for i, c := range chains {
		srcs[i] = history.Source(ctx, c, fetch)
	}
	cfg := *d.cfg
	if err := cfg.ForCaptures(map[string][]string{q.venue: nil}); err != nil {
		return err
	}
	ts := newTardisSink(w, q)
	_, err := replay.Play(ctx, replay.PlayerOptions{
		NewDecoder: decoderFor(&cfg, d.log),
		Sink:       func(string) (venue.Sink, error) { return ts, nil },
		Parallel:   len(srcs) > 1, // one connection decodes on the answer's goroutine
	}, srcs)
	if ferr := ts.flush(); err == nil {
		err = ferr
	}
	return err
}

// tardisWS answers tardis-machine's websocket /ws-replay-normalized?options=:
// the messages of /replay-normalized, one a websocket text message, then
// a normal close. A request refused before the upgrade gets the HTTP
// error; a failure after it closes with 1011 and the error's code.
func (d *Daemon) tardisWS(w http.ResponseWriter, r *http.Request, tok *api.Token) {
	q, err := d.parseTardis(r, tok, true)
	if err != nil {
		if !writeQueryError(w, err) {
			d.historyFail(w, err)
		}
		return
	}
	chains := q.chains()
	var fetch history.Fetch
	if len(chains) > 0 {
		done, ok := d.admitQuery(w, r)
		if !ok {
			return
		}
		defer done()
		if fetch, err = d.prefetch(r.Context(), chains); err != nil {
			d.historyFail(w, err)
			return
		}
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the request
	}
	defer c.CloseNow()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if len(chains) > 0 {
		if err := d.playNormalized(ctx, &wsLines{ctx: ctx, c: c}, q, chains, fetch); err != nil {
			_, code, _ := claimcheck.ErrorStatus(err)
			c.Close(websocket.StatusInternalError, string(code))
			return
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
}

// wsLines writes each line written to it as one websocket text message.
type wsLines struct {
	ctx context.Context
	c   *websocket.Conn
}

func (l *wsLines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			i = len(p)
		}
		if err := l.c.Write(l.ctx, websocket.MessageText, p[:i]); err != nil {
			return 0, err
		}
		p = p[min(i+1, len(p)):]
	}
	return n, nil
}

// tardisSink turns the decoders' events into tardis-machine's normalized
// messages: trade and book_change from the raw streams, the derived data
// types computed as the export computes them (derive, Advance before the
// book takes an event, Apply after).
type tardisSink struct {
	mu       sync.Mutex
	w        io.Writer
	q        *tardisQuery
	exchange string
	trades   bool
	changes  bool
	derived  map[venue.Stream][]derive.Deriver // by source stream
	books    map[venue.Stream]*venue.Book
	names    map[venue.Stream]string // derived stream → data type
	buf      []byte
	err      error
}

func newTardisSink(w io.Writer, q *tardisQuery) *tardisSink {
	t := &tardisSink{w: w, q: q, exchange: q.o.Exchange, derived: map[venue.Stream][]derive.Deriver{},
		books: map[venue.Stream]*venue.Book{}, names: map[venue.Stream]string{}}
	for _, dt := range q.o.DataTypes {
		switch dt {
		case "trade":
			t.trades = true
		case "book_change":
			t.changes = true
		}
	}
	return t
}

// symbol is the tardis symbol of a fanoutd stream's symbol, and whether
// the query wants it.
func (t *tardisSink) symbol(st venue.Stream) (string, bool) {
	s := st.Symbol()
	if t.q.symbols == nil {
		return strings.ToUpper(s), true
	}
	ts, ok := t.q.symbols[s]
	return ts, ok
}

// resolve builds the derivers of source stream src once.
func (t *tardisSink) resolve(src venue.Stream) []derive.Deriver {
	if ds, ok := t.derived[src]; ok {
		return ds
	}
	var ds []derive.Deriver
	if _, want := t.symbol(src); want {
		for _, dt := range t.q.o.DataTypes {
			ch, err := tardisChannel(dt)
			if err != nil || !ch.Derived() || ch.Source() != src.Channel() {
				continue
			}
			id := venue.NewStream(src.Venue(), ch, src.Symbol())
			if dv, err := derive.New(id); err == nil {
				ds = append(ds, dv)
				t.names[id] = dt
			}
		}
	}
	t.derived[src] = ds
	if src.Channel() == venue.Level2 && len(ds) > 0 {
		t.books[src] = &venue.Book{}
	}
	return ds
}

func (t *tardisSink) Event(ev *venue.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ds := t.resolve(ev.Stream)
	book := t.books[ev.Stream]
	for _, dv := range ds {
		dv.Advance(ev.RecvTime, book, t.emit)
	}
	if sym, ok := t.symbol(ev.Stream); ok && t.within(ev.RecvTime) {
		switch {
		case ev.Kind == venue.KindTrade && t.trades:
			t.trade(ev, sym)
		case ev.Kind == venue.KindBook && t.changes:
			t.bookChange(ev, sym)
		}
	}
	if book != nil {
		book.Apply(ev)
	}
	for _, dv := range ds {
		dv.Apply(ev, book, t.emit)
	}
}

func (t *tardisSink) Notice(n notice.Notice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.Kind != notice.LinkDown {
		return
	}
	for _, ds := range t.derived {
		for _, dv := range ds {
			dv.Break(n.At)
		}
	}
	if t.q.o.WithDisconnectMessages && t.within(n.At) {
		t.buf = append(t.buf, `{"type":"disconnect","exchange":"`...)
		t.buf = append(t.buf, t.exchange...)
		t.buf = append(t.buf, `","localTimestamp":"`...)
		t.buf = replay.AppendTime(t.buf, n.At)
		t.buf = append(t.buf, "\"}\n"...)
		t.written()
	}
}

func (t *tardisSink) within(at time.Time) bool { return !at.Before(t.q.from) && at.Before(t.q.to) }

func (t *tardisSink) head(typ, sym string) {
	t.buf = append(t.buf, `{"type":"`...)
	t.buf = append(t.buf, typ...)
	t.buf = append(t.buf, `","symbol":"`...)
	t.buf = append(t.buf, sym...)
	t.buf = append(t.buf, `","exchange":"`...)
	t.buf = append(t.buf, t.exchange...)
	t.buf = append(t.buf, '"')
}

func (t *tardisSink) tail(venueTime, recv time.Time) {
	if venueTime.IsZero() {
		venueTime = recv
	}
	t.buf = append(t.buf, `,"timestamp":"`...)
	t.buf = replay.AppendTime(t.buf, venueTime)
	t.buf = append(t.buf, `","localTimestamp":"`...)
	t.buf = replay.AppendTime(t.buf, recv)
	t.buf = append(t.buf, "\"}\n"...)
	t.written()
}

// num appends a decimal as a JSON number written from its exact text.
func (t *tardisSink) num(key string, v string) {
	t.buf = append(t.buf, ',', '"')
	t.buf = append(t.buf, key...)
	t.buf = append(t.buf, '"', ':')
	t.buf = append(t.buf, v...)
}

func (t *tardisSink) trade(ev *venue.Event, sym string) {
	t.head("trade", sym)
	t.buf = append(t.buf, `,"id":`...)
	t.buf = strconv.AppendQuote(t.buf, ev.TradeID)
	t.num("price", ev.Price.String())
	t.num("amount", ev.Size.String())
	t.buf = append(t.buf, `,"side":"`...)
	if side := ev.Side.String(); side != "" {
		t.buf = append(t.buf, side...)
	} else {
		t.buf = append(t.buf, "unknown"...)
	}
	t.buf = append(t.buf, '"')
	t.tail(ev.VenueTime, ev.RecvTime)
}

func (t *tardisSink) levels(key string, ls []venue.Level) {
	t.buf = append(t.buf, `,"`...)
	t.buf = append(t.buf, key...)
	t.buf = append(t.buf, `":[`...)
	for i, l := range ls {
		if i > 0 {
			t.buf = append(t.buf, ',')
		}
		t.buf = append(t.buf, `{"price":`...)
		t.buf = append(t.buf, l.Price.String()...)
		t.buf = append(t.buf, `,"amount":`...)
		t.buf = append(t.buf, l.Size.String()...)
		t.buf = append(t.buf, '}')
	}
	t.buf = append(t.buf, ']')
}

func (t *tardisSink) bookChange(ev *venue.Event, sym string) {
	bids, asks := ev.Levels()
	t.head("book_change", sym)
	t.buf = append(t.buf, `,"isSnapshot":`...)
	t.buf = strconv.AppendBool(t.buf, ev.Snapshot)
	t.levels("bids", bids)
	t.levels("asks", asks)
	t.tail(ev.VenueTime, ev.RecvTime)
}

// emit writes a derived stream's output.
func (t *tardisSink) emit(o derive.Out) {
	var st venue.Stream
	var at time.Time
	if o.Event != nil {
		st, at = o.Event.Stream, o.Event.RecvTime
	} else {
		st, at = o.Bar.Stream, o.Bar.End
	}
	sym, ok := t.symbol(st)
	if !ok || !t.within(at) {
		return
	}
	name := t.names[st]
	d, _ := st.Channel().Derivation()
	switch {
	case o.Bar != nil:
		b := o.Bar
		t.head("trade_bar", sym)
		t.buf = append(t.buf, `,"name":"`...)
		t.buf = append(t.buf, name...)
		t.buf = append(t.buf, `","interval":`...)
		t.buf = strconv.AppendInt(t.buf, d.Interval.Milliseconds(), 10)
		t.buf = append(t.buf, `,"kind":"time"`...)
		t.num("open", b.Open.String())
		t.num("high", b.High.String())
		t.num("low", b.Low.String())
		t.num("close", b.Close.String())
		t.num("volume", b.Volume.String())
		t.num("buyVolume", b.BuyVolume.String())
		t.num("sellVolume", b.SellVolume.String())
		t.num("trades", strconv.Itoa(b.Trades))
		t.buf = append(t.buf, `,"openTimestamp":"`...)
		t.buf = replay.AppendTime(t.buf, b.FirstTrade)
		t.buf = append(t.buf, `","closeTimestamp":"`...)
		t.buf = replay.AppendTime(t.buf, b.LastTrade)
		t.buf = append(t.buf, '"')
		t.tail(b.End, b.End)
	case o.Event.Kind == venue.KindQuote:
		// tardis-machine's quote is a book snapshot named quote, depth 1,
		// interval 0; an empty side is an empty list.
		ev := o.Event
		var bid, ask []venue.Level
		if !ev.BidSize.IsZero() {
			bid = []venue.Level{{Price: ev.Bid, Size: ev.BidSize}}
		}
		if !ev.AskSize.IsZero() {
			ask = []venue.Level{{Price: ev.Ask, Size: ev.AskSize}}
		}
		t.snapshot(sym, "quote", 1, 0, bid, ask)
		t.tail(ev.VenueTime, ev.RecvTime)
	default:
		ev := o.Event
		bids, asks := ev.Levels()
		t.snapshot(sym, name, d.Depth, d.Interval, bids, asks)
		t.tail(ev.VenueTime, ev.RecvTime)
	}
}

// snapshot writes a book_snapshot message up to its times.
func (t *tardisSink) snapshot(sym, name string, depth int, interval time.Duration, bids, asks []venue.Level) {
	t.head("book_snapshot", sym)
	t.buf = append(t.buf, `,"name":"`...)
	t.buf = append(t.buf, name...)
	t.buf = append(t.buf, `","depth":`...)
	t.buf = strconv.AppendInt(t.buf, int64(depth), 10)
	t.buf = append(t.buf, `,"interval":`...)
	t.buf = strconv.AppendInt(t.buf, interval.Milliseconds(), 10)
	t.levels("bids", bids)
	t.levels("asks", asks)
}

func (t *tardisSink) written() {
	if len(t.buf) >= 256<<10 {
		t.write()
	}
}

func (t *tardisSink) write() {
	if t.err == nil && len(t.buf) > 0 {
		_, t.err = t.w.Write(t.buf)
	}
	t.buf = t.buf[:0]
}

func (t *tardisSink) flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.write()
	if t.err != nil {
		return fmt.Errorf("replay-normalized: %w", t.err)
	}
	return nil
}

var _ venue.Sink = (*tardisSink)(nil)
