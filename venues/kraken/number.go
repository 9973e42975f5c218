package kraken

import "github.com/fanoutd/fanoutd/internal/scan"

// parseNum parses the text of a JSON number into coef·10^-decs without
// going through float64: "0.12290" is (12290, 5), "9705.60000000" is
// (970560000000, 8), "1e-05" is (1, 5). It is Kraken's own because Kraken
// alone writes prices and sizes as JSON numbers, which may carry an
// exponent; the part before the exponent is read by scan.Coef, as every
// venue's plain decimals are. It fails on anything that is not a number,
// on more than 18 significant digits and on absurd exponents.
func parseNum(b []byte) (coef int64, decs int, ok bool) {
	mant, exp := b, 0
	for i, c := range b {
		if c == 'e' || c == 'E' {
			if exp, ok = parseExp(b[i+1:]); !ok {
				return 0, 0, false
			}
			mant = b[:i]
			break
		}
	}
	c, frac, neg, st := scan.Coef(mant)
	if st != scan.OK {
		return 0, 0, false
	}
	if neg {
		c = -c
	}
	coef, decs = c, frac-exp
	for ; decs < 0; decs++ {
		if coef > (1<<63-1)/10 {
			return 0, 0, false
		}
		coef *= 10
	}
	if decs > 64 {
		return 0, 0, false
	}
	if neg {
		coef = -coef
	}
	return coef, decs, true
}

// parseExp parses an exponent's text after the 'e': an optional sign and
// one to three digits.
func parseExp(b []byte) (int, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, b = b[0] == '-', b[1:]
	}
	if len(b) == 0 || len(b) > 3 {
		return 0, false
	}
	e := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		e = e*10 + int(c-'0')
	}
	if neg {
		e = -e
	}
	return e, true
}

// rescale returns coef·10^-decs as a coefficient at exponent -prec. It
// fails when the value has non-zero digits finer than prec (the venue sent
// more precision than its instrument has) or overflows an int64.
func rescale(coef int64, decs, prec int) (int64, bool) {
	switch {
	case decs == prec:
		return coef, true
	case decs < prec:
		if coef == 0 {
			return 0, true
		}
		return scan.ScaleUp(coef, prec-decs)
	}
	k := decs - prec
	if k > scan.MaxPow10 {
		return 0, coef == 0
	}
	p := scan.Pow10(k)
	if coef%p != 0 {
		return 0, false
	}
	return coef / p, true
}
