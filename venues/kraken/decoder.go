package kraken

import (
	"bytes"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/scan"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Name is the venue's name as it appears in streams.
const Name = "kraken"

// Book depths Kraken accepts for the book channel.
var validDepths = []int{10, 25, 100, 500, 1000}

// DefaultDepth is the book depth subscribed when Config.Depth is 0 (Kraken's
// own default).
const DefaultDepth = 10

// checksumLevels is how many levels per side the v2 checksum covers,
// whatever the subscribed depth.
const checksumLevels = 10

// Decoder turns Kraken v2 frames into events and notices on its sink: it
// keeps each symbol's book, applies Kraken's depth truncation, verifies the
// CRC32 checksum after every book message, and marks a book invalid (and,
// in a live adapter, resubscribes it) when a message does not verify. The
// live Adapter drives one from its socket; replay drives one from a capture.
// A Decoder is not safe for concurrent use.
type Decoder struct {
	sink  *venue.CoverageSink
	log   *slog.Logger
	depth int

	syms map[string]*symState
	sc   scan.Scanner
	clk  scan.Clock

	rawB, rawA []rawLevel         // scratch: one message's levels as parsed
	lvB, lvA   []venue.FixedLevel // scratch: snapshot levels before Replace
	ev         venue.Event        // the book update, reused (venue.Sink)
	fixed      []venue.FixedLevel // its levels
	ck         []byte             // scratch: checksum input
	digits     digitCache         // text of recent coefficients, for the checksum

	frame         []byte          // the frame being decoded (during Frame only), quoted by badFrame
	bad           venue.BadFrames // frames that did not decode, in all; one notice per burst
	dataFrames    uint64          // book, trade and ticker frames decoded
	instrumentGot bool            // an instrument snapshot has arrived

	// Hooks the live adapter sets; nil when replaying.
	onResync     func(symbol string)
	onWhole      func(symbol string) // a verified snapshot made the book whole
	onAck        func(a ack)
	onRateLimit  func() // a rate-limit error that names no request
	onInstrument func(symbols []string)

	instrSyms []string // scratch: the pairs of an instrument snapshot
}

// ack is a subscribe or unsubscribe answer as the decoder read it.
type ack struct {
	method  string // "subscribe" or "unsubscribe"
	success bool
	channel string // from result, "" if the venue did not say
	symbol  string
	reqID   int64
	err     string
	limited bool // refused for the rate limit: to be asked again, not a refusal
}

// symState is what the decoder keeps per symbol.
type symState struct {
	sym                string
	l2, trades, ticker venue.Stream
	pricePrec, qtyPrec int  // from the instrument channel
	precKnown          bool // pricePrec/qtyPrec came from the venue
	// infPP and infQP are the finest precisions seen for the symbol while
	// none is known: a snapshot's levels may all be coarser than the
	// instrument's precision, and a later update then shows a finer one.
	infPP, infQP int
	book         *bookState
}

// bookState is one symbol's book and whether it can be trusted.
type bookState struct {
	b     venue.Book
	valid bool // a verified snapshot arrived and every message since verified
	// pp and qp are the exponents every price and size in b carries
	// (-pp, -qp), so Cmp never rescales and the checksum reads the
	// coefficient directly.
	pp, qp int
}

// rawLevel is one level as parsed, before it is rescaled.
type rawLevel struct {
	p, q       int64
	pdec, qdec int
}

// NewDecoder returns a decoder that writes to cfg.Sink and keeps books at
// cfg.Depth (the depth a capture was subscribed with; Kraken's default 10
// when 0). Invalid depths fall back to the default; New rejects them.
func NewDecoder(cfg venue.Config) *Decoder {
	depth := cfg.Depth
	if !validDepth(depth) {
		depth = DefaultDepth
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Decoder{sink: venue.NewCoverageSink(Name, cfg.Sink), log: log.With("venue", Name), depth: depth, syms: make(map[string]*symState)}
}

var _ venue.Decoder = (*Decoder)(nil)

func validDepth(d int) bool {
	for _, v := range validDepths {
		if d == v {
			return true
		}
	}
	return false
}

// BadFrames returns how many frames did not decode since the decoder was
// made.
func (d *Decoder) BadFrames() uint64 { return d.bad.Count() }

// LinkDown marks every book invalid: after a reconnect Kraken sends a new
// snapshot, and nothing is published for a book until it has.
func (d *Decoder) LinkDown(t time.Time) {
	d.sink.LinkDown(t)
	for _, s := range d.syms {
		if s.book != nil {
			s.book.valid = false
		}
	}
}

// symbol returns the state for sym, creating it; nil if sym is not a
// symbol a stream may carry.
func (d *Decoder) symbol(sym []byte) *symState {
	if s := d.syms[string(sym)]; s != nil {
		return s
	}
	if !venue.ValidSymbol(sym) {
		return nil
	}
	name := string(sym)
	s := &symState{
		sym:    name,
		l2:     venue.NewStream(Name, venue.Level2, name),
		trades: venue.NewStream(Name, venue.Trades, name),
		ticker: venue.NewStream(Name, venue.Ticker, name),
	}
	d.syms[name] = s
	return s
}

// frameHead is what the top level of a frame says.
type frameHead struct {
	channel, typ, method, errText, symbol []byte
	success, hasSuccess                   bool
	reqID                                 int64
	result                                []byte
	data                                  []byte // raw data value, when it came before channel/type
	dataDone                              bool   // data was decoded in place
}

// Frame decodes one raw frame received at recv.
func (d *Decoder) Frame(recv time.Time, frame []byte) {
	d.frame = frame
	d.decode(recv, frame)
	d.frame = nil
}

func (d *Decoder) decode(recv time.Time, frame []byte) {
	s := &d.sc
	s.Reset(frame)
	var h frameHead
	if s.Peek() != '{' {
		d.badFrame(recv, "not a JSON object", nil)
		return
	}
	for more := s.Object(); more; more = s.More('}') {
		switch string(s.Key()) {
		case "channel":
			h.channel = s.Str()
		case "type":
			h.typ = s.Str()
		case "data":
			if h.channel != nil && h.typ != nil {
				if !d.data(recv, &h) {
					return // reported
				}
				h.dataDone = true
				continue
			}
			h.data = s.Raw()
		case "method":
			h.method = s.Str()
		case "success":
			h.success, h.hasSuccess = s.Bool(), true
		case "error", "Error": // the rate-limit error is reported as {"Error":"Exceeded msg rate"} (unverified)
			if s.Peek() == '"' {
				h.errText = s.Str()
			} else {
				s.Skip()
			}
		case "symbol":
			if s.Peek() == '"' {
				h.symbol = s.Str()
			} else {
				s.Skip()
			}
		case "req_id":
			n, dec, ok := parseNum(s.Num())
			if ok && dec == 0 {
				h.reqID = n
			}
		case "result":
			h.result = s.Raw()
		default:
			s.Skip()
		}
	}
	if !s.End() {
		d.badFrame(recv, "malformed JSON", nil)
		return
	}
	if h.data != nil && !h.dataDone {
		s.Reset(h.data)
		if !d.data(recv, &h) {
			return
		}
		s.Reset(frame)
	}
	if h.method != nil {
		d.method(recv, &h)
		return
	}
	if h.channel == nil {
		if h.errText != nil {
			d.venueError(recv, "", h.errText, h.symbol)
			return
		}
		d.badFrame(recv, "frame with neither channel nor method", nil)
	}
}

// data decodes the data value at the scanner's position for h's channel.
// It returns false when the frame was bad (and has been reported).
func (d *Decoder) data(recv time.Time, h *frameHead) bool {
	s := &d.sc
	switch string(h.channel) {
	case "book":
		snap := string(h.typ) == "snapshot"
		if !snap && string(h.typ) != "update" {
			d.badFrame(recv, "book frame of unknown type", nil)
			return false
		}
		d.dataFrames++
		return d.bookData(recv, snap)
	case "trade":
		d.dataFrames++
		return d.tradeData(recv)
	case "ticker":
		d.dataFrames++
		return d.tickerData(recv)
	case "instrument":
		return d.instrumentData(recv, string(h.typ) == "snapshot")
	case "status":
		return d.statusData(recv)
	}
	s.Skip() // heartbeat and channels we do not use
	if s.Failed() {
		d.badFrame(recv, "malformed JSON", nil)
		return false
	}
	return true
}

// each walks the array of objects that a book, trade, ticker or status
// frame's data is, calling elem with the scanner at each element. Data
// that is not an array, or does not parse, is a bad frame ("<what> data is
// not an array", "malformed <what> frame"); elem reports false when it
// reported the frame bad itself. each reports whether the frame was good.
func (d *Decoder) each(recv time.Time, what string, elem func(s *scan.Scanner) bool) bool {
	s := &d.sc
	if s.Peek() != '[' {
		d.badFrame(recv, what+" data is not an array", nil)
		return false
	}
	for more := s.Array(); more; more = s.More(']') {
		if !elem(s) {
			return false
		}
	}
	if s.Failed() {
		d.badFrame(recv, "malformed "+what+" frame", nil)
		return false
	}
	return true
}

// bookData decodes a book snapshot or update: an array of per-symbol
// objects.
func (d *Decoder) bookData(recv time.Time, snap bool) bool {
	return d.each(recv, "book", func(s *scan.Scanner) bool {
		var sym, tsb []byte
		var ck int64
		hasCk := false
		d.rawB, d.rawA = d.rawB[:0], d.rawA[:0]
		badLevel := ""
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "symbol":
				sym = s.Str()
			case "bids":
				d.rawB = d.levels(d.rawB, &badLevel)
			case "asks":
				d.rawA = d.levels(d.rawA, &badLevel)
			case "checksum":
				n, dec, ok := parseNum(s.Num())
				if ok && dec == 0 && n >= 0 && n <= 1<<32-1 {
					ck, hasCk = n, true
				} else {
					badLevel = "bad checksum field"
				}
			case "timestamp":
				tsb = s.Str()
			default:
				s.Skip()
			}
		}
		if s.Failed() {
			d.badFrame(recv, "malformed book frame", d.syms[string(sym)])
			return false
		}
		st := d.symbol(sym)
		if st == nil {
			d.badFrame(recv, "book frame without a valid symbol", nil)
			return true
		}
		if badLevel != "" {
			d.badFrame(recv, badLevel, st)
			return true
		}
		if !hasCk {
			d.badFrame(recv, "book frame without a checksum", st)
			return true
		}
		var ts time.Time
		if tsb != nil {
			ts = d.clk.Parse(tsb)
		}
		if snap {
			d.snapshot(recv, ts, st, uint32(ck))
		} else {
			d.update(recv, ts, st, uint32(ck))
		}
		return true
	})
}

