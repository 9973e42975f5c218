package venue

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// TestParseDecimal: the one slow-path rule of every adapter: plain or
// exponent notation, at most 64 bytes, an exponent within ±64.
func TestParseDecimal(t *testing.T) {
	for in, want := range map[string]string{
		"1234567890123456789012.5": "1234567890123456789012.5",
		"-0.00000000000000000001":  "-0.00000000000000000001",
		"1e-05":                    "0.00001",
		"2.5E+3":                   "2500",
		strings.Repeat("9", 64):    strings.Repeat("9", 64),
	} {
		v, ok := ParseDecimal([]byte(in))
		if !ok || v.String() != want {
			t.Errorf("ParseDecimal(%q) = %v, %v; want %s", in, v, ok, want)
		}
	}
	for _, in := range []string{"", " 1", "1 ", "0x10", "1.2.3", "NaN", "Infinity", "1e-65", "1e65", strings.Repeat("9", 65), "1,5", "+"} {
		if v, ok := ParseDecimal([]byte(in)); ok {
			t.Errorf("ParseDecimal(%q) = %v, accepted", in, v)
		}
	}
}

// FuzzParseDecimal: ParseDecimal never panics, and what it accepts is the
// value decimal.NewFromString reads from the same text, within its bounds.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"1.5", "-0.1", "1e-05", "12345678901234567890123", "9.9E+64", ".5", "5."} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, ok := ParseDecimal(b)
		if !ok {
			return
		}
		w, err := decimal.NewFromString(string(b))
		if err != nil || !v.Equal(w) || len(b) > 64 || v.Exponent() < -64 || v.Exponent() > 64 {
			t.Fatalf("ParseDecimal(%q) = %v accepted; NewFromString %v, %v", b, v, w, err)
		}
	})
}
