package fanout

import (
	"errors"
	"fmt"
)

// DefaultMaxQueueLen is the default bound on one subscriber's queue: 10000
// messages, the seed's figure (docs/design.md).
const DefaultMaxQueueLen = 10000

// Validate reports the first option the feed cannot run with: a negative
// queue bound (0 means the default, or no byte bound) or no venue.
// AddFeed validates them.
func (o Options) Validate() error {
	switch {
	case o.Venue == "":
		return errors.New("fanout: a feed needs its venue's name")
	case o.MaxQueueLen < 0:
		return fmt.Errorf("fanout: MaxQueueLen %d is negative (0: the default)", o.MaxQueueLen)
	case o.MaxQueueBytes < 0:
		return fmt.Errorf("fanout: MaxQueueBytes %d is negative (0: no byte bound)", o.MaxQueueBytes)
	}
	return nil
}

// ResumeBelow returns the queue length a dropping subscriber must drain
// below before it is sent to again: half the bound, and at least 1.
func ResumeBelow(bound int) int { return max(1, bound/2) }
