package okx

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

// Name is the venue's name in streams and notices.
const Name = "okx"

const (
	// resyncRetry is how long a book may wait for the snapshot its resync
	// asked for before the decoder asks again (only while frames for the
	// instrument keep arriving, so a silent venue is left to the link's
	// own deadline).
	resyncRetry = 10 * time.Second
	// maxInsts bounds the instruments a decoder keeps state for, so a
	// stream of made-up instIds cannot grow memory without bound. OKX
	// lists a few thousand instruments in all.
	maxInsts = 20000
)

// Decoder turns OKX v5 public frames into events and notices: it keeps a
// book per instrument, checks the seqId chain and, where OKX still sends
// one, the checksum, and marks a book invalid (and asks for a resync
// through the adapter) when either fails. The live Adapter drives one from
// its websocket; replay drives one from a capture. Not safe for concurrent
// use. The zero Decoder is not usable; call NewDecoder.
type Decoder struct {
	sink *venue.CoverageSink
	log  *slog.Logger

	insts map[string]*inst
	last  *inst               // the instrument of the last push (in insts; never removed)
	cache *venue.DecimalCache // sizes, shared by every book

	// scratch, reused for every frame
	bids, asks []rawLevel
	ev         venue.Event        // the book update, reused (venue.Sink)
	fixed      []venue.FixedLevel // its levels, and a snapshot's
	text       []venue.LevelText  // a snapshot's level texts

	badFrames  venue.BadFrames // frames that did not parse or made an impossible book; one notice per burst
	resyncs    uint64
	checksums  uint64 // checksums verified
	keepalives uint64 // no-change updates (seqId == prevSeqId) skipped

	// Set by the Adapter; nil when a capture drives the decoder.
	hooks hooks
}

// hooks is how the decoder reaches the live link. Each is called on the
// goroutine that calls Frame.
type hooks struct {
	resync  func(instID string)              // unsubscribe and resubscribe the book
	ack     func(op, channel, instID string) // a subscribe or unsubscribe ack
	refused func(channel, instID string)     // an error naming an instrument
	forced  func(code, msg string)           // a forced-disconnect notice (64008)
	data    func()                           // any data push arrived
	limited func()                           // a rate-limit error (it names no request)
	whole   func(instID string)              // a snapshot made the book whole
}

// inst is the decoder's state for one instrument.
type inst struct {
	id                 string
	l2, trades, ticker venue.Stream
	book               venue.Book
	scale              int32    // most price decimals since the snapshot (see scaleFor)
	sum                checksum // the book's, while OKX sends checksums
	valid              bool     // book holds a snapshot and every update since
	resyncing          bool     // a resync was asked for and no snapshot came yet
	resyncAt           time.Time
	haveSeq            bool  // lastSeq holds the seqId of the last frame applied
	lastSeq            int64 // seqId of the last frame applied
	snapFails          int   // snapshots in a row that failed their checks
	checked            bool  // the book's frames carry checksums
}

// rawLevel is a level as read from a frame, before it touches the book.
type rawLevel struct {
	px, sz []byte
	pm, sm int64 // price and size mantissas
	pf, sf int32 // their decimals
	bigSz  bool  // size longer than an int64: szDec holds it
	szDec  decimal.Decimal
}

// NewDecoder returns a decoder that emits to cfg.Sink and logs to
// cfg.Logger. It keeps no link: a gap or a bad checksum marks the book
// invalid and the decoder waits for the next snapshot in its input.
func NewDecoder(cfg venue.Config) *Decoder {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Decoder{sink: venue.NewCoverageSink(Name, cfg.Sink), log: log.With("venue", Name), insts: make(map[string]*inst), cache: new(venue.DecimalCache)}
}

var _ venue.Decoder = (*Decoder)(nil)

// Stats are the decoder's counters.
type Stats struct {
	BadFrames  uint64 // frames that did not parse or made an impossible book
	Resyncs    uint64 // books marked invalid (gap, checksum, bad frame)
	Checksums  uint64 // checksums verified
	Keepalives uint64 // no-change updates skipped
}

