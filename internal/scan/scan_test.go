package scan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// walk reads one value of any kind with the scanner's typed reads and
// returns it in encoding/json's shapes (numbers as json.Number), so a
// scan can be compared with encoding/json's decoding of the same text.
func walk(s *Scanner, depth int) any {
	if depth > MaxDepth {
		s.Fail()
		return nil
	}
	switch s.Peek() {
	case '{':
		m := map[string]any{}
		for ok := s.Object(); ok; ok = s.More('}') {
			k := s.Text() // Key, unescaped
			if !s.Expect(':') {
				return nil
			}
			m[string(k)] = walk(s, depth+1)
		}
		return m
	case '[':
		a := []any{}
		for ok := s.Array(); ok; ok = s.More(']') {
			a = append(a, walk(s, depth+1))
		}
		return a
	case '"':
		return string(s.Text())
	case 't', 'f':
		return s.Bool()
	case 'n':
		s.literal("null")
		return nil
	}
	return json.Number(s.Num())
}

func TestStr(t *testing.T) {
	for _, c := range []struct{ in, raw, text string }{
		{`"abc"`, "abc", "abc"},
		{`""`, "", ""},
		{` "a"`, "a", "a"},
		{`"a\"b"`, `a\"b`, `a"b`},
		{`"a\\"`, `a\\`, `a\`},
		{`"a\\\"b"`, `a\\\"b`, `a\"b`},
		{`"\u00e9t\u00e9"`, `\u00e9t\u00e9`, "été"},
		{`"ünï"`, "ünï", "ünï"},
	} {
		s := New([]byte(c.in))
		if got := string(s.Str()); got != c.raw || !s.End() {
			t.Errorf("Str(%s) = %q (failed %v), want %q", c.in, got, s.Failed(), c.raw)
		}
		s.Reset([]byte(c.in))
		if got := string(s.Text()); got != c.text || !s.End() {
			t.Errorf("Text(%s) = %q (failed %v), want %q", c.in, got, s.Failed(), c.text)
		}
	}
	for _, in := range []string{``, `"abc`, `"a\"`, `"a\`, `abc"`, `'a'`, "\"a\nb\"", "\"\x00\"", `1`, `{}`, `null`} {
		s := New([]byte(in))
		if got := s.Str(); got != nil || !s.Failed() {
			t.Errorf("Str(%q) = %q, did not fail", in, got)
		}
	}
	s := New([]byte(`"\x"`)) // an escape encoding/json does not know
	if s.Text(); !s.Failed() {
		t.Errorf(`Text("\x") did not fail`)
	}
}

func TestInt(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"-0", 0}, {"7", 7}, {" 42", 42}, {"-42", -42},
		{"1700000000000", 1700000000000},
		{"9223372036854775807", math.MaxInt64},
		{"-9223372036854775807", -math.MaxInt64},
		{"007", 7}, // leading zeros are not JSON, but harmless; no venue decoder refused them
	} {
		s := New([]byte(c.in))
		if got := s.Int(); got != c.want || !s.End() {
			t.Errorf("Int(%q) = %d (failed %v), want %d", c.in, got, s.Failed(), c.want)
		}
		if got, ok := ParseInt([]byte(strings.TrimSpace(c.in))); !ok || got != c.want {
			t.Errorf("ParseInt(%q) = %d, %v", c.in, got, ok)
		}
	}
	for _, in := range []string{
		"", "-", "+1", "a", `"1"`, "1.5", "1e3", "1E3", "-x", "true", "null",
		"9223372036854775808", "-9223372036854775808", "99999999999999999999999999",
	} {
		s := New([]byte(in))
		if got := s.Int(); got != 0 || !s.Failed() {
			t.Errorf("Int(%q) = %d, did not fail", in, got)
		}
	}
	for _, in := range []string{"", "1 ", " 1", "1x", "1.0"} {
		if n, ok := ParseInt([]byte(in)); ok {
			t.Errorf("ParseInt(%q) = %d, accepted", in, n)
		}
	}
}

func TestIntOrString(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{{`1597026383085`, 1597026383085}, {`"1597026383085"`, 1597026383085}, {`"-855196043"`, -855196043}, {`-3`, -3}} {
		s := New([]byte(c.in))
		if got := s.IntOrString(); got != c.want || !s.End() {
			t.Errorf("IntOrString(%s) = %d (failed %v), want %d", c.in, got, s.Failed(), c.want)
		}
	}
	for _, in := range []string{`""`, `" 1"`, `"1 "`, `"1.5"`, `"1`, `"9223372036854775808"`, `"1\u0030"`, `[1]`} {
		s := New([]byte(in))
		if got := s.IntOrString(); got != 0 || !s.Failed() {
			t.Errorf("IntOrString(%s) = %d, did not fail", in, got)
		}
	}
}

