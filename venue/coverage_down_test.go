package venue

import (
	"errors"
	"testing"
	"time"
)

// TestCoverageDownSinceFirstFailure: a link that keeps failing is down
// since its first failure, not its last attempt, with the last error; once
// up, neither is reported, and a later drop starts a new down_since.
func TestCoverageDownSinceFirstFailure(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	c := NewCoverageTracker("kraken")
	for i := range 3 {
		c.SetLink(LinkConnecting, t0.Add(time.Duration(2*i)*time.Second))
		c.Failed(t0.Add(time.Duration(2*i+1)*time.Second), errors.New("dial: no such host "+string(rune('a'+i))))
	}
	s := c.Snapshot()
	if s.Link != "down" || !s.DownSince.Equal(t0.Add(time.Second)) || s.Error != "dial: no such host c" || !s.Since.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("after three failures: %+v", s)
	}
	c.SetLink(LinkConnecting, t0.Add(6*time.Second))
	if s := c.Snapshot(); !s.DownSince.Equal(t0.Add(time.Second)) || s.Error == "" {
		t.Fatalf("connecting again: %+v", s)
	}
	c.SetLink(LinkUp, t0.Add(7*time.Second))
	if s := c.Snapshot(); !s.DownSince.IsZero() || s.Error != "" {
		t.Fatalf("up: %+v", s)
	}
	c.SetLink(LinkDown, t0.Add(9*time.Second))
	if s := c.Snapshot(); !s.DownSince.Equal(t0.Add(9*time.Second)) || s.Error != "" {
		t.Fatalf("dropped: %+v", s)
	}
}