// levels reads an array of {"price":…,"qty":…} into dst.
func (d *Decoder) levels(dst []rawLevel, bad *string) []rawLevel {
	s := &d.sc
	for more := s.Array(); more; more = s.More(']') {
		var l rawLevel
		okP, okQ := false, false
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "price":
				l.p, l.pdec, okP = parseNum(s.Num())
			case "qty":
				l.q, l.qdec, okQ = parseNum(s.Num())
			default:
				s.Skip()
			}
		}
		switch {
		case !okP || !okQ:
			*bad = "level without a readable price and qty"
		case l.p <= 0:
			*bad = "level with a price not above zero"
		case l.q < 0:
			*bad = "level with a negative qty"
		}
		dst = append(dst, l)
	}
	return dst
}

// snapshot replaces st's book with the levels parsed into rawB/rawA.
func (d *Decoder) snapshot(recv, ts time.Time, st *symState, ck uint32) {
	bk := st.book
	if bk == nil {
		bk = &bookState{}
		st.book = bk
	}
	pp, qp := st.pricePrec, st.qtyPrec
	if !st.precKnown {
		// No instrument data yet: take the finest precision the snapshot
		// shows. Kraken writes values at full precision, so this matches the
		// instrument's precision on live frames (see doc.go).
		pp, qp = st.infPP, st.infQP
		for _, l := range d.rawB {
			pp, qp = max(pp, l.pdec), max(qp, l.qdec)
		}
		for _, l := range d.rawA {
			pp, qp = max(pp, l.pdec), max(qp, l.qdec)
		}
	}
	if pp > venue.MaxScale || qp > venue.MaxScale {
		d.badSnapshot(recv, "precision finer than 1e-18", st)
		return
	}
	bk.pp, bk.qp = pp, qp
	var ok bool
	if d.lvB, ok = d.toLevels(d.lvB[:0], d.rawB, pp, qp); !ok {
		d.badSnapshot(recv, "book level finer than the instrument's precision", st)
		return
	}
	if d.lvA, ok = d.toLevels(d.lvA[:0], d.rawA, pp, qp); !ok {
		d.badSnapshot(recv, "book level finer than the instrument's precision", st)
		return
	}
	bk.b.ReplaceFixed(d.lvB, d.lvA)
	bk.b.Truncate(nil, venue.Bid, d.depth)
	bk.b.Truncate(nil, venue.Ask, d.depth)
	if bk.b.Crossed() {
		d.badSnapshot(recv, "crossed book in snapshot", st)
		return
	}
	if got := d.checksum(bk); got != ck {
		d.resync(recv, st, "checksum", "snapshot", ck, got)
		return
	}
	bk.valid = true
	ev := bk.b.SnapshotFixed(st.l2)
	ev.VenueTime, ev.RecvTime = ts, recv
	d.emit(ev)
	if d.onWhole != nil {
		d.onWhole(st.sym)
	}
}

