package bybit

import (
	"github.com/shopspring/decimal"
)

// scanner walks one JSON frame in place. It knows just enough JSON to read
// Bybit's frames without building a tree or copying: strings come back as
// slices of the frame (escapes are left as written; no field the decoder
// reads legitimately contains one), numbers as int64, and anything it does
// not need is skipped. encoding/json into maps was rejected: it allocates
// per key and per value and is an order of magnitude slower on this path.
//
// Every method records failure in bad and returns a zero value; callers
// check bad once after a group of reads. A scanner never panics on any
// input and never reads past the frame.
type scanner struct {
	b   []byte
	i   int
	bad bool
}

func (s *scanner) reset(b []byte) { s.b, s.i, s.bad = b, 0, false }

func (s *scanner) fail() { s.bad = true; s.i = len(s.b) }

func (s *scanner) ws() {
	for s.i < len(s.b) && s.b[s.i] <= ' ' {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// eat consumes c if it is the next non-space byte.
func (s *scanner) eat(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) expect(c byte) {
	if !s.eat(c) {
		s.fail()
	}
}

// str reads a string and returns its raw contents (escapes not decoded).
// A byte loop beats bytes.IndexByte here: Bybit's strings are a few bytes
// long, shorter than IndexByte's set-up pays for.
func (s *scanner) str() []byte {
	if !s.eat('"') {
		s.fail()
		return nil
	}
	b, start := s.b, s.i
	for i := start; i < len(b); i++ {
		switch b[i] {
		case '"':
			s.i = i + 1
			return b[start:i]
		case '\\':
			i++
		}
	}
	s.fail()
	return nil
}

// int reads an integer, written as a JSON number or as a string of digits
// (Bybit's req_id and a few ids come either way).
func (s *scanner) int() int64 {
	quoted := s.eat('"')
	if !quoted {
		s.ws()
	}
	neg := false
	if s.i < len(s.b) && s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	start := s.i
	var v int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if s.i-start >= 18 {
			s.fail()
			return 0
		}
		v = v*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	if s.i == start {
		s.fail()
		return 0
	}
	if quoted && !s.eat('"') {
		s.fail()
		return 0
	}
	if neg {
		v = -v
	}
	return v
}

// boolean reads true or false.
func (s *scanner) boolean() bool {
	s.ws()
	switch {
	case s.lit("true"):
		return true
	case s.lit("false"):
		return false
	}
	s.fail()
	return false
}

func (s *scanner) lit(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// maxDepth bounds nesting in skip, so a hostile frame cannot recurse deep.
const maxDepth = 32

// skip skips one value of any type.
func (s *scanner) skip() { s.skipDepth(0) }

func (s *scanner) skipDepth(depth int) {
	if depth > maxDepth {
		s.fail()
		return
	}
	switch s.peek() {
	case '"':
		s.str()
	case '{':
		s.i++
		if s.eat('}') {
			return
		}
		for !s.bad {
			s.str()
			s.expect(':')
			s.skipDepth(depth + 1)
			if s.eat('}') {
				return
			}
			s.expect(',')
		}
	case '[':
		s.i++
		if s.eat(']') {
			return
		}
		for !s.bad {
			s.skipDepth(depth + 1)
			if s.eat(']') {
				return
			}
			s.expect(',')
		}
	case 't':
		s.expectLit("true")
	case 'f':
		s.expectLit("false")
	case 'n':
		s.expectLit("null")
	default:
		start := s.i
		for s.i < len(s.b) {
			c := s.b[s.i]
			if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
				s.i++
				continue
			}
			break
		}
		if s.i == start {
			s.fail()
		}
	}
}

func (s *scanner) expectLit(w string) {
	if !s.lit(w) {
		s.fail()
	}
}

// object calls field for each key of an object; field must consume the
// value. It stops at the first failure.
func (s *scanner) object(field func(key []byte)) {
	s.expect('{')
	if s.bad || s.eat('}') {
		return
	}
	for !s.bad {
		k := s.str()
		s.expect(':')
		if s.bad {
			return
		}
		field(k)
		if s.eat('}') {
			return
		}
		s.expect(',')
	}
}

// end checks that only whitespace follows.
func (s *scanner) end() {
	s.ws()
	if s.i != len(s.b) {
		s.fail()
	}
}

// parseFixed reads a plain decimal ("63982.70", "0", "-1.5") into a
// mantissa and exponent without allocating. ok is false when b is not such
// a decimal or has more than 18 significant digits (the slow path takes
// those).
func parseFixed(b []byte) (m int64, exp int32, ok bool) {
	i := 0
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		i++
	}
	digits, frac, dot := 0, 0, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			if m != 0 || c != '0' {
				digits++
				if digits > 18 {
					return 0, 0, false
				}
			}
			m = m*10 + int64(c-'0')
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, 0, false
		}
	}
	start := 0
	if neg {
		start = 1
	}
	// at least one digit, and none of "1.", ".5" or "-" alone
	if len(b) == start || b[start] == '.' || b[len(b)-1] == '.' {
		return 0, 0, false
	}
	if neg {
		m = -m
	}
	return m, -int32(frac), true
}

var pow10 = [...]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// rescale returns m·10^(exp-to) at exponent to (to < exp), or false when
// that overflows int64.
func rescale(m int64, exp, to int32) (int64, bool) {
	k := exp - to
	if k <= 0 || int(k) >= len(pow10) {
		return m, k == 0
	}
	p := pow10[k]
	if m > (1<<63-1)/p || m < -(1<<63-1)/p {
		return m, false
	}
	return m * p, true
}

// decCacheBits sizes decCache: 1024 slots of 40 bytes, enough for the
// prices of a 200-level book and the sizes that recur.
const decCacheBits = 10

// decCache hands out one shared decimal.Decimal per (mantissa, exponent)
// it has seen recently. decimal.New allocates a big.Int each time; on a
// book feed the same prices (and many sizes) recur frame after frame, so a
// direct-mapped cache turns most of those allocations into a lookup.
// Decimals are immutable, so sharing one between events is safe. A map was
// rejected: it grows without a bound and hashes slower than this.
type decCache struct {
	slots [1 << decCacheBits]decSlot
}

type decSlot struct {
	m   int64
	exp int32
	ok  bool
	d   decimal.Decimal
}

func (c *decCache) get(m int64, exp int32) decimal.Decimal {
	h := (uint64(m)*0x9E3779B97F4A7C15 ^ uint64(uint32(exp))*0xC2B2AE3D27D4EB4F) >> (64 - decCacheBits)
	sl := &c.slots[h]
	if sl.ok && sl.m == m && sl.exp == exp {
		return sl.d
	}
	d := decimal.New(m, exp)
	*sl = decSlot{m: m, exp: exp, ok: true, d: d}
	return d
}
