package coinbase

import (
	"bytes"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/scan"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Name is the venue's name in streams and notices.
const Name = "coinbase"

// product is what the decoder keeps for one product id.
type product struct {
	id                  string
	l2, trades, ticker  venue.Stream
	book                venue.Book
	valid               bool   // book built from a snapshot and not known wrong since
	lastTrade           string // newest trade id published, "" if none yet
	tradesSeen          bool   // a market_trades frame was seen (later snapshots are catch-up)
	refused             bool   // a refusal notice was emitted
	l2Pending, l2Active bool   // adapter bookkeeping: level2 requested / confirmed
	// gone is set when the adapter unsubscribed the product: frames still
	// in flight for it are dropped, so coverage never reports a stream the
	// user left, until the adapter subscribes it again or a subscriptions
	// ack lists it again.
	gone bool
}

// request is a subscribe or unsubscribe the adapter sent, awaiting the
// venue's subscriptions ack. Acks answer requests in order.
type request struct {
	unsubscribe bool
	channel     string // the venue's channel name
	products    []string
}

// update is one parsed level of an l2_data event: in fixed point (fixed
// true), or as decimals for a value too long for it.
type update struct {
	side  venue.BookSide
	fixed bool
	fl    venue.FixedLevel
	price decimal.Decimal
	size  decimal.Decimal
}

// level returns u as decimals.
func (u *update) level() venue.Level {
	if u.fixed {
		return u.fl.Level()
	}
	return venue.Level{Price: u.price, Size: u.size}
}

// Decoder turns Coinbase Advanced Trade frames into events and notices.
// It is the frame-level half of the Adapter; replay drives one from a
// capture. The zero Decoder is not usable; call NewDecoder. A Decoder is
// not safe for concurrent use.
type Decoder struct {
	sink *venue.CoverageSink

	products map[string]*product
	seq      int64 // last sequence_num on this link, -1 before the first
	dec      decimals
	clk      scan.Clock

	bad venue.BadFrames // counted, one data_quality notice per burst

	// resync is set when the link must be dropped and rebuilt (a gap, a
	// bad frame); the adapter reads it after each frame. Replay ignores it:
	// the capture holds what the live adapter did next.
	resync string

	pending    []request // the adapter's requests awaiting an ack, oldest first
	skipAck    bool      // an error frame answered the oldest request; its ack may follow
	onRefuse   func(symbol string)
	onResync   func(reason string)                             // the live link drops and reconnects
	onBook     func(id string)                                 // one book needs a new snapshot: resubscribe its level2
	onWhole    func(id string)                                 // a snapshot made id's book whole
	onL2Full   func(recv time.Time, ids []string, text string) // the venue refused level2 for ids: too many in the session
	scratch    []update
	bidScratch []venue.Level
	askScratch []venue.Level
	ev         venue.Event        // the book update, reused (venue.Sink)
	fixed      []venue.FixedLevel // its levels
}

var _ venue.Decoder = (*Decoder)(nil)

// NewDecoder returns a decoder that writes to cfg.Sink. Only Sink is used.
func NewDecoder(cfg venue.Config) *Decoder {
	return &Decoder{
		sink:     venue.NewCoverageSink(Name, cfg.Sink),
		products: make(map[string]*product),
		seq:      -1,
		dec:      newDecimals(),
	}
}

// BadFrames returns how many frames did not parse or made an impossible
// book, since the decoder was made.
func (d *Decoder) BadFrames() uint64 { return d.bad.Count() }

// Book returns the decoder's book for product id and whether it is valid
// (built from a snapshot and not known to be wrong since). The book is the
// decoder's own: read it between frames, never keep it.
func (d *Decoder) Book(id string) (*venue.Book, bool) {
	p := d.products[id]
	if p == nil {
		return nil, false
	}
	return &p.book, p.valid
}

func (d *Decoder) product(id []byte) *product {
	if p := d.products[string(id)]; p != nil {
		return p
	}
	s := string(id)
	p := &product{id: s, l2: venue.NewStream(Name, venue.Level2, s),
		trades: venue.NewStream(Name, venue.Trades, s), ticker: venue.NewStream(Name, venue.Ticker, s)}
	d.products[s] = p
	return p
}

// LinkDown marks every book invalid until the venue sends a new snapshot
// and forgets the link's sequence and pending requests. It emits nothing:
// the adapter (or replay) emits link_down.
func (d *Decoder) LinkDown(t time.Time) {
	d.sink.LinkDown(t)
	for _, p := range d.products {
		p.valid = false
		p.l2Pending, p.l2Active = false, false
	}
	d.seq = -1
	d.resync = ""
	d.pending = d.pending[:0]
	d.skipAck = false
}

// Frame decodes one frame received at recv.
func (d *Decoder) Frame(recv time.Time, frame []byte) {
	s := scan.New(frame)
	var channel, typ, message, reason, ts, events []byte
	var seq int64
	hasSeq, done := false, false
	if s.Peek() != '{' {
		d.badFrame(recv, "not a JSON object", frame, nil)
		return
	}
	for more := s.Object(); more; more = s.More('}') {
		switch string(s.Key()) {
		case "channel":
			channel = s.Text()
		case "type":
			typ = s.Text()
		case "timestamp":
			ts = s.Str()
		case "sequence_num":
			seq, hasSeq = s.Int(), !s.Failed()
		case "message":
			message = s.Text()
		case "reason":
			reason = s.Text()
		case "events":
			// The venue writes events last, after channel, timestamp and
			// sequence_num: decode it in this one pass. Any other order is
			// decoded after the envelope.
			if channel != nil && hasSeq && ts != nil && !done {
				if !d.envelope(recv, seq, frame) {
					return
				}
				bad := d.bad.Count()
				d.events(&s, recv, channel, ts, seq, frame)
				if d.bad.Count() != bad {
					return // reported once; the rest of the frame is not read
				}
				done = true
				continue
			}
			events = s.Raw()
		default:
			s.Skip()
		}
	}
	if !s.End() {
		d.badFrame(recv, "malformed JSON", frame, nil)
		return
	}
	if done {
		return
	}
	if channel == nil {
		if string(typ) == "error" {
			d.errorFrame(recv, message, reason)
			return
		}
		if typ == nil {
			d.badFrame(recv, "frame has neither channel nor type", frame, nil)
		}
		return // another request/response shape: nothing we use
	}
	if !hasSeq || !d.envelope(recv, seq, frame) {
		if !hasSeq {
			d.badFrame(recv, "frame has no sequence_num", frame, nil)
		}
		return
	}
	if events == nil {
		if string(channel) == "l2_data" {
			d.badL2(recv, "frame has no events", frame)
		} else {
			d.badFrame(recv, "frame has no events", frame, nil)
		}
		return
	}
	es := scan.New(events)
	d.events(&es, recv, channel, ts, seq, frame)
}

// envelope checks a data frame's sequence_num against the link's.
func (d *Decoder) envelope(recv time.Time, seq int64, frame []byte) bool {
	if seq < 0 {
		d.badFrame(recv, "negative sequence_num", frame, nil)
		return false
	}
	if d.seq >= 0 && seq != d.seq+1 {
		d.gap(recv, d.seq+1, seq)
	}
	d.seq = seq
	return true
}

// events decodes the events array at s by channel.
func (d *Decoder) events(s *scan.Scanner, recv time.Time, channel, ts []byte, seq int64, frame []byte) {
	switch string(channel) {
	case "l2_data":
		d.l2(s, recv, d.clk.Parse(ts), seq, frame)
	case "market_trades":
		d.trades(s, recv, frame)
	case "ticker":
		d.tickers(s, recv, d.clk.Parse(ts), frame)
	case "subscriptions":
		d.ack(s, recv, frame)
	default:
		// heartbeats, and channels we do not subscribe: their sequence_num
		// is all we need.
		s.Skip()
	}
}

// gap handles a break in the connection's sequence_num: every level2 book
// on the link may have missed an update.
func (d *Decoder) gap(recv time.Time, want, got int64) {
	d.resyncAll(recv, "sequence_gap", map[string]any{"expected_sequence_num": want, "sequence_num": got})
	d.setResync("sequence_gap")
}

// resyncAll invalidates every valid book, with a book_resync notice each.
func (d *Decoder) resyncAll(recv time.Time, reason string, details map[string]any) {
	for _, id := range d.sortedIDs() {
		p := d.products[id]
		if p.valid {
			d.invalidate(p, recv, reason, details)
		}
	}
}

func (d *Decoder) sortedIDs() []string {
	ids := make([]string, 0, len(d.products))
	for id := range d.products {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (d *Decoder) invalidate(p *product, recv time.Time, reason string, details map[string]any) {
	p.valid = false
	det := map[string]any{"reason": reason, "product_id": p.id, "resync": "reconnect"}
	for k, v := range details {
		det[k] = v
	}
	if d.seq >= 0 {
		det["last_sequence_num"] = d.seq
	}
	how := "reconnecting"
	if det["resync"] == "resubscribe" {
		how = "resubscribing"
	}
	d.sink.Notice(notice.Must(notice.BookResync, Name, string(p.l2), recv,
		"coinbase "+p.id+" book resync ("+reason+"): "+how+" for a new snapshot", det))
}

// badFrame counts a frame that did not parse or made an impossible book and
// reports the burst once. If the frame concerned p, p's book is resynced
// by resubscribing its level2 on the same link; a frame that names no book
// costs none: its sequence_num was read (or the next frame's shows a gap),
// so nothing else was lost. Level2 frames that name no product go to
// badL2.
func (d *Decoder) badFrame(recv time.Time, why string, frame []byte, p *product) {
	if p == nil {
		d.bad.Report(d.sink, Name, recv, "", why, frame)
		return
	}
	d.bad.Report(d.sink, Name, recv, p.l2, why, frame)
	if p.valid {
		d.invalidate(p, recv, "bad_frame", map[string]any{"bad_frame": why, "resync": "resubscribe"})
	}
	if d.onBook != nil {
		d.onBook(p.id)
	}
}

// badL2 is badFrame for a level2 frame whose product could not be read: any
// book may have missed it, so every book is resynced (the link reconnects).
func (d *Decoder) badL2(recv time.Time, why string, frame []byte) {
	d.bad.Report(d.sink, Name, recv, "", why, frame)
	d.resyncAll(recv, "bad_frame", map[string]any{"bad_frame": why})
	d.setResync("bad_frame")
}

// l2 decodes the events of an l2_data frame.
func (d *Decoder) l2(s *scan.Scanner, recv, vt time.Time, seq int64, frame []byte) {
	d.eachEvent(s, recv, "l2_data", frame, func() bool {
		var typ, id, updates []byte
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "type":
				typ = s.Str()
			case "product_id":
				id = s.Text()
			case "updates":
				updates = s.Raw()
			default:
				s.Skip()
			}
		}
		if s.Failed() {
			return true // reported by eachEvent
		}
		if id == nil || updates == nil {
			d.badL2(recv, "l2_data event lacks product_id or updates", frame)
			return false
		}
		p := d.product(id)
		snap := string(typ) == "snapshot"
		if !snap && string(typ) != "update" {
			d.badFrame(recv, "l2_data event type is neither snapshot nor update", frame, p)
			return false
		}
		if !snap && !p.valid {
			return true // waiting for a snapshot: updates to a book known wrong are dropped
		}
		sub := scan.New(updates)
		ups, ok := d.levels(&sub)
		if !ok {
			d.badFrame(recv, "bad l2_data level", frame, p)
			return false
		}
		if snap {
			d.snapshot(p, ups, recv, vt, seq, frame)
		} else {
			d.update(p, ups, recv, vt, seq, frame)
		}
		return true
	})
}

// eachEvent walks the events array of an l2_data or market_trades frame,
// calling event with s at each element. Events that are not an array, or
// do not parse, are a bad frame ("<channel> events is not an array",
// "malformed <channel> events"); event reports false when it reported the
// frame bad itself, which ends the walk.
func (d *Decoder) eachEvent(s *scan.Scanner, recv time.Time, channel string, frame []byte, event func() bool) {
	bad := d.badFrame
	if channel == "l2_data" {
		bad = func(recv time.Time, why string, frame []byte, _ *product) { d.badL2(recv, why, frame) }
	}
	if s.Peek() != '[' {
		bad(recv, channel+" events is not an array", frame, nil)
		return
	}
	for more := s.Array(); more; more = s.More(']') {
		if !event() {
			return
		}
	}
	if s.Failed() {
		bad(recv, "malformed "+channel+" events", frame, nil)
	}
}

// levels parses an updates array into d.scratch.
func (d *Decoder) levels(s *scan.Scanner) ([]update, bool) {
	ups := d.scratch[:0]
	for more := s.Array(); more; more = s.More(']') {
		var side, price, qty []byte
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "side":
				side = s.Str()
			case "price_level":
				price = s.Str()
			case "new_quantity":
				qty = s.Str()
			default:
				s.Skip()
			}
		}
		if s.Failed() {
			return nil, false
		}
		var u update
		switch string(side) {
		case "bid":
			u.side = venue.Bid
		case "offer", "ask":
			u.side = venue.Ask
		default:
			return nil, false
		}
		var ok1, ok2 bool
		u.fl.Price, ok1 = fixed(price)
		u.fl.Size, ok2 = fixed(qty)
		u.fixed = ok1 && ok2 && u.fl.Price.M > 0
		if !u.fixed {
			u.price, ok1 = d.dec.price(price)
			u.size, ok2 = d.dec.size(qty)
			if !ok1 || !ok2 {
				return nil, false
			}
		}
		ups = append(ups, u)
	}
	d.scratch = ups
	return ups, !s.Failed()
}

