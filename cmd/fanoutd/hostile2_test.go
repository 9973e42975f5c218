package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHostileReplaySpeed: `replay --speed` at paces that overflow the
// pacing (1e-300, the smallest float) or freeze it (1e-12). Promise: below
// the documented slowest pace, 0.001, exit 2 naming it before anything
// starts; 0.001 itself is a pace.
func TestHostileReplaySpeed(t *testing.T) {
	for _, speed := range []string{"1e-300", "5e-324", "1e-12", "0.000999", "1e-4"} {
		var out, errb bytes.Buffer
		code := run([]string{"replay", "--speed", speed, capture("kraken")}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), `--speed: "`+speed+`" is below the slowest pace, 0.001`) {
			t.Errorf("--speed %s: exit %d, %q", speed, code, errb.String())
		}
	}
	for _, speed := range []string{"0.001", "1", "1e6"} {
		if _, err := parseSpeed(speed); err != nil {
			t.Errorf("--speed %s: %v", speed, err)
		}
	}
}
