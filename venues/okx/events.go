package okx

import (
	"bytes"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/scan"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// decimalOf parses an OKX number string; empty is zero when emptyOK.
func decimalOf(b []byte, emptyOK bool) (decimal.Decimal, bool) {
	if len(b) == 0 {
		return decimal.Decimal{}, emptyOK
	}
	m, f, neg, st := scan.Coef(b)
	switch {
	case neg: // OKX writes no sign
		return decimal.Decimal{}, false
	case st == scan.OK:
		if m == 0 {
			return decimal.Decimal{}, true
		}
		return decimal.New(m, -int32(f)), true
	case st == scan.Big:
		return venue.ParseDecimal(b)
	}
	return decimal.Decimal{}, false
}

// trade decodes one element of a trades push.
func (d *Decoder) trade(recv time.Time, s *scan.Scanner, in *inst, b []byte) bool {
	var id, px, sz, side []byte
	var ts int64
	if !d.object(recv, s, "trade", nil, b, func(k []byte) {
		switch string(k) {
		case "tradeId":
			id = s.Str()
		case "px":
			px = s.Str()
		case "sz":
			sz = s.Str()
		case "side":
			side = s.Str()
		case "ts":
			ts = s.IntOrString()
		default:
			s.Skip()
		}
	}) {
		return false
	}
	ev := &venue.Event{Kind: venue.KindTrade, Stream: in.trades, RecvTime: recv, VenueTime: msTime(ts)}
	var ok1, ok2 bool
	ev.Price, ok1 = decimalOf(px, false)
	ev.Size, ok2 = decimalOf(sz, false)
	if !ok1 || !ok2 || ev.Price.Sign() <= 0 || !venue.ValidSymbol(id) {
		return d.badFrame(recv, in.trades, "impossible trade", b)
	}
	switch string(side) {
	case "buy":
		ev.Side = venue.SideBuy
	case "sell":
		ev.Side = venue.SideSell
	}
	ev.TradeID = string(id)
	d.emit(ev, recv)
	return true
}

// ticker decodes one element of a tickers push.
func (d *Decoder) ticker(recv time.Time, s *scan.Scanner, in *inst, b []byte) bool {
	var bid, bidSz, ask, askSz, last []byte
	var ts int64
	if !d.object(recv, s, "ticker", nil, b, func(k []byte) {
		switch string(k) {
		case "bidPx":
			bid = s.Str()
		case "bidSz":
			bidSz = s.Str()
		case "askPx":
			ask = s.Str()
		case "askSz":
			askSz = s.Str()
		case "last":
			last = s.Str()
		case "ts":
			ts = s.IntOrString()
		default:
			s.Skip()
		}
	}) {
		return false
	}
	ev := &venue.Event{Kind: venue.KindTicker, Stream: in.ticker, RecvTime: recv, VenueTime: msTime(ts)}
	var ok [5]bool
	ev.Bid, ok[0] = decimalOf(bid, true)
	ev.BidSize, ok[1] = decimalOf(bidSz, true)
	ev.Ask, ok[2] = decimalOf(ask, true)
	ev.AskSize, ok[3] = decimalOf(askSz, true)
	ok[4] = true
	if len(last) > 0 {
		ev.Last.Decimal, ok[4] = decimalOf(last, false)
		ev.Last.Valid = true
	}
	if ok != [5]bool{true, true, true, true, true} {
		return d.badFrame(recv, in.ticker, "impossible ticker", b)
	}
	d.emit(ev, recv)
	return true
}

// bbo decodes one element of a bbo-tbt push (a one-level book, whole
// every time) as a ticker.
func (d *Decoder) bbo(recv time.Time, s *scan.Scanner, in *inst, b []byte) bool {
	var m bookMsg
	m.bids, m.asks = d.bids[:0], d.asks[:0]
	if !d.object(recv, s, "bbo", nil, b, func(k []byte) {
		if !m.levelsOrTime(s, k) {
			s.Skip()
		}
	}) {
		return false
	}
	d.bids, d.asks = m.bids[:0], m.asks[:0]
	ev := &venue.Event{Kind: venue.KindTicker, Stream: in.ticker, RecvTime: recv, VenueTime: msTime(m.ts)}
	if len(m.bids) > 0 {
		ev.Bid, ev.BidSize = decimal.New(m.bids[0].pm, -m.bids[0].pf), m.bids[0].size(nil)
	}
	if len(m.asks) > 0 {
		ev.Ask, ev.AskSize = decimal.New(m.asks[0].pm, -m.asks[0].pf), m.asks[0].size(nil)
	}
	d.emit(ev, recv)
	return true
}

// event handles {"event":...} frames: acks, errors and notices.
func (d *Decoder) event(recv time.Time, f *frame, b []byte) {
	switch string(f.event) {
	case "subscribe", "unsubscribe":
		if !f.hasArg {
			d.badFrame(recv, "", "ack without arg", b)
			return
		}
		if string(f.event) == "unsubscribe" && kindOfChannel(f.channel) == chanBooks {
			// The book is no longer fed (an unsubscribe, or the first half
			// of a resync): only a new snapshot makes it valid again.
			if in := d.insts[string(f.instID)]; in != nil {
				in.valid, in.haveSeq = false, false
			}
		}
		if d.hooks.ack != nil {
			d.hooks.ack(string(f.event), string(f.channel), string(f.instID))
		}
	case "error":
		d.venueError(recv, f)
	case "notice":
		d.log.Warn("okx notice", "code", string(f.code), "msg", string(f.msg))
		if string(f.code) == "64008" && d.hooks.forced != nil {
			d.hooks.forced(string(f.code), string(f.msg))
		}
	default:
		d.log.Debug("okx event ignored", "event", string(f.event), "code", string(f.code))
	}
}

// venueError reports an error event. OKX's error frames carry no arg; the
// channel and instrument are only in the message ("Wrong URL or
// channel:books,instId:FOO-USDT doesn't exist").
func (d *Decoder) venueError(recv time.Time, f *frame) {
	ch, inst := msgField(f.msg, "channel:"), msgField(f.msg, "instId:")
	stream := ""
	if c, ok := ourChannel(ch); ok && venue.ValidSymbol(inst) {
		stream = string(venue.NewStream(Name, c, string(inst)))
	}
	det := map[string]any{"code": string(f.code), "message": string(f.msg)}
	if len(ch) > 0 {
		det["channel"] = string(ch)
	}
	if len(inst) > 0 {
		det["symbol"] = string(inst)
	}
	kind := notice.Refusal
	switch string(f.code) {
	case "60014", "50011", "63999":
		kind = notice.RateLimited
	}
	d.sink.Notice(notice.Must(kind, Name, stream, recv, "okx error "+string(f.code)+": "+string(f.msg), det))
	switch {
	case kind == notice.RateLimited && d.hooks.limited != nil:
		d.hooks.limited()
	case kind == notice.Refusal && d.hooks.refused != nil:
		d.hooks.refused(string(ch), string(inst))
	}
}

// msgField returns what follows key in msg, up to a comma, space or end.
func msgField(msg []byte, key string) []byte {
	i := bytes.Index(msg, []byte(key))
	if i < 0 {
		return nil
	}
	v := msg[i+len(key):]
	if j := bytes.IndexAny(v, ", "); j >= 0 {
		v = v[:j]
	}
	return v
}

// ourChannel maps an OKX channel to fanoutd's.
func ourChannel(ch []byte) (venue.Channel, bool) {
	switch kindOfChannel(ch) {
	case chanBooks:
		return venue.Level2, true
	case chanTrades:
		return venue.Trades, true
	case chanTickers, chanBBO:
		return venue.Ticker, true
	}
	return "", false
}

// okxChannel is the OKX channel fanoutd subscribes for ch.
func okxChannel(ch venue.Channel) string {
	switch ch {
	case venue.Level2:
		return "books"
	case venue.Trades:
		return "trades"
	}
	return "tickers"
}
