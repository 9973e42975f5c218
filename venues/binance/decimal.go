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
// (no exponent, no '+', no spaces): scan.Coef, with more than maxFrac
// fraction digits refused. It costs one decimal.New (two small
// allocations) for a non-zero value.
func parseDecimal(b []byte) (decimal.Decimal, bool) {
	c, frac, neg, st := scan.Coef(b)
	switch {
	case st == scan.Big:
		return parseDecimalSlow(b)
	case st == scan.Bad || frac > maxFrac:
		return decimal.Decimal{}, false
	}
	if neg {
		c = -c
	}
	return makeDecimal(uint64(c), frac, neg), true
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

// parseDecimalSlow reads values with more than 18 significant digits
// (venue.ParseDecimal), with at most maxFrac fraction digits.
func parseDecimalSlow(b []byte) (decimal.Decimal, bool) {
	v, ok := venue.ParseDecimal(b)
	return v, ok && v.Exponent() >= -maxFrac
}

// priceScale is Binance's price format: eight fraction digits.
const priceScale = 8

var pow10 = [...]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8}

// priceFits reports whether a price with mantissa m and frac fraction
// digits is one Binance writes: at most eight fraction digits, and at most
// 92,233,720,368.5 (an int64 of units of 1e-8), above any Binance spot
// price.
func priceFits(m uint64, frac int) bool {
	return frac <= priceScale && m <= uint64(1<<63-1)/uint64(pow10[priceScale-frac])
}

// lvl is a parsed level: its price and size in fixed point, or, for a size
// too long for that (over 18 significant digits, isBig), its size in big.
type lvl struct {
	venue.FixedLevel
	big   decimal.Decimal
	isBig bool
}

// level returns l with decimals.
func (l *lvl) level() venue.Level {
	if l.isBig {
		return venue.Level{Price: l.Price.Decimal(), Size: l.big}
	}
	return l.Level()
}

// set applies l to side s of b.
func (l *lvl) set(b *venue.Book, s venue.BookSide) {
	if l.isBig {
		b.Set(s, l.Price.Decimal(), l.big)
		return
	}
	b.SetFixed(s, l.Price, l.Size)
}

// setAll applies levels to side s of b: set in one loop, which saves a
// call per level on the update path.
func setAll(b *venue.Book, s venue.BookSide, levels []lvl) {
	for i := range levels {
		if l := &levels[i]; !l.isBig {
			b.SetFixed(s, l.Price, l.Size)
		} else {
			l.set(b, s)
		}
	}
}

// replace makes bids and asks (in any order) the whole of b; a price given
// twice keeps its last size, zero sizes are dropped. fixed is scratch for
// the levels in fixed point, returned grown.
func replace(b *venue.Book, bids, asks []lvl, fixed []venue.FixedLevel) []venue.FixedLevel {
	fixed = fixed[:0]
	for _, side := range [2][]lvl{bids, asks} {
		for i := range side {
			if side[i].isBig {
				b.Reset()
				for i := range bids {
					bids[i].set(b, venue.Bid)
				}
				for i := range asks {
					asks[i].set(b, venue.Ask)
				}
				return fixed
			}
			fixed = append(fixed, side[i].FixedLevel)
		}
	}
	b.ReplaceFixed(fixed[:len(bids)], fixed[len(bids):])
	return fixed
}

// levels reads an array of [price, size] string pairs and appends them to
// dst, in fixed point: no decimal is built (a size of more than 18
// significant digits is the exception, kept as a decimal in big). A
// negative or malformed value, or a price Binance does not write
// (priceFits), fails the scan.
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
		var l lvl
		ok2 := qd.St != scan.Bad && !qd.Neg && qd.Frac <= maxFrac
		switch {
		case !ok2:
		case qd.St == scan.Big:
			l.big, ok2 = parseDecimalSlow(qd.Text)
			l.isBig = true
			ok2 = ok2 && l.big.Sign() >= 0
		default:
			l.Size = venue.Fixed{M: qd.M, Scale: uint8(qd.Frac)}
		}
		// Later Binance versions may add fields to a level; ignore them.
		for s.Eat(',') {
			s.Skip()
		}
		if !s.Expect(']') {
			return dst
		}
		if pd.St != scan.OK || pd.Neg || !priceFits(uint64(pd.M), pd.Frac) || !ok2 || pd.M <= 0 {
			s.Fail()
			return dst
		}
		l.Price = venue.Fixed{M: pd.M, Scale: uint8(pd.Frac)}
		dst = append(dst, l)
	}
	return dst
}
