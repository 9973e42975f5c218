package venue

import (
	"math/rand/v2"
	"time"
)

// Backoff yields reconnect delays: the first retry at once, then 1 s
// doubling to a 30 s cap, each with up to 20% jitter taken off so that many
// links dropped together do not reconnect together. The zero Backoff is
// ready to use; Reset after a connection that stayed up.
type Backoff struct {
	// Base is the first non-zero delay. Defaults to 1 s.
	Base time.Duration
	// Max caps the delay. Defaults to 30 s.
	Max time.Duration

	attempt int
}

// Next returns the delay before the next attempt.
func (b *Backoff) Next() time.Duration {
	base, maxd := b.Base, b.Max
	if base <= 0 {
		base = time.Second
	}
	if maxd <= 0 {
		maxd = 30 * time.Second
	}
	n := b.attempt
	b.attempt++
	if n == 0 {
		return 0
	}
	d := base
	for i := 1; i < n && d < maxd; i++ {
		d *= 2
	}
	d = min(d, maxd)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// Attempt returns how many delays Next has handed out since the last Reset.
func (b *Backoff) Attempt() int { return b.attempt }

// Reset starts the sequence again from an immediate retry.
func (b *Backoff) Reset() { b.attempt = 0 }
