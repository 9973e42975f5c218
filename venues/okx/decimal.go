package okx

import (
	"math"

	"github.com/fanoutd/fanoutd/internal/scan"
)

// numStatus is how parseNum ended.
type numStatus uint8

const (
	numOK numStatus = iota
	numBad
	numBig // well formed but more digits than an int64 holds
)

// parseNum parses an unsigned decimal as OKX writes prices and sizes
// ("30243.5", "0.00047612", "415") into a mantissa and the number of digits
// after the point (scan.Fixed). Signs, exponents and empty strings are
// numBad.
func parseNum(b []byte) (m int64, frac int32, st numStatus) {
	u, f, neg, s := scan.Fixed(b)
	switch {
	case s == scan.Bad || neg:
		return 0, 0, numBad
	case s == scan.Big || u > math.MaxInt64:
		return 0, int32(f), numBig
	}
	return int64(u), int32(f), numOK
}
