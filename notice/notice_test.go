package notice

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var at = time.Date(2026, 11, 30, 5, 0, 0, 123000000, time.UTC)

func TestKindsAreClosed(t *testing.T) {
	want := []string{"link_up", "link_down", "link_reconnecting", "book_resync", "dropping", "resumed",
		"coverage_change", "refusal", "data_quality", "rate_limited", "shutdown", "replay_end", "recording_failed", "stream_gap", "token_expiring"}
	ks := Kinds()
	if len(ks) != len(want) {
		t.Fatalf("%d kinds, want %d", len(ks), len(want))
	}
	for i, k := range ks {
		if k.String() != want[i] {
			t.Errorf("kind %d = %q, want %q", i, k, want[i])
		}
		if p, err := ParseKind(want[i]); err != nil || p != k {
			t.Errorf("ParseKind(%q) = %v, %v", want[i], p, err)
		}
	}
	if Kind(0).Valid() || Kind(0).String() != "" {
		t.Error("zero kind is valid")
	}
	for _, k := range []Kind{0, Kind(len(want) + 1), 200} {
		if _, err := New(k, 0, "x", "", at, "m", nil); !errors.Is(err, ErrUnknownKind) {
			t.Errorf("New(kind %d) = %v, want ErrUnknownKind", k, err)
		}
	}
}

func TestDefaultSeverity(t *testing.T) {
	for k, want := range map[Kind]Severity{Dropping: Warning, Resumed: Info, LinkDown: Warning, LinkUp: Info, Shutdown: Info, DataQuality: Warning} {
		n, err := New(k, 0, "v", "", at, "", nil)
		if err != nil || n.Severity != want {
			t.Errorf("%s: severity %s, %v; want %s", k, n.Severity, err, want)
		}
	}
	n, _ := New(LinkDown, Error, "v", "", at, "", nil)
	if n.Severity != Error {
		t.Errorf("explicit severity ignored: %s", n.Severity)
	}
}

func TestCredentialKeysRefused(t *testing.T) {
	for _, key := range []string{"api_key", "API_KEY", "Secret", "password", "passphrase", "token", "access_token",
		"signature", "Authorization", "bearer", "private_key", "x-api-key", "client secret"} {
		if _, err := New(Refusal, 0, "v", "", at, "", map[string]any{key: "x"}); !errors.Is(err, ErrCredential) {
			t.Errorf("key %q: %v, want ErrCredential", key, err)
		}
		nested := map[string]any{"request": map[string]any{key: "x"}}
		if _, err := New(Refusal, 0, "v", "", at, "", nested); !errors.Is(err, ErrCredential) {
			t.Errorf("nested key %q: %v, want ErrCredential", key, err)
		}
	}
	if _, err := New(Dropping, 0, "v", "", at, "", map[string]any{"bound": 1, "queue_len": 2, "symbol": "BTC"}); err != nil {
		t.Errorf("ordinary details refused: %v", err)
	}
}

func TestWireForm(t *testing.T) {
	n, err := New(Dropping, 0, "coinbase", "coinbase:level2:BTC-USD", at, "queue \"full\"", map[string]any{
		"queue_len": 10000, "bound": 10000, "gaps": map[string]any{"s": []uint64{1043, 6276}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := string(n.AppendJSON(nil))
	want := `{"type":"notice","kind":"dropping","severity":"warning","venue":"coinbase","stream":"coinbase:level2:BTC-USD","at":"2026-11-30T05:00:00.123Z","message":"queue \"full\"","details":{"bound":10000,"gaps":{"s":[1043,6276]},"queue_len":10000}}`
	if got != want {
		t.Fatalf("wire form\n got %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("invalid JSON")
	}
	var back Notice
	if err := json.Unmarshal([]byte(got), &back); err != nil {
		t.Fatal(err)
	}
	if string(back.AppendJSON(nil)) != got {
		t.Fatalf("round trip changed the wire form:\n%s", back.AppendJSON(nil))
	}
	empty := Must(Shutdown, "", "", at, "bye", nil)
	if s := string(empty.AppendJSON(nil)); !strings.HasSuffix(s, `"details":{}}`) {
		t.Fatalf("nil details: %s", s)
	}
}

func TestUnmarshalRefusesBadNotices(t *testing.T) {
	for _, in := range []string{
		`{"type":"notice","kind":"nope","severity":"info","at":"2026-11-30T05:00:00Z"}`,
		`{"type":"notice","kind":"link_up","severity":"loud","at":"2026-11-30T05:00:00Z"}`,
		`{"type":"book","kind":"link_up","severity":"info","at":"2026-11-30T05:00:00Z"}`,
		`{"type":"notice","kind":"link_up","severity":"info","at":"2026-11-30T05:00:00Z","details":{"token":"x"}}`,
		`{"type":"notice"`,
	} {
		var n Notice
		if err := json.Unmarshal([]byte(in), &n); err == nil {
			t.Errorf("accepted %s", in)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"type":"notice","kind":"resumed","severity":"info","venue":"okx","stream":"","at":"2026-11-30T05:00:00Z","message":"m","details":{"gaps":{"a":[1,2]}}}`))
	f.Add([]byte(`{"type":"notice","kind":"link_up"`))
	f.Add([]byte("\xff\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var n Notice
		if err := n.UnmarshalJSON(b); err != nil {
			return
		}
		out := n.AppendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("re-encoded notice is not JSON: %s", out)
		}
		var back Notice
		if err := back.UnmarshalJSON(out); err != nil {
			t.Fatalf("re-encoded notice does not parse: %v\n%s", err, out)
		}
	})
}
