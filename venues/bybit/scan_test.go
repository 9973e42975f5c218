package bybit

import (
	"testing"

	"github.com/shopspring/decimal"
)

func TestParseFixed(t *testing.T) {
	for _, c := range []struct {
		in  string
		m   int64
		exp int32
		ok  bool
	}{
		{"63982.70", 6398270, -2, true},
		{"0", 0, 0, true},
		{"0.001683", 1683, -6, true},
		{"-1.5", -15, -1, true},
		{"100", 100, 0, true},
		{"000000000000000000001.5", 15, -1, true}, // leading zeros are not significant digits
		{"123456789012345678", 123456789012345678, 0, true},
		{"1234567890123456789", 0, 0, false}, // 19 digits: the slow path
		{"1e5", 0, 0, false},
		{"", 0, 0, false},
		{"-", 0, 0, false},
		{"1.", 0, 0, false},
		{".5", 0, 0, false},
		{"1.2.3", 0, 0, false},
		{"12a", 0, 0, false},
	} {
		m, exp, ok := parseFixed([]byte(c.in))
		if m != c.m || exp != c.exp || ok != c.ok {
			t.Errorf("parseFixed(%q) = %d, %d, %v; want %d, %d, %v", c.in, m, exp, ok, c.m, c.exp, c.ok)
		}
		if ok {
			want := decimal.RequireFromString(c.in)
			if !decimal.New(m, exp).Equal(want) {
				t.Errorf("parseFixed(%q) is not %s", c.in, want)
			}
		}
	}
}
