package coinbase

import (
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/scan"
	"github.com/fanoutd/fanoutd/venue"
)

// priceExp is the exponent every price is rescaled to when it fits, so
// that venue.Book compares prices without allocating (decimal.Cmp is
// allocation-free only for equal exponents). Coinbase writes "79944" and
// "79944.1" in one book; no Coinbase product quotes finer than 1e-12.
// A price that does not fit keeps its own exponent: correct, only slower.
const priceExp = 12

// maxFast bounds the text read by scan.Coef (any Coinbase value is far
// shorter); a longer one takes slowDecimal and venue.ParseDecimal's bound.
const maxFast = 40

// decPrice parses a price as a decimal shared through d.prices; ok is false
// for a malformed or negative one.
func (d *Decoder) decPrice(raw []byte) (decimal.Decimal, bool) {
	m, frac, neg, st := scan.Coef(raw)
	if st == scan.OK && !neg && len(raw) <= maxFast && frac <= priceExp {
		if k, ok := scan.ScaleUp(m, priceExp-frac); ok {
			return d.prices.Get(k, -priceExp), true
		}
	}
	return slowDecimal(raw)
}

// decSize parses a size as a decimal shared through d.sizes; ok is false for
// a malformed or negative one.
func (d *Decoder) decSize(raw []byte) (decimal.Decimal, bool) {
	m, frac, neg, st := scan.Coef(raw)
	switch {
	case st != scan.OK || neg || len(raw) > maxFast:
		return slowDecimal(raw)
	case m == 0:
		return decimal.Decimal{}, true
	}
	return d.sizes.Get(m, -int32(frac)), true
}

// fixed parses a non-negative plain decimal into fixed point; ok is false
// when it is malformed or too long for it (decPrice and decSize read it).
func fixed(raw []byte) (venue.Fixed, bool) {
	m, frac, neg, st := scan.Coef(raw)
	if st != scan.OK || neg || len(raw) > maxFast || frac > venue.MaxScale {
		return venue.Fixed{}, false
	}
	return venue.Fixed{M: m, Scale: uint8(frac)}, true
}

// slowDecimal reads what scan.Coef does not (venue.ParseDecimal); Coinbase
// writes no negative price or size.
func slowDecimal(raw []byte) (decimal.Decimal, bool) {
	v, ok := venue.ParseDecimal(raw)
	return v, ok && v.Sign() >= 0
}
