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

// decimalParts splits a decimal string into its coefficient, its number
// of fraction digits and its sign, without allocating (scan.Coef), and
// applies Binance's bound: more than maxFrac fraction digits is refused.
// More than 18 significant digits goes to the slow path.
func decimalParts(b []byte) (m uint64, frac int, neg bool, res int) {
	c, frac, neg, st := scan.Coef(b)
	switch {
	case st == scan.Big:
		return 0, 0, false, partsBig
	case st == scan.Bad || frac > maxFrac:
		return 0, 0, false, partsBad
	}
	if neg {
		c = -c
	}
	return uint64(c), frac, neg, partsOK
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
// dst, in fixed point: no decimal is built (a size of more than 18
// significant digits is the exception, kept as a decimal in big). A
// negative or malformed value fails the scan.
func levels(s *scan.Scanner, dst []lvl) []lvl {
	for more := s.Array(); more; more = s.More(']') {
		if !s.Expect('[') {
			return dst
		}
		pd := s.Decimal()
		if !s.Expect(',') {
			return dst
		}
		qd := s.Decimal()
		var big decimal.Decimal
		var qt qty
		ok2 := qd.St != scan.Bad && !qd.Neg && qd.Frac <= maxFrac
		switch {
		case !ok2:
		case qd.St == scan.Big:
			big, ok2 = parseDecimalSlow(qd.Text)
			qt.frac = bigQty
			ok2 = ok2 && big.Sign() >= 0
		default:
			qt = qty{uint64(qd.M), uint8(qd.Frac)}
		}
		// Later Binance versions may add fields to a level; ignore them.
		for s.Eat(',') {
			s.Skip()
		}
		if !s.Expect(']') {
			return dst
		}
		key, ok1 := priceKey(uint64(pd.M), pd.Frac)
		if pd.St != scan.OK || pd.Neg || !ok1 || !ok2 || pd.M <= 0 {
			s.Fail()
			return dst
		}
		dst = append(dst, lvl{key: key, size: qt, px: venue.Fixed{M: pd.M, Scale: uint8(pd.Frac)}, big: big})
	}
	return dst
}
