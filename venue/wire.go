package venue

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/jsonw"
)

// AppendJSON appends the wire form of e to dst, one JSON object without a
// trailing newline, and returns the extended slice:
//
//	{"type":"book","stream":…,"seq":…,"snapshot":…,"venue_seq":…,"venue_time":…,"recv_time":…,"bids":[["price","size"],…],"asks":[…]}
//	{"type":"trade","stream":…,"seq":…,"id":…,"price":…,"size":…,"side":"buy"|"sell"|"","venue_time":…,"recv_time":…}
//	{"type":"ticker","stream":…,"seq":…,"bid":…,"bid_size":…,"ask":…,"ask_size":…,"last":…,"venue_time":…,"recv_time":…}
//	{"type":"quote","stream":…,"seq":…,"bid":…,"bid_size":…,"ask":…,"ask_size":…,"venue_time":…,"recv_time":…}
//
// A book_snapshot_* stream carries book events with snapshot true. In a
// quote, bid and bid_size (ask and ask_size) are omitted when that side of
// the book is empty (BidSize, AskSize zero).
//
// Decimals are strings, times RFC3339Nano in UTC. venue_seq is omitted when
// 0, venue_time when unknown, last when the venue sent none. The form
// round-trips exactly through UnmarshalJSON; it is what subscribers
// receive and what a relay between nodes carries.
func (e *Event) AppendJSON(dst []byte) []byte {
	dst = e.AppendJSONHead(dst)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	return e.AppendJSONTail(dst)
}

// AppendJSONHead appends what AppendJSON writes before the seq:
// {"type":…,"stream":…,"seq": — the same for every event of a stream, for
// a writer that keeps it per stream (AppendJSON is AppendJSONHead, the
// seq, AppendJSONTail).
func (e *Event) AppendJSONHead(dst []byte) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, e.Kind.String()...)
	dst = append(dst, `","stream":`...)
	dst = jsonw.AppendString(dst, string(e.Stream))
	return append(dst, `,"seq":`...)
}

// AppendJSONTail appends what AppendJSON writes after the seq, to the
// closing brace.
func (e *Event) AppendJSONTail(dst []byte) []byte {
	switch e.Kind {
	case KindBook:
		dst = append(dst, `,"snapshot":`...)
		dst = strconv.AppendBool(dst, e.Snapshot)
		if e.VenueSeq != 0 {
			dst = append(dst, `,"venue_seq":`...)
			dst = strconv.AppendInt(dst, e.VenueSeq, 10)
		}
		dst = appendTimes(dst, e)
		if e.HasFixed() {
			dst = append(dst, `,"bids":`...)
			dst = appendFixedLevels(dst, e.FixedBids)
			dst = append(dst, `,"asks":`...)
			dst = appendFixedLevels(dst, e.FixedAsks)
			break
		}
		dst = append(dst, `,"bids":`...)
		dst = appendLevels(dst, e.Bids)
		dst = append(dst, `,"asks":`...)
		dst = appendLevels(dst, e.Asks)
	case KindTrade:
		dst = append(dst, `,"id":`...)
		dst = jsonw.AppendString(dst, e.TradeID)
		dst = appendDecField(dst, `,"price":`, e.Price)
		dst = appendDecField(dst, `,"size":`, e.Size)
		dst = append(dst, `,"side":"`...)
		dst = append(dst, e.Side.String()...)
		dst = append(dst, '"')
		dst = appendTimes(dst, e)
	case KindTicker:
		dst = appendDecField(dst, `,"bid":`, e.Bid)
		dst = appendDecField(dst, `,"bid_size":`, e.BidSize)
		dst = appendDecField(dst, `,"ask":`, e.Ask)
		dst = appendDecField(dst, `,"ask_size":`, e.AskSize)
		if e.Last.Valid {
			dst = appendDecField(dst, `,"last":`, e.Last.Decimal)
		}
		dst = appendTimes(dst, e)
	case KindQuote:
		if !e.BidSize.IsZero() {
			dst = appendDecField(dst, `,"bid":`, e.Bid)
			dst = appendDecField(dst, `,"bid_size":`, e.BidSize)
		}
		if !e.AskSize.IsZero() {
			dst = appendDecField(dst, `,"ask":`, e.Ask)
			dst = appendDecField(dst, `,"ask_size":`, e.AskSize)
		}
		dst = appendTimes(dst, e)
	}
	return append(dst, '}')
}

func appendTimes(dst []byte, e *Event) []byte {
	var vt []byte // the venue time's text
	if !e.VenueTime.IsZero() {
		dst = append(dst, `,"venue_time":"`...)
		at := len(dst)
		dst = jsonw.AppendTime(dst, e.VenueTime)
		vt = dst[at:]
		dst = append(dst, '"')
	}
	dst = append(dst, `,"recv_time":"`...)
	dst = jsonw.AppendTimeAfter(dst, e.RecvTime, e.VenueTime, vt)
	return append(dst, '"')
}

func appendDecField(dst []byte, key string, d decimal.Decimal) []byte {
	dst = append(dst, key...)
	dst = append(dst, '"')
	dst = AppendDecimal(dst, d)
	return append(dst, '"')
}