// Stats returns the counters so far.
func (d *Decoder) Stats() Stats {
	return Stats{BadFrames: d.badFrames.Count(), Resyncs: d.resyncs, Checksums: d.checksums, Keepalives: d.keepalives}
}

func (d *Decoder) inst(id []byte) *inst {
	if in := d.insts[string(id)]; in != nil {
		return in
	}
	s := string(id)
	in := &inst{
		id:     s,
		l2:     venue.NewStream(Name, venue.Level2, s),
		trades: venue.NewStream(Name, venue.Trades, s),
		ticker: venue.NewStream(Name, venue.Ticker, s),
	}
	d.insts[s] = in
	return in
}

// LinkDown marks every book invalid: the link that fed them is gone, and
// only a new snapshot makes them whole again.
func (d *Decoder) LinkDown(t time.Time) {
	d.sink.LinkDown(t)
	for _, in := range d.insts {
		in.valid, in.resyncing, in.haveSeq = false, false, false
	}
}

// channel kinds the decoder understands
type chanKind uint8

const (
	chanOther   chanKind = iota
	chanBooks            // books, books-l2-tbt, books50-l2-tbt: snapshot + updates
	chanTrades           // trades, trades-all
	chanTickers          // tickers
	chanBBO              // bbo-tbt: one level per side, each push whole
)

func kindOfChannel(ch []byte) chanKind {
	switch string(ch) {
	case "books", "books-l2-tbt", "books50-l2-tbt":
		return chanBooks
	case "trades", "trades-all":
		return chanTrades
	case "tickers":
		return chanTickers
	case "bbo-tbt":
		return chanBBO
	}
	return chanOther
}

// frame is what the top level of a frame said.
type frame struct {
	event, code, msg []byte
	channel, instID  []byte
	action           []byte
	hasArg           bool
}

// Frame decodes one frame. Text "pong" (the answer to the adapter's
// keepalive) is accepted and ignored.
func (d *Decoder) Frame(recv time.Time, b []byte) {
	if len(b) > 0 && (b[0] <= ' ' || b[len(b)-1] <= ' ') {
		b = bytes.TrimSpace(b)
	}
	if string(b) == "pong" {
		return
	}
	s := scan.New(b)
	var f frame
	if s.Peek() != '{' {
		d.bad(recv, nil, "not a JSON object", b)
		return
	}
	var data []byte // the data value, when it came before arg and action
	inPlace := false
	more := false
	if head(&s, &f) {
		more = s.More('}')
	} else {
		more = s.Object()
	}
	for ; more; more = s.More('}') {
		k := s.Key()
		if s.Failed() {
			d.bad(recv, nil, "bad key", b)
			return
		}
		switch string(k) {
		case "arg":
			if !d.arg(&s, &f) {
				d.bad(recv, nil, "bad arg", b)
				return
			}
		case "event":
			f.event = s.Str()
		case "action":
			f.action = s.Str()
		case "code":
			f.code = s.Str()
		case "msg":
			f.msg = s.Str()
		case "data":
			if f.hasArg && (f.action != nil || kindOfChannel(f.channel) != chanBooks) {
				// The usual order (arg, action, data): decode in place.
				if !d.data(recv, &s, &f, b) {
					return
				}
				inPlace = true
			} else {
				data = s.Raw()
			}
		default:
			s.Skip()
		}
		if s.Failed() {
			d.bad(recv, d.maybeInst(&f), "bad value for "+string(k), b)
			return
		}
	}
	if s.Failed() {
		d.bad(recv, d.maybeInst(&f), "unterminated object", b)
		return
	}
	if !s.End() {
		d.bad(recv, d.maybeInst(&f), "trailing bytes", b)
		return
	}
	switch {
	case f.event != nil:
		d.event(recv, &f, b)
	case data != nil:
		if !f.hasArg {
			d.bad(recv, nil, "data without arg", b)
			return
		}
		ds := scan.New(data)
		d.data(recv, &ds, &f, b)
	case inPlace:
	default:
		d.bad(recv, d.maybeInst(&f), "neither event nor data", b)
	}
}

