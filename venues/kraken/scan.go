package kraken

import "time"

// scanner reads the subset of JSON Kraken sends, straight from the frame's
// bytes: no tree, no maps, no copies. encoding/json into maps was rejected
// because it allocates per key and per number and cannot hand back a
// number's raw text, which the checksum needs (see checksum.go).
//
// A scanner that meets anything it cannot read sets bad and stops moving;
// every method is then a no-op returning zero values, so callers check bad
// once after a loop rather than after every call.
type scanner struct {
	b   []byte
	i   int
	bad bool
}

// maxDepth bounds nesting in skip so a hostile frame cannot exhaust the
// stack.
const maxDepth = 32

func (s *scanner) reset(b []byte) { s.b, s.i, s.bad = b, 0, false }

func (s *scanner) ws() {
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return // the common case: Kraken sends no space between tokens
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it, or 0.
func (s *scanner) peek() byte {
	s.ws()
	if s.bad || s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// expect consumes c after optional space.
func (s *scanner) expect(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	s.bad = true
	return false
}

// more drives a loop over an object's members or an array's elements:
//
//	first := true
//	for s.more('}', &first) { … }
//
// It consumes the separating comma, and the closing byte when the loop ends.
func (s *scanner) more(end byte, first *bool) bool {
	c := s.peek()
	switch {
	case s.bad || c == 0:
		s.bad = true
		return false
	case c == end:
		s.i++
		return false
	case !*first:
		if c != ',' {
			s.bad = true
			return false
		}
		s.i++
	}
	*first = false
	return true
}

// key reads an object key and the colon after it.
func (s *scanner) key() []byte {
	k := s.str()
	s.expect(':')
	return k
}

// str reads a string and returns its raw bytes between the quotes, escapes
// left as written (no key or symbol Kraken sends has any).
func (s *scanner) str() []byte {
	if !s.expect('"') {
		return nil
	}
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			out := s.b[start:s.i]
			s.i++
			return out
		case c == '\\':
			s.i += 2
		case c < 0x20:
			s.bad = true
			return nil
		default:
			s.i++
		}
	}
	s.bad = true
	return nil
}

// num reads a number, or a string holding one (the checksum guide writes
// prices as strings), and returns its text.
func (s *scanner) num() []byte {
	c := s.peek()
	if c == '"' {
		return s.str()
	}
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
		s.bad = true
		return nil
	}
	return s.b[start:s.i]
}

// boolean reads true or false.
func (s *scanner) boolean() bool {
	switch s.peek() {
	case 't':
		return s.lit("true")
	case 'f':
		s.lit("false")
		return false
	}
	s.bad = true
	return false
}

func (s *scanner) lit(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	s.bad = true
	return false
}

// skip reads and discards one value of any kind.
func (s *scanner) skip() { s.skipDepth(0) }

func (s *scanner) skipDepth(depth int) {
	if depth > maxDepth {
		s.bad = true
		return
	}
	switch c := s.peek(); c {
	case '"':
		s.str()
	case '{':
		s.i++
		first := true
		for s.more('}', &first) {
			s.key()
			s.skipDepth(depth + 1)
		}
	case '[':
		s.i++
		first := true
		for s.more(']', &first) {
			s.skipDepth(depth + 1)
		}
	case 't':
		s.lit("true")
	case 'f':
		s.lit("false")
	case 'n':
		s.lit("null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			s.num()
			return
		}
		s.bad = true
	}
}

// end reports whether only space is left.
func (s *scanner) end() bool {
	s.ws()
	return !s.bad && s.i == len(s.b)
}

// pow10 holds 10^0 … 10^18, every power that fits an int64.
var pow10 = [...]int64{
	1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
}

// maxDigits is how many significant digits parseNum accepts: any 18-digit
// coefficient fits an int64.
const maxDigits = 18

