package config

import (
	"strings"
	"testing"
	"time"
)

func TestRecoveryDefaultsAndOff(t *testing.T) {
	c, err := Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Recovery{MaxEventsPerStream: 10000, MaxBytes: 256 << 20, MaxAge: 2 * time.Minute}
	if c.Recovery != want {
		t.Fatalf("defaults %+v, want %+v", c.Recovery, want)
	}
	for _, y := range []string{
		"recovery:\n  max_events_per_stream: 0\n",
		"recovery:\n  max_bytes: 0\n",
		"recovery:\n  max_age: 0\n",
		"recovery:\n  max_age: 0s\n",
	} {
		c, err := Parse([]byte(y), nil)
		if err != nil {
			t.Fatalf("%q: %v", y, err)
		}
		if r := c.Recovery; r.MaxEventsPerStream != 0 && r.MaxBytes != 0 && r.MaxAge != 0 {
			t.Errorf("%q: recovery on (%+v)", y, c.Recovery)
		}
	}
	c, err = Parse([]byte("recovery:\n  max_events_per_stream: 500\n  max_bytes: 1048576\n  max_age: 30s\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Recovery != (Recovery{MaxEventsPerStream: 500, MaxBytes: 1 << 20, MaxAge: 30 * time.Second}) {
		t.Fatalf("set: %+v", c.Recovery)
	}
}

func TestRecoveryErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"recovery:\n  max_events_per_stream: -1\n", "config: recovery.max_events_per_stream: -1 is not an integer"},
		{"recovery:\n  max_events_per_stream: many\n", `config: recovery.max_events_per_stream: "many" is not an integer`},
		{"recovery:\n  max_bytes: 1.5\n", "config: recovery.max_bytes: 1.5 is not an integer"},
		{"recovery:\n  max_age: soon\n", `config: recovery.max_age: "soon" is not a duration`},
		{"recovery:\n  max_age: -1s\n", `config: recovery.max_age: "-1s" is not a duration`},
		{"recovery:\n  max_age: 5\n", "config: recovery.max_age: 5 is not a duration"},
		{"recovery:\n  max_events: 5\n", "config: recovery.max_events: unknown key"},
	} {
		_, err := Parse([]byte(tc.yaml), nil)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