func (d *Decoder) toLevels(dst []venue.FixedLevel, raw []rawLevel, pp, qp int) ([]venue.FixedLevel, bool) {
	for _, l := range raw {
		p, ok1 := rescale(l.p, l.pdec, pp)
		q, ok2 := rescale(l.q, l.qdec, qp)
		if !ok1 || !ok2 {
			return dst, false
		}
		if q == 0 {
			continue
		}
		dst = append(dst, venue.FixedLevel{Price: venue.Fixed{M: p, Scale: uint8(pp)}, Size: venue.Fixed{M: q, Scale: uint8(qp)}})
	}
	return dst, true
}

// update applies the levels parsed into rawB/rawA to st's book, truncates
// to the subscribed depth, verifies, and publishes the change — including
// each level truncation pushed out, as a removal. The event and its levels
// are reused for every message: a sink has them only during the call
// (venue.Sink), so the book path allocates nothing.
func (d *Decoder) update(recv, ts time.Time, st *symState, ck uint32) {
	bk := st.book
	if bk == nil || !bk.valid {
		return // waiting for a snapshot; Kraken's own updates are meaningless until then
	}
	nb, na := len(d.rawB), len(d.rawA)
	if cap(d.fixed) < 2*(nb+na) {
		d.fixed = make([]venue.FixedLevel, 0, 2*(nb+na)+8)
	}
	lv := d.fixed[:0:cap(d.fixed)]
	bids := lv[: 0 : 2*nb]
	asks := lv[2*nb : 2*nb : cap(lv)]
	var ok bool
	if bids, ok = d.applySide(bids, bk, venue.Bid, d.rawB); ok {
		asks, ok = d.applySide(asks, bk, venue.Ask, d.rawA)
	}
	if !ok {
		if !st.precKnown {
			// The precision was inferred too coarse: remember the finer one
			// for the snapshot the resync brings.
			for _, raw := range [2][]rawLevel{d.rawB, d.rawA} {
				for _, l := range raw {
					st.infPP, st.infQP = max(st.infPP, min(l.pdec, 18)), max(st.infQP, min(l.qdec, 18))
				}
			}
		}
		d.badFrame(recv, "book level finer than the instrument's precision", st)
		return
	}
	// Every level of the book is fixed point (ReplaceFixed, SetFixed at
	// scales of at most MaxScale), so TruncateFixed cannot refuse.
	bids, _ = bk.b.TruncateFixed(bids, venue.Bid, d.depth)
	asks, _ = bk.b.TruncateFixed(asks, venue.Ask, d.depth)
	if bk.b.Crossed() {
		d.badFrame(recv, "crossed book after update", st)
		return
	}
	if got := d.checksum(bk); got != ck {
		d.resync(recv, st, "checksum", "update", ck, got)
		return
	}
	if len(bids) == 0 && len(asks) == 0 {
		return
	}
	d.ev = venue.Event{Kind: venue.KindBook, Stream: st.l2, VenueTime: ts, RecvTime: recv, FixedBids: bids, FixedAsks: asks}
	d.emit(&d.ev)
}