func (d *Decoder) snapshot(p *product, ups []update, recv, vt time.Time, seq int64, frame []byte) {
	if allFixed(ups) {
		d.snapshotFixed(p, ups, recv, vt, seq, frame)
		return
	}
	bids, asks := d.bidScratch[:0], d.askScratch[:0]
	for i := range ups {
		if ups[i].side == venue.Bid {
			bids = append(bids, ups[i].level())
		} else {
			asks = append(asks, ups[i].level())
		}
	}
	// The venue's snapshot is unsorted; Replace is linear on best-first
	// input, so sort here (stable: a repeated price keeps its last size).
	slices.SortStableFunc(bids, func(a, b venue.Level) int { return b.Price.Cmp(a.Price) })
	slices.SortStableFunc(asks, func(a, b venue.Level) int { return a.Price.Cmp(b.Price) })
	bids, asks = dedupe(bids, cmpPrice), dedupe(asks, cmpPrice)
	d.bidScratch, d.askScratch = bids, asks
	p.book.Replace(bids, asks)
	d.snapshotDone(p, recv, vt, seq, frame)
}

func allFixed(ups []update) bool {
	for i := range ups {
		if !ups[i].fixed {
			return false
		}
	}
	return true
}

// sides gathers the levels of ups, bids then asks, in d.fixed (reused)
// and returns them with the number of bids.
func (d *Decoder) sides(ups []update) ([]venue.FixedLevel, int) {
	all := d.fixed[:0]
	for i := range ups {
		if ups[i].side == venue.Bid {
			all = append(all, ups[i].fl)
		}
	}
	nb := len(all)
	for i := range ups {
		if ups[i].side == venue.Ask {
			all = append(all, ups[i].fl)
		}
	}
	d.fixed = all
	return all, nb
}

