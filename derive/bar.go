package derive

import (
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/jsonw"
	"github.com/fanoutd/fanoutd/venue"
)

// Bar is one trade bar: the trades received in [Start, End).
type Bar struct {
	Stream     venue.Stream
	Seq        uint64
	Start, End time.Time
	Open       decimal.Decimal
	High       decimal.Decimal
	Low        decimal.Decimal
	Close      decimal.Decimal
	Volume     decimal.Decimal // sum of sizes
	BuyVolume  decimal.Decimal // sum of sizes of trades whose taker bought
	SellVolume decimal.Decimal // sum of sizes of trades whose taker sold
	Trades     int             // number of trades
	// FirstTrade and LastTrade are the venue times of the first and last
	// trade (their receive times where the venue gives none).
	FirstTrade, LastTrade time.Time
	// Gap marks a bar whose interval spans a link drop: trades may be
	// missing from it.
	Gap bool
}

// AppendJSON appends the wire form of b:
//
//	{"type":"trade_bar","stream":…,"seq":…,"interval_ms":…,"start":…,"end":…,"open":…,"high":…,"low":…,"close":…,
//	 "volume":…,"buy_volume":…,"sell_volume":…,"trades":…,"first_trade_time":…,"last_trade_time":…,"gap":true}
//
// Decimals are strings, times RFC3339Nano in UTC; gap is present only when
// true.
func (b *Bar) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"type":"trade_bar","stream":`...)
	dst = jsonw.AppendString(dst, string(b.Stream))
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, b.Seq, 10)
	dst = append(dst, `,"interval_ms":`...)
	dst = strconv.AppendInt(dst, b.End.Sub(b.Start).Milliseconds(), 10)
	dst = appendTime(dst, `,"start":"`, b.Start)
	dst = appendTime(dst, `,"end":"`, b.End)
	for _, f := range [...]struct {
		k string
		v decimal.Decimal
	}{{`,"open":"`, b.Open}, {`,"high":"`, b.High}, {`,"low":"`, b.Low}, {`,"close":"`, b.Close},
		{`,"volume":"`, b.Volume}, {`,"buy_volume":"`, b.BuyVolume}, {`,"sell_volume":"`, b.SellVolume}} {
		dst = append(dst, f.k...)
		dst = venue.AppendDecimal(dst, f.v)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"trades":`...)
	dst = strconv.AppendInt(dst, int64(b.Trades), 10)
	dst = appendTime(dst, `,"first_trade_time":"`, b.FirstTrade)
	dst = appendTime(dst, `,"last_trade_time":"`, b.LastTrade)
	if b.Gap {
		dst = append(dst, `,"gap":true`...)
	}
	return append(dst, '}')
}

func appendTime(dst []byte, key string, t time.Time) []byte {
	dst = append(dst, key...)
	dst = jsonw.AppendTime(dst, t)
	return append(dst, '"')
}

// bars derives trade_bar_<interval> from a trades stream.
type bars struct {
	id, src venue.Stream
	every   time.Duration
	cur     *Bar      // the open bar, nil if none
	broke   time.Time // the last Break, zero if none
	emit    func(Out) // where a Set sends the bars
}

func (b *bars) Due() time.Time {
	if b.cur == nil {
		return time.Time{}
	}
	return b.cur.End
}

func (b *bars) Break(t time.Time) {
	if b.cur != nil {
		b.cur.Gap = true
	}
	b.broke = t
}

func (b *bars) Advance(t time.Time, _ *venue.Book, emit func(Out)) {
	if b.cur != nil && !t.Before(b.cur.End) {
		emit(Out{Bar: b.cur})
		b.cur = nil
	}
}

func (b *bars) Apply(ev *venue.Event, _ *venue.Book, emit func(Out)) {
	if ev.Kind != venue.KindTrade {
		return
	}
	b.Advance(ev.RecvTime, nil, emit)
	at := ev.VenueTime
	if at.IsZero() {
		at = ev.RecvTime
	}
	c := b.cur
	if c == nil {
		s := start(ev.RecvTime, b.every)
		c = &Bar{Stream: b.id, Start: s, End: s.Add(b.every), Open: ev.Price, High: ev.Price, Low: ev.Price, FirstTrade: at}
		// A drop since the previous bar closed, within this bar's interval.
		c.Gap = !b.broke.IsZero() && !b.broke.Before(s)
		b.cur = c
	}
	if ev.Price.GreaterThan(c.High) {
		c.High = ev.Price
	}
	if ev.Price.LessThan(c.Low) {
		c.Low = ev.Price
	}
	c.Close, c.LastTrade = ev.Price, at
	c.Volume = c.Volume.Add(ev.Size)
	switch ev.Side {
	case venue.SideBuy:
		c.BuyVolume = c.BuyVolume.Add(ev.Size)
	case venue.SideSell:
		c.SellVolume = c.SellVolume.Add(ev.Size)
	}
	c.Trades++
}
