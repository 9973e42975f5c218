// Package derive computes the derived streams of fanoutd — book snapshots
// (book_snapshot_<depth>_<interval>), quotes (quote) and trade bars
// (trade_bar_<interval>) — from the events of their source stream, once per
// stream whatever the number of subscribers. A Set holds every derived
// stream of one source and reads the source's book once per event for
// all of them, at the largest depth they ask, whatever their number.
//
// A Deriver (or a Set) is a consumer of its source stream inside the node: the feed
// that owns the source calls Advance with each source event's receive time
// before applying the event to its book, Apply after, and Advance again
// from a timer at Due when no event comes to close an interval. Time is
// the source events' receive time (the capture's time in a replay), never
// the wall clock, so a replay derives what live derived and tests need no
// sleeps. Neither is safe for concurrent use: its feed's lock guards it.
package derive

import (
	"strconv"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// Out is one derived message: Event for a book snapshot (a KindBook event
// with Snapshot set) or a quote (KindQuote), Bar for a trade bar. The
// receiver assigns its Seq and encodes it with AppendJSON.
type Out struct {
	Event *venue.Event
	Bar   *Bar
	// Levels, if set, is the wire form of a book snapshot's levels, and
	// Event has none: the streams of a Set share one encoding of the
	// book's top. Its bytes are valid only during the emit call.
	Levels *Levels
}

// Levels is each side's levels in wire form (["price","size"] arrays,
// comma-separated, without the enclosing brackets).
type Levels struct {
	Bids, Asks []byte
}

// AppendJSON appends o's wire form, at its Seq (Event.Seq or Bar.Seq):
// what venue.Event.AppendJSON (or Bar.AppendJSON) writes.
func (o Out) AppendJSON(dst []byte) []byte {
	switch {
	case o.Bar != nil:
		return o.Bar.AppendJSON(dst)
	case o.Levels == nil:
		return o.Event.AppendJSON(dst)
	}
	e := o.Event
	dst = e.AppendJSONHead(dst)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = append(dst, `,"snapshot":true`...)
	if e.VenueSeq != 0 {
		dst = append(dst, `,"venue_seq":`...)
		dst = strconv.AppendInt(dst, e.VenueSeq, 10)
	}
	if !e.VenueTime.IsZero() {
		dst = appendTime(dst, `,"venue_time":"`, e.VenueTime)
	}
	dst = appendTime(dst, `,"recv_time":"`, e.RecvTime)
	dst = append(dst, `,"bids":[`...)
	dst = append(dst, o.Levels.Bids...)
	dst = append(dst, `],"asks":[`...)
	dst = append(dst, o.Levels.Asks...)
	return append(dst, "]}"...)
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

// New returns the Deriver of the derived stream id alone: a Set of one
// stream, whose book snapshots carry decimal levels (Event.Bids and Asks).
func New(id venue.Stream) (Deriver, error) {
	d, err := id.Channel().Derivation()
	if err != nil {
		return nil, err
	}
	set := NewSet(venue.NewStream(id.Venue(), id.Channel().Source(), id.Symbol()))
	set.decimals = true
	o := &one{id: id, set: set, conflated: d.Kind != venue.KindBar}
	if err := o.set.Add(id, func(x Out) { o.out(x) }); err != nil {
		return nil, err
	}
	return o, nil
}

// one is a Deriver over a Set of one stream; out is the emit of the call
// in progress.
type one struct {
	id        venue.Stream
	set       *Set
	conflated bool
	out       func(Out)
}

func (o *one) Stream() venue.Stream { return o.id }
func (o *one) Source() venue.Stream { return o.set.src }
func (o *one) Conflated() bool      { return o.conflated }
func (o *one) Due() time.Time       { return o.set.Due() }
func (o *one) Break(t time.Time)    { o.set.Break(t) }

func (o *one) Seed(book *venue.Book, t time.Time, emit func(Out)) {
	o.out = emit
	o.set.Seed(o.id, book, t)
}

func (o *one) Advance(t time.Time, book *venue.Book, emit func(Out)) {
	o.out = emit
	o.set.Advance(t, book)
}

func (o *one) Apply(ev *venue.Event, book *venue.Book, emit func(Out)) {
	o.out = emit
	o.set.Apply(ev, book)
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
