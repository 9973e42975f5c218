package derive

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// Set computes every derived stream of one source stream, sharing the
// work on the source among them: the book's top is read at most once per
// Advance and once per Apply, at the deepest depth the streams due need,
// and encoded once (NewSet); each book stream takes the prefix of its
// depth. Book streams of one interval share one schedule, so an interval
// closes once per source, not once per stream. What grows with the
// streams is what they emit, the comparison of each due stream's top
// with the last it emitted, and each trade bar's update per trade, which
// a caller bounds by capping the streams and their depths.
//
// The zero Set is not usable; call NewSet. A Set is not safe for
// concurrent use: its feed's lock guards it.
type Set struct {
	src    venue.Stream
	groups []*group  // book streams by interval, ascending; every-change streams (0) first
	bars   []*bars   // trade_bar_* streams
	idle   int       // interval groups with no event since their last close
	due    time.Time // the earliest Due of groups and bars, zero if none
	reads  uint64    // times the book's top was read
	vtime  time.Time // VenueTime of the last book event applied
	vseq   int64     // VenueSeq of the last book event applied
	cur    top       // the last read
	// decimals: emit book snapshots with decimal levels (Event.Bids and
	// Asks), not their shared wire form (Out.Levels).
	decimals bool
}

// group is the book streams of one interval, by depth ascending.
type group struct {
	every   time.Duration
	members []*member
	pending bool      // an event came since the last close
	next    time.Time // when pending: the end of its interval
	last    time.Time // the last close
}

// member is one book stream: book_snapshot_<depth>_<interval> or quote.
type member struct {
	id         venue.Stream
	depth      int
	quote      bool
	emit       func(Out)
	bids, asks []venue.Level // the top last emitted (decimals)
	wire       [2][]byte     // the top last emitted (wire form)
	emitted    bool
	paused     bool // not computed (Pause)
}

// NewSet returns an empty Set of the derived streams of src. Its book
// snapshots carry their levels in wire form (Out.Levels), sliced from one
// encoding of the deepest top read.
func NewSet(src venue.Stream) *Set { return &Set{src: src} }

// Source returns the stream the Set reads.
func (s *Set) Source() venue.Stream { return s.src }

// Len returns the number of streams in the Set.
func (s *Set) Len() int {
	n := len(s.bars)
	for _, g := range s.groups {
		n += len(g.members)
	}
	return n
}

// Reads returns how many times the Set has read its source book's top:
// at most once per Seed, Advance and Apply, whatever the number of
// streams.
func (s *Set) Reads() uint64 { return s.reads }

// Add adds the derived stream id, whose messages go to emit; its source
// must be the Set's. Adding a stream twice is an error.
func (s *Set) Add(id venue.Stream, emit func(Out)) error {
	d, err := id.Channel().Derivation()
	if err != nil {
		return err
	}
	if src := venue.NewStream(id.Venue(), id.Channel().Source(), id.Symbol()); src != s.src {
		return fmt.Errorf("derive: %q is not derived from %q", id, s.src)
	}
	if s.has(id) {
		return fmt.Errorf("derive: %q added twice", id)
	}
	if d.Kind == venue.KindBar {
		s.bars = append(s.bars, &bars{id: id, src: s.src, every: d.Interval, emit: emit})
		return nil
	}
	m := &member{id: id, depth: d.Depth, emit: emit}
	if d.Kind == venue.KindQuote {
		m.depth, m.quote = 1, true
	}
	i, ok := slices.BinarySearchFunc(s.groups, d.Interval, func(g *group, iv time.Duration) int { return cmp.Compare(g.every, iv) })
	if !ok {
		s.groups = slices.Insert(s.groups, i, &group{every: d.Interval})
		if d.Interval > 0 {
			s.idle++
		}
	}
	g := s.groups[i]
	j, _ := slices.BinarySearchFunc(g.members, m.depth, func(x *member, d int) int { return cmp.Compare(x.depth, d) })
	g.members = slices.Insert(g.members, j, m)
	return nil
}

func (s *Set) has(id venue.Stream) bool {
	return s.member(id) != nil || slices.ContainsFunc(s.bars, func(b *bars) bool { return b.id == id })
}

// Remove removes the derived stream id, if the Set holds it.
func (s *Set) Remove(id venue.Stream) {
	s.bars = slices.DeleteFunc(s.bars, func(b *bars) bool { return b.id == id })
	for i, g := range s.groups {
		g.members = slices.DeleteFunc(g.members, func(m *member) bool { return m.id == id })
		if len(g.members) == 0 {
			if g.every > 0 && !g.pending {
				s.idle--
			}
			s.groups = slices.Delete(s.groups, i, i+1)
			break
		}
	}
	s.schedule()
}