// snapshotFixed is snapshot for levels all in fixed point.
func (d *Decoder) snapshotFixed(p *product, ups []update, recv, vt time.Time, seq int64, frame []byte) {
	all, nb := d.sides(ups)
	bids, asks := all[:nb], all[nb:]
	slices.SortStableFunc(bids, func(a, b venue.FixedLevel) int { return b.Price.Cmp(a.Price) })
	slices.SortStableFunc(asks, func(a, b venue.FixedLevel) int { return a.Price.Cmp(b.Price) })
	p.book.ReplaceFixed(dedupe(bids, cmpFixedPrice), dedupe(asks, cmpFixedPrice))
	d.snapshotDone(p, recv, vt, seq, frame)
}

func (d *Decoder) snapshotDone(p *product, recv, vt time.Time, seq int64, frame []byte) {
	if p.book.Crossed() {
		d.badFrame(recv, "crossed book after snapshot", frame, p)
		return
	}
	p.valid = true
	ev := p.book.SnapshotFixed(p.l2)
	ev.VenueTime, ev.RecvTime, ev.VenueSeq = vt, recv, seq
	d.emit(p, ev, p.l2, recv)
	if d.onWhole != nil {
		d.onWhole(p.id)
	}
}

// dedupe keeps the last of each run of equal prices in a sorted side.
func dedupe[L venue.Level | venue.FixedLevel](ls []L, cmp func(a, b L) int) []L {
	out := ls[:0]
	for i := range ls {
		if i+1 < len(ls) && cmp(ls[i], ls[i+1]) == 0 {
			continue
		}
		out = append(out, ls[i])
	}
	return out
}

