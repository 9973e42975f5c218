package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLoadAllReportsEveryBadKey: one run names every bad key of the file,
// unknown keys with the nearest known key, and bad values after them;
// a good file loads as Load does.
func TestLoadAllReportsEveryBadKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte(`listen: 127.0.0.1:8080
log_level: loud
websocket:
  write_timout: 5s
venues:
  binance:
    max_queue_len: -3
  kraken:
    symbolz: [BTC/USD]
shutdown_timeout: forever
`), 0o644)
	_, errs := LoadAll(p, nil)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		"config: websocket.write_timout: unknown key (line 4); did you mean write_timeout?",
		"config: venues.kraken.symbolz: unknown key (line 9); did you mean symbols?",
		`config: log_level: "loud" is not debug, info, warn or error`,
		"config: shutdown_timeout: ",
		"config: venues.binance.max_queue_len: -3",
	}
	if len(got) != len(want) {
		t.Fatalf("%d errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d: %q, want %q…", i, got[i], want[i])
		}
	}
	if _, err := Load(p, nil); err == nil || err.Error() != got[0] {
		t.Errorf("Load: %v, want the first of LoadAll's", err)
	}
	good := filepath.Join(t.TempDir(), "g.yaml")
	os.WriteFile(good, []byte("websocket:\n  write_timeout: 5s\n"), 0o644)
	if cfg, errs := LoadAll(good, nil); len(errs) != 0 || cfg.Websocket.WriteTimeout.String() != "5s" {
		t.Fatalf("good file: %v %v", cfg, errs)
	}
}

// TestSuggestNearestKey: an unknown key suggests the known key of its
// section nearest to it, and nothing when none is near.
func TestSuggestNearestKey(t *testing.T) {
	for key, want := range map[string]string{
		"websocket.write_timout":      "write_timeout",
		"venues.okx.max_queue_lenn":   "max_queue_len",
		"lisen":                       "listen",
		"claim_check.stores[0].pathh": "path",
		"websocket.zzzzzzzz":          "",
	} {
		if got := suggest(key); got != want {
			t.Errorf("suggest(%q) = %q, want %q", key, got, want)
		}
	}
	if !slices.Contains(KnownKeys("websocket"), "write_timeout") || !slices.Contains(KnownKeys(""), "venues") {
		t.Fatalf("KnownKeys: %v %v", KnownKeys("websocket"), KnownKeys(""))
	}
}
