package client

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Message is what the client hands its Handler: *BookEvent, *Trade,
// *Ticker, *Quote, *TradeBar, *Notice, *Gap, *BookState, *Connected,
// *Disconnected.
type Message interface{ message() }

// BookEvent is a book event of a level2 stream (snapshot or update) or of
// a book_snapshot_* stream (always a snapshot). Levels are the wire's
// canonical strings; RawLevel.Decimal converts.
type BookEvent struct {
	Stream    string
	Seq       uint64
	Snapshot  bool
	VenueSeq  uint64
	VenueTime time.Time
	RecvTime  time.Time
	Bids      []RawLevel
	Asks      []RawLevel
}

// Trade is one trade of a trades stream.
type Trade struct {
	Stream    string
	Seq       uint64
	ID        string
	Price     decimal.Decimal
	Size      decimal.Decimal
	Side      string // the taker side: "buy", "sell", or "" where the venue does not say
	VenueTime time.Time
	RecvTime  time.Time
}

// Ticker is one event of a ticker stream.
type Ticker struct {
	Stream    string
	Seq       uint64
	Bid       decimal.Decimal
	BidSize   decimal.Decimal
	Ask       decimal.Decimal
	AskSize   decimal.Decimal
	Last      decimal.Decimal
	HasLast   bool
	VenueTime time.Time
	RecvTime  time.Time
}

// Quote is one event of a quote stream (the best bid and ask of a book).
type Quote struct {
	Stream    string
	Seq       uint64
	Bid       decimal.Decimal
	BidSize   decimal.Decimal
	HasBid    bool // false while the bid side is empty
	Ask       decimal.Decimal
	AskSize   decimal.Decimal
	HasAsk    bool
	VenueTime time.Time
	RecvTime  time.Time
}

// TradeBar is one closed interval of a trade_bar_* stream.
type TradeBar struct {
	Stream                        string
	Seq                           uint64
	IntervalMS                    int64
	Start, End                    time.Time
	Open, High, Low, Close        decimal.Decimal
	Volume, BuyVolume, SellVolume decimal.Decimal
	Trades                        int64
	FirstTradeTime, LastTradeTime time.Time
	Gap                           bool // the interval spans a link drop
}

// Notice is one of the daemon's notices, as sent.
type Notice struct {
	Kind     string
	Severity string
	Venue    string
	Stream   string
	At       time.Time
	Message  string
	Details  map[string]any
}

// Gap is a loss on one stream: the seqs First..Last were not received and
// will not be. Reason is where the client learnt it: "resumed" (the
// daemon's resumed notice, after a drop or a reattach), "stream_gap" (an
// edge lost them on the bus), "hole" (the client saw a seq skip), or
// "restart" (after a reconnect the stream's numbering started again: the
// daemon forgot it, First and Last are 0, the extent is unknown).
type Gap struct {
	Stream string
	First  uint64
	Last   uint64
	Reason string
}

// BookState is a change of a book's state.
type BookState struct {
	Stream string
	State  State
	Reason Reason
	Seq    uint64 // the book's seq at the change
	// GapFirst, GapLast: the loss, for ReasonGap.
	GapFirst, GapLast uint64
}

// Connected reports a connection (and, after the first, a reconnection).
type Connected struct {
	URL     string
	Attempt int // failed attempts since the last connection
}

// Disconnected reports a connection that ended; the client reconnects
// unless Err is fatal (see Error.Fatal).
type Disconnected struct {
	URL string
	Err error
}

func (*BookEvent) message()    {}
func (*Trade) message()        {}
func (*Ticker) message()       {}
func (*Quote) message()        {}
func (*TradeBar) message()     {}
func (*Notice) message()       {}
func (*Gap) message()          {}
func (*BookState) message()    {}
func (*Connected) message()    {}
func (*Disconnected) message() {}

// wire is every field of every server → client object.
type wire struct {
	Type      string          `json:"type"`
	Stream    string          `json:"stream"`
	Seq       uint64          `json:"seq"`
	Snapshot  bool            `json:"snapshot"`
	VenueSeq  uint64          `json:"venue_seq"`
	VenueTime string          `json:"venue_time"`
	RecvTime  string          `json:"recv_time"`
	Bids      [][2]string     `json:"bids"`
	Asks      [][2]string     `json:"asks"`
	ID        string          `json:"id"`
	Price     string          `json:"price"`
	Size      string          `json:"size"`
	Side      string          `json:"side"`
	Bid       string          `json:"bid"`
	BidSize   string          `json:"bid_size"`
	Ask       string          `json:"ask"`
	AskSize   string          `json:"ask_size"`
	Last      *string         `json:"last"`
	Kind      string          `json:"kind"`
	Severity  string          `json:"severity"`
	Venue     string          `json:"venue"`
	At        string          `json:"at"`
	Message   string          `json:"message"`
	Details   json.RawMessage `json:"details"`
	Code      string          `json:"code"`
	Streams   []string        `json:"streams"`

	IntervalMS     int64  `json:"interval_ms"`
	Start          string `json:"start"`
	End            string `json:"end"`
	Open           string `json:"open"`
	High           string `json:"high"`
	Low            string `json:"low"`
	Close          string `json:"close"`
	Volume         string `json:"volume"`
	BuyVolume      string `json:"buy_volume"`
	SellVolume     string `json:"sell_volume"`
	Trades         int64  `json:"trades"`
	FirstTradeTime string `json:"first_trade_time"`
	LastTradeTime  string `json:"last_trade_time"`
	Gap            bool   `json:"gap"`
}