func cmpPrice(a, b venue.Level) int           { return a.Price.Cmp(b.Price) }
func cmpFixedPrice(a, b venue.FixedLevel) int { return a.Price.Cmp(b.Price) }

func (d *Decoder) update(p *product, ups []update, recv, vt time.Time, seq int64, frame []byte) {
	if !allFixed(ups) {
		d.updateDecimal(p, ups, recv, vt, seq, frame)
		return
	}
	// The event and its levels are reused for every frame: a sink has them
	// only during the call (venue.Sink), so the book path allocates nothing.
	all, nb := d.sides(ups)
	for i := range ups {
		p.book.SetFixed(ups[i].side, ups[i].fl.Price, ups[i].fl.Size)
	}
	if p.book.Crossed() {
		d.badFrame(recv, "crossed book after update", frame, p)
		return
	}
	d.ev = venue.Event{Kind: venue.KindBook, Stream: p.l2, VenueTime: vt, RecvTime: recv, VenueSeq: seq,
		FixedBids: all[:nb:nb], FixedAsks: all[nb:]}
	d.emit(p, &d.ev, p.l2, recv)
}

// updateDecimal is update for a frame with a value too long for fixed
// point.
func (d *Decoder) updateDecimal(p *product, ups []update, recv, vt time.Time, seq int64, frame []byte) {
	var bids, asks []venue.Level
	for i := range ups {
		l := ups[i].level()
		if ups[i].side == venue.Bid {
			bids = append(bids, l)
		} else {
			asks = append(asks, l)
		}
		p.book.Set(ups[i].side, l.Price, l.Size)
	}
	if p.book.Crossed() {
		d.badFrame(recv, "crossed book after update", frame, p)
		return
	}
	ev := &venue.Event{Kind: venue.KindBook, Stream: p.l2, VenueTime: vt, RecvTime: recv, VenueSeq: seq, Bids: bids, Asks: asks}
	d.emit(p, ev, p.l2, recv)
}

