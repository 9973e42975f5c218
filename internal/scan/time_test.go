package scan

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	var c Clock
	for _, in := range []string{
		"2026-09-07T23:37:22.278662782Z",
		"2026-09-07T23:37:22Z",
		"2026-09-07T00:00:00.5Z",
		"2026-09-08T01:02:03.000001Z", // the next day: a new midnight
		"2026-09-07T23:59:59.999999999Z",
		"2023-10-06T17:35:55.440295Z",
		"2024-02-29T12:00:00Z",
		"2026-09-07T23:37:22.278+02:00", // not UTC: time.Parse
	} {
		want, err := time.Parse(time.RFC3339Nano, in)
		if err != nil {
			t.Fatal(err)
		}
		got := c.Parse([]byte(in))
		if !got.Equal(want) || got.Location() != want.Location() {
			t.Errorf("Parse(%q) = %v, want %v", in, got, want)
		}
	}
	for _, in := range []string{
		"", "2026-09-07", "2026-13-07T23:37:22Z", "2026-09-07T24:00:00Z", "2026-09-07T23:60:00Z",
		"2026-09-07T23:37:22.Z", "2026-09-07T23:37:2xZ", "x026-09-07T23:37:22Z",
		"2026-09-00T23:37:22Z", "2026-09-07T23:37:22.278662782z",
	} {
		if got := c.Parse([]byte(in)); !got.IsZero() {
			t.Errorf("Parse(%q) = %v, want the zero time", in, got)
		}
	}
}

func TestClockAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	var c Clock
	b := []byte("2026-09-07T23:37:22.278662782Z")
	c.Parse(b)
	if n := testing.AllocsPerRun(100, func() { c.Parse(b) }); n != 0 {
		t.Errorf("Parse allocates %v times", n)
	}
}
