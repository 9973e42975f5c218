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

// digits parses a non-negative decimal string of at most 18 significant
// digits and 40 bytes into its coefficient and the number of digits after
// the point (scan.Coef). ok is false for anything else (sign, exponent,
// empty, too long), and the caller falls back to decimal.NewFromString.
func digits(raw []byte) (m uint64, frac int, ok bool) {
	if len(raw) > 40 {
		return 0, 0, false
	}
	c, frac, neg, st := scan.Coef(raw)
	return uint64(c), frac, st == scan.OK && !neg
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
		p := uint64(scan.Pow10(priceExp - frac))
		if k := m * p; m == 0 || (k/p == m && k < 1<<63) {
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

// fixed parses a non-negative plain decimal into fixed point; ok is false
// when it is malformed or too long for it (then decimals parse it).
func fixed(raw []byte) (venue.Fixed, bool) {
	m, frac, ok := digits(raw)
	if !ok || m >= 1<<63 || frac > venue.MaxScale {
		return venue.Fixed{}, false
	}
	return venue.Fixed{M: int64(m), Scale: uint8(frac)}, true
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
