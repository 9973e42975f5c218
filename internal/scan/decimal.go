package scan

import "encoding/binary"

// Status says how Coef or Decimal ended.
type Status uint8

const (
	// OK: b is a plain decimal of at most 19 significant digits; m holds
	// them all. The zero Status.
	OK Status = iota
	// Bad: b is not a plain decimal.
	Bad
	// Big: b is a plain decimal of more than 19 significant digits, more
	// than m holds; the caller parses it another way or refuses it.
	Big
)

// maxMantissa bounds the mantissa split accumulates: below it, one more
// digit still fits a uint64.
const maxMantissa = 1e18

// split splits a plain decimal ("63982.70", "0.00047612", "-1.5", "415")
// into its mantissa m, its number of fraction digits and its sign, without
// allocating: the value is ±m·10^-frac. It accepts an optional '-', digits,
// and at most one '.' with digits on both sides; nothing else (no '+', no
// exponent, no space, not empty). Leading zeros are not significant: m <
// 1e18 holds whenever b has at most 18 significant digits, and then m fits
// an int64. Coef turns it into the signed coefficient the venues read.
func split(b []byte) (m uint64, frac int, neg bool, st Status) {
	i := 0
	if len(b) > 0 && b[0] == '-' {
		neg, i = true, 1
	}
	if i == len(b) || b[i] == '.' || b[len(b)-1] == '.' {
		return 0, 0, false, Bad
	}
	dot, big := false, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c-'0' <= 9:
			if m < maxMantissa {
				m = m*10 + uint64(c-'0')
			} else {
				big = true // keep going: the rest must still be well formed
			}
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, 0, false, Bad
		}
	}
	if big {
		return 0, frac, neg, Big
	}
	return m, frac, neg, OK
}

// MaxCoefDigits is the most significant digits Coef reads into a
// coefficient: any such coefficient is below 10^18 and fits an int64.
const MaxCoefDigits = 18

// Coef reads a plain decimal, as split does, into a signed coefficient of
// at most MaxCoefDigits significant digits: the value is coef·10^-frac.
// neg reports a leading '-' (which coef cannot show for "-0"). st is Big
// for a well-formed decimal with more digits, which the caller parses
// another way or refuses, and Bad for what split refuses; coef is then 0.
// It is the one reading of prices and sizes every venue's decoder shares;
// each adds only its venue's bounds (sign, fraction digits).
func Coef(b []byte) (coef int64, frac int, neg bool, st Status) {
	m, frac, neg, st := split(b)
	switch {
	case st == Bad:
		return 0, 0, false, Bad
	case st == Big || m >= maxMantissa:
		return 0, frac, neg, Big
	}
	coef = int64(m)
	if neg {
		coef = -coef
	}
	return coef, frac, neg, OK
}

// pow10 holds 10^0 … 10^18, every power of ten an int64 holds.
var pow10 = [...]int64{
	1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
}

// MaxPow10 is the largest k for which Pow10 is defined.
const MaxPow10 = len(pow10) - 1

// Pow10 returns 10^k for 0 <= k <= MaxPow10; it panics for any other k.
func Pow10(k int) int64 { return pow10[k] }

// ScaleUp returns m·10^k, and false when k is negative or beyond MaxPow10
// or the product overflows an int64.
func ScaleUp(m int64, k int) (int64, bool) {
	if k == 0 {
		return m, true
	}
	if k < 0 || k > MaxPow10 {
		return 0, false
	}
	p := pow10[k]
	if m > maxInt64/p || m < -maxInt64/p {
		return 0, false
	}
	return m * p, true
}

// Dec is a plain decimal read from a JSON string by Scanner.Decimal: its
// text as written (for the checksums computed over it), and, when St is
// OK, its value ±M·10^-Frac with M below 10^18.
type Dec struct {
	Text []byte
	M    int64 // the coefficient, non-negative; Neg gives the sign
	Frac int
	Neg  bool
	St   Status
}

// Decimal reads a JSON string holding a plain decimal, as Str then Coef
// would, in one pass over its bytes: the digits are accumulated while the
// closing quote is looked for. A string that is not a plain decimal
// (escapes included) is St Bad with its raw text, and the scan goes on; a
// malformed string fails s as Str does. It is the one reading of the
// prices and sizes that venues send as strings; each adds only its own
// bounds (sign, fraction digits).
func (s *Scanner) Decimal() (d Dec) {
	if !s.Expect('"') {
		d.St = Bad
		return d
	}
	b, i := s.b, s.i
	start := i
	if i < len(b) && b[i] == '-' {
		d.Neg = true
		i++
	}
	var m uint64
	digits, dot, big := 0, -1, false
	i, m, digits, big = digitRun(b, i, m, digits, big)
	if i < len(b) && b[i] == '.' && digits > 0 {
		dot = digits
		i++
		// Eight fraction digits at once where they fit (Binance's and
		// OKX's sizes, Binance's prices).
		if i+8 <= len(b) && m < maxMantissa/1e8 {
			if v := binary.LittleEndian.Uint64(b[i:]); eightDigits(v) {
				m = m*1e8 + parseEight(v)
				digits += 8
				i += 8
			}
		}
		i, m, digits, big = digitRun(b, i, m, digits, big)
	}
	if i < len(b) && b[i] == '"' && digits > 0 && dot != digits {
		d.Text = b[start:i]
		s.i = i + 1
		if dot >= 0 {
			d.Frac = digits - dot
		}
		switch {
		case big || m >= maxMantissa:
			d.St = Big
		default:
			d.M = int64(m)
		}
		return d
	}
	// Not a plain decimal: read the rest as a string.
	s.i = start - 1
	d = Dec{St: Bad}
	d.Text = s.Str()
	return d
}

