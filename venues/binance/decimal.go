package binance

import (
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/scan"
	"github.com/fanoutd/fanoutd/venue"
)

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
// fraction digits and its sign, without allocating (scan.Fixed), and
// applies Binance's bounds: more than 18 significant digits goes to the
// slow path, more than maxFrac fraction digits is refused.
func decimalParts(b []byte) (m uint64, frac int, neg bool, res int) {
	m, frac, neg, st := scan.Fixed(b)
	switch {
	case st == scan.Big || st == scan.OK && m >= 1e18:
		return 0, 0, false, partsBig
	case st == scan.Bad || frac > maxFrac:
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
func levels(s *scan.Scanner, prices *priceCache, dst []lvl) []lvl {
	for more := s.Array(); more; more = s.More(']') {
		if !s.Expect('[') {
			return dst
		}
		p, key, ok1 := prices.parse(s.Str())
		if !s.Expect(',') {
			return dst
		}
		qb := s.Str()
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
		for s.Eat(',') {
			s.Skip()
		}
		if !s.Expect(']') {
			return dst
		}
		if !ok1 || !ok2 || p.Sign() <= 0 || q.Sign() < 0 {
			s.Fail()
			return dst
		}
		dst = append(dst, lvl{key, qt, venue.Level{Price: p, Size: q}})
	}
	return dst
}
