package wsapi

import (
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanoutd/fanoutd/notice"
)

// clockLog records what an expiry did, and when.
type clockLog struct {
	mu      sync.Mutex
	warned  []time.Time // when warn was called
	warnExp []time.Time // the exp it was told
	expired []time.Time
}

func newClock(lead time.Duration, l *clockLog) *expiry {
	return &expiry{lead: lead,
		warn: func(exp time.Time) {
			l.mu.Lock()
			l.warned, l.warnExp = append(l.warned, time.Now()), append(l.warnExp, exp)
			l.mu.Unlock()
		},
		expire: func() {
			l.mu.Lock()
			l.expired = append(l.expired, time.Now())
			l.mu.Unlock()
		}}
}

func (l *clockLog) counts() (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.warned), len(l.expired)
}

// TestExpiryWarnsThenExpires: token_expiring exactly lead before exp,
// the close at exp, each once.
func TestExpiryWarnsThenExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l clockLog
		start := time.Now()
		exp := start.Add(5 * time.Minute)
		e := newClock(time.Minute, &l)
		e.set(exp)
		time.Sleep(4*time.Minute - time.Nanosecond)
		synctest.Wait()
		if w, x := l.counts(); w != 0 || x != 0 {
			t.Fatalf("before exp-lead: %d warnings, %d expiries", w, x)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if w, _ := l.counts(); w != 1 || !l.warned[0].Equal(exp.Add(-time.Minute)) || !l.warnExp[0].Equal(exp) {
			t.Fatalf("warnings at %v (exp %v), want one at %v", l.warned, l.warnExp, exp.Add(-time.Minute))
		}
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		if _, x := l.counts(); x != 0 {
			t.Fatal("expired before exp")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if w, x := l.counts(); w != 1 || x != 1 || !l.expired[0].Equal(exp) {
			t.Fatalf("%d warnings, expiries at %v, want one at %v", w, l.expired, exp)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if w, x := l.counts(); w != 1 || x != 1 {
			t.Fatalf("later: %d warnings, %d expiries", w, x)
		}
	})
}

// TestExpiryRefreshExtends: a refresh after the warning moves exp; the
// old exp passes without a close, the new one warns again and closes.
func TestExpiryRefreshExtends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l clockLog
		start := time.Now()
		e := newClock(time.Minute, &l)
		e.set(start.Add(2 * time.Minute))
		time.Sleep(90 * time.Second) // warned at 1m
		newExp := start.Add(10 * time.Minute)
		e.set(newExp)
		time.Sleep(3 * time.Minute) // past the old exp
		synctest.Wait()
		if w, x := l.counts(); w != 1 || x != 0 {
			t.Fatalf("after the old exp: %d warnings, %d expiries", w, x)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if w, x := l.counts(); w != 2 || x != 1 || !l.warned[1].Equal(newExp.Add(-time.Minute)) || !l.expired[0].Equal(newExp) {
			t.Fatalf("warnings %v, expiries %v; want a second warning at %v and the close at %v", l.warned, l.expired,
				newExp.Add(-time.Minute), newExp)
		}
	})
}

// TestExpiryShortToken: a token that expires sooner than lead is warned
// at once; one already past expires at once; stop disarms; a static
// token (zero exp) never expires.
func TestExpiryShortToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l clockLog
		start := time.Now()
		e := newClock(time.Minute, &l)
		e.set(start.Add(10 * time.Second))
		synctest.Wait()
		if w, _ := l.counts(); w != 1 || !l.warned[0].Equal(start) {
			t.Fatalf("warnings %v, want one at once", l.warned)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if _, x := l.counts(); x != 1 {
			t.Fatal("not expired at exp")
		}

		var l2 clockLog
		e2 := newClock(time.Minute, &l2)
		e2.set(time.Now().Add(-time.Second))
		synctest.Wait()
		if w, x := l2.counts(); x != 1 || w != 0 {
			t.Fatalf("past exp: %d warnings, %d expiries; want the close at once", w, x)
		}

		var l3 clockLog
		e3 := newClock(time.Minute, &l3)
		e3.set(time.Now().Add(5 * time.Minute))
		e3.stop()
		e4 := newClock(time.Minute, &l3)
		e4.set(time.Time{})
		time.Sleep(time.Hour)
		synctest.Wait()
		if w, x := l3.counts(); w != 0 || x != 0 {
			t.Fatalf("stopped or static: %d warnings, %d expiries", w, x)
		}
	})
}

// TestTokenExpiringNotice: the notice follows its kind's schema.
func TestTokenExpiringNotice(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := appendTokenExpiring(nil, now.Add(59500*time.Millisecond), now)
	var n notice.Notice
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if err := notice.CheckDetails(n); err != nil {
		t.Fatal(err)
	}
	if n.Kind != notice.TokenExpiring || n.Details["expires_at"] != "2026-12-01T12:00:59Z" || string(n.Details["in_ms"].(json.Number)) != "59500" {
		t.Fatalf("%s", b)
	}
}