func TestNumAndIntText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`0.12290`, "0.12290"}, {`-1e-05,`, "-1e-05"}, {`"9705.60000000"`, "9705.60000000"}, {`12]`, "12"},
	} {
		s := New([]byte(c.in))
		if got := string(s.Num()); got != c.want || s.Failed() {
			t.Errorf("Num(%s) = %q (failed %v), want %q", c.in, got, s.Failed(), c.want)
		}
	}
	for _, in := range []string{``, `+5`, `.5`, `e5`, `true`, `[1]`, `"1`} {
		s := New([]byte(in))
		if got := s.Num(); got != nil || !s.Failed() {
			t.Errorf("Num(%s) = %q, did not fail", in, got)
		}
	}
	s := New([]byte(`12345,`))
	if got := string(s.IntText()); got != "12345" || s.Failed() {
		t.Errorf("IntText = %q", got)
	}
	for _, in := range []string{`"12345"`, `1.5`, `-`} {
		s := New([]byte(in))
		if got := s.IntText(); got != nil || !s.Failed() {
			t.Errorf("IntText(%s) = %q, did not fail", in, got)
		}
	}
}

func TestBool(t *testing.T) {
	for in, want := range map[string]bool{"true": true, " false": false} {
		s := New([]byte(in))
		if got := s.Bool(); got != want || !s.End() {
			t.Errorf("Bool(%q) = %v (failed %v)", in, got, s.Failed())
		}
	}
	for _, in := range []string{"", "tru", "fals", "null", `"true"`, "1", "True"} {
		s := New([]byte(in))
		if s.Bool(); !s.Failed() {
			t.Errorf("Bool(%q) did not fail", in)
		}
	}
}

func TestObjectArrayMore(t *testing.T) {
	s := New([]byte(` { "a" : [ 1 , 2 ] , "b" : {} , "c" : [] } `))
	var keys []string
	var elems []int64
	for ok := s.Object(); ok; ok = s.More('}') {
		k := string(s.Key())
		keys = append(keys, k)
		switch k {
		case "a":
			for ok := s.Array(); ok; ok = s.More(']') {
				elems = append(elems, s.Int())
			}
		case "b":
			if s.Object() {
				t.Error("Object on {} reported a member")
			}
		case "c":
			if s.Array() {
				t.Error("Array on [] reported an element")
			}
		}
	}
	if !s.End() || fmt.Sprint(keys, elems) != "[a b c] [1 2]" {
		t.Errorf("walked %v %v (failed %v)", keys, elems, s.Failed())
	}

	// Malformed containers fail the walk, wherever they break.
	for _, in := range []string{
		``, `[`, `{`, `{"a"}`, `{"a":1,}`, `{"a":1 "b":2}`, `{,"a":1}`, `{"a":1]`, `{1:2}`, `{"a":1`, `[1,]`, `[,1]`, `[1 2]`, `[1}`, `"x"`,
	} {
		s := New([]byte(in))
		if bytes.HasPrefix([]byte(in), []byte("[")) {
			for ok := s.Array(); ok; ok = s.More(']') {
				s.Int()
			}
		} else {
			for ok := s.Object(); ok; ok = s.More('}') {
				s.Key()
				s.Int()
			}
		}
		if !s.Failed() {
			t.Errorf("walk of %q did not fail", in)
		}
	}
}

func TestSkipAndRaw(t *testing.T) {
	valid := []string{
		`{"a":[1,-2.5e3,true,false,null,"x",{"b":{}}],"c":[]}`,
		`[[[[]]],{},[{}],""]`,
		`"a\"b"`, `-0`, `1E+5`, `true`, `null`, ` [ 1 , { "k" : "v" } ] `,
	}
	for _, in := range valid {
		s := New([]byte(in + `,`))
		raw := s.Raw()
		if s.Failed() || string(raw) != strings.TrimSpace(in) {
			t.Errorf("Raw(%s) = %q (failed %v)", in, raw, s.Failed())
		}
		if !s.Expect(',') || !s.End() {
			t.Errorf("Skip(%s) stopped at %d", in, s.i)
		}
	}
	invalid := []string{
		``, `]`, `}`, `,`, `:`, `[1,]`, `[,]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1]`, `[1}`,
		`[1 2]`, `tru`, `nul`, `nan`, `+1`, `.5`, `"abc`, `[`, `{"a":[1,{"b":2]}`, `[[[]]`, "\"\x01\"", `'a'`,
	}
	for _, in := range invalid {
		s := New([]byte(in))
		if s.Skip(); !s.Failed() {
			t.Errorf("Skip(%q) did not fail", in)
		}
	}
}

