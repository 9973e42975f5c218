package daemon

// The websocket form of GET /v1/history/stream: the same lines as the
// HTTP answer, in the live protocol's framing (text messages of one or
// more JSON objects separated by \n), played at a speed.

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
)

// isWebsocket: r asks for a websocket upgrade.
func isWebsocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// parseSpeed takes speed: empty or 1 (the recorded pacing), N (N times
// faster, at least replay.MinSpeed) or max (as fast as it goes, 0).
func parseSpeed(s string) (float64, error) {
	switch s {
	case "":
		return 1, nil
	case "max":
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < replay.MinSpeed {
		return 0, badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "speed=%q: want 1, a factor of at least %g, or max", s, replay.MinSpeed)
	}
	return f, nil
}

// errWriter is an answer's writer that remembers its first write error.
type errWriter interface {
	Write(p []byte) (int, error)
	failed() error
}

// wsMaxMessage bounds one websocket message of a history answer: the
// buffer is cut at line ends into messages of at most this.
const wsMaxMessage = 64 << 10

// wsMessages writes what is written to it as websocket text messages of
// whole lines, each without its last newline; a write error cancels the
// query.
type wsMessages struct {
	ctx    context.Context
	c      *websocket.Conn
	cancel context.CancelFunc
	err    error
}

func (m *wsMessages) failed() error { return m.err }

func (m *wsMessages) Write(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	n := len(p)
	for len(p) > 0 {
		cut := len(p)
		if cut > wsMaxMessage {
			if i := bytes.LastIndexByte(p[:wsMaxMessage], '\n'); i >= 0 {
				cut = i + 1
			} else if i := bytes.IndexByte(p, '\n'); i >= 0 {
				cut = i + 1 // one line longer than the bound
			}
		}
		if err := m.c.Write(m.ctx, websocket.MessageText, bytes.TrimSuffix(p[:cut], []byte{'\n'})); err != nil {
			m.err = err
			m.cancel()
			return 0, err
		}
		p = p[cut:]
	}
	return n, nil
}

// pacer holds each event and notice of the range until its time comes at
// the speed, counted from the range's start (what plays before it is not
// held), writing out what is buffered before it waits.
type pacer struct {
	ctx   context.Context
	next  venue.Sink
	flush func()
	from  time.Time
	speed float64
	start time.Time
}

func (p *pacer) wait(at time.Time) {
	if at.Before(p.from) {
		return
	}
	due := p.start.Add(time.Duration(float64(at.Sub(p.from)) / p.speed))
	if d := time.Until(due); d > 0 {
		p.flush()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.ctx.Done():
		}
	}
}

func (p *pacer) Event(ev *venue.Event) {
	p.wait(ev.RecvTime)
	p.next.Event(ev)
}

func (p *pacer) Notice(n notice.Notice) {
	p.wait(n.At)
	p.next.Notice(n)
}
