package venue_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// Each key backs off on its own, doubling to Max, and Done starts it over.
func TestRetryBackoffPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := venue.Retry{Base: time.Second, Max: 4 * time.Second}
		var delays []time.Duration
		for range 4 {
			d := r.Fail("a", time.Now())
			delays = append(delays, d)
			if !r.Waiting("a", time.Now()) {
				t.Fatal("a not waiting right after Fail")
			}
			time.Sleep(d)
			if r.Waiting("a", time.Now()) {
				t.Fatal("a still waiting after its delay")
			}
		}
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
			if delays[i] > want || delays[i] < want*4/5 {
				t.Errorf("delay %d = %v, want about %v", i, delays[i], want)
			}
		}
		if r.Waiting("b", time.Now()) || r.Failures("b") != 0 {
			t.Error("b waits though it never failed")
		}
		r.Fail("b", time.Now())
		time.Sleep(time.Second)
		if due := r.Due(time.Now()); len(due) != 2 || due[0] != "a" || due[1] != "b" {
			t.Errorf("due %v, want [a b]", due)
		}
		r.Done("a")
		if d := r.Fail("a", time.Now()); d > time.Second {
			t.Errorf("after Done the delay is %v, want the base again", d)
		}
	})
}
