package okx

import "math"

// scanner reads JSON from a frame without building anything: it hands out
// the raw bytes of strings and parses the few integers and decimals the
// adapter needs in place. A scanner is a value; copy it to look ahead.
//
// encoding/json into maps or structs was rejected: it allocates per field
// and cannot reach a million frames a second; a general fast parser
// (fastjson) still builds a tree the adapter would walk again. OKX frames
// have a small fixed shape, so the decoder walks the bytes once.
type scanner struct {
	b []byte
	i int
}

// maxDepth bounds nesting when skipping values, so a hostile frame cannot
// exhaust the stack.
const maxDepth = 32

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

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// eat consumes c if it is the next non-space byte.
func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c { // OKX sends no whitespace: skip ws()
		s.i++
		return true
	}
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// str reads a string and returns its raw contents: escapes are not
// decoded, so callers compare keys and values that never carry escapes
// and reject values that must not (numbers, ids).
func (s *scanner) str() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	// A plain loop: the strings of a frame are short (prices, keys), where
	// bytes.IndexByte's call costs more than it saves.
	for i := s.i; i < len(s.b); i++ {
		switch s.b[i] {
		case '"':
			s.i = i + 1
			return s.b[start:i], true
		case '\\':
			i++
		}
	}
	s.i = len(s.b)
	return nil, false
}

// skip consumes one value of any kind.
func (s *scanner) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch s.peek() {
	case '"':
		_, ok := s.str()
		return ok
	case '{':
		s.i++
		if s.eat('}') {
			return true
		}
		for {
			if _, ok := s.str(); !ok || !s.eat(':') || !s.skip(depth+1) {
				return false
			}
			if s.eat(',') {
				continue
			}
			return s.eat('}')
		}
	case '[':
		s.i++
		if s.eat(']') {
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			if s.eat(',') {
				continue
			}
			return s.eat(']')
		}
	case 0:
		return false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E' {
			s.i++
			continue
		}
		break
	}
	return s.i > start
}

// int reads a JSON integer (optionally negative).
func (s *scanner) int() (int64, bool) {
	s.ws()
	neg := false
	if s.i < len(s.b) && s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	start := s.i
	var n int64
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c < '0' || c > '9' {
			break
		}
		if n > (math.MaxInt64-9)/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		s.i++
	}
	if s.i == start {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// intOrString reads an integer written either bare or as a string
// ("ts":"1597026383085", "checksum":-855196043).
func (s *scanner) intOrString() (int64, bool) {
	if s.peek() != '"' {
		return s.int()
	}
	b, ok := s.str()
	if !ok {
		return 0, false
	}
	return atoi(b)
}

func atoi(b []byte) (int64, bool) {
	sc := scanner{b: b}
	n, ok := sc.int()
	return n, ok && sc.i == len(b)
}

// numStatus is how parseNum ended.
type numStatus uint8

const (
	numOK numStatus = iota
	numBad
	numBig // well formed but more digits than an int64 holds
)

// parseNum parses an unsigned decimal as OKX writes prices and sizes
// ("30243.5", "0.00047612", "415") into a mantissa and the number of digits
// after the point. Signs, exponents and empty strings are numBad.
func parseNum(b []byte) (m int64, frac int32, st numStatus) {
	if len(b) == 0 || b[0] == '.' || b[len(b)-1] == '.' {
		return 0, 0, numBad
	}
	dot := false
	big := false
	for _, c := range b {
		if c == '.' {
			if dot {
				return 0, 0, numBad
			}
			dot = true
			continue
		}
		if c < '0' || c > '9' {
			return 0, 0, numBad
		}
		if dot {
			frac++
		}
		if big || m > (math.MaxInt64-9)/10 {
			big = true
			continue
		}
		m = m*10 + int64(c-'0')
	}
	if big {
		return 0, frac, numBig
	}
	return m, frac, numOK
}

var pow10 = [...]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// scaleUp returns m * 10^by, and false on overflow.
func scaleUp(m int64, by int32) (int64, bool) {
	if by == 0 {
		return m, true
	}
	if by < 0 || int(by) >= len(pow10) {
		return 0, false
	}
	p := pow10[by]
	if m > math.MaxInt64/p || m < math.MinInt64/p {
		return 0, false
	}
	return m * p, true
}