func appendLevels(dst []byte, ls []Level) []byte {
	dst = append(dst, '[')
	for i := range ls {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `["`...)
		dst = AppendDecimal(dst, ls[i].Price)
		dst = append(dst, `","`...)
		dst = AppendDecimal(dst, ls[i].Size)
		dst = append(dst, `"]`...)
	}
	return append(dst, ']')
}

func appendFixedLevels(dst []byte, ls []FixedLevel) []byte {
	dst = append(dst, '[')
	for i := range ls {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `["`...)
		dst = AppendFixed(dst, ls[i].Price)
		dst = append(dst, `","`...)
		dst = AppendFixed(dst, ls[i].Size)
		dst = append(dst, `"]`...)
	}
	return append(dst, ']')
}

// MarshalJSON returns the wire form of e (see AppendJSON).
func (e *Event) MarshalJSON() ([]byte, error) {
	if e.Kind.String() == "" {
		return nil, errors.New("venue: marshal event with no kind")
	}
	return e.AppendJSON(nil), nil
}

type wireEvent struct {
	Type      string              `json:"type"`
	Stream    string              `json:"stream"`
	Seq       uint64              `json:"seq"`
	Snapshot  bool                `json:"snapshot"`
	VenueSeq  int64               `json:"venue_seq"`
	VenueTime string              `json:"venue_time"`
	RecvTime  string              `json:"recv_time"`
	Bids      [][2]string         `json:"bids"`
	Asks      [][2]string         `json:"asks"`
	ID        string              `json:"id"`
	Price     *decimal.Decimal    `json:"price"`
	Size      *decimal.Decimal    `json:"size"`
	Side      string              `json:"side"`
	Bid       *decimal.Decimal    `json:"bid"`
	BidSize   *decimal.Decimal    `json:"bid_size"`
	Ask       *decimal.Decimal    `json:"ask"`
	AskSize   *decimal.Decimal    `json:"ask_size"`
	Last      decimal.NullDecimal `json:"last"`
}

// UnmarshalJSON parses the wire form written by AppendJSON.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w wireEvent
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("venue: event: %w", err)
	}
	var out Event
	switch w.Type {
	case "book":
		out.Kind = KindBook
	case "trade":
		out.Kind = KindTrade
	case "ticker":
		out.Kind = KindTicker
	case "quote":
		out.Kind = KindQuote
	default:
		return fmt.Errorf("venue: event: unknown type %q", w.Type)
	}
	st, err := ParseStream(w.Stream)
	if err != nil {
		return err
	}
	if KindOf(st.Channel()) != out.Kind {
		return fmt.Errorf("venue: event: type %q on stream %q", w.Type, w.Stream)
	}
	out.Stream, out.Seq = st, w.Seq
	if w.VenueTime != "" {
		if out.VenueTime, err = time.Parse(time.RFC3339Nano, w.VenueTime); err != nil {
			return fmt.Errorf("venue: event: venue_time: %w", err)
		}
	}
	if out.RecvTime, err = time.Parse(time.RFC3339Nano, w.RecvTime); err != nil {
		return fmt.Errorf("venue: event: recv_time: %w", err)
	}
	dec := func(name string, d *decimal.Decimal) (decimal.Decimal, error) {
		if d == nil {
			return decimal.Decimal{}, fmt.Errorf("venue: event: missing %s", name)
		}
		return *d, nil
	}
	switch out.Kind {
	case KindBook:
		out.Snapshot, out.VenueSeq = w.Snapshot, w.VenueSeq
		if out.Bids, err = parseLevels(w.Bids); err != nil {
			return err
		}
		if out.Asks, err = parseLevels(w.Asks); err != nil {
			return err
		}
	case KindTrade:
		out.TradeID = w.ID
		if out.Price, err = dec("price", w.Price); err != nil {
			return err
		}
		if out.Size, err = dec("size", w.Size); err != nil {
			return err
		}
		switch w.Side {
		case "buy":
			out.Side = SideBuy
		case "sell":
			out.Side = SideSell
		case "":
		default:
			return fmt.Errorf("venue: event: unknown side %q", w.Side)
		}
	case KindTicker:
		for _, f := range []struct {
			name string
			src  *decimal.Decimal
			dst  *decimal.Decimal
		}{{"bid", w.Bid, &out.Bid}, {"bid_size", w.BidSize, &out.BidSize}, {"ask", w.Ask, &out.Ask}, {"ask_size", w.AskSize, &out.AskSize}} {
			if *f.dst, err = dec(f.name, f.src); err != nil {
				return err
			}
		}
		out.Last = w.Last
	case KindQuote:
		for _, f := range []struct {
			src *decimal.Decimal
			dst *decimal.Decimal
		}{{w.Bid, &out.Bid}, {w.BidSize, &out.BidSize}, {w.Ask, &out.Ask}, {w.AskSize, &out.AskSize}} {
			if f.src != nil {
				*f.dst = *f.src
			}
		}
	}
	*e = out
	return nil
}

func parseLevels(in [][2]string) ([]Level, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]Level, len(in))
	for i, l := range in {
		p, err := decimal.NewFromString(l[0])
		if err != nil {
			return nil, fmt.Errorf("venue: event: level %d price: %w", i, err)
		}
		s, err := decimal.NewFromString(l[1])
		if err != nil {
			return nil, fmt.Errorf("venue: event: level %d size: %w", i, err)
		}
		out[i] = Level{Price: p, Size: s}
	}
	return out, nil
}