// applySide sets each raw level on side s of bk, in order, appending what
// it set to dst.
func (d *Decoder) applySide(dst []venue.FixedLevel, bk *bookState, s venue.BookSide, raw []rawLevel) ([]venue.FixedLevel, bool) {
	for _, l := range raw {
		p, ok1 := rescale(l.p, l.pdec, bk.pp)
		q, ok2 := rescale(l.q, l.qdec, bk.qp)
		if !ok1 || !ok2 {
			return dst, false
		}
		fl := venue.FixedLevel{Price: venue.Fixed{M: p, Scale: uint8(bk.pp)}, Size: venue.Fixed{M: q, Scale: uint8(bk.qp)}}
		if !bk.b.SetFixed(s, fl.Price, fl.Size) {
			continue // removing a level we do not hold (already truncated): nothing changes
		}
		dst = append(dst, fl)
	}
	return dst, true
}

// resync marks st's book invalid and asks for a fresh snapshot.
func (d *Decoder) resync(recv time.Time, st *symState, reason, during string, want, got uint32) {
	bk := st.book
	if bk != nil {
		bk.valid = false
	}
	details := map[string]any{
		"reason":  reason,
		"symbol":  st.sym,
		"message": during,
		// Kraken has no sequence numbers: the checksums are what identify
		// the mismatch.
		"venue_checksum":    uint64(want),
		"computed_checksum": uint64(got),
	}
	if reason != "checksum" {
		delete(details, "venue_checksum")
		delete(details, "computed_checksum")
	}
	d.sink.Notice(notice.Must(notice.BookResync, Name, string(st.l2), recv,
		"kraken "+st.sym+" book "+reason+" mismatch on "+during+"; resubscribing for a fresh snapshot", details))
	if d.onResync != nil {
		d.onResync(st.sym)
	}
}

