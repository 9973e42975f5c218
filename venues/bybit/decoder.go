package bybit

import (
	"bytes"
	"log/slog"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/scan"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Name is the venue's name in streams and notices.
const Name = "bybit"

// maxTopics bounds the topics a decoder keeps state for, so that a
// hostile or corrupt stream cannot grow it without limit.
const maxTopics = 10000

// resyncRetry is how long a book waits for the snapshot a resync asked for
// before asking again (the venue may have lost the request).
const resyncRetry = 10 * time.Second

// Decoder turns Bybit v5 public frames into events, keeping one book per
// orderbook topic and checking its update ids. It implements
// venue.Decoder; the Adapter drives one from its websocket and replay
// drives one from a capture. The zero Decoder is not usable: call
// NewDecoder. A Decoder is not safe for concurrent use.
type Decoder struct {
	sink  *venue.CoverageSink
	log   *slog.Logger
	depth int // the level2 depth; orderbook.1 is also level2 only when depth is 1

	topics map[string]*topic // by topic as Bybit writes it
	last   *topic            // the topic lookup found last (in topics)

	// Hooks the Adapter sets; nil in replay.
	resync  func(topic string)  // ask the venue for a fresh snapshot of topic
	whole   func(topic string)  // a snapshot made topic's book whole
	control func(c *controlMsg) // a subscribe/unsubscribe/ping answer

	sc     scan.Scanner
	dsc    scan.Scanner // the data object, scanned after the envelope
	cache  venue.DecimalCache
	bids   []lvl // scratch for one frame's levels
	asks   []lvl
	ev     venue.Event        // the book update, reused (venue.Sink)
	fixed  []venue.FixedLevel // its levels
	trades []*venue.Event     // one frame's trades, emitted once all parse
	ctl    controlMsg

	// Bad-frame accounting.
	bad       venue.BadFrames // bad frames in all; one notice per burst
	dropped   uint64          // book updates dropped while their book was invalid
	unhandled uint64          // well-formed frames on topics we do not decode
}

// topicKind is what a Bybit topic carries.
type topicKind uint8

const (
	topicBook  topicKind = iota + 1 // orderbook.{depth}.{symbol}
	topicTrade                      // publicTrade.{symbol}
)

// topic is the decoder's state for one Bybit topic.
type topic struct {
	name   string
	kind   topicKind
	depth  int // levels per side for a book topic
	symbol string

	l2     venue.Stream // "" when the topic does not feed level2
	ticker venue.Stream // "" when the topic does not feed the ticker
	trades venue.Stream

	book     venue.Book
	valid    bool      // book holds the venue's book; updates may be applied
	lastU    int64     // u of the last frame applied
	priceExp int32     // exponent every price in book is rescaled to
	expSet   bool      // priceExp was taken from a snapshot
	resyncAt time.Time // when a resync was last asked for; zero if none pending
}

// controlMsg is a Bybit answer to a request: {"success":…,"ret_msg":…,
// "conn_id":…,"req_id":…,"op":…}, or an option-style {"op":"pong","args":[…]}.
// The slices point into the frame and are valid only during the call.
type controlMsg struct {
	Op         []byte
	Success    bool
	HasSuccess bool
	RetMsg     []byte
	ReqID      []byte
	ConnID     []byte
}

// NewDecoder returns a decoder that writes to cfg.Sink. cfg.Depth says
// whether orderbook.1 also feeds the level2 stream (Depth 1); every other
// orderbook.{N} topic feeds level2 at its own depth, and orderbook.1 always
// feeds the ticker stream.
func NewDecoder(cfg venue.Config) *Decoder {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	depth := cfg.Depth
	if depth == 0 {
		depth = DefaultDepth
	}
	return &Decoder{
		sink:   venue.NewCoverageSink(Name, cfg.Sink),
		log:    log.With("venue", Name),
		depth:  depth,
		topics: make(map[string]*topic),
	}
}

var _ venue.Decoder = (*Decoder)(nil)

// Stats are a decoder's counters.
type Stats struct {
	BadFrames      uint64 // frames that did not parse or made an impossible book
	DroppedUpdates uint64 // book updates dropped while their book awaited a snapshot
	Unhandled      uint64 // well-formed frames on topics the decoder does not decode
}

// Stats returns the decoder's counters.
func (d *Decoder) Stats() Stats {
	return Stats{BadFrames: d.bad.Count(), DroppedUpdates: d.dropped, Unhandled: d.unhandled}
}

// LinkDown marks every book invalid until the venue sends a new snapshot.
// It emits nothing: the caller reports the link drop.
func (d *Decoder) LinkDown(t time.Time) {
	d.sink.LinkDown(t)
	for _, t := range d.topics {
		t.valid = false
		t.resyncAt = time.Time{}
	}
}

// forget drops the state of every topic of symbol (after an unsubscribe).
func (d *Decoder) forget(symbol string, now time.Time) {
	for k, t := range d.topics {
		if t.symbol == symbol {
			delete(d.topics, k)
		}
	}
	d.last = nil
	d.sink.Forget(now, venue.NewStream(Name, venue.Level2, symbol), venue.NewStream(Name, venue.Trades, symbol),
		venue.NewStream(Name, venue.Ticker, symbol))
}

// Coverage returns the tracker the decoder records observed streams in.
func (d *Decoder) Coverage() *venue.CoverageTracker { return d.sink.Tracker }

// Frame decodes one raw frame received at recv.
//
// Bybit writes "topic" and "type" before "data", so the data is parsed in
// the same pass as the envelope; a frame in another key order has its
// data parsed after the envelope instead.
func (d *Decoder) Frame(recv time.Time, frame []byte) {
	s := &d.sc
	s.Reset(frame)
	var (
		topicName, typ, op    []byte
		ts, cts               int64
		data                  []byte // the data value, when not parsed in place
		success, hasSuccess   bool
		retMsg, reqID, connID []byte
		t                     *topic
		parsed                bool // data parsed in place
		p                     parsedData
	)
	for more := s.Object(); more; more = s.More('}') {
		switch string(s.Key()) {
		case "topic":
			topicName = s.Str()
		case "type":
			typ = s.Str()
		case "ts":
			ts = s.IntOrString()
		case "cts":
			cts = s.IntOrString()
		case "data":
			if topicName != nil && (typ != nil || bytes.HasPrefix(topicName, []byte("publicTrade."))) {
				if t = d.lookup(topicName); t != nil {
					p = d.parseData(s, t, typ)
					parsed = true
					continue
				}
			}
			data = s.Raw()
		case "op":
			op = s.Str()
		case "success":
			success, hasSuccess = s.Bool(), true
		case "ret_msg":
			retMsg = s.Str()
		case "req_id":
			if s.Peek() == '"' {
				reqID = s.Str()
			} else {
				reqID = s.Raw()
			}
		case "conn_id":
			connID = s.Str()
		default:
			s.Skip()
		}
	}
	if !s.End() {
		if t == nil && topicName != nil {
			t = d.lookup(topicName)
		}
		why := p.why
		if why == "" {
			why = "frame does not parse"
		}
		d.badFrame(recv, t, why, frame)
		return
	}
	if topicName == nil {
		if op == nil && !hasSuccess {
			d.badFrame(recv, nil, "frame is neither data nor a control answer", frame)
			return
		}
		d.ctl = controlMsg{Op: op, Success: success, HasSuccess: hasSuccess, RetMsg: retMsg, ReqID: reqID, ConnID: connID}
		if d.control != nil {
			d.control(&d.ctl)
		}
		return
	}
	if t == nil {
		t = d.lookup(topicName)
	}
	if t == nil {
		d.unhandled++
		return
	}
	if !parsed {
		if data == nil {
			d.badFrame(recv, t, "data frame without data", frame)
			return
		}
		ds := &d.dsc
		ds.Reset(data)
		p = d.parseData(ds, t, typ)
		if !ds.End() && p.why == "" {
			p.why = "data does not parse"
		}
	}
	if p.why != "" {
		d.badFrame(recv, t, p.why, frame)
		return
	}
	vt := ts
	if cts > 0 {
		vt = cts
	}
	var venueTime time.Time
	if vt > 0 {
		venueTime = time.UnixMilli(vt)
	}
	switch t.kind {
	case topicBook:
		d.applyBook(recv, venueTime, t, p, frame)
	case topicTrade:
		for _, ev := range d.trades {
			ev.RecvTime = recv
			d.sink.Event(ev)
		}
		clear(d.trades)
		d.trades = d.trades[:0]
	}
}

// parsedData is what parseData read: for a book, the levels are in
// d.bids and d.asks; for trades, the events are in d.trades. why is set
// when the data is impossible or does not parse.
type parsedData struct {
	snap bool
	u    int64
	why  errText
}

// parseData reads the value of "data" at s for topic t. The scanner is
// left after the value (or failed).
func (d *Decoder) parseData(s *scan.Scanner, t *topic, typ []byte) parsedData {
	var p parsedData
	switch t.kind {
	case topicBook:
		switch string(typ) {
		case "snapshot":
			p.snap = true
		case "delta":
		default:
			s.Skip()
			p.why = "orderbook frame type is neither snapshot nor delta"
			return p
		}
		d.bids, d.asks = d.bids[:0], d.asks[:0]
		p.u = -1
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "b":
				d.bids, p.why = d.levels(s, t, d.bids, p.snap, p.why)
			case "a":
				d.asks, p.why = d.levels(s, t, d.asks, p.snap, p.why)
			case "u":
				p.u = s.IntOrString()
			default:
				s.Skip()
			}
		}
		switch {
		case s.Failed():
			p.why = "orderbook data does not parse"
		case p.why == "" && p.u <= 0:
			p.why = "orderbook frame without a positive u"
		}
	case topicTrade:
		p.why = d.parseTrades(s, t)
	}
	return p
}