// head reads the start every push of OKX's is written with,
// {"arg":{"channel":C,"instId":I},"action":A, into f as the member loop of
// Frame and arg would, and leaves s after A; anything else leaves s as it
// was and reports false.
func head(s *scan.Scanner, f *frame) bool {
	t := *s
	if !t.Lit(`{"arg":{"channel":`) {
		return false
	}
	ch := t.Str()
	if !t.Lit(`,"instId":`) {
		return false
	}
	id := t.Str()
	if !t.Lit(`},"action":`) {
		return false
	}
	act := t.Str()
	if t.Failed() {
		return false
	}
	f.hasArg, f.channel, f.instID, f.action = true, ch, id, act
	*s = t
	return true
}

func (d *Decoder) maybeInst(f *frame) *inst {
	if !f.hasArg || len(f.instID) == 0 || kindOfChannel(f.channel) != chanBooks {
		return nil
	}
	return d.insts[string(f.instID)]
}

func (d *Decoder) arg(s *scan.Scanner, f *frame) bool {
	if s.Peek() != '{' {
		return false
	}
	f.hasArg = true
	for more := s.Object(); more; more = s.More('}') {
		switch string(s.Key()) {
		case "channel":
			f.channel = s.Str()
		case "instId":
			f.instID = s.Str()
		default:
			s.Skip()
		}
	}
	return !s.Failed()
}

// data decodes a push's data array; it reports false if it reported the
// frame bad.
func (d *Decoder) data(recv time.Time, s *scan.Scanner, f *frame, b []byte) bool {
	kind := kindOfChannel(f.channel)
	if kind == chanOther {
		if s.Skip(); s.Failed() {
			return d.bad(recv, nil, "bad data", b)
		}
		return true
	}
	if !venue.ValidSymbol(f.instID) {
		if kind != chanBooks {
			return d.badFrame(recv, "", "push without a valid instId", b)
		}
		return d.bad(recv, nil, "push without a valid instId", b)
	}
	in := d.last
	if in == nil || in.id != string(f.instID) { // frames mostly repeat an instrument
		in = d.insts[string(f.instID)]
	}
	if in == nil {
		if len(d.insts) >= maxInsts {
			return d.badFrame(recv, "", "too many instruments", b)
		}
		in = d.inst(f.instID)
	}
	d.last = in
	if d.hooks.data != nil {
		d.hooks.data()
	}
	bookIn := in
	if kind != chanBooks {
		bookIn = nil
	}
	if s.Peek() != '[' {
		return d.bad(recv, bookIn, "data is not an array", b)
	}
	for more := s.Array(); more; more = s.More(']') {
		var ok bool
		switch kind {
		case chanBooks:
			ok = d.bookData(recv, s, in, f.action, b)
		case chanTrades:
			ok = d.trade(recv, s, in, b)
		case chanTickers:
			ok = d.ticker(recv, s, in, b)
		case chanBBO:
			ok = d.bbo(recv, s, in, b)
		}
		if !ok {
			return false
		}
	}
	if s.Failed() {
		return d.bad(recv, bookIn, "unterminated data", b)
	}
	return true
}

// object walks one object of a push's data: field reads the value of each
// member. A bad object is reported with what naming it, against book (a
// resync) or, when book is nil, as a bad frame only; object then reports
// false.
func (d *Decoder) object(recv time.Time, s *scan.Scanner, what string, book *inst, b []byte, field func(k []byte)) bool {
	bad := func(why string) bool {
		if book != nil {
			return d.bad(recv, book, why, b)
		}
		return d.badFrame(recv, "", why, b)
	}
	if s.Peek() != '{' {
		return bad(what + " is not an object")
	}
	for more := s.Object(); more; more = s.More('}') {
		k := s.Key()
		if s.Failed() {
			return bad("bad key in " + what)
		}
		if field(k); s.Failed() {
			return bad("bad " + string(k) + " in " + what)
		}
	}
	if s.Failed() {
		return bad("unterminated " + what)
	}
	return true
}

// bookMsg is one element of a books push.
type bookMsg struct {
	bids, asks        []rawLevel
	ts, cs, prev, seq int64
	hasCS, hasSeq     bool
	hasPrev           bool
}

