package venue

import (
	"errors"
	"fmt"
	"strings"
)

// Channel is the kind of data a stream carries.
type Channel string

// The three channels of fanoutd. The strings are part of the wire contract.
const (
	Level2 Channel = "level2"
	Trades Channel = "trades"
	Ticker Channel = "ticker"
)

// Valid reports whether c is one of the three channels.
func (c Channel) Valid() bool { return c == Level2 || c == Trades || c == Ticker }

// ParseChannel returns the channel named s, raw or derived (see
// Derivation), or an error naming s. A derived channel is returned in its
// canonical form (Channel.Canonical).
func ParseChannel(s string) (Channel, error) {
	c := Channel(s)
	if c.Valid() {
		return c, nil
	}
	if _, err := c.Derivation(); err != nil {
		return "", err
	}
	return c.Canonical(), nil
}

// Stream names one feed of events: "venue:channel:symbol", with the symbol
// written as the venue writes it ("coinbase:level2:BTC-USD",
// "kraken:level2:BTC/USD", "binance:level2:BTCUSDT").
//
// A Stream is a string so it can key maps, be compared and be written to the
// wire without work; build one with NewStream or ParseStream so it is valid.
type Stream string

// ErrBadStream is wrapped by every error ParseStream returns.
var ErrBadStream = errors.New("venue: bad stream")

// NewStream joins the three parts of a stream name. It does not validate;
// use ParseStream on input from outside.
func NewStream(venueName string, ch Channel, symbol string) Stream {
	return Stream(venueName + ":" + string(ch) + ":" + symbol)
}

// ParseStream validates s as venue:channel:symbol. The venue is lower-case
// letters and digits, the channel one of Level2, Trades, Ticker or a
// derived channel, and the
// symbol 1 to 64 printable non-space characters (it may contain ':' or '/').
// A derived channel's interval is rewritten in its canonical form
// (Channel.Canonical): "x:book_snapshot_10_1000ms:Y" is returned as
// "x:book_snapshot_10_1s:Y", the one name of that stream.
func ParseStream(s string) (Stream, error) {
	v, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", fmt.Errorf("%w %q: want venue:channel:symbol", ErrBadStream, s)
	}
	ch, sym, ok := strings.Cut(rest, ":")
	if !ok {
		return "", fmt.Errorf("%w %q: want venue:channel:symbol", ErrBadStream, s)
	}
	if !validVenueName(v) {
		return "", fmt.Errorf("%w %q: venue %q is not lower-case letters and digits", ErrBadStream, s, v)
	}
	if !Channel(ch).Known() {
		return "", fmt.Errorf("%w %q: unknown channel %q (want level2, trades, ticker, quote, book_snapshot_<depth>_<interval> or trade_bar_<interval>)", ErrBadStream, s, ch)
	}
	if !ValidSymbol(sym) {
		return "", fmt.Errorf("%w %q: symbol must be 1 to 64 printable characters without spaces", ErrBadStream, s)
	}
	return Stream(s).Canonical(), nil
}

func validVenueName(v string) bool {
	if v == "" || len(v) > 32 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ValidSymbol reports whether s can be the symbol of a stream: 1 to 64
// printable ASCII characters other than space, '"' and '\\'. Adapters
// check what a venue sends with it before a symbol becomes a stream.
func ValidSymbol[T string | []byte](s T) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Canonical returns s with a derived channel in its canonical form
// (Channel.Canonical); any other stream is returned as is.
func (s Stream) Canonical() Stream {
	c := s.Channel()
	if c.Valid() {
		return s
	}
	if cc := c.Canonical(); cc != c {
		return NewStream(s.Venue(), cc, s.Symbol())
	}
	return s
}

// Venue returns the venue part of s.
func (s Stream) Venue() string {
	v, _, _ := strings.Cut(string(s), ":")
	return v
}

// Channel returns the channel part of s.
func (s Stream) Channel() Channel {
	_, rest, _ := strings.Cut(string(s), ":")
	ch, _, _ := strings.Cut(rest, ":")
	return Channel(ch)
}

// Symbol returns the symbol part of s.
func (s Stream) Symbol() string {
	_, rest, _ := strings.Cut(string(s), ":")
	_, sym, _ := strings.Cut(rest, ":")
	return sym
}
