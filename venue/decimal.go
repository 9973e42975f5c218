package venue

import (
	"strconv"

	"github.com/shopspring/decimal"
)

// AppendDecimal appends d as decimal.Decimal.String would write it (plain
// notation, trailing fractional zeros trimmed) without allocating when the
// coefficient has at most 18 digits, which is every price and size a venue
// sends. String goes through big.Int's general conversion and allocates
// twice, and this is on the encode path of every event.
func AppendDecimal(dst []byte, d decimal.Decimal) []byte {
	if !decimal.TrimTrailingZeros || decimal.UseScientificNotation || d.NumDigits() > 18 {
		return append(dst, d.String()...)
	}
	return appendCoef(dst, d.CoefficientInt64(), int(d.Exponent()))
}

// appendCoef appends c·10^exp in plain notation, trailing fractional zeros
// trimmed.
func appendCoef(dst []byte, c int64, exp int) []byte {
	if c == 0 {
		return append(dst, '0')
	}
	if c < 0 {
		dst = append(dst, '-')
		c = -c
	}
	if exp >= 0 {
		dst = strconv.AppendInt(dst, c, 10)
		for range exp {
			dst = append(dst, '0')
		}
		return dst
	}
	var buf [20]byte
	digits := strconv.AppendInt(buf[:0], c, 10)
	frac := -exp
	// Trim trailing zeros of the fractional part.
	for frac > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		frac--
	}
	if frac == 0 {
		return append(dst, digits...)
	}
	if len(digits) > frac {
		dst = append(dst, digits[:len(digits)-frac]...)
		dst = append(dst, '.')
		return append(dst, digits[len(digits)-frac:]...)
	}
	dst = append(dst, '0', '.')
	for range frac - len(digits) {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}
