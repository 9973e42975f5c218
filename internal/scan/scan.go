// Package scan reads JSON from a venue frame in place, without allocating:
// the scanner and the number and time parsing the five venue decoders
// share.
//
// # Why not encoding/json
//
// A decoder reads frames of a small, known shape, up to a million a
// second. encoding/json into maps or structs allocates per key and per
// value and cannot hand back a number's text (Kraken's and OKX's checksums
// need the exact text the venue sent); a tree-building parser (fastjson)
// builds a structure the decoder would walk a second time. A Scanner walks
// the bytes once, and the decoder takes what it needs as it goes.
//
// # What a Scanner accepts
//
// Strings come back raw, as slices of the frame with escapes left as
// written (Text unescapes, allocating only when there is an escape); a
// string holding a raw control character fails, as JSON requires. Numbers
// are read as integers (Int), or as their text for the caller to parse
// (Num, with Coef for plain decimals, or Decimal for those in strings). Values the caller does not want
// are skipped: Skip checks their structure (brackets, commas, colons,
// strings, the three literals, and that a number is made of number
// characters and starts with '-' or a digit; not the number grammar) and
// refuses nesting deeper than MaxDepth. Nothing is converted to float64.
//
// # What stays in the venues
//
// The rules of a venue's data are its own: which signs and how many
// digits a price or size may have and what happens to a longer one (each
// venue bounds Coef's result its own way), Kraken's exponents, the decimal
// caches, and the exact price and size texts the Kraken and OKX checksums
// are computed over (Str and Num hand them back untouched).
//
// # Failure
//
// A Scanner's reads fail softly: the first thing it cannot read marks it
// failed and moves it to the end of its input, every read returns a zero
// value from then on, and the caller checks Failed once after a group of
// reads instead of after every call. No input makes it panic or read past
// its input (FuzzScanner).
package scan

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unsafe"
)

// MaxDepth is how deeply Skip follows nested objects and arrays; deeper
// input fails. Venue frames nest a handful of levels; the bound keeps a
// hostile frame from costing more than its length.
const MaxDepth = 64

// Scanner walks one JSON document in place. The zero Scanner reads an
// empty document (every read fails); Reset or New points one at a frame.
// A Scanner is a small value: copy it to keep a position.
type Scanner struct {
	b   []byte
	i   int  // next byte to read
	bad bool // a read failed; i == len(b)
}

// New returns a Scanner at the start of b.
func New(b []byte) Scanner { return Scanner{b: b} }

// Reset points s at the start of b and clears any failure.
func (s *Scanner) Reset(b []byte) { s.b, s.i, s.bad = b, 0, false }

// Failed reports whether a read failed.
func (s *Scanner) Failed() bool { return s.bad }

// Fail marks s failed, as a failed read does: for a caller that finds a
// well-formed value it cannot accept and wants the rest of the scan to
// stop.
func (s *Scanner) Fail() {
	s.bad = true
	s.i = len(s.b)
}

// space holds JSON's white space. A table lookup keeps Peek, and so Eat
// and Expect, small enough to inline.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// Peek skips white space and returns the next byte without consuming it,
// or 0 at the end of the input (and after a failure).
func (s *Scanner) Peek() byte {
	for s.i < len(s.b) {
		if c := s.b[s.i]; c > ' ' || !space[c] {
			return c
		}
		s.i++
	}
	return 0
}

// Eat consumes c if it is the next byte after white space, and reports
// whether it did. It never fails s.
func (s *Scanner) Eat(c byte) bool {
	if s.Peek() == c {
		s.i++
		return true
	}
	return false
}

// Expect consumes c after white space, or fails s.
func (s *Scanner) Expect(c byte) bool {
	if s.Peek() == c {
		s.i++
		return true
	}
	s.Fail()
	return false
}

// End reports whether only white space is left and nothing failed; if
// anything else is left, it fails s.
func (s *Scanner) End() bool {
	if s.Peek() != 0 || s.i != len(s.b) {
		s.Fail()
	}
	return !s.bad
}

// Object consumes the '{' that opens an object and reports whether a
// member follows; it fails s if the next value is not an object. With Key
// and More it walks the members:
//
//	for more := s.Object(); more; more = s.More('}') {
//		switch string(s.Key()) {
//		case "price":
//			price = s.Str()
//		default:
//			s.Skip()
//		}
//	}
//	if s.Failed() { … }
//
// Each member's value must be consumed (read or skipped) before More.
func (s *Scanner) Object() bool { return s.Expect('{') && !s.Eat('}') }

// Array consumes the '[' that opens an array and reports whether an
// element follows; it fails s if the next value is not an array. With
// More it walks the elements:
//
//	for more := s.Array(); more; more = s.More(']') { … consume one element … }
func (s *Scanner) Array() bool { return s.Expect('[') && !s.Eat(']') }