// TestDepth: nesting up to MaxDepth is skipped, deeper nesting fails
// (without recursion, so any depth costs only its length).
func TestDepth(t *testing.T) {
	for _, c := range []struct {
		depth int
		ok    bool
	}{{1, true}, {MaxDepth, true}, {MaxDepth + 1, false}, {100000, false}} {
		for _, open := range []string{"[", `{"k":`} {
			closing := "]"
			if open != "[" {
				closing = "}"
			}
			in := strings.Repeat(open, c.depth) + "1" + strings.Repeat(closing, c.depth)
			s := New([]byte(in))
			if s.Skip(); s.Failed() == c.ok {
				t.Errorf("Skip of %d × %s: failed %v, want ok %v", c.depth, open, s.Failed(), c.ok)
			}
		}
	}
}

// TestFailedIsSticky: after a failure every read returns zero values and
// the walk loops end.
func TestFailedIsSticky(t *testing.T) {
	s := New([]byte(`{"a":x,"b":"y","c":1}`))
	if !s.Object() || string(s.Key()) != "a" {
		t.Fatal("setup")
	}
	s.Str() // fails on x
	if !s.Failed() || s.More('}') || s.Key() != nil || s.Str() != nil || s.Int() != 0 || s.Num() != nil ||
		s.Raw() != nil || s.Object() || s.Array() || s.Eat('"') || s.Peek() != 0 || s.End() {
		t.Error("a failed scanner went on reading")
	}
	s.Reset([]byte(`1`))
	if s.Int() != 1 || !s.End() {
		t.Error("Reset did not clear the failure")
	}
}

func TestMembers(t *testing.T) {
	in := `[{"type":"a","tickers":[1,2]},{"tickers":[3],"x":{"tickers":[99]}},{},{"tickers":[4],"tickers":[5]}]`
	s := New([]byte(in))
	var got []int64
	all := s.Members("tickers", func() bool {
		for ok := s.Array(); ok; ok = s.More(']') {
			got = append(got, s.Int())
		}
		return true
	})
	if !all || !s.End() || fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Errorf("Members = %v, %v (failed %v)", got, all, s.Failed())
	}

	s.Reset([]byte(in))
	calls := 0
	if s.Members("tickers", func() bool { calls++; s.Skip(); return false }) || calls != 1 || s.Failed() {
		t.Errorf("a stopped walk: calls %d, failed %v", calls, s.Failed())
	}

	for _, bad := range []string{`{}`, `[1]`, `[{"tickers":[1}]`, `[{"tickers":[1]}`, `[{"tickers"}]`} {
		s.Reset([]byte(bad))
		if !s.Members("tickers", func() bool { s.Skip(); return true }) || !s.Failed() {
			t.Errorf("Members(%s) did not fail", bad)
		}
	}
}

