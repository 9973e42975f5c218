package venue

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/notice"
)

// LinkState is the state of a venue link.
type LinkState uint8

// Link states. The zero LinkState is LinkIdle (never started).
const (
	LinkIdle LinkState = iota
	LinkConnecting
	LinkUp
	LinkDown
)

// String returns the lower-case name of the state.
func (s LinkState) String() string {
	switch s {
	case LinkConnecting:
		return "connecting"
	case LinkUp:
		return "up"
	case LinkDown:
		return "down"
	}
	return "idle"
}

// StreamCoverage is what was observed on one stream since the link came up.
type StreamCoverage struct {
	Stream Stream    `json:"stream"`
	Since  time.Time `json:"since"`      // first event observed on this link
	Last   time.Time `json:"last_event"` // newest event observed
	Events uint64    `json:"events"`
}

// Coverage is a venue's link state and the streams observed arriving on it.
// It reports what arrived, never what was merely subscribed.
type Coverage struct {
	Venue   string           `json:"venue"`
	Link    string           `json:"link"`
	Since   time.Time        `json:"since"` // when Link last changed
	Resyncs uint64           `json:"resyncs"`
	Streams []StreamCoverage `json:"streams"` // sorted by stream
	// Leader is, in a cluster, the ingest node leading the venue (its
	// cluster.node) as this node knows it; Leading says whether it is this
	// node (ingest nodes only). Absent outside a cluster.
	Leader  string `json:"leader,omitempty"`
	Leading *bool  `json:"leading,omitempty"`
	// DownSince is, while the link is not up, when it first failed since it
	// was last up (or since it started): it does not restart at each
	// reconnect attempt. Error is the last connection failure's reason
	// (the dial error). Both are absent while the link is up.
	DownSince time.Time `json:"down_since,omitzero"`
	Error     string    `json:"error,omitempty"`
	// Clock is, in a replay, the replay's clock: the receive time of the
	// newest record played, against which the ages of Since and of the
	// streams' last_event are measured. Absent on a live link.
	Clock time.Time `json:"clock,omitzero"`
}

// CoverageTracker is the coverage bookkeeping adapters share. The zero
// value is not usable; call NewCoverageTracker. Safe for concurrent use.
type CoverageTracker struct {
	venue string

	mu      sync.Mutex // protects the fields below
	link    LinkState
	since   time.Time
	resyncs uint64
	downAt  time.Time // first failure since the link was last up
	err     string    // the last failure's reason, until the link is up
	streams map[Stream]*StreamCoverage
	last    *StreamCoverage // the entry Observe found last, while in streams
}

// NewCoverageTracker returns a tracker for venueName with the link idle.
func NewCoverageTracker(venueName string) *CoverageTracker {
	return &CoverageTracker{venue: venueName, streams: make(map[Stream]*StreamCoverage)}
}

// Observe records an event observed on stream at t. It reports whether the
// stream was not covered before (a coverage change).
func (c *CoverageTracker) Observe(stream Stream, t time.Time) bool {
	c.mu.Lock() // unlocked without defer: once per event, and nothing here panics
	sc := c.last
	if sc == nil || sc.Stream != stream { // a decoder's events mostly repeat a stream
		if sc = c.streams[stream]; sc == nil {
			sc = &StreamCoverage{Stream: stream, Since: t, Last: t, Events: 1}
			c.streams[stream], c.last = sc, sc
			c.mu.Unlock()
			return true
		}
		c.last = sc
	}
	sc.Last = t
	sc.Events++
	c.mu.Unlock()
	return false
}

// Forget drops stream from coverage (after an unsubscribe or a refusal).
// It reports whether the stream was covered.
func (c *CoverageTracker) Forget(stream Stream) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.streams[stream]
	delete(c.streams, stream)
	if c.last != nil && c.last.Stream == stream {
		c.last = nil
	}
	return ok
}

