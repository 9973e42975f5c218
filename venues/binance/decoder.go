package binance

import (
	"log/slog"
	"strings"
	"time"

	"github.com/fanoutd/fanoutd/internal/scan"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Name is the venue's name in streams and notices.
const Name = "binance"

// Book sync states of one symbol.
type syncState uint8

const (
	// stateWaiting: no valid book. Depth events are buffered until a
	// snapshot arrives that they bridge to.
	stateWaiting syncState = iota + 1
	// stateSynced: the book is valid and published; each event must chain.
	stateSynced
)

// maxBuffered bounds the depth events held while a book waits for its
// snapshot (100 s of a 100 ms stream). Past it the oldest are dropped; if
// that leaves the snapshot unbridgeable the decoder asks for another.
const maxBuffered = 1000

// pending is a depth event buffered while its book waits for a snapshot.
type pending struct {
	first, last int64 // U and u
	at          time.Time
	levels      []lvl
	nbids       int
}

// symbol is the decoder's state for one symbol: its streams and its book.
type symbol struct {
	name                   string // as Binance writes it: BTCUSDT
	l2, trades, ticker     venue.Stream
	state                  syncState
	book                   venue.Book
	lastU                  int64 // u of the last event applied, or the snapshot's lastUpdateId
	straddle               bool  // synced from a snapshot; the next event must straddle lastU+1
	requested              bool  // a snapshot was asked for and has not arrived
	buf                    []pending
	stale, gaps, snapshots uint64
}

// hooks are what the live adapter plugs into its decoder; a decoder for
// replay leaves them nil, and then a book that needs a snapshot waits for the
// next generated snapshot frame in the capture.
type hooks struct {
	// fetch asks for a REST snapshot of the symbol (lower case, as in stream
	// names). It must not block: it is called while a frame is decoded.
	fetch func(lower string)
	// response reports a reply to a SUBSCRIBE or UNSUBSCRIBE request: code
	// 0 is success, otherwise Binance's error code and message. id is -1
	// when the reply's id is not an integer.
	response func(id int64, code int64, msg string)
	// shutdown reports a serverShutdown event.
	shutdown func()
	// resync reports that a book started a resync.
	resync func()
}

// Decoder turns Binance frames into events and notices: combined-stream
// frames ({"stream":…,"data":…}) and raw ones, the replies to live
// SUBSCRIBE requests, serverShutdown, and the generated REST snapshot frame
// {"stream":"<sym>@depthSnapshot","generated":true,"data":<REST body>} the
// adapter records. It keeps each symbol's book by the official bridge
// procedure (see the package doc). It does no I/O.
//
// A Decoder is not safe for concurrent use (venue.Decoder).
type Decoder struct {
	sink  *venue.CoverageSink
	log   *slog.Logger
	hooks hooks

	names map[string]string  // lower-case symbol → as configured
	syms  map[string]*symbol // keyed by lower-case symbol, as in stream names

	bids, asks []lvl // scratch for the frame being decoded
	ev         venue.Event
	fixed      []venue.FixedLevel // ev's levels, reused (venue.Sink)

	badFrames venue.BadFrames // frames that did not parse or were impossible; one notice per burst
}

var _ venue.Decoder = (*Decoder)(nil)

// NewDecoder returns a decoder that writes to cfg.Sink. cfg.Symbols, if
// set, give the spelling of each symbol in stream names; others are
// spelled as the frames spell them (upper case).
func NewDecoder(cfg venue.Config) *Decoder {
	d := &Decoder{
		sink:  venue.NewCoverageSink(Name, cfg.Sink),
		log:   cfg.Logger,
		names: map[string]string{},
		syms:  map[string]*symbol{},
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	for _, s := range cfg.Symbols {
		d.names[strings.ToLower(s)] = s
	}
	return d
}

// BadFrames returns how many frames did not parse or were impossible.
func (d *Decoder) BadFrames() uint64 { return d.badFrames.Count() }

// symbolFor returns the state for a lower-case symbol, creating it. name is
// the venue's spelling if the frame carried one.
func (d *Decoder) symbolFor(lower []byte, name []byte) *symbol {
	if s := d.syms[string(lower)]; s != nil {
		return s
	}
	l := string(lower)
	n := d.names[l]
	if n == "" {
		if len(name) > 0 {
			n = string(name)
		} else {
			n = strings.ToUpper(l)
		}
	}
	s := &symbol{
		name:   n,
		l2:     venue.NewStream(Name, venue.Level2, n),
		trades: venue.NewStream(Name, venue.Trades, n),
		ticker: venue.NewStream(Name, venue.Ticker, n),
		state:  stateWaiting,
	}
	d.syms[l] = s
	return s
}

// Forget drops the state of a symbol (after an unsubscribe).
func (d *Decoder) Forget(symbol string) { delete(d.syms, strings.ToLower(symbol)) }

// Coverage returns the tracker the decoder records observed streams in.
func (d *Decoder) Coverage() *venue.CoverageTracker { return d.sink.Tracker }

// Want marks a symbol's book as wanted: if it has no valid book and no
// snapshot is on its way, the decoder asks for one (through the fetch hook).
// The adapter calls it once a depth subscription is acknowledged.
func (d *Decoder) Want(symbol string) {
	lower := strings.ToLower(symbol)
	s := d.symbolFor([]byte(lower), nil)
	if s.state != stateSynced {
		d.request(lower, s)
	}
}

func (d *Decoder) request(lower string, s *symbol) {
	if s.requested || d.hooks.fetch == nil {
		return
	}
	s.requested = true
	d.hooks.fetch(lower)
}

// LinkDown implements venue.Decoder: every book waits for a new snapshot,
// and nothing buffered survives (the new link's events start afresh).
func (d *Decoder) LinkDown(t time.Time) {
	d.sink.LinkDown(t)
	for _, s := range d.syms {
		s.reset()
		s.requested = false
	}
}

func (s *symbol) reset() {
	s.state = stateWaiting
	s.book.Reset()
	s.buf = s.buf[:0]
	s.straddle = false
	s.lastU = 0
}

// Frame implements venue.Decoder.
func (d *Decoder) Frame(recv time.Time, frame []byte) {
	sc := scan.New(frame)
	var (
		stream, evType, symName []byte
		data                    []byte // the payload, when it came before "stream"
		inPlace                 bool   // the payload was decoded in place
		id                      int64  = -1
		hasID, hasResult        bool
		errCode                 int64
		errMsg                  []byte
		hasErr, hasU            bool
	)
	more := sc.Object()
	if !more {
		d.bad(recv, "not a JSON object", frame, nil)
		return
	}
	for ; more; more = sc.More('}') {
		switch string(sc.Key()) {
		case "stream":
			stream = sc.Str()
		case "data":
			if stream != nil {
				// Binance writes "stream" first: decode in place.
				d.payload(recv, stream, &sc, frame)
				if sc.Failed() {
					return
				}
				inPlace = true
			} else {
				data = sc.Raw()
			}
		case "id":
			hasID = true
			if c := sc.Peek(); c == '-' || c >= '0' && c <= '9' {
				id = sc.Int()
			} else {
				sc.Skip()
			}
		case "result":
			hasResult = true
			sc.Skip()
		case "error":
			hasErr = true
			errCode, errMsg = d.errorObject(&sc)
		case "e":
			if sc.Peek() == '"' {
				evType = sc.Str()
			} else {
				sc.Skip()
			}
		case "s":
			if sc.Peek() == '"' {
				symName = sc.Str()
			} else {
				sc.Skip()
			}
		case "u":
			hasU = true
			sc.Skip()
		default:
			sc.Skip()
		}
	}
	if !sc.End() {
		d.bad(recv, "malformed JSON", frame, d.symbolOfStream(stream))
		return
	}
	switch {
	case inPlace:
		return
	case data != nil && stream != nil:
		ds := scan.New(data)
		d.payload(recv, stream, &ds, frame)
	case hasID && (hasResult || hasErr):
		if d.hooks.response != nil {
			if hasErr && errCode == 0 {
				errCode = -1
			}
			d.hooks.response(id, errCode, string(errMsg))
		}
	case evType != nil || hasU && symName != nil:
		// A raw stream (/ws/…): the frame is the payload.
		var lower []byte
		if symName != nil {
			lower = []byte(strings.ToLower(string(symName)))
		}
		kind := "bookTicker"
		switch string(evType) {
		case "depthUpdate":
			kind = "depth"
		case "trade":
			kind = "trade"
		case "serverShutdown":
			kind = "serverShutdown"
		case "":
		default:
			return // an event we did not subscribe to
		}
		ds := scan.New(frame)
		d.payloadKind(recv, kind, lower, &ds, frame)
	default:
		d.bad(recv, "unknown frame", frame, nil)
	}
}

// errorObject reads {"code":N,"msg":"…"}.
func (d *Decoder) errorObject(sc *scan.Scanner) (code int64, msg []byte) {
	if sc.Peek() != '{' {
		sc.Skip()
		return -1, nil
	}
	more := sc.Object()
	if !more {
		return -1, nil
	}
	for ; more; more = sc.More('}') {
		switch string(sc.Key()) {
		case "code":
			code = sc.Int()
		case "msg":
			msg = sc.Str()
		default:
			sc.Skip()
		}
	}
	return code, msg
}

// symbolOfStream returns the known symbol a stream name refers to, if any.
func (d *Decoder) symbolOfStream(stream []byte) *symbol {
	if stream == nil {
		return nil
	}
	i := indexByte(stream, '@')
	if i <= 0 {
		return nil
	}
	return d.syms[string(stream[:i])]
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// payload decodes the data of a combined-stream frame named stream, with sc
// positioned at it.
func (d *Decoder) payload(recv time.Time, stream []byte, sc *scan.Scanner, frame []byte) {
	if string(stream) == "!serverShutdown" {
		d.payloadKind(recv, "serverShutdown", nil, sc, frame)
		return
	}
	i := indexByte(stream, '@')
	if i <= 0 {
		sc.Skip()
		d.bad(recv, "stream name without @", frame, nil)
		return
	}
	lower, kind := stream[:i], stream[i+1:]
	switch string(kind) {
	case "depth@100ms", "depth":
		d.payloadKind(recv, "depth", lower, sc, frame)
	case "depthSnapshot":
		d.payloadKind(recv, "depthSnapshot", lower, sc, frame)
	case "trade":
		d.payloadKind(recv, "trade", lower, sc, frame)
	case "bookTicker":
		d.payloadKind(recv, "bookTicker", lower, sc, frame)
	default:
		sc.Skip() // a stream we do not decode (aggTrade, kline…)
	}
}

func (d *Decoder) payloadKind(recv time.Time, kind string, lower []byte, sc *scan.Scanner, frame []byte) {
	if kind == "serverShutdown" {
		sc.Skip()
		if !sc.Failed() && d.hooks.shutdown != nil {
			d.hooks.shutdown()
		}
		return
	}
	if len(lower) == 0 || len(lower) > 64 {
		sc.Skip()
		d.bad(recv, "frame without a symbol", frame, nil)
		return
	}
	switch kind {
	case "depth":
		d.depth(recv, lower, sc, frame)
	case "depthSnapshot":
		d.snapshot(recv, lower, sc, frame)
	case "trade":
		d.trade(recv, lower, sc, frame)
	case "bookTicker":
		d.bookTicker(recv, lower, sc, frame)
	}
}

// bad counts a bad frame, reports the first of a burst as a data_quality
// notice, and resyncs the book the frame belonged to, if known.
func (d *Decoder) bad(recv time.Time, why string, frame []byte, s *symbol) {
	var stream venue.Stream
	if s != nil {
		stream = s.l2
	}
	d.badFrames.Report(d.sink, Name, recv, stream, why, frame)
	if s != nil && s.state == stateSynced {
		d.resync(recv, s, "bad_frame", map[string]any{"last_u": s.lastU})
	}
}

// resync invalidates a published book, says so, and asks for a snapshot.
func (d *Decoder) resync(recv time.Time, s *symbol, reason string, details map[string]any) {
	s.reset()
	details["reason"] = reason
	d.sink.Notice(notice.Must(notice.BookResync, Name, string(s.l2), recv,
		"binance: "+s.name+" book resync: "+reason, details))
	if d.hooks.resync != nil {
		d.hooks.resync()
	}
	d.request(strings.ToLower(s.name), s)
}

// eventType reads a payload's event type ("e"), failing sc unless it is
// want.
func eventType(sc *scan.Scanner, want string) {
	if string(sc.Str()) != want {
		sc.Fail()
	}
}

// depthUpdate fields, parsed from one frame.
type depthUpdate struct {
	first, last int64 // U and u
	at          time.Time
	name        []byte
}

func (d *Decoder) parseDepth(sc *scan.Scanner) (du depthUpdate, ok bool) {
	d.bids, d.asks = d.bids[:0], d.asks[:0]
	var haveU, haveu, haveB, haveA bool
	for more := sc.Object(); more; more = sc.More('}') {
		switch string(sc.Key()) {
		case "e":
			eventType(sc, "depthUpdate")
		case "E":
			du.at = time.UnixMilli(sc.Int())
		case "s":
			du.name = sc.Str()
		case "U":
			du.first, haveU = sc.Int(), true
		case "u":
			du.last, haveu = sc.Int(), true
		case "b":
			d.bids, haveB = levels(sc, d.bids), true
		case "a":
			d.asks, haveA = levels(sc, d.asks), true
		default:
			sc.Skip()
		}
	}
	ok = !sc.Failed() && haveU && haveu && haveB && haveA && du.first > 0 && du.first <= du.last
	return du, ok
}

func (d *Decoder) depth(recv time.Time, lower []byte, sc *scan.Scanner, frame []byte) {
	du, ok := d.parseDepth(sc)
	if !ok {
		sc.Fail()
		d.bad(recv, "bad depthUpdate", frame, d.syms[string(lower)])
		return
	}
	s := d.symbolFor(lower, du.name)
	switch s.state {
	case stateWaiting:
		d.buffer(s, du)
		d.request(string(lower), s)
		return
	case stateSynced:
	}
	if du.last <= s.lastU {
		s.stale++ // older than the book: ignored, as the procedure says
		return
	}
	want := s.lastU + 1
	if s.straddle && du.first > want || !s.straddle && du.first != want {
		s.gaps++
		d.resync(recv, s, "gap", map[string]any{"last_u": s.lastU, "U": du.first, "u": du.last, "straddle": s.straddle})
		d.buffer(s, du) // newer than anything: it may bridge the next snapshot
		return
	}
	setAll(&s.book, venue.Bid, d.bids)
	setAll(&s.book, venue.Ask, d.asks)
	if s.book.Crossed() {
		d.bad(recv, "crossed book after update", frame, s)
		return
	}
	s.lastU, s.straddle = du.last, false
	// The event and its levels are reused for every frame: a sink has them
	// only during the call (venue.Sink), so the book path allocates nothing.
	d.ev = venue.Event{
		Kind:      venue.KindBook,
		Stream:    s.l2,
		VenueTime: du.at,
		RecvTime:  recv,
		VenueSeq:  du.last,
	}
	fixed, ok := d.fixed[:0], true
	for i := range d.bids {
		fixed, ok = append(fixed, d.bids[i].FixedLevel), ok && !d.bids[i].isBig
	}
	n := len(fixed)
	for i := range d.asks {
		fixed, ok = append(fixed, d.asks[i].FixedLevel), ok && !d.asks[i].isBig
	}
	d.fixed = fixed
	if ok && len(fixed) > 0 {
		d.ev.FixedBids, d.ev.FixedAsks = fixed[:n:n], fixed[n:]
	} else { // a size too long for fixed point: decimals
		d.ev.Bids, d.ev.Asks = decimalLevels(d.bids), decimalLevels(d.asks)
	}
	d.sink.Event(&d.ev)
}

func decimalLevels(src []lvl) []venue.Level {
	out := make([]venue.Level, len(src))
	for i := range src {
		out[i] = src[i].level()
	}
	return out
}

// buffer keeps a depth event of a waiting book.
func (d *Decoder) buffer(s *symbol, du depthUpdate) {
	if len(s.buf) >= maxBuffered {
		s.buf = append(s.buf[:0], s.buf[1:]...)
	}
	levels := make([]lvl, len(d.bids)+len(d.asks))
	n := copy(levels, d.bids)
	copy(levels[n:], d.asks)
	s.buf = append(s.buf, pending{first: du.first, last: du.last, at: du.at, levels: levels, nbids: n})
}

// snapshot handles the generated frame carrying a REST depth snapshot, and
// bridges the buffered events to it.
func (d *Decoder) snapshot(recv time.Time, lower []byte, sc *scan.Scanner, frame []byte) {
	d.bids, d.asks = d.bids[:0], d.asks[:0]
	var id int64
	var haveID, haveB, haveA bool
	for more := sc.Object(); more; more = sc.More('}') {
		switch string(sc.Key()) {
		case "lastUpdateId":
			id, haveID = sc.Int(), true
		case "bids":
			d.bids, haveB = levels(sc, d.bids), true
		case "asks":
			d.asks, haveA = levels(sc, d.asks), true
		default:
			sc.Skip()
		}
	}
	if sc.Failed() || !haveID || !haveB || !haveA || id <= 0 {
		sc.Fail()
		s := d.syms[string(lower)] // a bad frame creates no symbol
		if s == nil {
			d.bad(recv, "bad depth snapshot", frame, nil)
			return
		}
		s.requested = false
		synced := s.state == stateSynced
		d.bad(recv, "bad depth snapshot", frame, s) // resyncs a synced book, which asks again
		if !synced {
			d.request(string(lower), s)
		}
		return
	}
	s := d.symbolFor(lower, nil)
	s.requested = false
	if s.state == stateSynced && id <= s.lastU {
		return // older than the book we hold: nothing to do
	}
	s.state = stateWaiting
	d.fixed = replace(&s.book, d.bids, d.asks, d.fixed)
	if s.book.Crossed() {
		s.reset()
		d.bad(recv, "crossed depth snapshot", frame, nil)
		d.request(string(lower), s)
		return
	}
	s.snapshots++
	s.lastU = id
	at := time.Time{}
	// Discard what the snapshot already holds; the first event left must
	// straddle lastUpdateId+1, and each next one chain to the one before.
	i := 0
	for i < len(s.buf) && s.buf[i].last <= id {
		i++
	}
	applied := 0
	for ; i < len(s.buf); i++ {
		p := &s.buf[i]
		if applied == 0 && p.first > s.lastU+1 || applied > 0 && p.first != s.lastU+1 {
			// The snapshot is older than the buffer (or the buffer has a
			// hole): keep what follows and ask again.
			d.log.Debug("binance: snapshot does not bridge", "symbol", s.name, "lastUpdateId", id, "U", p.first, "last_u", s.lastU)
			s.buf = append(s.buf[:0], s.buf[i:]...)
			s.book.Reset()
			s.lastU = 0
			d.request(string(lower), s)
			return
		}
		setAll(&s.book, venue.Bid, p.levels[:p.nbids])
		setAll(&s.book, venue.Ask, p.levels[p.nbids:])
		s.lastU, at = p.last, p.at
		applied++
	}
	s.buf = s.buf[:0]
	if s.book.Crossed() {
		s.reset()
		d.bad(recv, "crossed book after bridging", frame, nil)
		d.request(string(lower), s)
		return
	}
	s.state, s.straddle = stateSynced, applied == 0
	ev := s.book.SnapshotFixed(s.l2)
	ev.VenueSeq, ev.RecvTime, ev.VenueTime = s.lastU, recv, at
	d.sink.Event(ev)
}

func (d *Decoder) trade(recv time.Time, lower []byte, sc *scan.Scanner, frame []byte) {
	var (
		ev                  = venue.Event{Kind: venue.KindTrade, RecvTime: recv}
		id, name            []byte
		haveP, haveQ, haveM bool
		okP, okQ            bool
	)
	for more := sc.Object(); more; more = sc.More('}') {
		switch string(sc.Key()) {
		case "e":
			eventType(sc, "trade")
		case "s":
			name = sc.Str()
		case "t":
			id = sc.IntText()
		case "p":
			ev.Price, okP = parseDecimal(sc.Str())
			haveP = true
		case "q":
			ev.Size, okQ = parseDecimal(sc.Str())
			haveQ = true
		case "T":
			ev.VenueTime = time.UnixMilli(sc.Int())
		case "m":
			haveM = true
			if sc.Bool() {
				ev.Side = venue.SideSell // the buyer made: the taker sold
			} else {
				ev.Side = venue.SideBuy
			}
		default:
			sc.Skip()
		}
	}
	if sc.Failed() || id == nil || !haveP || !haveQ || !haveM || !okP || !okQ || ev.Price.Sign() <= 0 || ev.Size.Sign() <= 0 {
		sc.Fail()
		d.bad(recv, "bad trade", frame, nil)
		return
	}
	s := d.symbolFor(lower, name)
	ev.Stream, ev.TradeID = s.trades, string(id)
	e := ev
	d.sink.Event(&e)
}

func (d *Decoder) bookTicker(recv time.Time, lower []byte, sc *scan.Scanner, frame []byte) {
	var (
		ev   = venue.Event{Kind: venue.KindTicker, RecvTime: recv}
		name []byte
		have int
		ok   = true
	)
	field := func(dst *venue.Event, k byte, v []byte) {
		x, good := parseDecimal(v)
		ok = ok && good && x.Sign() >= 0
		switch k {
		case 'b':
			dst.Bid = x
		case 'B':
			dst.BidSize = x
		case 'a':
			dst.Ask = x
		case 'A':
			dst.AskSize = x
		}
		have++
	}
	for more := sc.Object(); more; more = sc.More('}') {
		k := sc.Key()
		switch string(k) {
		case "s":
			name = sc.Str()
		case "b", "B", "a", "A":
			field(&ev, k[0], sc.Str())
		default:
			sc.Skip()
		}
	}
	if sc.Failed() || have != 4 || !ok {
		sc.Fail()
		d.bad(recv, "bad bookTicker", frame, nil)
		return
	}
	s := d.symbolFor(lower, name)
	ev.Stream = s.ticker
	e := ev
	d.sink.Event(&e)
}
