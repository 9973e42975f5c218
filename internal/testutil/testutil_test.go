package testutil

import (
	"strings"
	"testing"
	"time"
)

type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

// TestWaitFor: it returns once the condition holds, and fails the test,
// naming what it waited for, when it never does.
func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, time.Minute, "three polls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times", n)
	}
	r := &recorder{TB: t}
	func() {
		defer func() { recover() }()
		WaitFor(r, time.Millisecond, "the impossible", func() bool { return false })
	}()
	if !strings.Contains(r.failed, "still waiting for") {
		t.Fatalf("never-true condition: %q", r.failed)
	}
}