func (d *Decoder) emit(p *product, ev *venue.Event, st venue.Stream, recv time.Time) {
	if p.gone {
		return
	}
	d.sink.Event(ev)
}

// trades decodes a market_trades frame. Each event's trades arrive newest
// first; they are published oldest first. The snapshot sent on subscribe is
// recent history: on the first subscription it only sets the last trade
// id; after a reconnect, its trades newer than the last one published fill
// the gap.
func (d *Decoder) trades(s *scan.Scanner, recv time.Time, frame []byte) {
	d.eachEvent(s, recv, "market_trades", frame, func() bool {
		var typ, trades []byte
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "type":
				typ = s.Str()
			case "trades":
				trades = s.Raw()
			default:
				s.Skip()
			}
		}
		if s.Failed() || trades == nil {
			return true // a failure is reported by eachEvent
		}
		sub := scan.New(trades)
		evs, ok := d.parseTrades(&sub, recv)
		if !ok {
			d.badFrame(recv, "bad market_trades trade", frame, nil)
			return false
		}
		snap := string(typ) == "snapshot"
		for i := len(evs) - 1; i >= 0; i-- {
			ev := evs[i]
			p := d.products[ev.Stream.Symbol()]
			history := snap && !p.tradesSeen
			if !newerTrade(ev.TradeID, p.lastTrade) {
				continue
			}
			p.lastTrade = ev.TradeID
			if !history {
				d.emit(p, ev, p.trades, recv)
			}
		}
		for _, ev := range evs {
			d.products[ev.Stream.Symbol()].tradesSeen = true
		}
		return true
	})
}

