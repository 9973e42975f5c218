package bybit

import "github.com/fanoutd/fanoutd/internal/scan"

// parseFixed reads a plain decimal ("63982.70", "0", "-1.5") into a
// coefficient and exponent without allocating (scan.Coef). ok is false
// when b is not such a decimal or has more than 18 significant digits (the
// slow path takes those).
func parseFixed(b []byte) (m int64, exp int32, ok bool) {
	m, frac, _, st := scan.Coef(b)
	return m, -int32(frac), st == scan.OK
}