// badFrame counts a frame that did not decode, reports it once per burst,
// and resyncs the book it concerned — or every valid book if
// it cannot be told which (the checksum covers only the top 10 levels, so a
// lost update deeper in the book would otherwise go unnoticed).
func (d *Decoder) badFrame(recv time.Time, reason string, st *symState) {
	var stream venue.Stream
	if st != nil {
		stream = st.l2
	}
	d.bad.Report(d.sink, Name, recv, stream, reason, d.frame)
	d.log.Debug("bad frame", "reason", reason)
	if st != nil {
		if st.book != nil && st.book.valid {
			d.resyncBad(recv, st, reason)
		}
		return
	}
	// In symbol order, so that a capture replays to the same notices.
	for _, sym := range slices.Sorted(maps.Keys(d.syms)) {
		if s := d.syms[sym]; s.book != nil && s.book.valid {
			d.resyncBad(recv, s, reason)
		}
	}
}

// badSnapshot reports a snapshot that cannot make a book and asks for
// another, even when the book was already invalid (a resync's own snapshot):
// otherwise nothing would ever ask again.
func (d *Decoder) badSnapshot(recv time.Time, reason string, st *symState) {
	if st.book != nil && st.book.valid {
		d.badFrame(recv, reason, st) // resyncs
		return
	}
	d.badFrame(recv, reason, st)
	if st.book == nil {
		st.book = &bookState{}
	}
	d.resyncBad(recv, st, reason)
}

func (d *Decoder) resyncBad(recv time.Time, st *symState, reason string) {
	st.book.valid = false
	d.sink.Notice(notice.Must(notice.BookResync, Name, string(st.l2), recv,
		"kraken "+st.sym+" book resync after a bad frame: "+reason,
		map[string]any{"reason": "bad_frame", "detail": reason, "symbol": st.sym}))
	if d.onResync != nil {
		d.onResync(st.sym)
	}
}

func (d *Decoder) emit(ev *venue.Event) {
	d.sink.Event(ev)
}

// Coverage returns the tracker the decoder records observed streams in.
func (d *Decoder) Coverage() *venue.CoverageTracker { return d.sink.Tracker }

// forget drops symbol's streams from coverage (after an unsubscribe).
func (d *Decoder) forget(symbol string, t time.Time) {
	d.sink.Forget(t, venue.NewStream(Name, venue.Level2, symbol), venue.NewStream(Name, venue.Trades, symbol),
		venue.NewStream(Name, venue.Ticker, symbol))
}

