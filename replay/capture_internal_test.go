package replay

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestTimeCacheMatchesParseTime: the Reader's cached parse returns what
// ParseTime returns — the same Time value (==, not only Equal) or the same
// error — over a walk of timestamps that crosses minutes, days, months,
// years and a leap day, mixed with malformed ones that share a cached
// minute, and with RFC 3339 forms that are not the fixed one.
func TestTimeCacheMatchesParseTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var c timeCache
	at := time.Date(2023, 12, 31, 23, 58, 0, 0, time.UTC)
	check := func(s string) {
		t.Helper()
		got, gerr := c.parse([]byte(s))
		want, werr := ParseTime([]byte(s))
		if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("%q: cached %v (%v), ParseTime %v (%v)", s, got, gerr, want, werr)
		}
	}
	bad := 0
	for i := range 200000 {
		at = at.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
		if i%50000 == 0 {
			at = time.Date(2024, 2, 28, 23, 59, 59, 0, time.UTC) // through 29 February
		}
		s := at.Format("2006-01-02T15:04:05.0000000Z")
		check(s)
		switch rng.IntN(20) {
		case 0: // a bad second or fraction after a cached minute
			b := []byte(s)
			b[17+rng.IntN(11)] = "6x9:. Z"[rng.IntN(7)]
			check(string(b))
			bad++
		case 1: // another form of the same instant
			check(at.Format(time.RFC3339Nano))
			check(at.In(time.FixedZone("", 3600)).Format("2006-01-02T15:04:05.000000+01:00"))
		}
	}
	for _, s := range []string{
		"2024-02-30T00:00:00.0000000Z", "2024-02-29T00:00:60.0000000Z", "2024-02-29T00:00:59.9999999Z",
		"2024-02-29T00:00:59.999999Z", "0000-01-01T00:00:00.0000000Z", "0001-01-01T00:00:00.0000000Z",
		"0001-01-01T00:00:01.0000000Z", "9999-12-31T23:59:59.9999999Z", "2024-02-29T00:00:5a.0000000Z",
	} {
		check(s)
	}
	if bad < 1000 {
		t.Fatalf("only %d malformed timestamps checked", bad)
	}
}
