package scan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds are frames of every venue's shape, whole and cut short.
var fuzzSeeds = []string{
	`{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":1700000000000,"s":"BTCUSDT","U":100000000001,"u":100000000002,"b":[["59999.61000000","3.12345678"]],"a":[]}}`,
	`{"topic":"orderbook.50.BTCUSDT","ts":1680652808085,"type":"delta","data":{"s":"BTCUSDT","b":[["28161.04","0.177474"]],"a":[["28184.33","0"]],"u":59438061,"seq":4281282232},"cts":1680652808083}`,
	`{"channel":"l2_data","client_id":"","timestamp":"2026-09-07T01:57:58.894355Z","sequence_num":3,"events":[{"type":"update","product_id":"BTC-USD","updates":[{"side":"bid","event_time":"2026-09-07T01:57:58.894355Z","price_level":"50000.1","new_quantity":"0"}]}]}`,
	`{"channel":"book","type":"update","data":[{"symbol":"MATIC/USD","bids":[{"price":0.5660,"qty":1e-05}],"asks":[],"checksum":2114181697,"timestamp":"2023-10-06T17:35:55.440295Z"}]}`,
	`{"arg":{"channel":"books","instId":"BTC-USDT"},"action":"update","data":[{"asks":[["30243.5","0.00047612","0","1"]],"bids":[],"ts":"1652400000000","checksum":-855196043,"prevSeqId":10,"seqId":15}]}`,
	`{"k\u00e9y":"v\n\"x\"","a":[true,false,null,-0.5,1E+2],"e":{}}`,
	`[[[[[[[[[[1]]]]]]]]]]`,
}

// FuzzScanner checks, on any input, that the scanner never panics, and on
// valid JSON that it accepts it and reads what encoding/json reads.
func FuzzScanner(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
		for _, n := range []int{1, len(s) / 3, len(s) / 2, len(s) - 1} {
			f.Add([]byte(s[:n]))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := New(in)
		got := walk(&s, 0)
		walked := s.End()

		s.Reset(in)
		raw := s.Raw()
		skipped := s.End()
		if skipped && !bytes.Equal(raw, bytes.Trim(in, " \t\n\r")) {
			t.Fatalf("Raw = %q of %q", raw, in)
		}
		if walked && !skipped {
			t.Fatalf("walk accepted what Skip refused: %q", in)
		}

		if json.Valid(in) && depth(in) <= MaxDepth {
			if !walked || !skipped {
				t.Fatalf("valid JSON refused (walk %v, skip %v): %q", walked, skipped, in)
			}
			if utf8.Valid(in) { // encoding/json replaces invalid UTF-8; the scanner hands back bytes
				d := json.NewDecoder(bytes.NewReader(in))
				d.UseNumber()
				var want any
				if err := d.Decode(&want); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
					t.Fatalf("walk = %#v\nwant   %#v", got, want)
				}
			}
		}

		// Every number the walk met parses as encoding/json and strconv say.
		s.Reset(in)
		numbers(&s, 0, func(b []byte) {
			checkFixed(t, b)
			n, ok := ParseInt(b)
			want, err := strconv.ParseInt(string(b), 10, 64)
			if ok != (err == nil && b[0] != '+' && want != -1<<63) || ok && n != want {
				t.Fatalf("ParseInt(%q) = %d, %v; strconv says %d, %v", b, n, ok, want, err)
			}
		})
	})
}

// depth returns how deeply valid JSON nests.
func depth(b []byte) int {
	d, deepest, in := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == '[' || c == '{'):
			d++
			deepest = max(deepest, d)
		case !in && (c == ']' || c == '}'):
			d--
		}
	}
	return deepest
}

// numbers calls fn with the text of every number and string in a value.
func numbers(s *Scanner, depth int, fn func([]byte)) {
	if depth > MaxDepth {
		s.Fail()
		return
	}
	switch s.Peek() {
	case '{':
		for ok := s.Object(); ok; ok = s.More('}') {
			s.Key()
			numbers(s, depth+1, fn)
		}
	case '[':
		for ok := s.Array(); ok; ok = s.More(']') {
			numbers(s, depth+1, fn)
		}
	case 't', 'f', 'n':
		s.Skip()
	default:
		if b := s.Num(); len(b) > 0 {
			fn(b)
		}
	}
}

// FuzzFixed compares split with math/big on any text.
func FuzzFixed(f *testing.F) {
	for _, s := range []string{"63982.70", "0", "-1.5", "0.00000000", "12345678901234567890.5", "1e5", "1.", ".5", "-", "00.10"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFixed(t, b) })
}

func checkFixed(t *testing.T, b []byte) {
	t.Helper()
	m, frac, neg, st := split(b)
	plain := len(b) > 0 && strings.Trim(string(b), "-0123456789.") == "" &&
		strings.Count(string(b), ".") <= 1 && strings.LastIndex(string(b), "-") <= 0
	if plain {
		digits := strings.TrimPrefix(string(b), "-")
		plain = digits != "" && digits[0] != '.' && digits[len(digits)-1] != '.'
	}
	if (st == Bad) == plain {
		t.Fatalf("split(%q) status %d; plain decimal: %v", b, st, plain)
	}
	if st != OK {
		return
	}
	want, ok := new(big.Rat).SetString(string(b))
	if !ok {
		t.Fatalf("math/big cannot read %q", b)
	}
	got := new(big.Rat).SetFrac(new(big.Int).SetUint64(m), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(frac)), nil))
	if neg {
		got.Neg(got)
	}
	if got.Cmp(want) != 0 || neg != (b[0] == '-') {
		t.Fatalf("split(%q) = %d, %d, %v: %s, want %s", b, m, frac, neg, got.RatString(), want.RatString())
	}
	if i := strings.IndexByte(string(b), '.'); i >= 0 && frac != len(b)-i-1 || i < 0 && frac != 0 {
		t.Fatalf("split(%q): %d fraction digits", b, frac)
	}
}

