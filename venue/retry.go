package venue

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Retry schedules requests to be asked again, each key (a stream, a
// book) on its own exponential backoff: a subscribe the venue
// rate-limited, a resync whose new snapshot was bad again. A key is never
// given up on; Done forgets it once it succeeded. The zero value is ready
// to use. Not safe for concurrent use.
type Retry struct {
	// Base is the first delay. Defaults to 1 s.
	Base time.Duration
	// Max caps the delay. Defaults to 30 s.
	Max time.Duration

	keys map[string]*retryKey
}

type retryKey struct {
	fails int       // failures since the last Done
	due   time.Time // zero: not scheduled
}

// Fail records a failed attempt of key at now and schedules the next one
// after a delay that doubles with each failure since the last Done. It
// returns the delay.
func (r *Retry) Fail(key string, now time.Time) time.Duration {
	base, maxd := r.Base, r.Max
	if base <= 0 {
		base = time.Second
	}
	if maxd <= 0 {
		maxd = 30 * time.Second
	}
	if r.keys == nil {
		r.keys = map[string]*retryKey{}
	}
	k := r.keys[key]
	if k == nil {
		k = &retryKey{}
		r.keys[key] = k
	}
	d := base
	for i := 0; i < k.fails && d < maxd; i++ {
		d *= 2
	}
	d = min(d, maxd)
	d -= time.Duration(rand.Int64N(int64(d)/5 + 1)) // jitter, so keys spread out
	k.fails++
	k.due = now.Add(d)
	return d
}

// Waiting reports whether key is scheduled for later than now: it must
// not be asked for yet.
func (r *Retry) Waiting(key string, now time.Time) bool {
	k := r.keys[key]
	return k != nil && !k.due.IsZero() && now.Before(k.due)
}

// Failures returns the failures of key since its last Done.
func (r *Retry) Failures(key string) int {
	if k := r.keys[key]; k != nil {
		return k.fails
	}
	return 0
}

// Due returns, sorted, the keys whose time has come, and unschedules
// them; their failure counts are kept until Done.
func (r *Retry) Due(now time.Time) []string {
	var out []string
	for key, k := range r.keys {
		if !k.due.IsZero() && !now.Before(k.due) {
			k.due = time.Time{}
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// Done forgets key: it succeeded (or is no longer wanted).
func (r *Retry) Done(key string) { delete(r.keys, key) }

// Reset forgets every key.
func (r *Retry) Reset() { clear(r.keys) }
