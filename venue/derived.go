package venue

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Derivation says what a derived channel computes from its source channel.
// The names are Tardis.dev's data types, so that users recognise them:
//
//	book_snapshot_<depth>_<interval>  top depth levels per side, at most once per interval (source level2)
//	quote                             best bid and ask with sizes, on every change of the top (source level2)
//	trade_bar_<interval>              OHLC, volumes and count per interval of receive time (source trades)
//
// Depth is 1 to MaxDerivedDepth; an interval is a decimal integer
// followed by ms, s or m, at most MaxDerivedInterval, without leading
// zeros; book_snapshot takes 0ms (every change), trade_bar does not. Equal
// intervals are one channel: Canonical writes each in the largest unit
// that divides it (1000ms is 1s), and ParseChannel and ParseStream return
// that form.
type Derivation struct {
	Kind     Kind          // KindBook (book_snapshot), KindQuote or KindBar
	Depth    int           // book_snapshot: levels per side
	Interval time.Duration // book_snapshot and trade_bar; 0: every change
}

// Limits of derived channels' parameters.
const (
	MaxDerivedDepth    = 1000
	MaxDerivedInterval = 24 * time.Hour
)

// Quote is the derived channel of best bids and asks.
const Quote Channel = "quote"

// Derived reports whether c is a valid derived channel.
func (c Channel) Derived() bool {
	_, err := c.Derivation()
	return err == nil
}

// Known reports whether c is a raw channel or a valid derived one.
func (c Channel) Known() bool { return c.Valid() || c.Derived() }

// Source returns the raw channel c is computed from: level2 for
// book_snapshot_* and quote, trades for trade_bar_*, and c itself for a
// raw channel (or "" for an unknown one).
func (c Channel) Source() Channel {
	if c.Valid() {
		return c
	}
	d, err := c.Derivation()
	if err != nil {
		return ""
	}
	if d.Kind == KindBar {
		return Trades
	}
	return Level2
}

// Derivation parses a derived channel's name.
func (c Channel) Derivation() (Derivation, error) {
	s := string(c)
	switch {
	case s == string(Quote):
		return Derivation{Kind: KindQuote}, nil
	case strings.HasPrefix(s, "book_snapshot_"):
		ds, is, ok := strings.Cut(s[len("book_snapshot_"):], "_")
		if !ok {
			return Derivation{}, fmt.Errorf("venue: channel %q: want book_snapshot_<depth>_<interval>", s)
		}
		n, err := strconv.Atoi(ds)
		if err != nil || n < 1 || n > MaxDerivedDepth || ds[0] == '0' || ds[0] == '+' {
			return Derivation{}, fmt.Errorf("venue: channel %q: depth %q is not 1 to %d", s, ds, MaxDerivedDepth)
		}
		iv, err := parseInterval(is, true)
		if err != nil {
			return Derivation{}, fmt.Errorf("venue: channel %q: %w", s, err)
		}
		return Derivation{Kind: KindBook, Depth: n, Interval: iv}, nil
	case strings.HasPrefix(s, "trade_bar_"):
		iv, err := parseInterval(s[len("trade_bar_"):], false)
		if err != nil {
			return Derivation{}, fmt.Errorf("venue: channel %q: %w", s, err)
		}
		return Derivation{Kind: KindBar, Interval: iv}, nil
	}
	return Derivation{}, fmt.Errorf("venue: unknown channel %q (want level2, trades, ticker, quote, book_snapshot_<depth>_<interval> or trade_bar_<interval>)", s)
}

// Canonical returns the one name of the derived channel c: its interval
// in the largest of m, s and ms that divides it (book_snapshot_10_1000ms is
// book_snapshot_10_1s, trade_bar_60s is trade_bar_1m, 0 stays 0ms). A raw
// or unknown channel is returned as is.
func (c Channel) Canonical() Channel {
	if c.Valid() {
		return c
	}
	d, err := c.Derivation()
	if err != nil {
		return c
	}
	var b []byte
	switch d.Kind {
	case KindBook:
		b = append(b, "book_snapshot_"...)
		b = strconv.AppendInt(b, int64(d.Depth), 10)
		b = append(b, '_')
	case KindBar:
		b = append(b, "trade_bar_"...)
	default:
		return c
	}
	b = appendInterval(b, d.Interval)
	if string(b) == string(c) {
		return c
	}
	return Channel(b)
}

// appendInterval appends iv in the largest unit that divides it.
func appendInterval(b []byte, iv time.Duration) []byte {
	switch {
	case iv == 0:
		return append(b, "0ms"...)
	case iv%time.Minute == 0:
		return append(strconv.AppendInt(b, int64(iv/time.Minute), 10), 'm')
	case iv%time.Second == 0:
		return append(strconv.AppendInt(b, int64(iv/time.Second), 10), 's')
	}
	return append(strconv.AppendInt(b, int64(iv/time.Millisecond), 10), "ms"...)
}

// parseInterval parses <n>ms, <n>s or <n>m.
func parseInterval(s string, zero bool) (time.Duration, error) {
	var num string
	var unit time.Duration
	switch {
	case strings.HasSuffix(s, "ms"):
		num, unit = s[:len(s)-2], time.Millisecond
	case strings.HasSuffix(s, "s"):
		num, unit = s[:len(s)-1], time.Second
	case strings.HasSuffix(s, "m"):
		num, unit = s[:len(s)-1], time.Minute
	default:
		return 0, fmt.Errorf("interval %q: want <n>ms, <n>s or <n>m", s)
	}
	if num == "" || len(num) > 8 || num[0] == '0' && num != "0" {
		return 0, fmt.Errorf("interval %q: want <n>ms, <n>s or <n>m", s)
	}
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return 0, fmt.Errorf("interval %q: want <n>ms, <n>s or <n>m", s)
		}
	}
	n, _ := strconv.Atoi(num)
	d := time.Duration(n) * unit
	switch {
	case d == 0 && !zero:
		return 0, fmt.Errorf("interval %q: must be more than 0", s)
	case d == 0 && unit != time.Millisecond:
		return 0, fmt.Errorf("interval %q: write 0 as 0ms", s)
	case d > MaxDerivedInterval:
		return 0, fmt.Errorf("interval %q: more than %v", s, MaxDerivedInterval)
	}
	return d, nil
}