// lookup returns the state of a topic the decoder decodes, creating it on
// first sight, or nil for any other topic.
func (d *Decoder) lookup(name []byte) *topic {
	if t := d.last; t != nil && t.name == string(name) { // frames mostly repeat a topic
		return t
	}
	if t, ok := d.topics[string(name)]; ok {
		d.last = t
		return t
	}
	if bytes.IndexByte(name, '\\') >= 0 || len(d.topics) >= maxTopics {
		return nil
	}
	t := &topic{name: string(name)}
	switch {
	case bytes.HasPrefix(name, []byte("orderbook.")):
		rest := name[len("orderbook."):]
		i := bytes.IndexByte(rest, '.')
		if i <= 0 {
			return nil
		}
		n, err := strconv.Atoi(string(rest[:i]))
		if err != nil || n <= 0 || n > 100000 {
			return nil
		}
		t.kind, t.depth, t.symbol = topicBook, n, string(rest[i+1:])
		if n != 1 || d.depth == 1 {
			t.l2 = venue.NewStream(Name, venue.Level2, t.symbol)
		}
		if n == 1 {
			t.ticker = venue.NewStream(Name, venue.Ticker, t.symbol)
		}
	case bytes.HasPrefix(name, []byte("publicTrade.")):
		t.kind, t.symbol = topicTrade, string(name[len("publicTrade."):])
		t.trades = venue.NewStream(Name, venue.Trades, t.symbol)
	default:
		return nil
	}
	if t.symbol == "" {
		return nil
	}
	d.topics[t.name] = t
	return t
}

