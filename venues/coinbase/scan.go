package coinbase

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/shopspring/decimal"
)

// scanner walks one JSON frame in place. It reads only what the decoder
// uses and validates that; values it skips are skipped by bracket and
// string matching, not validated. The first error sets bad, after which
// every method returns false, so a caller checks bad once at the end.
//
// encoding/json into maps, or into structs, was rejected for the hot path:
// it allocates per field and per string and runs at a fraction of the
// frame rate the issue asks for (see the benchmark in bench_test.go).
type scanner struct {
	b   []byte
	i   int
	bad bool
}

func (s *scanner) fail() bool {
	s.bad = true
	s.i = len(s.b)
	return false
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// enter consumes the opening byte of an object or array.
func (s *scanner) enter(open byte) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != open {
		return s.fail()
	}
	s.i++
	return true
}

// more reports whether another member or element follows in the container
// being walked, consuming the separating comma, or the closing byte when
// it returns false. first must start true for each container.
func (s *scanner) more(end byte, first *bool) bool {
	s.ws()
	if s.i >= len(s.b) {
		return s.fail()
	}
	if s.b[s.i] == end {
		s.i++
		return false
	}
	if !*first {
		if s.b[s.i] != ',' {
			return s.fail()
		}
		s.i++
		s.ws()
	}
	*first = false
	return true
}

// key reads an object key and its colon.
func (s *scanner) key() []byte {
	k, _ := s.str()
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		s.fail()
		return nil
	}
	s.i++
	return k
}

// str reads a string and returns its raw bytes between the quotes, and
// whether they hold an escape (the caller unescapes if it cares).
func (s *scanner) str() (raw []byte, escaped bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.fail()
		return nil, false
	}
	start := s.i + 1
	// Fast paths: most strings (keys, prices, times) end within 32 bytes
	// and a byte loop beats IndexByte's call there; longer ones use
	// IndexByte for the quote. A backslash takes the slow loop.
	j := start
	for end := min(len(s.b), start+32); j < end; j++ {
		if c := s.b[j]; c == '"' {
			s.i = j + 1
			return s.b[start:j], false
		} else if c == '\\' {
			break
		}
	}
	if j == start+32 {
		if k := bytes.IndexByte(s.b[j:], '"'); k >= 0 && bytes.IndexByte(s.b[j:j+k], '\\') < 0 {
			s.i = j + k + 1
			return s.b[start : j+k], false
		}
	}
	for j := start; j < len(s.b); j++ {
		switch s.b[j] {
		case '"':
			s.i = j + 1
			return s.b[start:j], escaped
		case '\\':
			escaped = true
			j++
		}
	}
	s.fail()
	return nil, false
}

// text reads a string value and returns it unescaped. Only strings with
// escapes allocate.
func (s *scanner) text() []byte {
	start := s.i
	raw, esc := s.str()
	if !esc || s.bad {
		return raw
	}
	var out string
	if err := json.Unmarshal(s.b[start:s.i], &out); err != nil {
		s.fail()
		return nil
	}
	return []byte(out)
}

// int reads an integer number.
func (s *scanner) int() (int64, bool) {
	s.ws()
	neg := false
	if s.i < len(s.b) && s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	start := s.i
	var n int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if n > (1<<62)/10 {
			return 0, s.fail()
		}
		n = n*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	if s.i == start {
		return 0, s.fail()
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, s.fail()
	}
	if neg {
		n = -n
	}
	return n, true
}

// skip skips one value of any type. Containers are skipped by matching
// brackets outside strings, so a skipped value is not validated.
func (s *scanner) skip() bool {
	s.ws()
	if s.i >= len(s.b) {
		return s.fail()
	}
	switch s.b[s.i] {
	case '"':
		s.str()
		return !s.bad
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if s.str(); s.bad {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return s.fail()
	}
	// A number or a literal: up to the next delimiter.
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if s.i == start {
				return s.fail()
			}
			return true
		}
		s.i++
	}
	return s.fail()
}

// end checks that only whitespace follows the top-level value.
func (s *scanner) end() bool {
	s.ws()
	if s.i != len(s.b) {
		return s.fail()
	}
	return !s.bad
}

// priceExp is the exponent every price is rescaled to when it fits, so
// that venue.Book compares prices without allocating (decimal.Cmp is
// allocation-free only for equal exponents). Coinbase writes "79944" and
// "79944.1" in one book; no Coinbase product quotes finer than 1e-12.
// A price that does not fit keeps its own exponent: correct, only slower.
const priceExp = 12

var pow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
	1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// digits parses a non-negative decimal string of at most 19 significant
