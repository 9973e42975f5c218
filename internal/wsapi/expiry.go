package wsapi

import (
	"strconv"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/notice"
)

// expiry is a connection's token clock: warn is called once, lead
// before exp (at once if exp is nearer), and expire at exp. set moves
// exp (a refresh) and arms the warning again. The zero expiry does
// nothing until set; a zero exp never expires (a static token).
type expiry struct {
	lead   time.Duration
	warn   func(exp time.Time)
	expire func()

	mu     sync.Mutex // protects the fields below
	t      *time.Timer
	exp    time.Time
	warned bool
	done   bool // stopped, or expired
}

// set makes exp the token's expiry and arms the clock.
func (e *expiry) set(exp time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return
	}
	e.exp, e.warned = exp, false
	if exp.IsZero() {
		if e.t != nil {
			e.t.Stop()
		}
		return
	}
	e.armLocked(time.Now())
}

// armLocked sets the timer for the next step after now. e.mu must be held.
func (e *expiry) armLocked(now time.Time) {
	next := e.exp
	if !e.warned {
		next = e.exp.Add(-e.lead)
	}
	d := max(next.Sub(now), 0)
	if e.t == nil {
		e.t = time.AfterFunc(d, e.fire)
	} else {
		e.t.Reset(d)
	}
}

// fire is the timer's callback: it does the step due now, if any (a
// callback that set overtook finds nothing due and re-arms), and arms
// the next.
func (e *expiry) fire() {
	e.mu.Lock()
	if e.done || e.exp.IsZero() {
		e.mu.Unlock()
		return
	}
	now := time.Now()
	if !now.Before(e.exp) {
		e.done = true
		e.mu.Unlock()
		e.expire()
		return
	}
	warn := !e.warned && !now.Before(e.exp.Add(-e.lead))
	e.warned = e.warned || warn
	exp := e.exp
	e.armLocked(now)
	e.mu.Unlock()
	if warn {
		e.warn(exp)
	}
}

// stop disarms the clock for good.
func (e *expiry) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.done = true
	if e.t != nil {
		e.t.Stop()
	}
}

// appendTokenExpiring appends the token_expiring notice of a token that
// expires at exp, as of now.
func appendTokenExpiring(dst []byte, exp, now time.Time) []byte {
	in := max(exp.Sub(now), 0).Milliseconds()
	n := notice.Must(notice.TokenExpiring, "", "", now,
		"the connection's token expires in "+strconv.FormatInt((in+999)/1000, 10)+
			"s; send {\"op\":\"refresh\",\"token\":…} with a new one, or the connection is closed with 4003 at expiry",
		map[string]any{"expires_at": exp.UTC().Format(time.RFC3339), "in_ms": in})
	return n.AppendJSON(dst)
}