// Seed starts the stream id from the source's current book (nil for a
// trades source) as of t, the receive time of its last event: an
// every-change stream emits the book's top at once, an interval stream at
// the end of the interval that holds t.
func (s *Set) Seed(id venue.Stream, book *venue.Book, t time.Time) {
	if book == nil {
		return
	}
	for _, g := range s.groups {
		for _, m := range g.members {
			if m.id != id {
				continue
			}
			if g.every == 0 {
				s.read(book, m.depth, &s.cur)
				s.flush(m, t, &s.cur)
				return
			}
			s.touch(g, t)
			s.schedule()
			return
		}
	}
}

// Pause stops computing the book stream id (not a trade bar, whose every
// bar counts): it emits nothing and costs nothing per source event until
// Resume. A feed pauses a stream none of whose subscribers has a
// connection: what such a subscriber needs on reattaching is the current
// state, which Resume computes then.
func (s *Set) Pause(id venue.Stream) {
	if m := s.member(id); m != nil {
		m.paused = true
	}
}

// Resume computes the paused book stream id again and emits its top at
// once, stamped t, the receive time of the source's last event (book is
// the source's book; nil emits nothing). It may be called while the Set
// is emitting: it reads the book into buffers of its own.
func (s *Set) Resume(id venue.Stream, book *venue.Book, t time.Time) {
	m := s.member(id)
	if m == nil || !m.paused {
		return
	}
	m.paused = false
	if book == nil {
		return
	}
	var own top
	s.read(book, m.depth, &own)
	m.emitted = false
	s.flush(m, t, &own)
}

func (s *Set) member(id venue.Stream) *member {
	for _, g := range s.groups {
		for _, m := range g.members {
			if m.id == id {
				return m
			}
		}
	}
	return nil
}

// Advance closes every interval that ends at or before t; book is the
// source's book before any event received at t is applied.
func (s *Set) Advance(t time.Time, book *venue.Book) {
	if s.due.IsZero() || t.Before(s.due) {
		return
	}
	depth, closing := 0, false
	for _, g := range s.groups {
		if g.every > 0 && g.pending && !t.Before(g.next) {
			depth, closing = max(depth, deepest(g.members)), true
		}
	}
	if closing {
		if depth > 0 {
			s.read(book, depth, &s.cur)
		}
		for _, g := range s.groups {
			if g.every == 0 || !g.pending || t.Before(g.next) {
				continue
			}
			for _, m := range g.members {
				// A member deeper than the read was paused when it was
				// made (a Resume during this loop emitted it).
				if !m.paused && m.depth <= depth {
					s.flush(m, g.next, &s.cur)
				}
			}
			g.pending, g.last = false, g.next
			s.idle++
		}
	}
	for _, b := range s.bars {
		b.Advance(t, nil, b.emit)
	}
	s.schedule()
}

// Apply takes ev, an event of the source stream, after it has been
// applied to book.
func (s *Set) Apply(ev *venue.Event, book *venue.Book) {
	switch ev.Kind {
	case venue.KindTrade:
		if len(s.bars) > 0 {
			for _, b := range s.bars {
				b.Apply(ev, nil, b.emit)
			}
			s.schedule()
		}
		return
	case venue.KindBook:
	default:
		return
	}
	s.vtime, s.vseq = ev.VenueTime, ev.VenueSeq
	if len(s.groups) == 0 {
		return
	}
	if g := s.groups[0]; g.every == 0 {
		// The streams whose top ev may have changed are those of depth
		// at or past the first it touches (touches is monotone in depth).
		i := 0
		if !ev.Snapshot {
			i, _ = slices.BinarySearchFunc(g.members, true, func(m *member, _ bool) int {
				if touches(ev, book, m.depth) {
					return 1
				}
				return -1
			})
		}
		if d := deepest(g.members[i:]); d > 0 {
			s.read(book, d, &s.cur)
			for _, m := range g.members[i:] {
				if !m.paused && m.depth <= d {
					s.flush(m, ev.RecvTime, &s.cur)
				}
			}
		}
	}
	if s.idle > 0 {
		for _, g := range s.groups {
			if g.every > 0 && !g.pending {
				s.touch(g, ev.RecvTime)
			}
		}
		s.schedule()
	}
}

// Due returns when the earliest open interval closes, or the zero time if
// none is open.
func (s *Set) Due() time.Time { return s.due }

// Break records that the source had a discontinuity at t (its link
// dropped): a trade bar that spans it is marked.
func (s *Set) Break(t time.Time) {
	for _, b := range s.bars {
		b.Break(t)
	}
}

// touch opens g's interval that holds t (or the one after its last close).
func (s *Set) touch(g *group, t time.Time) {
	if g.pending {
		return
	}
	g.pending = true
	s.idle--
	from := t
	if g.last.After(from) {
		from = g.last
	}
	g.next = boundary(from, g.every)
}

// schedule recomputes Due.
func (s *Set) schedule() {
	var due time.Time
	for _, g := range s.groups {
		if g.every > 0 && g.pending && (due.IsZero() || g.next.Before(due)) {
			due = g.next
		}
	}
	for _, b := range s.bars {
		if d := b.Due(); !d.IsZero() && (due.IsZero() || d.Before(due)) {
			due = d
		}
	}
	s.due = due
}