// digits into its mantissa and the number of digits after the point. ok is
// false for anything else (sign, exponent, empty, too long), and the
// caller falls back to decimal.NewFromString.
func digits(raw []byte) (m uint64, frac int, ok bool) {
	if len(raw) == 0 || len(raw) > 40 {
		return 0, 0, false
	}
	dot := -1
	n := 0
	for i, c := range raw {
		switch {
		case c >= '0' && c <= '9':
			if m == 0 && c == '0' {
				if dot >= 0 {
					frac++
				}
				continue
			}
			if n == 19 {
				return 0, 0, false
			}
			m = m*10 + uint64(c-'0')
			n++
			if dot >= 0 {
				frac++
			}
		case c == '.' && dot < 0 && i > 0 && i < len(raw)-1:
			dot = i
		default:
			return 0, 0, false
		}
	}
	return m, frac, true
}

type sizeKey struct {
	m    uint64
	frac int
}

// maxCache bounds each decimal cache; a full cache is cleared.
const maxCache = 1 << 16

// maxSizeCache bounds the size cache: sizes repeat far less than prices.
const maxSizeCache = 1 << 12

// decimals turns decimal strings into decimal.Decimal values, sharing one
// value per distinct price or size: shopspring decimals are immutable, so
// events and books can share them, and a hit costs no allocation (a miss
// costs the two of big.NewInt). Prices are keyed at priceExp, sizes by
// their own digits.
type decimals struct {
	prices map[uint64]decimal.Decimal
	sizes  map[sizeKey]decimal.Decimal
}

func newDecimals() decimals {
	return decimals{prices: make(map[uint64]decimal.Decimal, 1024), sizes: make(map[sizeKey]decimal.Decimal, 1024)}
}

// price parses a price; ok is false for a malformed or negative one.
func (d *decimals) price(raw []byte) (decimal.Decimal, bool) {
	m, frac, ok := digits(raw)
	if ok && frac <= priceExp {
		if k := m * pow10[priceExp-frac]; m == 0 || (k/pow10[priceExp-frac] == m && k < 1<<63) {
			if v, hit := d.prices[k]; hit {
				return v, true
			}
			v := decimal.New(int64(k), -priceExp)
			if len(d.prices) >= maxCache {
				clear(d.prices)
			}
			d.prices[k] = v
			return v, true
		}
	}
	return slowDecimal(raw)
}

// size parses a size; ok is false for a malformed or negative one.
func (d *decimals) size(raw []byte) (decimal.Decimal, bool) {
	m, frac, ok := digits(raw)
	if !ok || m >= 1<<63 {
		return slowDecimal(raw)
	}
	if m == 0 {
		return decimal.Decimal{}, true
	}
	k := sizeKey{m, frac}
	if v, hit := d.sizes[k]; hit {
		return v, true
	}
	v := decimal.New(int64(m), -int32(frac))
	if len(d.sizes) >= maxSizeCache {
		clear(d.sizes)
	}
	d.sizes[k] = v
	return v, true
}

func slowDecimal(raw []byte) (decimal.Decimal, bool) {
	if len(raw) == 0 || len(raw) > 64 {
		return decimal.Decimal{}, false
	}
	for _, c := range raw { // plain decimal notation only: no sign, no exponent
		if (c < '0' || c > '9') && c != '.' {
			return decimal.Decimal{}, false
		}
	}
	v, err := decimal.NewFromString(string(raw))
	if err != nil {
		return decimal.Decimal{}, false
	}
	return v, true
}

// clock parses the RFC 3339 UTC timestamps Coinbase writes
// ("2026-09-07T23:37:22.278662782Z"), reusing the last day's midnight so
// that a frame costs no time.Date call. Other forms go through time.Parse;
// an unparseable time is zero (the venue time is informative, not a
// reason to drop a frame).
type clock struct {
	day     [10]byte
	midnite time.Time
}

func num(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func (c *clock) parse(raw []byte) time.Time {
	if len(raw) >= 20 && raw[10] == 'T' && raw[13] == ':' && raw[16] == ':' && raw[len(raw)-1] == 'Z' {
		if string(raw[:10]) != string(c.day[:]) || c.midnite.IsZero() {
			y, ok1 := num(raw[0:4])
			mo, ok2 := num(raw[5:7])
			d, ok3 := num(raw[8:10])
			if !ok1 || !ok2 || !ok3 || raw[4] != '-' || raw[7] != '-' || mo < 1 || mo > 12 || d < 1 || d > 31 {
				return c.slow(raw)
			}
			c.midnite = time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC)
			copy(c.day[:], raw[:10])
		}
		h, ok1 := num(raw[11:13])
		mi, ok2 := num(raw[14:16])
		sec, ok3 := num(raw[17:19])
		if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || sec > 60 {
			return c.slow(raw)
		}
		ns := 0
		if frac := raw[19 : len(raw)-1]; len(frac) > 0 {
			if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
				return c.slow(raw)
			}
			f, ok := num(frac[1:])
			if !ok {
				return c.slow(raw)
			}
			ns = f * int(pow10[10-len(frac)])
		}
		return c.midnite.Add(time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute +
			time.Duration(sec)*time.Second + time.Duration(ns))
	}
	return c.slow(raw)
}

func (c *clock) slow(raw []byte) time.Time {
	t, err := time.Parse(time.RFC3339Nano, string(raw))
	if err != nil {
		return time.Time{}
	}
	return t
}
