package bybit

import (
	"strings"
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

func TestScannerStrings(t *testing.T) {
	var s scanner
	for _, c := range []struct{ in, want string }{
		{`"abc"`, "abc"},
		{`"a\"b"`, `a\"b`},
		{`"a\\"`, `a\\`},
		{`"a\\\"b"`, `a\\\"b`},
		{`""`, ""},
	} {
		s.reset([]byte(c.in))
		if got := string(s.str()); got != c.want || s.bad {
			t.Errorf("str(%s) = %q (bad %v), want %q", c.in, got, s.bad, c.want)
		}
	}
	for _, in := range []string{`"abc`, `"a\"`, `abc"`, ``} {
		s.reset([]byte(in))
		s.str()
		if !s.bad {
			t.Errorf("str(%s) did not fail", in)
		}
	}
}

func TestScannerSkipDepth(t *testing.T) {
	var s scanner
	s.reset([]byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000)))
	s.skip()
	if !s.bad {
		t.Error("skip accepted nesting past maxDepth")
	}
	s.reset([]byte(`{"a":[1,-2.5e3,true,false,null,"x",{"b":{}}],"c":[]}`))
	s.skip()
	s.end()
	if s.bad {
		t.Error("skip failed on valid JSON")
	}
}