// More ends a member or element: it consumes a ',' and reports true, or
// consumes closing ('}' or ']') and reports false. Anything else fails s.
func (s *Scanner) More(closing byte) bool {
	switch s.Peek() {
	case ',':
		s.i++
		return true
	case closing:
		s.i++
		return false
	}
	s.Fail()
	return false
}

// Key reads a member's key and the colon after it, and returns the key's
// raw text.
func (s *Scanner) Key() []byte {
	k, _ := s.str()
	if !s.Expect(':') {
		return nil
	}
	return k
}

// Str reads a string and returns its raw text between the quotes: a slice
// of the input, escapes left as written (keys and values the decoders
// compare or parse carry none).
func (s *Scanner) Str() []byte {
	b, _ := s.str()
	return b
}

// Text reads a string and returns it unescaped. Only a string that holds
// an escape allocates.
func (s *Scanner) Text() []byte {
	raw, esc := s.str()
	if !esc {
		return raw
	}
	var out string
	if err := json.Unmarshal(s.b[s.i-len(raw)-2:s.i], &out); err != nil {
		s.Fail()
		return nil
	}
	return []byte(out)
}

// str reads a string, and reports whether it holds an escape. It tests 8
// bytes at a time for a quote, a backslash or a control character (a load
// may run past the closing quote, never past the input), and the last
// bytes, fewer than 8, one at a time; from a backslash on, escapedStr
// finishes the string.
func (s *Scanner) str() (raw []byte, escaped bool) {
	b, i := s.b, s.i
	if i >= len(b) || b[i] != '"' { // white space first, or not a string
		if !s.Expect('"') {
			return nil, false
		}
		i = s.i - 1
	}
	i++
	start := i
	p := unsafe.Pointer(unsafe.SliceData(b))
	for len(b)-i >= 8 {
		// b[i:i+8] is inside b: 0 <= start <= i and len(b)-i >= 8.
		w := binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(p, i))[:])
		if m := stopBytes(w); m != 0 {
			i += bits.TrailingZeros64(m) >> 3
			goto stop
		}
		i += 8
	}
	for i < len(b) && !special[b[i]] {
		i++
	}
	if i == len(b) {
		s.Fail()
		return nil, false
	}
stop:
	switch b[i] {
	case '"':
		s.i = i + 1
		// b[start:i] without its bounds checks: start <= i < len(b).
		return unsafe.Slice((*byte)(unsafe.Add(p, start)), i-start), false
	case '\\':
		return s.escapedStr(start, i)
	}
	s.Fail() // a control character
	return nil, false
}

// escapedStr finishes str's string that starts at b[start] from the backslash
// at b[i], a byte at a time: escapes are rare in venue frames.
func (s *Scanner) escapedStr(start, i int) (raw []byte, escaped bool) {
	b := s.b
	for ; i < len(b); i++ {
		c := b[i]
		if !special[c] {
			continue
		}
		switch c {
		case '"':
			s.i = i + 1
			return b[start:i], true
		case '\\':
			i++
		default: // a control character
			s.Fail()
			return nil, false
		}
	}
	s.Fail()
	return nil, false
}

// special holds the bytes that end a string's plain run: the quote, the
// backslash, and the control characters JSON forbids in a string.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

const (
	ones = 0x0101010101010101 // 1 in every byte
	high = 0x8080808080808080 // the top bit of every byte
)

// stopBytes sets the top bit of the bytes of w (8 bytes, the first in the
// low byte) that special holds, and perhaps of bytes above the lowest of
// them, never below it: (x-ones*n)&^x&high flags the bytes of x below n
// (n <= 0x80), and the borrow out of a flagged byte can flag the next.
// Xor with 0x02 maps the quote to 0x20 and keeps 0x00-0x1f below 0x20, so
// one test below 0x21 finds both; a second finds the backslash (xor 0x5c
// makes it zero).
func stopBytes(w uint64) uint64 {
	q := w ^ (ones * 0x02)
	e := w ^ (ones * '\\')
	return ((q-ones*0x21)&^q | (e-ones)&^e) & high
}

// Int reads a JSON integer (no fraction, no exponent) that fits an int64.
func (s *Scanner) Int() int64 {
	s.Peek()
	n, used, ok := parseInt(s.b[s.i:])
	s.i += used
	if !ok {
		s.Fail()
		return 0
	}
	if s.i < len(s.b) {
		if c := s.b[s.i]; c == '.' || c == 'e' || c == 'E' {
			s.Fail()
			return 0
		}
	}
	return n
}

// IntText reads a JSON integer, as Int does, and returns its text (an id
// the decoder passes on as written).
func (s *Scanner) IntText() []byte {
	s.Peek()
	start := s.i
	s.Int()
	return s.since(start)
}

