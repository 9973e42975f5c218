package binance

import (
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/venue"
)

// scanner walks one JSON document in place, without allocating. It knows
// only what Binance frames need: objects, arrays, strings (returned raw,
// escapes left in: no Binance key or value the decoder reads contains one),
// integers, and skipping any other value. It validates what it walks; a
// value it skips is checked for balance and string syntax, not for number
// grammar. encoding/json and fastjson were the alternatives: the first
// allocates per value and reflects, the second builds a tree the decoder
// would walk a second time; the frames are flat and known.
//
// The zero scanner over b is ready to use. Any failure sets bad, after which
// every method fails.
type scanner struct {
	b   []byte
	i   int
	bad bool
}

// maxDepth bounds nesting in skipped values (defence against deeply nested
// garbage, which would otherwise cost stack).
const maxDepth = 64

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

// fail marks the scan bad and returns false, for one-line error returns.
func (s *scanner) fail() bool {
	s.bad = true
	return false
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.bad || s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// want consumes byte c after optional space.
func (s *scanner) want(c byte) bool {
	if s.peek() != c {
		return s.fail()
	}
	s.i++
	return true
}

// end reports whether only space is left.
func (s *scanner) end() bool {
	s.ws()
	return !s.bad && s.i == len(s.b)
}

// objStart consumes '{' and reports whether the object has a first key.
func (s *scanner) objStart() bool {
	if !s.want('{') {
		return false
	}
	if s.peek() == '}' {
		s.i++
		return false
	}
	return !s.bad
}

// key reads a key and its colon.
func (s *scanner) key() []byte {
	k := s.str()
	if !s.want(':') {
		return nil
	}
	return k
}

// more consumes the ',' or the closing byte after a member or element and
// reports whether another follows.
func (s *scanner) more(closing byte) bool {
	switch s.peek() {
	case ',':
		s.i++
		return true
	case closing:
		s.i++
		return false
	}
	return s.fail()
}

// str reads a string and returns its raw content.
func (s *scanner) str() []byte {
	if !s.want('"') {
		return nil
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1]
		case c == '\\':
			s.i += 2
		case c < 0x20:
			s.fail()
			return nil
		default:
			s.i++
		}
	}
	s.fail()
	return nil
}

// int reads an integer (no fraction, no exponent) that fits in int64.
func (s *scanner) int() int64 {
	s.ws()
	neg := false
	if s.i < len(s.b) && s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	start := s.i
	var n int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if s.i-start >= 18 {
			s.fail()
			return 0
		}
		n = n*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	if s.i == start {
		s.fail()
		return 0
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.fail()
		return 0
	}
	if neg {
		n = -n
	}
	return n
}

// intText reads an integer and returns its text (a trade id).
func (s *scanner) intText() []byte {
	s.ws()
	start := s.i
	s.int()
	if s.bad {
		return nil
	}
	return s.b[start:s.i]
}

// boolean reads true or false.
func (s *scanner) boolean() bool {
	s.ws()
	if hasPrefix(s.b[s.i:], "true") {
		s.i += 4
		return true
	}
	if hasPrefix(s.b[s.i:], "false") {
		s.i += 5
		return false
	}
	s.fail()
	return false
}

// null consumes a null if one is next and reports whether it did.
func (s *scanner) null() bool {
	s.ws()
	if hasPrefix(s.b[s.i:], "null") {
		s.i += 4
		return true
	}
	return false
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

// skip skips one value of any kind and returns its raw bytes.
func (s *scanner) skip() []byte {
	s.ws()
	start := s.i
	s.skipDepth(0)
	if s.bad {
		return nil
	}
	return s.b[start:s.i]
}

func (s *scanner) skipDepth(depth int) {
	if depth > maxDepth {
		s.fail()
		return
	}
	switch c := s.peek(); c {
	case '"':
		s.str()
	case '{':
		if !s.objStart() {
			return
		}
		for {
			s.key()
			s.skipDepth(depth + 1)
			if s.bad || !s.more('}') {
				return
			}
		}
	case '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return
		}
		for {
			s.skipDepth(depth + 1)
			if s.bad || !s.more(']') {
				return
			}
		}
	case 't', 'f':
		s.boolean()
	case 'n':
		if !s.null() {
			s.fail()
		}
	default:
		if c == '-' || c >= '0' && c <= '9' {
			start := s.i
			for s.i < len(s.b) {
				c := s.b[s.i]
				if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
					break
				}
				s.i++
			}
			if s.i == start {
				s.fail()
			}
			return
		}
		s.fail()
	}
}

// zeros[k] is 0 with exponent -k. Removals repeat a zero size on every
// frame; sharing these (a Decimal is immutable) makes a removal cost no
// allocation.
var zeros = func() (z [20]decimal.Decimal) {
	for k := range z {
		z[k] = decimal.New(0, int32(-k))
	}
	return z
}()

// maxFrac bounds the fraction digits accepted: Binance writes 8, and a
// value with hundreds would make every comparison against it rescale.
const maxFrac = 18