// errText names why a frame was refused; a constant string so a bad frame
// costs no allocation until it is reported.
type errText = string

// lvl is one parsed level: in fixed point (fixed true), or as decimals
// for a value too long for it.
type lvl struct {
	fixed bool
	fl    venue.FixedLevel
	dl    venue.Level
}

func (l *lvl) level() venue.Level {
	if l.fixed {
		return l.fl.Level()
	}
	return l.dl
}

func allFixed(ls []lvl) bool {
	for i := range ls {
		if !ls[i].fixed {
			return false
		}
	}
	return true
}

func decimalLevels(ls []lvl) []venue.Level {
	out := make([]venue.Level, len(ls))
	for i := range ls {
		out[i] = ls[i].level()
	}
	return out
}

// applyBook applies an orderbook snapshot or delta already parsed into
// d.bids and d.asks.
func (d *Decoder) applyBook(recv, venueTime time.Time, t *topic, p parsedData, frame []byte) {
	snap, u := p.snap, p.u
	fixed := allFixed(d.bids) && allFixed(d.asks)
	if snap || u == 1 {
		// A snapshot, or u == 1 (the venue restarted): overwrite the book.
		if fixed {
			all := d.fixedLevels()
			t.book.ReplaceFixed(all[:len(d.bids)], all[len(d.bids):])
		} else {
			t.book.Replace(decimalLevels(d.bids), decimalLevels(d.asks))
		}
		t.lastU, t.valid, t.resyncAt = u, true, time.Time{}
		if t.book.Crossed() {
			d.badFrame(recv, t, "snapshot makes a crossed book", frame)
			return
		}
		if d.whole != nil {
			d.whole(t.name)
		}
		if t.l2 != "" {
			ev := t.book.SnapshotFixed(t.l2)
			ev.VenueSeq, ev.VenueTime, ev.RecvTime = u, venueTime, recv
			d.sink.Event(ev)
		}
		d.ticker(recv, venueTime, t)
		return
	}

	if !t.valid {
		d.dropped++
		if !t.resyncAt.IsZero() && recv.Sub(t.resyncAt) > resyncRetry {
			d.askResync(recv, t)
		}
		return
	}
	if u != t.lastU+1 {
		d.resyncBook(recv, t, "gap", map[string]any{
			"topic": t.name, "last_u": t.lastU, "got_u": u, "want_u": t.lastU + 1,
		})
		return
	}
	t.lastU = u
	if !fixed {
		d.applyDecimal(recv, venueTime, t, u, frame)
		return
	}
	all := d.fixedLevels()
	nb := len(d.bids)
	for _, l := range all[:nb] {
		t.book.SetFixed(venue.Bid, l.Price, l.Size)
	}
	for _, l := range all[nb:] {
		t.book.SetFixed(venue.Ask, l.Price, l.Size)
	}
	if t.book.Crossed() {
		d.badFrame(recv, t, "update makes a crossed book", frame)
		return
	}
	if t.l2 == "" {
		t.book.Truncate(nil, venue.Bid, t.depth)
		t.book.Truncate(nil, venue.Ask, t.depth)
		d.ticker(recv, venueTime, t)
		return
	}
	// Bybit keeps its book at the topic's depth and says when a level
	// leaves it; if it ever does not, drop the level here too and tell the
	// consumer, so its book stays ours.
	bids, asks := all[:nb:nb], all[nb:]
	if t.book.Len(venue.Bid) > t.depth || t.book.Len(venue.Ask) > t.depth {
		var ok1, ok2 bool
		bids = append(make([]venue.FixedLevel, 0, nb+1), bids...)
		bids, ok1 = t.book.TruncateFixed(bids, venue.Bid, t.depth)
		asks, ok2 = t.book.TruncateFixed(asks, venue.Ask, t.depth)
		if !ok1 || !ok2 { // a level with no fixed point form: decimals
			ev := &venue.Event{Kind: venue.KindBook, Stream: t.l2, VenueSeq: u, VenueTime: venueTime, RecvTime: recv}
			ev.Bids, ev.Asks = (&venue.Event{FixedBids: bids, FixedAsks: asks}).Levels()
			ev.Bids = t.book.Truncate(ev.Bids, venue.Bid, t.depth)
			ev.Asks = t.book.Truncate(ev.Asks, venue.Ask, t.depth)
			d.sink.Event(ev)
			d.ticker(recv, venueTime, t)
			return
		}
	}
	// The event and its levels are reused for every frame: a sink has them
	// only during the call (venue.Sink), so the book path allocates nothing.
	d.ev = venue.Event{
		Kind: venue.KindBook, Stream: t.l2, VenueSeq: u, VenueTime: venueTime, RecvTime: recv,
		FixedBids: bids, FixedAsks: asks,
	}
	d.sink.Event(&d.ev)
	d.ticker(recv, venueTime, t)
}

