package venue

import (
	"encoding/binary"
	"fmt"
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

// TestDigits8 checks digits8 against strconv on every 4-digit half
// around each power of ten and on a stride through all of 0 … 10^8-1.
func TestDigits8(t *testing.T) {
	check := func(x uint64) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], digits8(x))
		if want := fmt.Sprintf("%08d", x); string(b[:]) != want {
			t.Fatalf("digits8(%d) = %q, want %q", x, b[:], want)
		}
	}
	for x := uint64(0); x < 1e8; x += 997 {
		check(x)
	}
	for h := uint64(0); h < 1e4; h++ {
		for _, l := range []uint64{0, 1, 9, 10, 99, 100, 999, 1000, 9999} {
			check(h*1e4 + l)
			check(l*1e4 + h)
		}
	}
}