// levelsOrTime reads member k if it is one that books and bbo-tbt
// elements share (the levels and the time), and reports whether it was.
func (m *bookMsg) levelsOrTime(s *scan.Scanner, k []byte) bool {
	switch string(k) {
	case "asks":
		m.asks = parseLevels(s, m.asks)
	case "bids":
		m.bids = parseLevels(s, m.bids)
	case "ts":
		m.ts = s.IntOrString()
	default:
		return false
	}
	return true
}

func (d *Decoder) bookData(recv time.Time, s *scan.Scanner, in *inst, action []byte, b []byte) bool {
	var m bookMsg
	m.bids, m.asks = d.bids[:0], d.asks[:0]
	if !d.object(recv, s, "book data", in, b, func(k []byte) {
		if m.levelsOrTime(s, k) {
			return
		}
		switch string(k) {
		case "checksum":
			m.cs, m.hasCS = s.IntOrString(), true
		case "prevSeqId":
			m.prev, m.hasPrev = s.IntOrString(), true
		case "seqId":
			m.seq, m.hasSeq = s.IntOrString(), true
		default:
			s.Skip()
		}
	}) {
		return false
	}
	d.bids, d.asks = m.bids[:0], m.asks[:0] // keep grown scratch
	switch string(action) {
	case "snapshot":
		return d.snapshot(recv, in, &m, b)
	case "update":
		return d.update(recv, in, &m, b)
	}
	return d.bad(recv, in, "unknown action", b)
}

// parseLevels reads [[px, sz, ...], ...] into dst, checking every number;
// a bad one fails s.
func parseLevels(s *scan.Scanner, dst []rawLevel) []rawLevel {
	for more := s.Array(); more; more = s.More(']') {
		var l rawLevel
		pd, sd, ok := s.Level() // the compact form OKX writes
		if !ok {
			if pd, sd, ok = levelBySteps(s); !ok {
				return dst
			}
		}
		l.px, l.sz = pd.Text, sd.Text
		if l.pm, l.pf = pd.M, int32(pd.Frac); pd.St != scan.OK || pd.Neg || l.pm == 0 {
			s.Fail() // a price of more than 18 digits is not a price
			return dst
		}
		st := sd.St
		if sd.Neg {
			st = scan.Bad // OKX writes no sign
		}
		switch l.sm, l.sf = sd.M, int32(sd.Frac); st {
		case scan.Bad:
			s.Fail()
			return dst
		case scan.Big:
			var ok bool
			if l.szDec, ok = venue.ParseDecimal(l.sz); !ok {
				s.Fail()
				return dst
			}
			l.bigSz = true
		}
		dst = append(dst, l)
	}
	return dst
}

// levelBySteps reads a level [px, sz, ...] value by value, as Level does
// for the compact form; a malformed one fails s.
func levelBySteps(s *scan.Scanner) (pd, sd scan.Dec, ok bool) {
	s.Expect('[')
	pd = s.Decimal()
	s.Expect(',')
	sd = s.Decimal()
	for s.Eat(',') { // the deprecated "0" and the order count
		if s.Peek() == '"' {
			s.Str() // what Skip does with a string, without its container walk
		} else {
			s.Skip()
		}
	}
	return pd, sd, s.Expect(']')
}

func (l *rawLevel) zero() bool { return !l.bigSz && l.sm == 0 }

// text returns the text OKX wrote for l.
func (l *rawLevel) text() venue.LevelText { return venue.LevelText{Price: l.px, Size: l.sz} }

// set applies l, whose price is px at the book's scale, to side s of in's
// book, and records the change for the checksum.
func (in *inst) set(s venue.BookSide, px venue.Fixed, l *rawLevel) {
	if l.bigSz {
		if in.book.Set(s, px.Decimal(), l.szDec) {
			in.sum.touch(0) // the rank is not known: rebuild
		}
		return
	}
	ch := in.book.SetFixedText(s, px, venue.Fixed{M: l.sm, Scale: uint8(l.sf)}, l.text())
	in.sum.changed(&in.book, s, ch)
}

