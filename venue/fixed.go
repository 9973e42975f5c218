package venue

import (
	"cmp"
	"math/bits"

	"github.com/shopspring/decimal"
)

// Fixed is an exact decimal in fixed point: M·10^-Scale. It is the form
// adapters decode prices and sizes into on the book path, where building a
// decimal.Decimal (a big.Int, two allocations) per level would cost more
// than the rest of the frame. The zero Fixed is 0.
//
// A Fixed is valid when Scale is at most MaxScale; adapters only make
// non-negative ones (book prices and sizes).
type Fixed struct {
	M     int64
	Scale uint8
}

// MaxScale is the largest Fixed.Scale: 18 fraction digits, the finest
// price the book keys (see Book).
const MaxScale = 18

// FixedLevel is a Level in fixed point.
type FixedLevel struct {
	Price Fixed
	Size  Fixed
}

// IsZero reports whether f is 0.
func (f Fixed) IsZero() bool { return f.M == 0 }

// Decimal returns f as a decimal.Decimal (M with exponent -Scale, as
// decimal.New builds it). It allocates.
func (f Fixed) Decimal() decimal.Decimal { return decimal.New(f.M, -int32(f.Scale)) }

// Level returns l with decimals.
func (l FixedLevel) Level() Level { return Level{Price: l.Price.Decimal(), Size: l.Size.Decimal()} }

// FixedOf returns d in fixed point, and false if it has none: a
// coefficient of more than 18 digits or more than MaxScale fraction
// digits.
func FixedOf(d decimal.Decimal) (Fixed, bool) {
	if d.NumDigits() > 18 {
		return Fixed{}, false
	}
	c, exp := d.CoefficientInt64(), int(d.Exponent())
	switch {
	case exp > 0:
		if exp > 18 {
			return Fixed{}, false
		}
		hi, lo := bits.Mul64(uint64(absInt(c)), pow10[exp])
		if hi != 0 || lo > 1<<63-1 {
			return Fixed{}, false
		}
		if c < 0 {
			return Fixed{M: -int64(lo)}, true
		}
		return Fixed{M: int64(lo)}, true
	case exp < -MaxScale:
		return Fixed{}, false
	}
	return Fixed{M: c, Scale: uint8(-exp)}, true
}

func absInt(c int64) int64 {
	if c < 0 {
		return -c
	}
	return c
}

// key returns f's book key (f·10^18 as a 128-bit integer), and false if f
// has none (negative, or Scale beyond MaxScale).
func (f Fixed) key() (priceKey, bool) {
	if f.M < 0 || f.Scale > MaxScale {
		return priceKey{}, false
	}
	hi, lo := bits.Mul64(uint64(f.M), pow10[MaxScale-int(f.Scale)])
	return priceKey{hi, lo}, true
}

// Cmp compares two non-negative Fixed values exactly, whatever their
// scales: -1, 0 or +1.
func (f Fixed) Cmp(o Fixed) int {
	if f.Scale == o.Scale { // the common case: compare the integers
		return cmp.Compare(f.M, o.M)
	}
	a, ok1 := f.key()
	b, ok2 := o.key()
	if ok1 && ok2 {
		return a.cmp(b)
	}
	return f.Decimal().Cmp(o.Decimal())
}

// AppendFixed appends f as AppendDecimal appends f.Decimal(): plain
// notation, trailing fractional zeros trimmed.
func AppendFixed(dst []byte, f Fixed) []byte {
	if !decimal.TrimTrailingZeros || decimal.UseScientificNotation {
		return append(dst, f.Decimal().String()...)
	}
	return appendCoef(dst, f.M, -int(f.Scale))
}