// top is one read of a book's top: as levels (a Set of decimals), or as
// each side's levels in wire form, encoded once, with the end of each
// level's bytes, so that every depth is a prefix of it.
type top struct {
	bids, asks []venue.Level
	wire       [2][]byte
	ends       [2][]int
	best       [2]venue.Level // wire: the best level of each side (quote)
}

// read reads the top depth levels of each side of book into t: the one
// read every stream due now slices.
func (s *Set) read(book *venue.Book, depth int, t *top) {
	s.reads++
	if s.decimals {
		t.bids = book.Top(t.bids[:0], venue.Bid, depth)
		t.asks = book.Top(t.asks[:0], venue.Ask, depth)
		return
	}
	for i, side := range [2]venue.BookSide{venue.Bid, venue.Ask} {
		w, ends := t.wire[i][:0], t.ends[i][:0]
		n := min(depth, book.Len(side))
		for j := range n {
			if j > 0 {
				w = append(w, ',')
			}
			w = append(w, `["`...)
			if l, ok := book.LevelFixed(side, j); ok {
				w = venue.AppendFixed(w, l.Price)
				w = append(w, `","`...)
				w = venue.AppendFixed(w, l.Size)
			} else {
				l := book.Level(side, j)
				w = venue.AppendDecimal(w, l.Price)
				w = append(w, `","`...)
				w = venue.AppendDecimal(w, l.Size)
			}
			w = append(w, `"]`...)
			ends = append(ends, len(w))
		}
		t.wire[i], t.ends[i] = w, ends
		t.best[i] = venue.Level{}
		if n > 0 {
			t.best[i], _ = book.Best(side)
		}
	}
}

// deepest returns the largest depth of the members of ms not paused, 0 if
// none; ms is by depth ascending.
func deepest(ms []*member) int {
	for i := len(ms) - 1; i >= 0; i-- {
		if !ms[i].paused {
			return ms[i].depth
		}
	}
	return 0
}

// flush emits m's top, sliced from t and stamped at, if it differs from
// the last m emitted.
func (s *Set) flush(m *member, at time.Time, t *top) {
	if !s.decimals {
		s.flushWire(m, at, t)
		return
	}
	bids, asks := t.bids[:min(m.depth, len(t.bids))], t.asks[:min(m.depth, len(t.asks))]
	if m.emitted && levelsEqual(bids, m.bids) && levelsEqual(asks, m.asks) {
		return
	}
	m.emitted = true
	m.bids = append(m.bids[:0], bids...)
	m.asks = append(m.asks[:0], asks...)
	ev := &venue.Event{Stream: m.id, RecvTime: at, VenueTime: s.vtime}
	if m.quote {
		ev.Kind = venue.KindQuote
		if len(bids) > 0 {
			ev.Bid, ev.BidSize = bids[0].Price, bids[0].Size
		}
		if len(asks) > 0 {
			ev.Ask, ev.AskSize = asks[0].Price, asks[0].Size
		}
	} else {
		ev.Kind, ev.Snapshot, ev.VenueSeq = venue.KindBook, true, s.vseq
		ev.Bids, ev.Asks = slices.Clone(bids), slices.Clone(asks)
	}
	m.emit(Out{Event: ev})
}

// flushWire is flush for a Set in wire form: m's levels are a prefix of
// t's encoding, compared as bytes and handed on as bytes (Out.Levels).
func (s *Set) flushWire(m *member, at time.Time, t *top) {
	var w [2][]byte
	for i := range w {
		if n := min(m.depth, len(t.ends[i])); n > 0 {
			w[i] = t.wire[i][:t.ends[i][n-1]]
		}
	}
	if m.emitted && bytes.Equal(w[0], m.wire[0]) && bytes.Equal(w[1], m.wire[1]) {
		return
	}
	m.emitted = true
	m.wire[0] = append(m.wire[0][:0], w[0]...)
	m.wire[1] = append(m.wire[1][:0], w[1]...)
	ev := &venue.Event{Stream: m.id, RecvTime: at, VenueTime: s.vtime}
	if m.quote {
		ev.Kind = venue.KindQuote
		ev.Bid, ev.BidSize = t.best[0].Price, t.best[0].Size
		ev.Ask, ev.AskSize = t.best[1].Price, t.best[1].Size
		m.emit(Out{Event: ev})
		return
	}
	ev.Kind, ev.Snapshot, ev.VenueSeq = venue.KindBook, true, s.vseq
	m.emit(Out{Event: ev, Levels: &Levels{Bids: w[0], Asks: w[1]}})
}

func levelsEqual(a, b []venue.Level) bool {
	return slices.EqualFunc(a, b, func(x, y venue.Level) bool { return x.Price.Equal(y.Price) && x.Size.Equal(y.Size) })
}