func (d *Decoder) parseTrades(s *scan.Scanner, recv time.Time) ([]*venue.Event, bool) {
	var evs []*venue.Event
	for more := s.Array(); more; more = s.More(']') {
		var id, tid, price, size, tm, side []byte
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "product_id":
				id = s.Text()
			case "trade_id":
				tid = s.Text()
			case "price":
				price = s.Str()
			case "size":
				size = s.Str()
			case "time":
				tm = s.Str()
			case "side":
				side = s.Str()
			default:
				s.Skip()
			}
		}
		if s.Failed() || id == nil || tid == nil {
			return nil, false
		}
		p := d.product(id)
		ev := &venue.Event{Kind: venue.KindTrade, Stream: p.trades, RecvTime: recv, VenueTime: d.clk.Parse(tm)}
		ev.TradeID = string(tid)
		var ok1, ok2 bool
		ev.Price, ok1 = d.dec.price(price)
		ev.Size, ok2 = d.dec.size(size)
		if !ok1 || !ok2 {
			return nil, false
		}
		// Coinbase's side is the maker's; ours is the taker's.
		switch string(side) {
		case "BUY", "buy":
			ev.Side = venue.SideSell
		case "SELL", "sell":
			ev.Side = venue.SideBuy
		}
		evs = append(evs, ev)
	}
	return evs, !s.Failed()
}