// FuzzDecimal checks Scanner.Decimal against Str then Coef on the same
// input: the same text, status, value and position, and the same failure.
func FuzzDecimal(f *testing.F) {
	for _, s := range []string{`"63982.70"`, `"0"`, `"-1.5"`, `"0.00000000"`, `"12345678901234567890.5"`, `"1e5"`, `"1."`, `".5"`, `"-"`, `""`, `"00.10"`, `"1\"2"`, `"a\\"`, `5`, `"1.2.3"`, `"1`, `"-.5"`, `"97000.01000000"`, `"0.01234000"`, `"123456789012345678901234"`, `"12345678a"`, `"1234567.8"`, `"12345678.12345678"`} {
		f.Add([]byte(s + `,"x"`))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		a := New(in)
		d := a.Decimal()
		b := New(in)
		raw := b.Str()
		coef, frac, neg, st := Coef(raw)
		if a.Failed() != b.Failed() || a.i != b.i {
			t.Fatalf("%q: Decimal failed %v at %d, Str failed %v at %d", in, a.Failed(), a.i, b.Failed(), b.i)
		}
		if b.Failed() {
			return
		}
		if !bytes.Equal(d.Text, raw) || d.St != st {
			t.Fatalf("%q: Decimal %q status %d, Str+Coef %q status %d", in, d.Text, d.St, raw, st)
		}
		if st == OK && (d.Coef() != coef || d.Frac != frac || d.Neg != neg) {
			t.Fatalf("%q: Decimal %d·10^-%d neg %v, Coef %d·10^-%d neg %v", in, d.Coef(), d.Frac, d.Neg, coef, frac, neg)
		}
		if s2 := a.Str(); !bytes.Equal(s2, b.Str()) {
			t.Fatalf("%q: scans diverge after the value", in)
		}
	})
}

// FuzzLevel checks Scanner.Level against reading the level value by value
// (Expect, Decimal, Str): where Level reads one, the same texts, values
// and position; where it does not, the scanner where it was.
func FuzzLevel(f *testing.F) {
	for _, s := range []string{`["97000.1","0.04209902","0","1"]`, `["96999","14.16731997"]`, `["1.5","-2","0","12"],`, `[ "1","2"]`, `["1","2",0]`, `["1","2","a\"b"]`, `["1e5","2"]`, `["1","12345678901234567890123"]`, `["123456789.123456789","0.000000001","0","1"]`, `["1","2","0"`, `["1","2"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		a := New(in)
		px, sz, ok := a.Level()
		if !ok {
			if a.i != 0 || a.Failed() {
				t.Fatalf("%q: Level refused it but moved to %d (failed %v)", in, a.i, a.Failed())
			}
			return
		}
		b := New(in)
		b.Expect('[')
		bpx := b.Decimal()
		b.Expect(',')
		bsz := b.Decimal()
		for b.Eat(',') {
			b.Str()
		}
		b.Expect(']')
		if b.Failed() || b.i != a.i {
			t.Fatalf("%q: Level read it to %d, the steps to %d (failed %v)", in, a.i, b.i, b.Failed())
		}
		for _, p := range [][2]Dec{{px, bpx}, {sz, bsz}} {
			x, y := p[0], p[1]
			if !bytes.Equal(x.Text, y.Text) || x.M != y.M || x.Frac != y.Frac || x.Neg != y.Neg || x.St != y.St {
				t.Fatalf("%q: Level read %+v, the steps %+v", in, x, y)
			}
		}
	})
}

// FuzzStr checks str, 8 bytes at a time, against strBytes, the byte loop
// it replaced, from every start in the input: the same text, escape flag,
// position and failure.
func FuzzStr(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{`"`, `""`, `"\"`, `"\\"`, `"a\"b"`, "\"a\x1fb\"", "\"abcdefgh\x00\"", `"abcdefg\`, `"abcdefgh\"ijklmnop"`, "\"\xff\xfe\x7f\x80\"", `"0123456789abcdef"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for start := range in {
			got, want := New(in), New(in)
			got.i, want.i = start, start
			raw, esc := got.str()
			wraw, wesc := want.strBytes()
			if !bytes.Equal(raw, wraw) || (raw == nil) != (wraw == nil) || esc != wesc || got.i != want.i || got.bad != want.bad {
				t.Fatalf("str of %q at %d = %q, %v, at %d, failed %v; the byte loop %q, %v, at %d, failed %v",
					in, start, raw, esc, got.i, got.bad, wraw, wesc, want.i, want.bad)
			}
		}
	})
}

// strBytes is str as a byte loop with one table test per byte: the
// reference FuzzStr holds str to.
func (s *Scanner) strBytes() (raw []byte, escaped bool) {
	if !s.Expect('"') {
		return nil, false
	}
	b := s.b
	for i := s.i; i < len(b); i++ {
		c := b[i]
		if !special[c] {
			continue
		}
		switch c {
		case '"':
			raw = b[s.i:i]
			s.i = i + 1
			return raw, escaped
		case '\\':
			escaped = true
			i++
		default: // a control character
			s.Fail()
			return nil, false
		}
	}
	s.Fail()
	return nil, false
}
