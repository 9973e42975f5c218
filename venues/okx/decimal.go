package okx

import "github.com/fanoutd/fanoutd/internal/scan"

// parseNum parses an unsigned decimal as OKX writes prices and sizes
// ("30243.5", "0.00047612", "415") into a coefficient and the number of
// digits after the point (scan.Coef). A sign is scan.Bad: OKX writes none.
func parseNum(b []byte) (m int64, frac int32, st scan.Status) {
	c, f, neg, st := scan.Coef(b)
	if neg {
		return 0, 0, scan.Bad
	}
	return c, int32(f), st
}