// tradeData decodes an array of trades, one event each.
func (d *Decoder) tradeData(recv time.Time) bool {
	return d.each(recv, "trade", func(s *scan.Scanner) bool {
		var sym, side, id, tsb []byte
		var p, q int64
		var pd, qd int
		okP, okQ := false, false
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "symbol":
				sym = s.Str()
			case "side":
				side = s.Str()
			case "price":
				p, pd, okP = parseNum(s.Num())
			case "qty":
				q, qd, okQ = parseNum(s.Num())
			case "trade_id":
				id = s.Num()
			case "timestamp":
				tsb = s.Str()
			default:
				s.Skip()
			}
		}
		if s.Failed() {
			return true // reported by each
		}
		st := d.symbol(sym)
		if st == nil || !okP || !okQ || p <= 0 || q <= 0 {
			d.badFrame(recv, "trade without a valid symbol, price or qty", nil)
			return true
		}
		ev := &venue.Event{Kind: venue.KindTrade, Stream: st.trades, RecvTime: recv,
			TradeID: string(id), Price: decimal.New(p, int32(-pd)), Size: decimal.New(q, int32(-qd))}
		switch string(side) {
		case "buy":
			ev.Side = venue.SideBuy
		case "sell":
			ev.Side = venue.SideSell
		}
		if tsb != nil {
			ev.VenueTime = d.clk.Parse(tsb)
		}
		d.emit(ev)
		return true
	})
}

// tickerData decodes an array of tickers (best bid and offer, last trade).
func (d *Decoder) tickerData(recv time.Time) bool {
	return d.each(recv, "ticker", func(s *scan.Scanner) bool {
		var sym, tsb []byte
		var v [5]struct {
			c   int64
			dec int
			ok  bool
		}
		for more := s.Object(); more; more = s.More('}') {
			i := -1
			switch string(s.Key()) {
			case "symbol":
				sym = s.Str()
			case "bid":
				i = 0
			case "bid_qty":
				i = 1
			case "ask":
				i = 2
			case "ask_qty":
				i = 3
			case "last":
				i = 4
			case "timestamp":
				tsb = s.Str()
			default:
				s.Skip()
			}
			if i >= 0 {
				v[i].c, v[i].dec, v[i].ok = parseNum(s.Num())
			}
		}
		if s.Failed() {
			return true // reported by each
		}
		st := d.symbol(sym)
		if st == nil || !v[0].ok || !v[1].ok || !v[2].ok || !v[3].ok || v[1].c < 0 || v[3].c < 0 {
			d.badFrame(recv, "ticker without a valid symbol, bid or ask", nil)
			return true
		}
		dec := func(i int) decimal.Decimal { return decimal.New(v[i].c, int32(-v[i].dec)) }
		ev := &venue.Event{Kind: venue.KindTicker, Stream: st.ticker, RecvTime: recv,
			Bid: dec(0), BidSize: dec(1), Ask: dec(2), AskSize: dec(3)}
		if v[4].ok {
			ev.Last = decimal.NullDecimal{Decimal: dec(4), Valid: true}
		}
		if tsb != nil {
			ev.VenueTime = d.clk.Parse(tsb)
		}
		d.emit(ev)
		return true
	})
}

// instrumentData reads the instrument channel's pairs for their price and
// qty precision. A precision that changes under a live book resyncs it.
func (d *Decoder) instrumentData(recv time.Time, snap bool) bool {
	s := &d.sc
	d.instrSyms = d.instrSyms[:0]
	if s.Peek() != '{' {
		d.badFrame(recv, "instrument data is not an object", nil)
		return false
	}
	for more := s.Object(); more; more = s.More('}') {
		if string(s.Key()) != "pairs" {
			s.Skip()
			continue
		}
		for more := s.Array(); more; more = s.More(']') {
			var sym []byte
			pp, qp := -1, -1
			for more := s.Object(); more; more = s.More('}') {
				switch string(s.Key()) {
				case "symbol":
					sym = s.Str()
				case "price_precision":
					if n, dec, ok := parseNum(s.Num()); ok && dec == 0 && n >= 0 && n <= 18 {
						pp = int(n)
					}
				case "qty_precision":
					if n, dec, ok := parseNum(s.Num()); ok && dec == 0 && n >= 0 && n <= 18 {
						qp = int(n)
					}
				default:
					s.Skip()
				}
			}
			if snap && !s.Failed() && len(sym) > 0 {
				d.instrSyms = append(d.instrSyms, string(sym))
			}
			if s.Failed() || pp < 0 || qp < 0 {
				continue
			}
			st := d.symbol(sym)
			if st == nil {
				continue
			}
			changed := st.precKnown && (st.pricePrec != pp || st.qtyPrec != qp) ||
				!st.precKnown && st.book != nil && st.book.valid && (st.book.pp != pp || st.book.qp != qp)
			st.pricePrec, st.qtyPrec, st.precKnown = pp, qp, true
			if changed && st.book != nil && st.book.valid {
				d.resync(recv, st, "precision_change", "instrument", 0, 0)
			}
		}
	}
	if s.Failed() {
		d.badFrame(recv, "malformed instrument frame", nil)
		return false
	}
	if snap {
		d.instrumentGot = true
		if d.onInstrument != nil {
			d.onInstrument(slices.Clone(d.instrSyms))
		}
	}
	return true
}