func (l *rawLevel) size(c *venue.DecimalCache) decimal.Decimal {
	switch {
	case l.bigSz:
		return l.szDec
	case l.sm == 0:
		return decimal.Decimal{}
	}
	return c.Get(l.sm, -l.sf)
}

// scaleFor returns the price scale that holds the book and m's levels, and
// whether every price fits an int64 at it (units of 10^-scale): OKX's
// prices do, and one that does not is refused as out of range.
func scaleFor(bk *venue.Book, base int32, m *bookMsg) (int32, bool) {
	sc := base
	for i := range m.bids {
		sc = max(sc, m.bids[i].pf)
	}
	for i := range m.asks {
		sc = max(sc, m.asks[i].pf)
	}
	if int(sc) > scan.MaxPow10 {
		return 0, false
	}
	for _, ls := range [2][]rawLevel{m.bids, m.asks} {
		for i := range ls {
			if _, ok := scan.ScaleUp(ls[i].pm, int(sc-ls[i].pf)); !ok {
				return 0, false
			}
		}
	}
	// At the book's own scale (base) its prices fit: each was set at it.
	return sc, bk == nil || sc == base || fits(bk, sc)
}

// fits reports whether every price of bk fits an int64 at scale sc.
func fits(bk *venue.Book, sc int32) bool {
	for _, at := range [2][2]int{{int(venue.Bid), 0}, {int(venue.Ask), bk.Len(venue.Ask) - 1}} {
		s := venue.BookSide(at[0])
		if bk.Len(s) == 0 {
			continue
		}
		l, ok := bk.LevelFixed(s, at[1]) // the highest price of the side
		if !ok {
			l.Price, ok = venue.FixedOf(bk.Level(s, at[1]).Price)
		}
		if _, ok2 := scan.ScaleUp(l.Price.M, int(sc)-int(l.Price.Scale)); !ok || !ok2 {
			return false
		}
	}
	return true
}

// price returns a price of mantissa pm and pf decimals at scale sc, which
// scaleFor checked it fits.
func price(pm int64, pf, sc int32) venue.Fixed {
	key, _ := scan.ScaleUp(pm, int(sc-pf))
	return venue.Fixed{M: key, Scale: uint8(sc)}
}

func (d *Decoder) snapshot(recv time.Time, in *inst, m *bookMsg, b []byte) bool {
	// A snapshot answers any resync asked for: if it fails its own checks,
	// that is a new failure to report.
	in.resyncing = false
	sc, ok := scaleFor(nil, 0, m)
	if !ok {
		in.snapFails++
		return d.bad(recv, in, "price out of range", b)
	}
	bk := &in.book
	bk.Reset()
	bk.KeepText(m.hasCS && m.cs != 0)
	in.scale = sc
	in.sum.reset()
	d.fill(in, m)
	if bk.Crossed() {
		in.snapFails++
		d.bad(recv, in, "crossed snapshot", b)
		return true
	}
	if m.hasCS && m.cs != 0 {
		in.snapFails++ // undone below if it verifies
		if !d.verify(recv, in, m) {
			return true
		}
	}
	in.valid, in.resyncing, in.snapFails = true, false, 0
	in.haveSeq, in.lastSeq = m.hasSeq, m.seq
	in.checked = m.hasCS && m.cs != 0
	if d.hooks.whole != nil {
		d.hooks.whole(in.id)
	}
	ev := bk.SnapshotFixed(in.l2)
	ev.RecvTime, ev.VenueTime, ev.VenueSeq = recv, msTime(m.ts), m.seq
	d.emit(ev, recv)
	return true
}