// SetLink records a link state change at t. Any state other than LinkUp
// clears every stream: nothing is observed arriving on a link that is not up.
func (c *CoverageTracker) SetLink(s LinkState, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s == c.link {
		return
	}
	c.link, c.since = s, t
	switch s {
	case LinkUp:
		c.downAt, c.err = time.Time{}, ""
	case LinkDown:
		if c.downAt.IsZero() {
			c.downAt = t
		}
	}
	if s != LinkUp {
		clear(c.streams)
		c.last = nil
	}
}

// Failed records a connection attempt that failed at t with err: the link
// is down, since its first failure, for err's reason.
func (c *CoverageTracker) Failed(t time.Time, err error) {
	c.SetLink(LinkDown, t)
	c.mu.Lock()
	c.err = err.Error()
	c.mu.Unlock()
}

// Resync counts one book resync.
func (c *CoverageTracker) Resync() {
	c.mu.Lock()
	c.resyncs++
	c.mu.Unlock()
}

// Link returns the current link state.
func (c *CoverageTracker) Link() LinkState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.link
}

// Snapshot returns the coverage now.
func (c *CoverageTracker) Snapshot() Coverage {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Coverage{Venue: c.venue, Link: c.link.String(), Since: c.since, Resyncs: c.resyncs,
		Streams: make([]StreamCoverage, 0, len(c.streams))}
	if c.link != LinkUp {
		out.DownSince, out.Error = c.downAt, c.err
	}
	for _, sc := range c.streams {
		out.Streams = append(out.Streams, *sc)
	}
	slices.SortFunc(out.Streams, byStream)
	return out
}

// CoverageSink is the Sink every decoder emits through, so that live and
// replay report coverage alike: the first event of a stream since the link
// came up (or since the stream was forgotten) is preceded by a
// coverage_change notice {"stream":…,"live":true}; a book_resync counts a
// resync. Not safe for concurrent use (as the decoder it serves).
type CoverageSink struct {
	Sink    Sink // downstream
	Tracker *CoverageTracker
}

// NewCoverageSink returns a CoverageSink for venueName in front of s, with
// a new tracker.
func NewCoverageSink(venueName string, s Sink) *CoverageSink {
	return &CoverageSink{Sink: s, Tracker: NewCoverageTracker(venueName)}
}

// Event records ev's stream as observed and hands ev on.
func (c *CoverageSink) Event(ev *Event) {
	if c.Tracker.Observe(ev.Stream, ev.RecvTime) {
		c.coverage(ev.Stream, ev.RecvTime, true)
	}
	c.Sink.Event(ev)
}

// Notice hands n on, counting a book_resync.
func (c *CoverageSink) Notice(n notice.Notice) {
	if n.Kind == notice.BookResync {
		c.Tracker.Resync()
	}
	c.Sink.Notice(n)
}

// Forget drops streams from coverage (an unsubscribe, a refusal), with a
// coverage_change {"live":false} for each that was live.
func (c *CoverageSink) Forget(t time.Time, streams ...Stream) {
	for _, st := range streams {
		if c.Tracker.Forget(st) {
			c.coverage(st, t, false)
		}
	}
}

// LinkDown clears coverage: no stream is live on a link that dropped. The
// link_down notice says so; no coverage_change is sent per stream.
func (c *CoverageSink) LinkDown(t time.Time) { c.Tracker.SetLink(LinkDown, t) }

func (c *CoverageSink) coverage(st Stream, t time.Time, live bool) {
	msg := string(st) + " is live"
	if !live {
		msg = string(st) + " is no longer live"
	}
	c.Sink.Notice(notice.Must(notice.CoverageChange, c.Tracker.venue, string(st), t, msg,
		map[string]any{"stream": string(st), "live": live}))
}

// byStream orders stream coverages by stream.
func byStream(a, b StreamCoverage) int { return cmp.Compare(a.Stream, b.Stream) }