// since returns the text read since start, or nil if a read failed.
func (s *Scanner) since(start int) []byte {
	if s.bad {
		return nil
	}
	return s.b[start:s.i]
}

// IntOrString reads an integer written bare or as a string of the same
// form ("ts":"1597026383085"; venues write ids and times either way).
func (s *Scanner) IntOrString() int64 {
	if s.Peek() != '"' {
		return s.Int()
	}
	n, ok := ParseInt(s.Str())
	if !ok {
		s.Fail()
		return 0
	}
	return n
}

// Num reads a number and returns its text, or a string and returns its
// raw text (venues write prices either way); the caller parses it.
func (s *Scanner) Num() []byte {
	if s.Peek() == '"' {
		return s.Str()
	}
	start := s.i
	s.number()
	return s.since(start)
}

// number consumes a number's characters: a '-' or a digit, then digits,
// signs, points and exponent marks. The grammar is left to whoever parses
// the text.
func (s *Scanner) number() {
	if s.i >= len(s.b) || s.b[s.i] != '-' && s.b[s.i]-'0' > 9 {
		s.Fail()
		return
	}
	for s.i++; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c-'0' <= 9, c == '-', c == '+', c == '.', c == 'e', c == 'E':
		default:
			return
		}
	}
}

// Bool reads true or false.
func (s *Scanner) Bool() bool {
	switch s.Peek() {
	case 't':
		if s.Lit("true") {
			return true
		}
	case 'f':
		if s.Lit("false") {
			return false
		}
	}
	s.Fail()
	return false
}

// Lit consumes w if the input continues with it exactly, white space
// included, and reports whether it did; it never fails s. A decoder matches
// the fixed start of the frames it knows with it.
func (s *Scanner) Lit(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// Skip reads and discards one value of any kind, checking its structure
// (see the package doc). It keeps its own stack of open containers, one
// bit each, rather than recursing.
func (s *Scanner) Skip() {
	var objects uint64 // bit d: the container open at depth d is an object
	depth := 0
	for !s.bad {
		// One value.
		switch c := s.Peek(); c {
		case '"':
			s.str()
		case '{', '[':
			s.i++
			if c == '{' && s.Eat('}') || c == '[' && s.Eat(']') {
				break
			}
			if depth == MaxDepth {
				s.Fail()
				return
			}
			if c == '{' {
				objects |= 1 << depth
				s.Key()
			} else {
				objects &^= 1 << depth
			}
			depth++
			continue // its first member or element
		case 't':
			s.literal("true")
		case 'f':
			s.literal("false")
		case 'n':
			s.literal("null")
		default:
			s.number()
		}
		// After a value: close what it ends, up to the next ',' or the end.
		for ; depth > 0 && !s.bad; depth-- {
			obj := objects>>(depth-1)&1 == 1
			if s.Eat(',') {
				if obj {
					s.Key()
				}
				break
			}
			if obj {
				s.Expect('}')
			} else {
				s.Expect(']')
			}
		}
		if depth == 0 {
			return
		}
	}
}

func (s *Scanner) literal(w string) {
	if !s.Lit(w) {
		s.Fail()
	}
}

// Raw skips one value, as Skip does, and returns its text: for a value
// the caller decodes later, or passes on as written.
func (s *Scanner) Raw() []byte {
	s.Peek()
	start := s.i
	s.Skip()
	return s.since(start)
}

// Members walks an array of objects and, for each member named key, calls
// fn with s at the member's value; fn must consume the value, and returns
// false to stop the walk (having reported why, say). Other members are
// skipped. Members reports false if fn stopped it; whether the array
// parsed shows in Failed.
func (s *Scanner) Members(key string, fn func() bool) bool {
	for more := s.Array(); more; more = s.More(']') {
		for more := s.Object(); more; more = s.More('}') {
			if string(s.Key()) != key {
				s.Skip()
				continue
			}
			if !fn() {
				return false
			}
		}
	}
	return true
}

// ParseInt parses b, all of it, as a JSON integer that fits an int64: an
// optional '-' and digits.
func ParseInt(b []byte) (int64, bool) {
	n, used, ok := parseInt(b)
	return n, ok && used == len(b)
}

// parseInt parses the integer at the start of b and returns how many
// bytes it read.
func parseInt(b []byte) (n int64, used int, ok bool) {
	i := 0
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		i++
	}
	start := i
	var u uint64
	// Up to 18 digits cannot overflow: no check on them.
	for end := min(len(b), start+18); i < end; i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		u = u*10 + uint64(d)
	}
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		if u >= maxInt64/10 && (u > maxInt64/10 || d > maxInt64%10) {
			return 0, i, false
		}
		u = u*10 + uint64(d)
	}
	if i == start {
		return 0, i, false
	}
	n = int64(u)
	if neg {
		n = -n
	}
	return n, i, true
}

const maxInt64 = 1<<63 - 1
