package venue

import (
	"time"

	"github.com/shopspring/decimal"
)

// Kind says which of the three normalized events an Event holds.
// The zero Kind is not a valid event.
type Kind uint8

// The event kinds. Their wire names are "book", "trade" and "ticker";
// the derived channels add "quote" (in an Event: the ticker fields, a side
// with no level having a zero size) and "trade_bar" (encoded by package
// derive, never held in an Event).
const (
	KindBook Kind = iota + 1
	KindTrade
	KindTicker
	KindQuote
	KindBar
)

// String returns the wire name of k ("book", "trade", "ticker"), or "" for
// the zero Kind.
func (k Kind) String() string {
	switch k {
	case KindBook:
		return "book"
	case KindTrade:
		return "trade"
	case KindTicker:
		return "ticker"
	case KindQuote:
		return "quote"
	case KindBar:
		return "trade_bar"
	}
	return ""
}

// KindOf returns the event kind a channel carries.
func KindOf(ch Channel) Kind {
	switch ch {
	case Level2:
		return KindBook
	case Trades:
		return KindTrade
	case Ticker:
		return KindTicker
	}
	if d, err := ch.Derivation(); err == nil {
		return d.Kind
	}
	return 0
}

// Side is the taker side of a trade.
type Side uint8

// Taker sides. SideUnknown is for venues that do not say.
const (
	SideUnknown Side = iota
	SideBuy
	SideSell
)

// String returns "buy", "sell" or "" (unknown), the wire form.
func (s Side) String() string {
	switch s {
	case SideBuy:
		return "buy"
	case SideSell:
		return "sell"
	}
	return ""
}

// Level is one price level of a book: an absolute size at a price.
// In an update, a zero Size removes the level.
type Level struct {
	Price decimal.Decimal
	Size  decimal.Decimal
}

// Event is one normalized event: a level2 book update or snapshot, a trade
// or a ticker. It is one flat struct rather than an interface so that
// handing one through the hot path costs no allocation and no type switch;
// the fields that belong to other kinds are left zero.
//
// An Event handed to a Sink is the sink's to read during the call only (see
// Sink); one the receiver keeps (a Clone, a decoded wire event) is
// immutable and may be shared between goroutines.
type Event struct {
	Kind   Kind
	Stream Stream
	// Seq is fanoutd's per-stream sequence (see the package doc). Adapters
	// leave it 0; the daemon assigns it on publish.
	Seq uint64
	// VenueTime is when the venue says the event happened; zero if unknown.
	VenueTime time.Time
	// RecvTime is when fanoutd read the frame that carried the event.
	RecvTime time.Time

	// Book (KindBook). Snapshot true means Bids and Asks are the whole book
	// and replace it; false means they are absolute sizes for the levels
	// named, size 0 removing the level. VenueSeq is the venue's sequence
	// number for the frame, 0 if it has none.
	Snapshot bool
	VenueSeq int64
	Bids     []Level
	Asks     []Level
	// FixedBids and FixedAsks are the levels in fixed point, which adapters
	// fill instead of Bids and Asks on the book path so that no decimal is
	// built per level. An event holds its levels in one form: when Bids and
	// Asks are both empty, FixedBids and FixedAsks hold them. Levels
	// returns decimals whichever the form.
	FixedBids []FixedLevel
	FixedAsks []FixedLevel

	// Trade (KindTrade): ID as the venue writes it, Price, Size, taker Side.
	TradeID string
	Price   decimal.Decimal
	Size    decimal.Decimal
	Side    Side

	// Ticker (KindTicker): best bid and ask with their sizes, and the last
	// trade price where the venue sends one (Last.Valid false if not).
	Bid     decimal.Decimal
	BidSize decimal.Decimal
	Ask     decimal.Decimal
	AskSize decimal.Decimal
	Last    decimal.NullDecimal
}

// HasFixed reports whether e holds its book levels in fixed point
// (FixedBids, FixedAsks) rather than in Bids and Asks.
func (e *Event) HasFixed() bool {
	return len(e.Bids) == 0 && len(e.Asks) == 0 && len(e.FixedBids)+len(e.FixedAsks) > 0
}

// Levels returns e's book levels as decimals, converting them (and
// allocating) when e holds them in fixed point.
func (e *Event) Levels() (bids, asks []Level) {
	if !e.HasFixed() {
		return e.Bids, e.Asks
	}
	return fixedLevels(e.FixedBids), fixedLevels(e.FixedAsks)
}

func fixedLevels(src []FixedLevel) []Level {
	if len(src) == 0 {
		return nil
	}
	out := make([]Level, len(src))
	for i, l := range src {
		out[i] = l.Level()
	}
	return out
}

// Clone returns a copy of e that shares no memory with it, with its book
// levels as decimals in Bids and Asks (FixedBids and FixedAsks nil): what
// a sink that keeps an event stores (see Sink).
func (e *Event) Clone() *Event {
	c := *e
	if e.HasFixed() {
		c.Bids, c.Asks = e.Levels()
	} else {
		c.Bids, c.Asks = cloneLevels(e.Bids), cloneLevels(e.Asks)
	}
	c.FixedBids, c.FixedAsks = nil, nil
	return &c
}

func cloneLevels(ls []Level) []Level {
	if ls == nil {
		return nil
	}
	return append(make([]Level, 0, len(ls)), ls...)
}
