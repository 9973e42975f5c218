package venuetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Sink is a venue.Sink that records what an adapter emits, keeps the book a
// consumer of the events would hold, and checks the stream's invariants as
// events arrive:
//   - every book event names a level2 stream, every trade a trades stream,
//     every ticker a ticker stream, and Seq is left 0;
//   - a stream's first book event is a snapshot, and so is the first after
//     a LinkDown or a BookResync notice for its venue or stream: a consumer
//     never sees an update applied to a book known to be wrong;
//   - a book never crosses after an event is applied.
//
// Violations are collected and reported by Check.
type Sink struct {
	mu       sync.Mutex // protects the fields below
	events   []*venue.Event
	notices  []notice.Notice
	books    map[venue.Stream]*venue.Book
	invalid  map[venue.Stream]bool // needs a snapshot before the next update
	problems []string
	changed  chan struct{}
}

var _ venue.Sink = (*Sink)(nil)

// NewSink returns an empty recording sink.
func NewSink() *Sink {
	return &Sink{books: map[venue.Stream]*venue.Book{}, invalid: map[venue.Stream]bool{}, changed: make(chan struct{})}
}

func (s *Sink) signal() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Event records ev and applies it to the stream's book.
func (s *Sink) Event(ev *venue.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.signal()
	ev = ev.Clone() // ev is ours only during the call (venue.Sink)
	s.events = append(s.events, ev)
	if ev.Seq != 0 {
		s.problem("%s: adapter set seq %d (the daemon assigns seq)", ev.Stream, ev.Seq)
	}
	if venue.KindOf(ev.Stream.Channel()) != ev.Kind {
		s.problem("%s: event kind %s on a %s stream", ev.Stream, ev.Kind, ev.Stream.Channel())
	}
	if ev.Kind != venue.KindBook {
		return
	}
	b := s.books[ev.Stream]
	if b == nil {
		b = &venue.Book{}
		s.books[ev.Stream] = b
		if !ev.Snapshot {
			s.problem("%s: first book event is an update, not a snapshot", ev.Stream)
		}
	}
	if !ev.Snapshot && s.invalid[ev.Stream] {
		s.problem("%s: update after a link drop or resync, before a snapshot", ev.Stream)
	}
	if ev.Snapshot {
		delete(s.invalid, ev.Stream)
	}
	b.Apply(ev)
	if b.Crossed() {
		s.problem("%s: book crossed after event (snapshot=%v venue_seq=%d)", ev.Stream, ev.Snapshot, ev.VenueSeq)
	}
}

// Notice records n.
func (s *Sink) Notice(n notice.Notice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.signal()
	s.notices = append(s.notices, n)
	if err := notice.CheckDetails(n); err != nil {
		s.problem("%v (details %v)", err, n.Details)
	}
	switch n.Kind {
	case notice.LinkDown:
		// One connection of several names its streams; else every
		// stream of the venue stops.
		only, partial := n.Details["streams"].([]string)
		for st := range s.books {
			if st.Venue() == n.Venue && (!partial || slices.Contains(only, string(st))) {
				s.invalid[st] = true
			}
		}
	case notice.BookResync:
		if n.Stream != "" {
			s.invalid[venue.Stream(n.Stream)] = true
		} else {
			for st := range s.books {
				if st.Venue() == n.Venue && st.Channel() == venue.Level2 {
					s.invalid[st] = true
				}
			}
		}
	}
}

func (s *Sink) problem(format string, args ...any) {
	if len(s.problems) < 20 {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

// Check fails t with every invariant violation seen so far.
func (s *Sink) Check(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		t.Errorf("venuetest: %s", p)
	}
}

// Events returns a copy of the events recorded so far.
func (s *Sink) Events() []*venue.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*venue.Event(nil), s.events...)
}

// Notices returns a copy of the notices recorded so far.
func (s *Sink) Notices() []notice.Notice {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]notice.Notice(nil), s.notices...)
}

// NoticesExcept returns the notices recorded so far other than those of
// the kinds named (decoder tests leave out coverage_change).
func (s *Sink) NoticesExcept(kinds ...notice.Kind) []notice.Notice {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []notice.Notice
	for _, n := range s.notices {
		if !slices.Contains(kinds, n.Kind) {
			out = append(out, n)
		}
	}
	return out
}

// NoNotice fails t for each notice of one of kinds recorded from index
// from on.
func (s *Sink) NoNotice(t testing.TB, from int, kinds ...notice.Kind) {
	t.Helper()
	for _, n := range s.Notices()[from:] {
		if slices.Contains(kinds, n.Kind) {
			t.Errorf("unexpected %s: %s", n.Kind, n.Message)
		}
	}
}

// Book returns a copy of the book a consumer of the events holds for stream
// (empty if none).
func (s *Sink) Book(stream venue.Stream) *venue.Book {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &venue.Book{}
	if b := s.books[stream]; b != nil {
		out.Apply(b.Snapshot(stream))
	}
	return out
}

// WaitFor waits until cond (called with the sink locked; it must not call
// the sink) holds, failing t after timeout with what.
func (s *Sink) WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitFor(t, timeout, what, func() (bool, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return cond(), s.changed
	})
}

// waitFor calls check until it reports done, each time waiting for the
// channel it returns (closed on the next change) before calling it again,
// and fails t with what once timeout has passed.
func waitFor(t testing.TB, timeout time.Duration, what string, check func() (done bool, changed <-chan struct{})) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ok, ch := check()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("venuetest: timed out after %v waiting for %s", timeout, what)
		}
	}
}

// WaitEvent waits for an event recorded at index from or later for which
// match is true, and returns it with its index. match must not call the
// sink.
func (s *Sink) WaitEvent(t testing.TB, timeout time.Duration, from int, what string, match func(*venue.Event) bool) (*venue.Event, int) {
	t.Helper()
	var got *venue.Event
	idx := -1
	s.WaitFor(t, timeout, what, func() bool {
		for i := from; i < len(s.events); i++ {
			if match(s.events[i]) {
				got, idx = s.events[i], i
				return true
			}
		}
		return false
	})
	return got, idx
}

// WaitNotice waits for a notice of kind recorded at index from or later,
// and returns it with its index.
func (s *Sink) WaitNotice(t testing.TB, timeout time.Duration, from int, kind notice.Kind) (notice.Notice, int) {
	t.Helper()
	var got notice.Notice
	idx := -1
	s.WaitFor(t, timeout, "a "+kind.String()+" notice", func() bool {
		for i := from; i < len(s.notices); i++ {
			if s.notices[i].Kind == kind {
				got, idx = s.notices[i], i
				return true
			}
		}
		return false
	})
	return got, idx
}

// AppendJSONLines appends the wire form (AppendJSON) of every event
// recorded, then of every notice, one a line, and returns the extended
// buffer: the output a golden file holds.
func (s *Sink) AppendJSONLines(b []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.events {
		b = append(ev.AppendJSON(b), '\n')
	}
	for i := range s.notices {
		b = append(s.notices[i].AppendJSON(b), '\n')
	}
	return b
}

// NumNotices returns how many notices are recorded.
func (s *Sink) NumNotices() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.notices)
}

// NumEvents returns how many events are recorded.
func (s *Sink) NumEvents() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// WaitBook waits until the consumer's book for stream equals want(),
// evaluated afresh on every change.
func (s *Sink) WaitBook(t testing.TB, timeout time.Duration, stream venue.Stream, want func() *venue.Book) {
	t.Helper()
	s.WaitFor(t, timeout, "book "+string(stream)+" to match the venue's", func() bool {
		b := s.books[stream]
		return b != nil && b.Equal(want())
	})
}
