package testutil

import (
	"strings"
	"testing"
	"testing/synctest"
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

// TestPoll: true once the condition holds, false when d passes first, with
// the condition asked again until then.
func TestPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Poll(time.Minute, func() bool { return time.Since(start) >= time.Second }) {
			t.Fatal("Poll gave up on a condition that holds after 1 s")
		}
		n := 0
		if Poll(time.Second, func() bool { n++; return false }) || n < 2 {
			t.Fatalf("Poll on a never-true condition: asked %d times", n)
		}
		if waited := time.Since(start); waited < 2*time.Second {
			t.Fatalf("gave up after %v, before its 1 s had passed", waited-time.Second)
		}
	})
}