// parseNum parses the text of a JSON number into coef·10^-decs without
// going through float64: "0.12290" is (12290, 5), "9705.60000000" is
// (970560000000, 8), "1e-05" is (1, 5). It fails on anything that is not a
// number, on more than 18 significant digits and on absurd exponents.
func parseNum(b []byte) (coef int64, decs int, ok bool) {
	i, neg := 0, false
	if i < len(b) && b[i] == '-' {
		neg, i = true, i+1
	}
	var c int64
	nd := 0
	digits := false
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		digits = true
		d := int64(b[i] - '0')
		if c == 0 && d == 0 {
			continue
		}
		if nd == maxDigits {
			return 0, 0, false
		}
		c, nd = c*10+d, nd+1
	}
	if i < len(b) && b[i] == '.' {
		i++
		frac := false
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			frac = true
			decs++
			d := int64(b[i] - '0')
			if c == 0 && d == 0 {
				continue
			}
			if nd == maxDigits {
				return 0, 0, false
			}
			c, nd = c*10+d, nd+1
		}
		if !frac {
			return 0, 0, false
		}
	}
	if !digits {
		return 0, 0, false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := false
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			eneg, i = b[i] == '-', i+1
		}
		e, ed := 0, 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if ed == 3 {
				return 0, 0, false
			}
			e, ed = e*10+int(b[i]-'0'), ed+1
		}
		if ed == 0 {
			return 0, 0, false
		}
		if eneg {
			decs += e
		} else {
			decs -= e
		}
	}
	if i != len(b) {
		return 0, 0, false
	}
	for ; decs < 0; decs++ {
		if c > (1<<63-1)/10 {
			return 0, 0, false
		}
		c *= 10
	}
	if decs > 64 {
		return 0, 0, false
	}
	if neg {
		c = -c
	}
	return c, decs, true
}

// rescale returns coef·10^-decs as a coefficient at exponent -prec. It
// fails when the value has non-zero digits finer than prec (the venue sent
// more precision than its instrument has) or overflows an int64.
func rescale(coef int64, decs, prec int) (int64, bool) {
	switch {
	case decs == prec:
		return coef, true
	case decs < prec:
		k := prec - decs
		if k >= len(pow10) {
			return 0, coef == 0
		}
		p := pow10[k]
		if coef > (1<<63-1)/p || coef < -(1<<63-1)/p {
			return 0, false
		}
		return coef * p, true
	}
	k := decs - prec
	if k >= len(pow10) {
		return 0, coef == 0
	}
	p := pow10[k]
	if coef%p != 0 {
		return 0, false
	}
	return coef / p, true
}

// parseTime reads Kraken's RFC 3339 timestamps ("2023-10-06T17:35:55.440295Z")
// without allocating; other forms go through time.Parse.
func parseTime(b []byte) (time.Time, bool) {
	if len(b) >= 20 && b[4] == '-' && b[7] == '-' && b[10] == 'T' && b[13] == ':' && b[16] == ':' && b[len(b)-1] == 'Z' {
		num := func(s []byte) (int, bool) {
			n := 0
			for _, c := range s {
				if c < '0' || c > '9' {
					return 0, false
				}
				n = n*10 + int(c-'0')
			}
			return n, true
		}
		y, ok1 := num(b[0:4])
		mo, ok2 := num(b[5:7])
		d, ok3 := num(b[8:10])
		h, ok4 := num(b[11:13])
		mi, ok5 := num(b[14:16])
		sec, ok6 := num(b[17:19])
		ns := 0
		rest := b[19 : len(b)-1]
		ok7 := true
		if len(rest) > 0 {
			if rest[0] != '.' || len(rest) == 1 || len(rest) > 10 {
				ok7 = false
			} else {
				f, ok := num(rest[1:])
				ns, ok7 = f*int(pow10[10-len(rest)]), ok
			}
		}
		if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h < 24 && mi < 60 && sec < 61 {
			return time.Date(y, time.Month(mo), d, h, mi, sec, ns, time.UTC), true
		}
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	return t, err == nil
}