// fixedLevels returns d.bids then d.asks in fixed point, in d.fixed.
func (d *Decoder) fixedLevels() []venue.FixedLevel {
	all := d.fixed[:0]
	for i := range d.bids {
		all = append(all, d.bids[i].fl)
	}
	for i := range d.asks {
		all = append(all, d.asks[i].fl)
	}
	d.fixed = all
	return all
}

// applyDecimal is the update half of applyBook for a frame with a value
// too long for fixed point.
func (d *Decoder) applyDecimal(recv, venueTime time.Time, t *topic, u int64, frame []byte) {
	bids, asks := decimalLevels(d.bids), decimalLevels(d.asks)
	for _, l := range bids {
		t.book.Set(venue.Bid, l.Price, l.Size)
	}
	for _, l := range asks {
		t.book.Set(venue.Ask, l.Price, l.Size)
	}
	if t.book.Crossed() {
		d.badFrame(recv, t, "update makes a crossed book", frame)
		return
	}
	if t.l2 != "" {
		ev := &venue.Event{
			Kind: venue.KindBook, Stream: t.l2, VenueSeq: u, VenueTime: venueTime, RecvTime: recv,
			Bids: bids, Asks: asks,
		}
		if t.book.Len(venue.Bid) > t.depth {
			ev.Bids = t.book.Truncate(ev.Bids, venue.Bid, t.depth)
		}
		if t.book.Len(venue.Ask) > t.depth {
			ev.Asks = t.book.Truncate(ev.Asks, venue.Ask, t.depth)
		}
		d.sink.Event(ev)
	} else {
		t.book.Truncate(nil, venue.Bid, t.depth)
		t.book.Truncate(nil, venue.Ask, t.depth)
	}
	d.ticker(recv, venueTime, t)
}

