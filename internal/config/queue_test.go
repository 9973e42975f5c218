package config

import (
	"math"
	"strings"
	"testing"
)

// TestMaxQueueLenValidation: any positive integer is a bound, 1 included;
// anything else is refused naming the key and the value as written.
func TestMaxQueueLenValidation(t *testing.T) {
	for _, v := range []any{1, 5000, uint64(7), 3.0} {
		if _, err := maxQueueLen("k", v); err != nil {
			t.Errorf("maxQueueLen(%#v) = %v, want ok", v, err)
		}
	}
	if n, _ := maxQueueLen("k", 1); n != 1 {
		t.Errorf("bound 1 became %d", n)
	}
	if n, _ := maxQueueLen("k", nil); n != 10000 {
		t.Errorf("absent: %d, want 10000", n)
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{"10000", `"10000"`}, {0, "0"}, {-5, "-5"}, {1.5, "1.5"}, {"infinity", `"infinity"`},
		{true, "true"}, {math.Inf(1), "+Inf"}, {[]int{1}, "[]int{1}"},
	} {
		_, err := maxQueueLen("venues.kraken.max_queue_len", tc.v)
		if err == nil || err.Error() != "config: venues.kraken.max_queue_len: "+tc.want+" is not a positive integer" {
			t.Errorf("maxQueueLen(%#v): %v, want it to name the key and the value %s", tc.v, err, tc.want)
		}
	}
	if _, err := Parse([]byte("venues:\n  kraken:\n    max_queue_len: \"10000\"\n"), nil); err == nil || !strings.Contains(err.Error(), `venues.kraken.max_queue_len: "10000" is not a positive integer`) {
		t.Errorf("Parse: %v", err)
	}
}
