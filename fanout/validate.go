package fanout

import (
	"fmt"
	"math"
)

// DefaultMaxQueueLen is the default bound on one subscriber's queue: 10000
// messages, the seed's figure (docs/design.md).
const DefaultMaxQueueLen = 10000

// MaxQueueLen validates a venue's max_queue_len as given in configuration.
// Absent or null (nil) gives DefaultMaxQueueLen. Any positive integer is
// accepted, 1 included; JSON numbers arrive as float64 and are accepted
// when integral. Anything else — the string "10000", 0, -5, 1.5,
// "infinity", true — is an error naming the value as given (the caller
// adds the key): a bound that silently fell back to the default would be
// back-pressure an operator believes is configured and is not.
func MaxQueueLen(v any) (int, error) {
	bad := func() (int, error) {
		return 0, fmt.Errorf("%#v is not a positive integer", v)
	}
	switch x := v.(type) {
	case nil:
		return DefaultMaxQueueLen, nil
	case int:
		if x > 0 {
			return x, nil
		}
	case int64:
		if x > 0 && x <= math.MaxInt32 {
			return int(x), nil
		}
	case int32:
		if x > 0 {
			return int(x), nil
		}
	case uint64:
		if x > 0 && x <= math.MaxInt32 {
			return int(x), nil
		}
	case uint:
		if x > 0 && x <= math.MaxInt32 {
			return int(x), nil
		}
	case float64:
		if x >= 1 && x <= math.MaxInt32 && x == math.Trunc(x) {
			return int(x), nil
		}
	}
	return bad()
}

// ResumeBelow returns the queue length a dropping subscriber must drain
// below before it is sent to again: half the bound, and at least 1.
func ResumeBelow(bound int) int { return max(1, bound/2) }