// ticker emits the best bid and ask of an orderbook.1 topic as a ticker.
// A book with an empty side gives no ticker (there is no best price to
// report).
func (d *Decoder) ticker(recv, venueTime time.Time, t *topic) {
	if t.ticker == "" {
		return
	}
	bid, ask, ok := d.best(t)
	if !ok {
		return
	}
	d.sink.Event(&venue.Event{
		Kind: venue.KindTicker, Stream: t.ticker, VenueTime: venueTime, RecvTime: recv,
		Bid: bid.Price, BidSize: bid.Size, Ask: ask.Price, AskSize: ask.Size,
	})
}

// best returns the best bid and ask of t's book as decimals from the
// decimal cache, so a ticker costs its event and not a decimal per value.
func (d *Decoder) best(t *topic) (bid, ask venue.Level, ok bool) {
	fb, ok1 := t.book.BestFixed(venue.Bid)
	fa, ok2 := t.book.BestFixed(venue.Ask)
	if ok1 && ok2 {
		dec := func(f venue.Fixed) decimal.Decimal { return d.cache.Get(f.M, -int32(f.Scale)) }
		return venue.Level{Price: dec(fb.Price), Size: dec(fb.Size)}, venue.Level{Price: dec(fa.Price), Size: dec(fa.Size)}, true
	}
	bid, ok1 = t.book.Best(venue.Bid)
	ask, ok2 = t.book.Best(venue.Ask)
	return bid, ask, ok1 && ok2
}

// levels reads [["price","size"],…] into dst, in fixed point where a
// value has that form (see lvl). It returns a reason when a level is
// impossible (price not positive, size negative).
func (d *Decoder) levels(s *scan.Scanner, t *topic, dst []lvl, snap bool, why errText) ([]lvl, errText) {
	for more := s.Array(); more; more = s.More(']') {
		s.Expect('[')
		pd := s.Decimal()
		s.Expect(',')
		sd := s.Decimal()
		s.Expect(']')
		if s.Failed() {
			return dst, why
		}
		pb, sb := pd.Text, sd.Text
		pm, pexp, pok := pd.Coef(), -int32(pd.Frac), pd.St == scan.OK
		zm, zexp, zok := sd.Coef(), -int32(sd.Frac), sd.St == scan.OK
		if pok && zok && pexp >= -venue.MaxScale && zexp >= -venue.MaxScale {
			switch {
			case pm <= 0:
				if why == "" {
					why = "level price is not positive"
				}
			case zm < 0:
				if why == "" {
					why = "level size is negative"
				}
			default:
				dst = append(dst, lvl{fixed: true, fl: venue.FixedLevel{
					Price: venue.Fixed{M: pm, Scale: uint8(-pexp)},
					Size:  venue.Fixed{M: zm, Scale: uint8(-zexp)},
				}})
			}
			continue
		}
		p, pok := d.price(t, pb, snap)
		z, zok := d.size(sb)
		switch {
		case !pok || !zok:
			if why == "" {
				why = "level price or size is not a decimal"
			}
		case p.Sign() <= 0:
			if why == "" {
				why = "level price is not positive"
			}
		case z.Sign() < 0:
			if why == "" {
				why = "level size is negative"
			}
		default:
			dst = append(dst, lvl{dl: venue.Level{Price: p, Size: z}})
		}
	}
	return dst, why
}