// parseDecimal turns a Binance decimal string such as "0.35130000" into a
// decimal.Decimal without going through a Go string. Binance writes every
// spot price and quantity with eight fraction digits, so the values share
// one exponent and the book's comparisons stay allocation-free (see
// venue.Book). It accepts digits with at most one '.', and a leading '-'
// (which the caller rejects where a negative is impossible); nothing else
// (no exponent, no '+', no spaces). It costs one decimal.New (two small
// allocations) for a non-zero value.
func parseDecimal(b []byte) (decimal.Decimal, bool) {
	m, frac, neg, res := decimalParts(b)
	switch res {
	case partsBad:
		return decimal.Decimal{}, false
	case partsBig:
		return parseDecimalSlow(b)
	}
	return makeDecimal(m, frac, neg), true
}

// decimalParts results.
const (
	partsOK = iota
	partsBad
	partsBig // over 18 significant digits: use parseDecimalSlow
)

// decimalParts splits a decimal string into its mantissa, its number of
// fraction digits and its sign, without allocating.
func decimalParts(b []byte) (m uint64, frac int, neg bool, res int) {
	if len(b) == 0 {
		return 0, 0, false, partsBad
	}
	i := 0
	if b[0] == '-' {
		neg, i = true, 1
	}
	if i == len(b) || b[i] == '.' || b[len(b)-1] == '.' {
		return 0, 0, false, partsBad
	}
	digits, dot := 0, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			if m != 0 || c != '0' {
				digits++
			}
			if digits > 18 {
				return 0, 0, false, partsBig
			}
			m = m*10 + uint64(c-'0')
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, 0, false, partsBad
		}
	}
	if frac > maxFrac {
		return 0, 0, false, partsBad
	}
	return m, frac, neg, partsOK
}

func makeDecimal(m uint64, frac int, neg bool) decimal.Decimal {
	if m == 0 {
		return zeros[frac]
	}
	v := int64(m)
	if neg {
		v = -v
	}
	return decimal.New(v, int32(-frac))
}

// priceCache parses prices, with their book keys (see priceKey), and
// interns them: a live book's updates name the same few
// hundred prices near the top again and again, and a Decimal is immutable,
// so one value per price serves every event and the book. A lookup costs a
// map access instead of two allocations. Sizes are not interned: they rarely
// repeat. The zero priceCache is ready to use.
type priceCache struct {
	m map[uint64]decimal.Decimal // key: mantissa<<5 | fraction digits
}

// byKey returns the price of a book key (eight fraction digits).
func (c *priceCache) byKey(key int64) decimal.Decimal {
	m := uint64(key)
	if m < 1<<58 {
		if d, ok := c.m[m<<5|priceScale]; ok {
			return d
		}
	}
	return makeDecimal(m, priceScale, false)
}

// maxCachedPrices bounds the cache; past it the cache starts afresh.
const maxCachedPrices = 1 << 14

func (c *priceCache) parse(b []byte) (decimal.Decimal, int64, bool) {
	m, frac, neg, res := decimalParts(b)
	if res != partsOK || neg {
		return decimal.Decimal{}, 0, false // over 18 digits or negative: no Binance price
	}
	key, ok := priceKey(m, frac)
	if !ok {
		return decimal.Decimal{}, 0, false
	}
	if m >= 1<<58 { // too large to key the cache: 2.8e9 and over, no Binance price
		return makeDecimal(m, frac, false), key, true
	}
	ck := m<<5 | uint64(frac)
	if d, ok := c.m[ck]; ok {
		return d, key, true
	}
	if c.m == nil || len(c.m) >= maxCachedPrices {
		c.m = make(map[uint64]decimal.Decimal, 1024)
	}
	d := makeDecimal(m, frac, false)
	c.m[ck] = d
	return d, key, true
}

// parseDecimalSlow handles values with more than 18 significant digits.
func parseDecimalSlow(b []byte) (decimal.Decimal, bool) {
	if len(b) > 2*maxFrac {
		return decimal.Decimal{}, false
	}
	if dot := indexByte(b, '.'); dot >= 0 && len(b)-dot-1 > maxFrac {
		return decimal.Decimal{}, false
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c == '.' || c == '-') {
			return decimal.Decimal{}, false
		}
	}
	v, err := decimal.NewFromString(string(b))
	return v, err == nil
}

// levels reads an array of [price, size] string pairs and appends them to
// dst. A negative or malformed value fails the scan.
func (s *scanner) levels(prices *priceCache, dst []lvl) []lvl {
	if !s.want('[') {
		return dst
	}
	if s.peek() == ']' {
		s.i++
		return dst
	}
	for {
		if !s.want('[') {
			return dst
		}
		p, key, ok1 := prices.parse(s.str())
		if !s.want(',') {
			return dst
		}
		qb := s.str()
		var q decimal.Decimal
		var qt qty
		qm, qfrac, qneg, res := decimalParts(qb)
		ok2 := res != partsBad && !qneg
		switch {
		case !ok2:
		case res == partsBig:
			q, ok2 = parseDecimalSlow(qb)
			qt.frac = bigQty
		default:
			q, qt = makeDecimal(qm, qfrac, false), qty{qm, uint8(qfrac)}
		}
		// Later Binance versions may add fields to a level; ignore them.
		for s.peek() == ',' {
			s.i++
			s.skip()
		}
		if !s.want(']') {
			return dst
		}
		if !ok1 || !ok2 || p.Sign() <= 0 || q.Sign() < 0 {
			s.fail()
			return dst
		}
		dst = append(dst, lvl{key, qt, venue.Level{Price: p, Size: q}})
		if !s.more(']') {
			return dst
		}
	}
}