// statusData logs the venue's system status (online, maintenance,
// cancel_only, post_only).
func (d *Decoder) statusData(recv time.Time) bool {
	return d.each(recv, "status", func(s *scan.Scanner) bool {
		for more := s.Object(); more; more = s.More('}') {
			if string(s.Key()) != "system" {
				s.Skip()
				continue
			}
			if sys := s.Str(); string(sys) != "online" && !s.Failed() {
				d.log.Warn("venue status", "system", string(sys))
			}
		}
		return true
	})
}

// method handles answers to our requests: subscribe/unsubscribe acks and
// pong.
func (d *Decoder) method(recv time.Time, h *frameHead) {
	m := string(h.method)
	if m != "subscribe" && m != "unsubscribe" {
		if h.hasSuccess && !h.success {
			d.venueError(recv, m, h.errText, h.symbol)
		}
		return // pong and the like: their arrival is all that matters
	}
	a := ack{method: m, success: h.success, symbol: string(h.symbol), reqID: h.reqID, err: string(h.errText),
		limited: !h.success && isRateLimit(h.errText)}
	if h.result != nil {
		s := &d.sc
		s.Reset(h.result)
		if s.Peek() == '{' {
			for more := s.Object(); more; more = s.More('}') {
				switch string(s.Key()) {
				case "channel":
					a.channel = string(s.Str())
				case "symbol":
					if s.Peek() == '"' {
						a.symbol = string(s.Str())
					} else {
						s.Skip()
					}
				default:
					s.Skip()
				}
			}
		}
	}
	switch {
	case a.success && m == "unsubscribe" && a.channel == "book":
		if st := d.syms[a.symbol]; st != nil && st.book != nil {
			st.book.valid = false
		}
	case !a.success && m == "subscribe":
		low := bytes.ToLower(h.errText)
		switch {
		case bytes.Contains(low, []byte("already subscribed")):
			// harmless: we are getting what we asked for
		case a.limited:
			d.sink.Notice(notice.Must(notice.RateLimited, Name, "", recv, "kraken: "+a.err,
				map[string]any{"message": a.err, "symbol": a.symbol, "channel": a.channel}))
		default:
			stream := ""
			if ch := channelOf(a.channel); ch != "" && a.symbol != "" && venue.ValidSymbol(a.symbol) {
				stream = string(venue.NewStream(Name, ch, a.symbol))
			}
			d.sink.Notice(notice.Must(notice.Refusal, Name, stream, recv,
				"kraken refused "+a.channel+" "+a.symbol+": "+a.err,
				map[string]any{"message": a.err, "symbol": a.symbol, "channel": a.channel}))
		}
	}
	if d.onAck != nil {
		d.onAck(a)
	}
}

// venueError reports an error frame that is not a subscription answer.
func (d *Decoder) venueError(recv time.Time, method string, errText, sym []byte) {
	e := string(errText)
	if isRateLimit(errText) {
		d.sink.Notice(notice.Must(notice.RateLimited, Name, "", recv, "kraken: "+e, map[string]any{"message": e}))
		if d.onRateLimit != nil {
			d.onRateLimit()
		}
		return
	}
	d.log.Warn("venue error", "method", method, "error", e, "symbol", string(sym))
}

// isRateLimit reports whether a venue error is Kraken's rate limit
// ("Exceeded msg rate").
func isRateLimit(errText []byte) bool {
	return bytes.Contains(bytes.ToLower(errText), []byte("exceeded msg rate")) ||
		bytes.Contains(bytes.ToLower(errText), []byte("rate limit"))
}

// channelOf maps Kraken's channel names to ours.
func channelOf(kc string) venue.Channel {
	switch kc {
	case "book":
		return venue.Level2
	case "trade":
		return venue.Trades
	case "ticker":
		return venue.Ticker
	}
	return ""
}