// decimalAt reads the plain decimal that starts at b[i], just after its
// opening quote, up to its closing quote, as Decimal does (the same steps:
// Decimal keeps its own copy, a call fewer per value; FuzzLevel checks the
// two agree); end is the index after the closing quote. ok is false when
// the string is not a plain decimal (or does not end).
func decimalAt(b []byte, i int) (d Dec, end int, ok bool) {
	start := i
	if i < len(b) && b[i] == '-' {
		d.Neg = true
		i++
	}
	var m uint64
	digits, dot, big := 0, -1, false
	i, m, digits, big = digitRun(b, i, m, digits, big)
	if i < len(b) && b[i] == '.' && digits > 0 {
		dot = digits
		i++
		// Eight fraction digits at once where they fit (Binance's and
		// OKX's sizes, Binance's prices).
		if i+8 <= len(b) && m < maxMantissa/1e8 {
			if v := binary.LittleEndian.Uint64(b[i:]); eightDigits(v) {
				m = m*1e8 + parseEight(v)
				digits += 8
				i += 8
			}
		}
		i, m, digits, big = digitRun(b, i, m, digits, big)
	}
	if i >= len(b) || b[i] != '"' || digits == 0 || dot == digits {
		return Dec{}, 0, false
	}
	d.Text = b[start:i]
	if dot >= 0 {
		d.Frac = digits - dot
	}
	switch {
	case big || m >= maxMantissa:
		d.St = Big
	default:
		d.M = int64(m)
	}
	return d, i + 1, true
}

// Level reads one book level written compactly, `["px","sz"]` with any
// more plain strings after the size (`["px","sz","0","4"]`) and no white
// space, and returns the price and size as Decimal reads them. When the
// level is written any other way (white space, a value that is not a
// plain decimal or a plain string, an escape), ok is false and s is left
// where it was, for the caller to read the level value by value.
func (s *Scanner) Level() (px, sz Dec, ok bool) {
	b, i := s.b, s.i
	if i+2 > len(b) || b[i] != '[' || b[i+1] != '"' {
		return px, sz, false
	}
	if px, i, ok = decimalAt(b, i+2); !ok || i+2 > len(b) || b[i] != ',' || b[i+1] != '"' {
		return Dec{}, Dec{}, false
	}
	if sz, i, ok = decimalAt(b, i+2); !ok {
		return Dec{}, Dec{}, false
	}
	for i+1 < len(b) && b[i] == ',' && b[i+1] == '"' {
		for i += 2; i < len(b) && !special[b[i]]; i++ {
		}
		if i == len(b) || b[i] != '"' {
			return Dec{}, Dec{}, false
		}
		i++
	}
	if i >= len(b) || b[i] != ']' {
		return Dec{}, Dec{}, false
	}
	s.i = i + 1
	return px, sz, true
}

// Coef returns d's signed coefficient (d.M with d's sign).
func (d *Dec) Coef() int64 {
	if d.Neg {
		return -d.M
	}
	return d.M
}

// digitRun reads the digits from b[i] on into m, counting them; big is
// set once m holds all it can.
func digitRun(b []byte, i int, m uint64, digits int, big bool) (int, uint64, int, bool) {
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		if m < maxMantissa {
			m = m*10 + uint64(c)
		} else {
			big = true
		}
		digits++
	}
	return i, m, digits, big
}

// eightDigits reports whether the eight bytes of v (little endian) are all
// ASCII digits.
func eightDigits(v uint64) bool {
	return v&0xF0F0F0F0F0F0F0F0 == 0x3030303030303030 &&
		(v+0x0606060606060606)&0xF0F0F0F0F0F0F0F0 == 0x3030303030303030
}

// parseEight returns the value of the eight ASCII digits of v, the first
// in the lowest byte, with three multiplications (SWAR).
func parseEight(v uint64) uint64 {
	v = (v & 0x0F0F0F0F0F0F0F0F) * 2561 >> 8
	v = (v & 0x00FF00FF00FF00FF) * 6553601 >> 16
	return (v & 0x0000FFFF0000FFFF) * 42949672960001 >> 32
}
