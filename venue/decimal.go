package venue

import (
	"encoding/binary"
	"math/bits"
	"slices"
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

// decimalCacheBits sizes DecimalCache: 2048 slots of 40 bytes, enough for
// the prices of a deep book and the sizes that recur.
const decimalCacheBits = 11

// DecimalCache hands out one shared decimal.Decimal per coefficient and
// exponent it has seen recently. decimal.New allocates twice (a big.Int and
// its word); on a book feed the same prices and many sizes recur frame
// after frame, and a Decimal is immutable, so one value can be shared by
// the book and any number of events. It is direct-mapped: a map was
// rejected, since it grows without a bound and hashes slower. The zero
// value is ready to use; a nil *DecimalCache makes every decimal anew. Not
// safe for concurrent use.
type DecimalCache struct {
	slots [1 << decimalCacheBits]decimalSlot
}

type decimalSlot struct {
	m   int64
	exp int32
	ok  bool
	d   decimal.Decimal
}

// Get returns m·10^exp, from the cache or new.
func (c *DecimalCache) Get(m int64, exp int32) decimal.Decimal {
	if c == nil {
		return decimal.New(m, exp)
	}
	h := (uint64(m)*0x9E3779B97F4A7C15 ^ uint64(uint32(exp))*0xC2B2AE3D27D4EB4F) >> (64 - decimalCacheBits)
	sl := &c.slots[h]
	if sl.ok && sl.m == m && sl.exp == exp {
		return sl.d
	}
	d := decimal.New(m, exp)
	*sl = decimalSlot{m: m, exp: exp, ok: true, d: d}
	return d
}

// digitPairs holds "00" to "99", for writing two digits at a time.
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// appendCoef appends c·10^exp in plain notation, trailing fractional zeros
// trimmed. The digits are written in place in dst, last first and two at a
// time (this runs twice per level of every event exported): no scratch
// buffer to copy over, no division per digit.
func appendCoef(dst []byte, c int64, exp int) []byte {
	if c == 0 {
		return append(dst, '0')
	}
	u := uint64(c)
	if c < 0 {
		dst = append(dst, '-')
		u = -u
	}
	if exp >= 0 {
		dst = strconv.AppendUint(dst, u, 10)
		for range exp {
			dst = append(dst, '0')
		}
		return dst
	}
	frac := -exp
	if frac <= 16 && u < 1e16 {
		return appendFrac16(dst, u, frac)
	}
	for frac >= 4 && u%10000 == 0 {
		u /= 10000
		frac -= 4
	}
	if frac >= 2 && u%100 == 0 {
		u /= 100
		frac -= 2
	}
	for frac > 0 && u%10 == 0 {
		u /= 10
		frac--
	}
	if frac == 0 {
		return strconv.AppendUint(dst, u, 10)
	}
	n := numDigits(u)
	size := frac + 2 // "0." and the fraction
	if n > frac {
		size = n + 1 // the digits and the point
	}
	dst = slices.Grow(dst, size)
	out := dst[len(dst) : len(dst)+size]
	i := size
	for ; frac >= 2; frac -= 2 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		out[i], out[i+1] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	if frac == 1 {
		i--
		out[i] = byte('0' + u%10)
		u /= 10
	}
	i--
	out[i] = '.'
	for u >= 100 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		out[i], out[i+1] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	switch {
	case u >= 10:
		out[i-2], out[i-1] = digitPairs[u*2], digitPairs[u*2+1]
		i -= 2
	case u > 0:
		i--
		out[i] = byte('0' + u)
	}
	for i > 0 { // the zeros after "0." of a value below 0.1, and that "0"
		i--
		out[i] = '0'
	}
	return dst[:len(dst)+size]
}

// appendFrac16 appends u·10^-frac, for 0 < u < 10^16 and 0 < frac <= 16,
// as appendCoef does: its sixteen digits (leading zeros included) are made
// eight at a time (digits8), the fraction's trailing zeros counted on
// them, and the integer part and the fraction copied from them sixteen
// bytes at a time into room grown past the end, the length then cut to
// what was meant.
func appendFrac16(dst []byte, u uint64, frac int) []byte {
	var s [32]byte // the digits, then zeros to read sixteen bytes from any of them
	hi := u / 1e8
	a, b := digits8(hi), digits8(u-hi*1e8)
	binary.LittleEndian.PutUint64(s[:8], a)
	binary.LittleEndian.PutUint64(s[8:], b)
	// A '0' byte xor '0' is zero: the top zero bytes are the trailing zeros.
	tz := bits.LeadingZeros64(b^0x3030303030303030) >> 3
	if tz == 8 {
		tz += bits.LeadingZeros64(a^0x3030303030303030) >> 3
	}
	keep := frac - min(tz, frac) // the fraction digits written
	base := len(dst)
	dst = slices.Grow(dst, 34)
	out := dst[base : base+34]
	ip := 1 // the integer part's length
	if n := numDigits(u); n > frac {
		ip = n - frac
		copy16(out[0:16], s[16-n:32-n])
	} else {
		out[0] = '0'
	}
	if keep == 0 {
		return dst[:base+ip]
	}
	out[ip] = '.'
	copy16(out[ip+1:ip+17], s[16-frac:32-frac])
	return dst[:base+ip+1+keep]
}

// copy16 copies sixteen bytes as two words, where copy would call memmove.
func copy16(dst, src []byte) {
	binary.LittleEndian.PutUint64(dst[:8], binary.LittleEndian.Uint64(src[:8]))
	binary.LittleEndian.PutUint64(dst[8:16], binary.LittleEndian.Uint64(src[8:16]))
}

// digits8 returns the eight decimal digits of x < 10^8, leading zeros
// included, as ASCII with the first digit in the lowest byte: x split into
// two halves of four digits, each into two of two, each into two digits,
// every split a multiply and shift per lane (x/100 as x·10486>>20 below
// 10^4, x/10 as x·103>>10 below 100).
func digits8(x uint64) uint64 {
	hi := x / 10000
	v := hi | (x-hi*10000)<<32
	q := (v * 10486 >> 20) & 0x0000007F0000007F
	v = q | (v-q*100)<<16
	q = (v * 103 >> 10) & 0x000F000F000F000F
	v = q | (v-q*10)<<8
	return v | 0x3030303030303030
}

// numDigits returns how many decimal digits u has (1 for 0).
func numDigits(u uint64) int {
	n := (bits.Len64(u) * 1233) >> 12
	if n < len(pow10) && u >= pow10[n] {
		n++
	}
	return max(n, 1)
}

// maxDecimalText bounds the text ParseDecimal reads: a venue's longest
// value is far shorter, and decimal.NewFromString's cost grows with it.
const maxDecimalText = 64

// ParseDecimal reads a venue's decimal text that scan.Coef does not take
// (more than 18 significant digits, or an exponent): an optional '-',
// digits with at most one '.', and an optional exponent ('e' or 'E', a
// sign, digits); at most 64 bytes, and an exponent of the value within
// ±64. Anything else is refused (ok false). Every adapter's slow path is
// this one rule; each refuses what its venue never sends (a sign, more
// fraction digits) on the value it returns.
func ParseDecimal(b []byte) (v decimal.Decimal, ok bool) {
	if len(b) == 0 || len(b) > maxDecimalText {
		return decimal.Decimal{}, false
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c == '.' || c == '-' || c == 'e' || c == 'E' || c == '+') {
			return decimal.Decimal{}, false
		}
	}
	v, err := decimal.NewFromString(string(b))
	if err != nil || v.Exponent() < -64 || v.Exponent() > 64 {
		return decimal.Decimal{}, false
	}
	return v, true
}