// fill makes m's levels (a snapshot's, in any order, zero sizes ignored)
// in's whole book, keeping their text if the book keeps text.
func (d *Decoder) fill(in *inst, m *bookMsg) {
	lv, txt := d.fixed[:0], d.text[:0]
	nb := 0
	for s, ls := range [2][]rawLevel{m.bids, m.asks} {
		for i := range ls {
			l := &ls[i]
			if l.bigSz { // a size too long for fixed point: level by level
				d.setEach(in, m)
				return
			}
			if !l.zero() {
				lv = append(lv, venue.FixedLevel{Price: price(l.pm, l.pf, in.scale), Size: venue.Fixed{M: l.sm, Scale: uint8(l.sf)}})
				txt = append(txt, l.text())
			}
		}
		if s == 0 {
			nb = len(lv)
		}
	}
	in.book.ReplaceFixedText(lv[:nb], lv[nb:], txt[:nb], txt[nb:])
	d.fixed, d.text = lv, txt
}

// setEach sets each non-zero level of m in in's book.
func (d *Decoder) setEach(in *inst, m *bookMsg) {
	for s, ls := range [2][]rawLevel{m.bids, m.asks} {
		for i := range ls {
			if l := &ls[i]; !l.zero() {
				in.set(venue.BookSide(s), price(l.pm, l.pf, in.scale), l)
			}
		}
	}
}

func (d *Decoder) update(recv time.Time, in *inst, m *bookMsg, b []byte) bool {
	if !in.valid {
		// Waiting for a snapshot: updates cannot be applied. Ask again if
		// the resync seems lost.
		if in.resyncing && recv.Sub(in.resyncAt) >= retryAfter(in.snapFails) && d.hooks.resync != nil {
			in.resyncAt = recv
			d.hooks.resync(in.id)
		}
		return true
	}
	if m.hasSeq && m.hasPrev {
		if in.haveSeq && m.prev != in.lastSeq {
			d.invalidate(recv, in, "gap", map[string]any{
				"last_seq_id": in.lastSeq, "prev_seq_id": m.prev, "seq_id": m.seq,
			})
			return true
		}
		if m.seq == m.prev {
			// No change for a while: OKX's keepalive. Not applied, not a gap.
			d.keepalives++
			in.haveSeq, in.lastSeq = true, m.seq
			return true
		}
		// m.seq < m.prev is OKX's reset after maintenance: legal.
	}
	bk := &in.book
	sc, ok := scaleFor(bk, in.scale, m)
	if !ok {
		return d.bad(recv, in, "price out of range", b)
	}
	in.scale = sc
	// The event and its levels are reused for every frame: a sink has them
	// only during the call (venue.Sink), so the book path allocates nothing.
	lv, fixed := d.fixed[:0], true
	for i := range m.bids {
		lv = append(lv, in.apply(venue.Bid, &m.bids[i]))
		fixed = fixed && !m.bids[i].bigSz
	}
	for i := range m.asks {
		lv = append(lv, in.apply(venue.Ask, &m.asks[i]))
		fixed = fixed && !m.asks[i].bigSz
	}
	d.fixed = lv
	if bk.Crossed() {
		d.bad(recv, in, "update crossed the book", b)
		return true
	}
	if m.hasCS && m.cs != 0 && !d.verify(recv, in, m) {
		return true
	}
	if m.hasSeq {
		in.haveSeq, in.lastSeq = true, m.seq
	}
	nb := len(m.bids)
	d.ev = venue.Event{
		Kind: venue.KindBook, Stream: in.l2, RecvTime: recv, VenueTime: msTime(m.ts),
		VenueSeq: m.seq, FixedBids: lv[:nb:nb], FixedAsks: lv[nb:],
	}
	if !fixed { // a size too long for fixed point: decimals
		d.ev.FixedBids, d.ev.FixedAsks = nil, nil
		d.ev.Bids, d.ev.Asks = d.decimalLevels(in.scale, m.bids), d.decimalLevels(in.scale, m.asks)
	}
	d.emit(&d.ev, recv)
	return true
}

// decimalLevels returns ls as venue levels at price scale sc.
func (d *Decoder) decimalLevels(sc int32, ls []rawLevel) []venue.Level {
	out := make([]venue.Level, len(ls))
	for i := range ls {
		out[i] = venue.Level{Price: price(ls[i].pm, ls[i].pf, sc).Decimal(), Size: ls[i].size(d.cache)}
	}
	return out
}

