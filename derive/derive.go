// Package derive computes the derived streams of fanoutd — book snapshots
// (book_snapshot_<depth>_<interval>), quotes (quote) and trade bars
// (trade_bar_<interval>) — from the events of their source stream, once per
// stream whatever the number of subscribers.
//
// A Deriver is a consumer of its source stream inside the node: the feed
// that owns the source calls Advance with each source event's receive time
// before applying the event to its book, Apply after, and Advance again
// from a timer at Due when no event comes to close an interval. Time is
// the source events' receive time (the capture's time in a replay), never
// the wall clock, so a replay derives what live derived and tests need no
// sleeps. A Deriver is not safe for concurrent use: its feed's lock
// guards it.
package derive

import (
	"fmt"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// Out is one derived message: Event for a book snapshot (a KindBook event
// with Snapshot set) or a quote (KindQuote), Bar for a trade bar. The
// receiver assigns its Seq.
type Out struct {
	Event *venue.Event
	Bar   *Bar
}

// Deriver computes one derived stream.
type Deriver interface {
	// Stream is the derived stream, Source the raw stream it reads.
	Stream() venue.Stream
	Source() venue.Stream
	// Conflated reports whether each message is a whole state (book
	// snapshots, quotes), so a newer one may replace an unsent older one.
	Conflated() bool
	// Seed starts the stream from the source's current book (nil for a
	// trades source) as of t, the receive time of its last event.
	Seed(book *venue.Book, t time.Time, emit func(Out))
	// Advance closes every interval that ends at or before t; book is the
	// source's book before any event received at t is applied.
	Advance(t time.Time, book *venue.Book, emit func(Out))
	// Apply takes ev, an event of the source stream, after it has been
	// applied to book.
	Apply(ev *venue.Event, book *venue.Book, emit func(Out))
	// Due returns when the open interval closes, or the zero time if none
	// is open with something to emit.
	Due() time.Time
	// Break records that the source had a discontinuity at t (its link
	// dropped): a trade bar that spans it is marked.
	Break(t time.Time)
}

// New returns the Deriver of the derived stream id.
func New(id venue.Stream) (Deriver, error) {
	d, err := id.Channel().Derivation()
	if err != nil {
		return nil, err
	}
	src := venue.NewStream(id.Venue(), id.Channel().Source(), id.Symbol())
	switch d.Kind {
	case venue.KindBook:
		return &bookSnap{id: id, src: src, depth: d.Depth, every: d.Interval}, nil
	case venue.KindQuote:
		return &bookSnap{id: id, src: src, depth: 1, quote: true}, nil
	case venue.KindBar:
		return &bars{id: id, src: src, every: d.Interval}, nil
	}
	return nil, fmt.Errorf("derive: %q is not a derived stream", id)
}

// boundary returns the end of the interval of length every that holds t:
// intervals are aligned to multiples of every since the Unix epoch.
func boundary(t time.Time, every time.Duration) time.Time {
	return start(t, every).Add(every)
}

func start(t time.Time, every time.Duration) time.Time {
	ns := t.UnixNano()
	r := ns % int64(every)
	if r < 0 {
		r += int64(every)
	}
	return time.Unix(0, ns-r).UTC()
}