// price parses a price and rescales it to the book's exponent, so that
// every price in a book shares one exponent and Book's comparisons do not
// allocate. The first snapshot fixes the exponent at its first price's;
// a later price with more decimals keeps its own exponent (still correct,
// only slower to compare).
func (d *Decoder) price(t *topic, b []byte, snap bool) (decimal.Decimal, bool) {
	m, frac, _, st := scan.Coef(b)
	if st != scan.OK {
		return slowDecimal(b)
	}
	exp := -int32(frac)
	if !t.expSet || (snap && exp < t.priceExp) {
		t.priceExp, t.expSet = exp, true
	}
	if exp > t.priceExp {
		if m2, ok := scan.ScaleUp(m, int(exp-t.priceExp)); ok {
			m, exp = m2, t.priceExp
		}
	}
	return d.cache.Get(m, exp), true
}

func (d *Decoder) size(b []byte) (decimal.Decimal, bool) {
	m, frac, _, st := scan.Coef(b)
	if st != scan.OK {
		return slowDecimal(b)
	}
	return d.cache.Get(m, -int32(frac)), true
}

// slowDecimal parses what scan.Coef does not take (venue.ParseDecimal).
func slowDecimal(b []byte) (decimal.Decimal, bool) { return venue.ParseDecimal(b) }

// parseTrades reads publicTrade data into d.trades, one event per trade in
// the venue's order. A frame with any bad trade emits none of them.
func (d *Decoder) parseTrades(s *scan.Scanner, t *topic) errText {
	d.trades = d.trades[:0]
	more := s.Array()
	if s.Failed() {
		return "publicTrade data is not an array"
	}
	var why errText
	for ; more; more = s.More(']') {
		var id, side, price, size []byte
		var ts int64
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "i":
				id = s.Str()
			case "T":
				ts = s.IntOrString()
			case "p":
				price = s.Str()
			case "v":
				size = s.Str()
			case "S":
				side = s.Str()
			default:
				s.Skip()
			}
		}
		if s.Failed() {
			break
		}
		p, ok1 := d.size(price)
		z, ok2 := d.size(size)
		if !ok1 || !ok2 || p.Sign() <= 0 || z.Sign() <= 0 || len(id) == 0 {
			why = "trade without a positive price and size and an id"
		}
		if why != "" {
			continue
		}
		ev := &venue.Event{Kind: venue.KindTrade, Stream: t.trades, Price: p, Size: z, TradeID: string(id)}
		switch string(side) {
		case "Buy":
			ev.Side = venue.SideBuy
		case "Sell":
			ev.Side = venue.SideSell
		}
		if ts > 0 {
			ev.VenueTime = time.UnixMilli(ts)
		}
		d.trades = append(d.trades, ev)
	}
	if s.Failed() {
		return "publicTrade data does not parse"
	}
	return why
}

// badFrame counts a frame that does not parse or makes an impossible book,
// reports it once per burst, and resyncs the book it concerns.
func (d *Decoder) badFrame(recv time.Time, t *topic, why string, frame []byte) {
	var stream venue.Stream
	if t != nil {
		stream = t.streamName()
	}
	if d.bad.Report(d.sink, Name, recv, stream, why, frame) {
		d.log.Warn("bad frame", "reason", why, "stream", stream, "bad_frames", d.bad.Count())
	}
	if t != nil && t.kind == topicBook && t.valid {
		d.resyncBook(recv, t, "bad_frame", map[string]any{"topic": t.name, "last_u": t.lastU, "cause": why})
	}
}

func (t *topic) streamName() venue.Stream {
	switch {
	case t.l2 != "":
		return t.l2
	case t.ticker != "":
		return t.ticker
	}
	return t.trades
}

// resyncBook marks t's book invalid, says so, and asks for a new snapshot.
// Nothing more is published for the book until that snapshot arrives.
func (d *Decoder) resyncBook(recv time.Time, t *topic, reason string, details map[string]any) {
	t.valid = false
	details["reason"] = reason
	if t.l2 != "" {
		d.sink.Notice(notice.Must(notice.BookResync, Name, string(t.l2), recv,
			"bybit: "+t.name+" book is being rebuilt: "+reason, details))
	} else {
		d.log.Info("ticker book resync", "topic", t.name, "reason", reason)
	}
	d.askResync(recv, t)
}

func (d *Decoder) askResync(recv time.Time, t *topic) {
	t.resyncAt = recv
	if t.resyncAt.IsZero() { // a zero receive time (a test) still counts as asked
		t.resyncAt = time.Unix(0, 1)
	}
	if d.resync != nil {
		d.resync(t.name)
	}
}