func ts(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func dec(s string) decimal.Decimal {
	d, _ := decimal.NewFromString(s)
	return d
}

func raw(ls [][2]string) []RawLevel {
	out := make([]RawLevel, len(ls))
	for i, l := range ls {
		out[i] = RawLevel{l[0], l[1]}
	}
	return out
}

func (w *wire) book() *BookEvent {
	return &BookEvent{Stream: w.Stream, Seq: w.Seq, Snapshot: w.Snapshot, VenueSeq: w.VenueSeq,
		VenueTime: ts(w.VenueTime), RecvTime: ts(w.RecvTime), Bids: raw(w.Bids), Asks: raw(w.Asks)}
}

// event returns the typed event of a data object, or nil.
func (w *wire) event() Message {
	switch w.Type {
	case "book":
		return w.book()
	case "trade":
		return &Trade{Stream: w.Stream, Seq: w.Seq, ID: w.ID, Price: dec(w.Price), Size: dec(w.Size), Side: w.Side, VenueTime: ts(w.VenueTime), RecvTime: ts(w.RecvTime)}
	case "ticker":
		t := &Ticker{Stream: w.Stream, Seq: w.Seq, Bid: dec(w.Bid), BidSize: dec(w.BidSize), Ask: dec(w.Ask), AskSize: dec(w.AskSize), VenueTime: ts(w.VenueTime), RecvTime: ts(w.RecvTime)}
		if w.Last != nil {
			t.Last, t.HasLast = dec(*w.Last), true
		}
		return t
	case "quote":
		return &Quote{Stream: w.Stream, Seq: w.Seq, Bid: dec(w.Bid), BidSize: dec(w.BidSize), HasBid: w.Bid != "", Ask: dec(w.Ask), AskSize: dec(w.AskSize), HasAsk: w.Ask != "", VenueTime: ts(w.VenueTime), RecvTime: ts(w.RecvTime)}
	case "trade_bar":
		return &TradeBar{Stream: w.Stream, Seq: w.Seq, IntervalMS: w.IntervalMS, Start: ts(w.Start), End: ts(w.End),
			Open: dec(w.Open), High: dec(w.High), Low: dec(w.Low), Close: dec(w.Close), Volume: dec(w.Volume), BuyVolume: dec(w.BuyVolume), SellVolume: dec(w.SellVolume),
			Trades: w.Trades, FirstTradeTime: ts(w.FirstTradeTime), LastTradeTime: ts(w.LastTradeTime), Gap: w.Gap}
	}
	return nil
}

func (w *wire) notice() *Notice {
	n := &Notice{Kind: w.Kind, Severity: w.Severity, Venue: w.Venue, Stream: w.Stream, At: ts(w.At), Message: w.Message}
	if len(w.Details) > 0 {
		_ = json.Unmarshal(w.Details, &n.Details)
	}
	return n
}

// channel returns the channel of stream venue:channel:symbol.
func channel(stream string) string {
	_, rest, ok := strings.Cut(stream, ":")
	if !ok {
		return ""
	}
	ch, _, _ := strings.Cut(rest, ":")
	return ch
}

// venueOf returns the venue of a stream.
func venueOf(stream string) string {
	v, _, _ := strings.Cut(stream, ":")
	return v
}

// isLevel2 reports whether stream is a raw level2 stream (kept as a Book).
func isLevel2(stream string) bool { return channel(stream) == "level2" }

// isConflated reports whether stream is a derived stream whose messages
// are whole states (book_snapshot_*, quote): a seq skip there is a
// replaced message, not a loss.
func isConflated(stream string) bool {
	ch := channel(stream)
	return ch == "quote" || strings.HasPrefix(ch, "book_snapshot_")
}

func validStream(s string) error {
	if strings.Count(s, ":") < 2 {
		return fmt.Errorf("client: stream %q is not venue:channel:symbol", s)
	}
	return nil
}
