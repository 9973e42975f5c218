package venue

import (
	"math/rand/v2"
	"testing"

	"github.com/shopspring/decimal"
)

// TestAppendCoefRandom checks appendCoef against decimal.String on random
// coefficients and exponents, every length of coefficient and fraction.
func TestAppendCoefRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300000 {
		c := r.Int64N(1 << r.IntN(63))
		if r.IntN(4) == 0 {
			c *= 1000
		}
		if r.IntN(5) == 0 {
			c = -c
		}
		exp := int32(-r.IntN(20) + 2)
		if got, want := string(appendCoef(nil, c, int(exp))), decimal.New(c, exp).String(); got != want {
			t.Fatalf("appendCoef(%d, %d) = %q, want %q", c, exp, got, want)
		}
	}
}
