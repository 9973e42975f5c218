package jsonw

import (
	"encoding/json"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "nl\ncr\rtab\t", "\x00\x1f", "ünï©ødé", "bad\xffutf8"} {
		out := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q -> %s: %v", s, out, err)
		}
		want, _ := json.Marshal(s) // encoding/json also replaces invalid UTF-8 with U+FFFD
		var wantBack string
		json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q -> %q, want %q", s, back, wantBack)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b")
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s)
		if !json.Valid(out) {
			t.Fatalf("invalid JSON for %q: %s", s, out)
		}
	})
}
