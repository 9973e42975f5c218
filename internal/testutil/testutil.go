// Package testutil holds the helpers the tests of several packages share.
// It is imported by tests only.
package testutil

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// WaitFor polls cond until it holds and returns how long that took, or
// fails tb after d naming what it waited for (nats-server's checkFor). It
// waits on a condition, never asserts a duration: d only bounds a test
// that would otherwise hang.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	if !Poll(d, cond) {
		tb.Fatalf("after %v: still waiting for %s", d, what)
	}
	return time.Since(start)
}

// Poll polls cond until it holds or d has passed, and reports whether it
// held: WaitFor for a caller that reports the failure itself (with what it
// then sees). The poll starts at 2 ms and backs off to 200 ms, so a cheap
// condition is seen at once and an expensive one (an HTTP query) is not
// hammered.
func Poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	pause := 2 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 200*time.Millisecond)
	}
	return true
}

// Objects reads one websocket message (failing tb if none comes within
// d) and splits it into its JSON objects, one a line, as the daemon
// batches them.
func Objects(tb testing.TB, ws *websocket.Conn, d time.Duration) []map[string]any {
	tb.Helper()
	ws.SetReadDeadline(time.Now().Add(d))
	_, m, err := ws.ReadMessage()
	if err != nil {
		tb.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(m, []byte("\n")) {
		var o map[string]any
		if err := json.Unmarshal(line, &o); err != nil {
			tb.Fatalf("%q: %v", line, err)
		}
		out = append(out, o)
	}
	return out
}