// apply applies l to side s of in's book and returns it in fixed point at
// the book's price scale (a big size as 0: the caller then uses
// decimalLevels).
func (in *inst) apply(s venue.BookSide, l *rawLevel) venue.FixedLevel {
	px := price(l.pm, l.pf, in.scale) // scaleFor checked it fits
	in.set(s, px, l)
	if l.bigSz {
		return venue.FixedLevel{Price: px}
	}
	return venue.FixedLevel{Price: px, Size: venue.Fixed{M: l.sm, Scale: uint8(l.sf)}}
}

// verify checks m's checksum against the book; on a mismatch it
// invalidates the book and reports false.
func (d *Decoder) verify(recv time.Time, in *inst, m *bookMsg) bool {
	got := in.sum.compute(&in.book)
	if int64(got) == m.cs {
		d.checksums++
		return true
	}
	det := map[string]any{"checksum": m.cs, "computed": int64(got)}
	if m.hasSeq {
		det["seq_id"], det["prev_seq_id"] = m.seq, m.prev
	}
	d.invalidate(recv, in, "checksum", det)
	return false
}

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func (d *Decoder) emit(ev *venue.Event, recv time.Time) {
	d.sink.Event(ev)
}

// Coverage returns the tracker the decoder records observed streams in.
func (d *Decoder) Coverage() *venue.CoverageTracker { return d.sink.Tracker }

// forget drops instID's streams from coverage (after an unsubscribe).
func (d *Decoder) forget(instID string, t time.Time) {
	d.sink.Forget(t, venue.NewStream(Name, venue.Level2, instID), venue.NewStream(Name, venue.Trades, instID),
		venue.NewStream(Name, venue.Ticker, instID))
}

// invalidate marks in's book wrong, tells the sink, and asks the link for
// a fresh snapshot. A book already waiting for one is left alone.
func (d *Decoder) invalidate(recv time.Time, in *inst, reason string, det map[string]any) {
	if !in.valid && in.resyncing {
		return
	}
	in.valid, in.resyncing, in.resyncAt, in.haveSeq = false, true, recv, false
	d.resyncs++
	if det == nil {
		det = map[string]any{}
	}
	det["reason"] = reason
	d.sink.Notice(notice.Must(notice.BookResync, Name, string(in.l2), recv,
		"book "+in.id+" is invalid ("+reason+"); resubscribing for a new snapshot", det))
	// After a snapshot that itself failed, the next request waits for the
	// retry path (doubling from resyncRetry), so a venue that keeps sending
	// bad snapshots does not get a resubscribe loop (OKX allows 480
	// subscribe operations an hour).
	if d.hooks.resync != nil && in.snapFails <= 1 {
		d.hooks.resync(in.id)
	}
}

// retryAfter is how long a resync may go unanswered before it is asked
// again, after fails bad snapshots in a row.
func retryAfter(fails int) time.Duration {
	return resyncRetry << min(max(fails-1, 0), 5)
}

// bad counts a frame that did not parse or made an impossible book,
// reports it once per burst, and resyncs the book it concerns.
// When it cannot tell which, it resyncs only the valid books that could not
// notice the loss themselves: a book with a seqId chain or checksums finds
// a lost frame of its own at its next update. It always returns false, so
// callers can return it.
func (d *Decoder) bad(recv time.Time, in *inst, why string, b []byte) bool {
	if in != nil {
		d.badFrame(recv, in.l2, why, b)
		d.invalidate(recv, in, "bad_frame", map[string]any{"error": why})
		return false
	}
	d.badFrame(recv, "", why, b)
	// In instrument order, so that a capture replays to the same notices.
	for _, id := range slices.Sorted(maps.Keys(d.insts)) {
		if in := d.insts[id]; in.valid && !in.haveSeq && !in.checked {
			d.invalidate(recv, in, "bad_frame", map[string]any{"error": why})
		}
	}
	return false
}

// badFrame counts and reports a bad frame that concerns no book (a trade
// or ticker push): nothing needs a resync.
func (d *Decoder) badFrame(recv time.Time, stream venue.Stream, why string, b []byte) bool {
	d.badFrames.Report(d.sink, Name, recv, stream, why, b)
	return false
}