// TestMatchesEncodingJSON: on valid JSON, a walk with the typed reads
// gives what encoding/json gives, and Skip accepts it.
func TestMatchesEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"stream":"btcusdt@depth","data":{"e":"depthUpdate","E":1700000000000,"U":1,"u":2,"b":[["1.0","2"]],"a":[]}}`,
		`{"channel":"book","type":"update","data":[{"symbol":"BTC/USD","bids":[{"price":0.1229,"qty":1e-05}],"checksum":3310070434}]}`,
		`{"k\u00e9y":"v\n\"x\"","a":[true,false,null,-0.5,1E+2],"e":{}}`,
	} {
		checkAgainstJSON(t, []byte(in))
	}
}

func checkAgainstJSON(t *testing.T, in []byte) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(in))
	d.UseNumber()
	var want any
	if err := d.Decode(&want); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	s := New(in)
	got := walk(&s, 0)
	if !s.End() {
		t.Fatalf("walk of valid JSON failed: %s", in)
	}
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Fatalf("walk = %#v\nwant   %#v", got, want)
	}
	s.Reset(in)
	if s.Skip(); !s.End() {
		t.Fatalf("Skip of valid JSON failed: %s", in)
	}
}

func TestFixed(t *testing.T) {
	type parts struct {
		m    uint64
		frac int
		neg  bool
		st   Status
	}
	for in, want := range map[string]parts{
		"63982.70":                       {6398270, 2, false, OK},
		"0":                              {0, 0, false, OK},
		"0.001683":                       {1683, 6, false, OK},
		"0.00000000":                     {0, 8, false, OK},
		"-1.5":                           {15, 1, true, OK},
		"000000000000000000001.5":        {15, 1, false, OK},
		"123456789012345678":             {123456789012345678, 0, false, OK},
		"1234567890123456789":            {1234567890123456789, 0, false, OK},
		"9999999999999999999":            {9999999999999999999, 0, false, OK},
		"0.0000000000000000000000000001": {1, 28, false, OK},
		"12345678901234567890":           {0, 0, false, Big},
		"12345678901234567890.5":         {0, 1, false, Big},
		"12345678901234567890x":          {0, 0, false, Bad},
		"":                               {0, 0, false, Bad},
		"-":                              {0, 0, false, Bad},
		".":                              {0, 0, false, Bad},
		"1.":                             {0, 0, false, Bad},
		".5":                             {0, 0, false, Bad},
		"-.5":                            {0, 0, false, Bad},
		"1.2.3":                          {0, 0, false, Bad},
		"1e5":                            {0, 0, false, Bad},
		"+1":                             {0, 0, false, Bad},
		" 1":                             {0, 0, false, Bad},
		"--1":                            {0, 0, false, Bad},
		"12a":                            {0, 0, false, Bad},
	} {
		var got parts
		got.m, got.frac, got.neg, got.st = split([]byte(in))
		if got != want {
			t.Errorf("split(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func TestScaleUp(t *testing.T) {
	type in struct {
		m int64
		k int
	}
	type out struct {
		n  int64
		ok bool
	}
	for c, want := range map[in]out{
		{5, 0}: {5, true}, {5, 3}: {5000, true}, {-5, 3}: {-5000, true}, {0, 18}: {0, true},
		{9, 18}: {9e18, true}, {10, 18}: {0, false}, {-10, 18}: {0, false}, {1, 19}: {0, false}, {1, -1}: {0, false},
		{math.MaxInt64 / 10, 1}: {math.MaxInt64 / 10 * 10, true}, {math.MaxInt64/10 + 1, 1}: {0, false},
	} {
		var got out
		if got.n, got.ok = ScaleUp(c.m, c.k); got != want {
			t.Errorf("ScaleUp(%d, %d) = %+v, want %+v", c.m, c.k, got, want)
		}
	}
	for k := 0; k <= MaxPow10; k++ {
		if want, _ := strconv.ParseInt("1"+strings.Repeat("0", k), 10, 64); Pow10(k) != want {
			t.Errorf("Pow10(%d) = %d", k, Pow10(k))
		}
	}
}

func TestCoef(t *testing.T) {
	for _, c := range []struct {
		in   string
		coef int64
		frac int
		neg  bool
		st   Status
	}{
		{"63982.70", 6398270, 2, false, OK},
		{"-1.5", -15, 1, true, OK},
		{"-0", 0, 0, true, OK},
		{"000000000000000000001.5", 15, 1, false, OK},
		{"999999999999999999", 999999999999999999, 0, false, OK}, // 18 digits
		{"1000000000000000000", 0, 0, false, Big},                // 19
		{"0.1234567890123456789", 0, 19, false, Big},
		{"1e5", 0, 0, false, Bad},
		{"", 0, 0, false, Bad},
		{"1.", 0, 0, false, Bad},
		{"0", 0, 0, false, OK},
		{"100", 100, 0, false, OK},
		{"0.001683", 1683, 6, false, OK},
		{"-", 0, 0, false, Bad},
		{".5", 0, 0, false, Bad},
		{"1.2.3", 0, 0, false, Bad},
		{"12a", 0, 0, false, Bad},
		{"+1", 0, 0, false, Bad},
	} {
		coef, frac, neg, st := Coef([]byte(c.in))
		if coef != c.coef || frac != c.frac || neg != c.neg || st != c.st {
			t.Errorf("Coef(%q) = %d, %d, %v, %d; want %d, %d, %v, %d", c.in, coef, frac, neg, st, c.coef, c.frac, c.neg, c.st)
		}
	}
}