// newerTrade reports whether trade id a comes after b. Coinbase trade ids
// are decimal integers; ids that are not are never deduplicated.
func newerTrade(a, b string) bool {
	if b == "" {
		return true
	}
	if !isDigits(a) || !isDigits(b) {
		return a != b
	}
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// tickers decodes a ticker frame: best bid and ask with sizes, and the
// last trade price.
func (d *Decoder) tickers(s *scan.Scanner, recv, vt time.Time, frame []byte) {
	if s.Peek() != '[' {
		d.badFrame(recv, "ticker events is not an array", frame, nil)
		return
	}
	walked := s.Members("tickers", func() bool {
		for more := s.Array(); more; more = s.More(']') {
			ev, p, ok := d.ticker(s, recv, vt)
			if !ok {
				d.badFrame(recv, "bad ticker", frame, nil)
				return false
			}
			d.emit(p, ev, p.ticker, recv)
		}
		return true
	})
	if walked && s.Failed() {
		d.badFrame(recv, "malformed ticker events", frame, nil)
	}
}

func (d *Decoder) ticker(s *scan.Scanner, recv, vt time.Time) (*venue.Event, *product, bool) {
	var id, price, bid, bidQ, ask, askQ []byte
	for more := s.Object(); more; more = s.More('}') {
		switch string(s.Key()) {
		case "product_id":
			id = s.Text()
		case "price":
			price = s.Str()
		case "best_bid":
			bid = s.Str()
		case "best_bid_quantity":
			bidQ = s.Str()
		case "best_ask":
			ask = s.Str()
		case "best_ask_quantity":
			askQ = s.Str()
		default:
			s.Skip()
		}
	}
	if s.Failed() || id == nil {
		return nil, nil, false
	}
	p := d.product(id)
	ev := &venue.Event{Kind: venue.KindTicker, Stream: p.ticker, VenueTime: vt, RecvTime: recv}
	var ok [4]bool
	ev.Bid, ok[0] = d.dec.price(bid)
	ev.BidSize, ok[1] = d.dec.size(bidQ)
	ev.Ask, ok[2] = d.dec.price(ask)
	ev.AskSize, ok[3] = d.dec.size(askQ)
	if ok != [4]bool{true, true, true, true} {
		return nil, nil, false
	}
	if price != nil {
		last, ok := d.dec.price(price)
		if !ok {
			return nil, nil, false
		}
		ev.Last = decimal.NullDecimal{Decimal: last, Valid: true}
	}
	return ev, p, true
}

// ack handles a subscriptions frame: the venue's whole current
// subscription set. It answers the oldest pending request; a product that
// request asked for and the set lacks was refused.
func (d *Decoder) ack(s *scan.Scanner, recv time.Time, frame []byte) {
	set := map[string][]string{}
	if s.Peek() != '[' {
		d.badFrame(recv, "subscriptions events is not an array", frame, nil)
		return
	}
	s.Members("subscriptions", func() bool {
		for more := s.Object(); more; more = s.More('}') {
			ch := string(s.Key())
			for more := s.Array(); more; more = s.More(']') {
				set[ch] = append(set[ch], string(s.Text()))
			}
		}
		return true
	})
	if s.Failed() {
		d.badFrame(recv, "malformed subscriptions", frame, nil)
		return
	}
	for _, ids := range set {
		for _, id := range ids {
			if p := d.products[id]; p != nil {
				p.gone = false
			}
		}
	}
	if d.skipAck {
		d.skipAck = false
		return
	}
	if len(d.pending) == 0 {
		return
	}
	req := d.pending[0]
	d.pending = d.pending[1:]
	if req.unsubscribe {
		return
	}
	for _, id := range req.products {
		if slices.Contains(set[req.channel], id) {
			if req.channel == "level2" {
				d.product([]byte(id)).l2Active = true
			}
			continue
		}
		d.refuse(recv, id, req.channel, "product missing from the subscriptions ack", "")
	}
}

// errorFrame handles {"type":"error",...}. An error naming a requested
// product refuses that product; one naming none answers (and refuses) the
// oldest pending request.
func (d *Decoder) errorFrame(recv time.Time, message, reason []byte) {
	if tooManyL2(message) || tooManyL2(reason) {
		d.l2Full(recv, message, reason)
		return
	}
	named := false
	for _, req := range d.pending {
		if req.unsubscribe {
			continue
		}
		for _, id := range req.products {
			if namesProduct(reason, id) || namesProduct(message, id) {
				d.refuse(recv, id, req.channel, string(message), string(reason))
				named = true
			}
		}
	}
	if named {
		return
	}
	if len(d.pending) > 0 {
		req := d.pending[0]
		d.pending = d.pending[1:]
		d.skipAck = true
		for _, id := range req.products {
			d.refuse(recv, id, req.channel, string(message), string(reason))
		}
		if !req.unsubscribe && len(req.products) > 0 {
			return
		}
	}
	// An error that answers nothing we sent (replay, or a venue-side
	// problem): report it so an operator sees it.
	d.sink.Notice(notice.Must(notice.Refusal, Name, "", recv, "coinbase error: "+string(message)+" "+string(reason),
		map[string]any{"message": refusalText(string(message), string(reason))}))
}

// tooManyL2 reports Coinbase's refusal of level2 products past its
// per-session limit ("too many L2 streams requested in a single session").
func tooManyL2(text []byte) bool {
	return bytes.Contains(bytes.ToLower(text), []byte("too many l2 streams"))
}

// l2Full answers the oldest pending level2 subscribe with the venue's
// "too many L2 streams" error, which names no product: level2 alone is
// refused for that request's products (their trades and ticker go on).
func (d *Decoder) l2Full(recv time.Time, message, reason []byte) {
	i := slices.IndexFunc(d.pending, func(r request) bool { return !r.unsubscribe && r.channel == "level2" })
	if i < 0 {
		d.sink.Notice(notice.Must(notice.Refusal, Name, "", recv, "coinbase error: "+refusalText(string(message), string(reason)),
			map[string]any{"message": refusalText(string(message), string(reason)), "channel": "level2"}))
		return
	}
	req := d.pending[i]
	d.pending = slices.Delete(d.pending, i, i+1)
	if i == 0 {
		d.skipAck = true
	}
	var ids []string
	for _, id := range req.products {
		p := d.product([]byte(id))
		if p.l2Active {
			continue
		}
		p.l2Pending = false
		ids = append(ids, id)
	}
	text := refusalText(string(message), string(reason))
	if d.onL2Full != nil {
		d.onL2Full(recv, ids, text) // the live adapter moves them to another connection
		return
	}
	for _, id := range ids {
		d.refuseL2(recv, id, text)
	}
}

// refuseL2 reports that id gets no level2 stream (the session's limit),
// with a refusal notice on that stream alone.
func (d *Decoder) refuseL2(recv time.Time, id, message string) {
	p := d.product([]byte(id))
	d.sink.Forget(recv, p.l2)
	d.sink.Notice(notice.Must(notice.Refusal, Name, string(p.l2), recv, "coinbase refused level2 for "+id+": "+message,
		map[string]any{"symbol": id, "channel": "level2", "message": message}))
}

// namesProduct reports whether text names product id as a whole word:
// "BTC-USD" is not named by "BTC-USDC is not a valid product".
func namesProduct(text []byte, id string) bool {
	word := func(c byte) bool {
		return c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	}
	for off := 0; off < len(text); {
		i := bytes.Index(text[off:], []byte(id))
		if i < 0 {
			return false
		}
		i += off
		end := i + len(id)
		if (i == 0 || !word(text[i-1])) && (end == len(text) || !word(text[end])) {
			return true
		}
		off = i + 1
	}
	return false
}

func (d *Decoder) refuse(recv time.Time, id, channel, message, reason string) {
	p := d.product([]byte(id))
	if p.refused {
		return
	}
	p.refused = true
	st := ""
	switch channel {
	case "level2":
		st = string(p.l2)
	case "market_trades":
		st = string(p.trades)
	case "ticker":
		st = string(p.ticker)
	}
	d.sink.Forget(recv, p.l2, p.trades, p.ticker)
	d.sink.Notice(notice.Must(notice.Refusal, Name, st, recv, "coinbase refused "+id+" on "+channel+": "+message,
		map[string]any{"symbol": id, "channel": channel, "message": refusalText(message, reason)}))
	if d.onRefuse != nil {
		d.onRefuse(id)
	}
}

// expect records a request the adapter is about to send. A product
// subscribed again is no longer gone: its snapshot comes before the
// subscriptions ack that lists it.
func (d *Decoder) expect(r request) {
	d.pending = append(d.pending, r)
	if !r.unsubscribe {
		for _, id := range r.products {
			p := d.product([]byte(id))
			p.refused, p.gone = false, false
			if r.channel == "level2" {
				p.l2Pending = true
			}
		}
	}
}

// forget drops what the decoder holds for product id (after an
// unsubscribe): its book must come from a new snapshot.
func (d *Decoder) forget(id string, t time.Time) {
	if p := d.products[id]; p != nil {
		p.valid, p.gone = false, true
		p.book.Reset()
		d.sink.Forget(t, p.l2, p.trades, p.ticker)
	}
}

// Coverage returns the tracker the decoder records observed streams in.
func (d *Decoder) Coverage() *venue.CoverageTracker { return d.sink.Tracker }

func (d *Decoder) setResync(reason string) {
	d.resync = reason
	if d.onResync != nil {
		d.onResync(reason)
	}
}

// refusalText is Coinbase's message and its reason, in one line.
func refusalText(message, reason string) string {
	if reason == "" {
		return message
	}
	return message + " (" + reason + ")"
}
