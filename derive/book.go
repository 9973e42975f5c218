package derive

import (
	"slices"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// bookSnap derives book_snapshot_<depth>_<interval> and quote (depth 1,
// every change, in the quote form) from a level2 stream.
type bookSnap struct {
	id, src venue.Stream
	depth   int
	every   time.Duration // 0: on every change
	quote   bool

	bids, asks []venue.Level // the top last emitted
	emitted    bool          // something was emitted
	pending    bool          // the top may differ from the last emitted
	next       time.Time     // when pending: the end of its interval
	last       time.Time     // stamp of the last message emitted
	vtime      time.Time     // VenueTime of the last event applied
	vseq       int64         // VenueSeq of the last event applied
	recv       time.Time     // RecvTime of the last event applied
	scratch    []venue.Level
}

func (b *bookSnap) Stream() venue.Stream { return b.id }
func (b *bookSnap) Source() venue.Stream { return b.src }
func (b *bookSnap) Conflated() bool      { return true }

func (b *bookSnap) Due() time.Time {
	if !b.pending || b.every == 0 {
		return time.Time{}
	}
	return b.next
}

func (b *bookSnap) Break(time.Time) {}

func (b *bookSnap) Seed(book *venue.Book, t time.Time, emit func(Out)) {
	if book == nil {
		return
	}
	b.recv = t
	b.touch(t)
	if b.every == 0 {
		b.flush(book, t, emit)
	}
}

func (b *bookSnap) Advance(t time.Time, book *venue.Book, emit func(Out)) {
	if b.every > 0 && b.pending && !t.Before(b.next) {
		b.flush(book, b.next, emit)
	}
}

func (b *bookSnap) Apply(ev *venue.Event, book *venue.Book, emit func(Out)) {
	if ev.Kind != venue.KindBook {
		return
	}
	b.vtime, b.vseq, b.recv = ev.VenueTime, ev.VenueSeq, ev.RecvTime
	if !ev.Snapshot && !b.touches(ev, book) {
		return
	}
	b.touch(ev.RecvTime)
	if b.every == 0 {
		b.flush(book, ev.RecvTime, emit)
	}
}

// touch marks the top as possibly changed at t.
func (b *bookSnap) touch(t time.Time) {
	if b.every == 0 || b.pending {
		b.pending = true
		return
	}
	b.pending = true
	from := t
	if b.last.After(from) {
		from = b.last
	}
	b.next = boundary(from, b.every)
}

// touches reports whether the update ev, applied to book, may have changed
// the top depth levels: some level it names is at or better than the
// depth-th level now (a removed level that was in the top leaves a worse
// one in its place), or a side holds depth levels or fewer.
func (b *bookSnap) touches(ev *venue.Event, book *venue.Book) bool {
	if ev.HasFixed() {
		return b.touchesFixed(ev, book)
	}
	for _, s := range [2]venue.BookSide{venue.Bid, venue.Ask} {
		ls := ev.Bids
		if s == venue.Ask {
			ls = ev.Asks
		}
		if len(ls) == 0 {
			continue
		}
		n := book.Len(s)
		if n <= b.depth {
			return true
		}
		edge := book.Level(s, b.depth-1).Price
		for i := range ls {
			c := ls[i].Price.Cmp(edge)
			if s == venue.Bid && c >= 0 || s == venue.Ask && c <= 0 {
				return true
			}
		}
	}
	return false
}

// touchesFixed is touches for an event with its levels in fixed point.
func (b *bookSnap) touchesFixed(ev *venue.Event, book *venue.Book) bool {
	for _, s := range [2]venue.BookSide{venue.Bid, venue.Ask} {
		ls := ev.FixedBids
		if s == venue.Ask {
			ls = ev.FixedAsks
		}
		if len(ls) == 0 {
			continue
		}
		n := book.Len(s)
		if n <= b.depth {
			return true
		}
		edge, ok := book.LevelFixed(s, b.depth-1)
		for i := range ls {
			var c int
			if ok {
				c = ls[i].Price.Cmp(edge.Price)
			} else {
				c = ls[i].Price.Decimal().Cmp(book.Level(s, b.depth-1).Price)
			}
			if s == venue.Bid && c >= 0 || s == venue.Ask && c <= 0 {
				return true
			}
		}
	}
	return false
}

// flush emits the book's top, stamped at, if it differs from the last
// emitted.
func (b *bookSnap) flush(book *venue.Book, at time.Time, emit func(Out)) {
	b.pending = false
	b.scratch = book.Top(b.scratch[:0], venue.Bid, b.depth)
	nb := len(b.scratch)
	b.scratch = book.Top(b.scratch, venue.Ask, b.depth)
	bids, asks := b.scratch[:nb], b.scratch[nb:]
	if b.emitted && levelsEqual(bids, b.bids) && levelsEqual(asks, b.asks) {
		return
	}
	b.emitted, b.last = true, at
	b.bids = append(b.bids[:0], bids...)
	b.asks = append(b.asks[:0], asks...)
	ev := &venue.Event{Stream: b.id, RecvTime: at, VenueTime: b.vtime}
	if b.quote {
		ev.Kind = venue.KindQuote
		if len(bids) > 0 {
			ev.Bid, ev.BidSize = bids[0].Price, bids[0].Size
		}
		if len(asks) > 0 {
			ev.Ask, ev.AskSize = asks[0].Price, asks[0].Size
		}
	} else {
		ev.Kind, ev.Snapshot, ev.VenueSeq = venue.KindBook, true, b.vseq
		ev.Bids, ev.Asks = slices.Clone(bids), slices.Clone(asks)
	}
	emit(Out{Event: ev})
}

func levelsEqual(a, b []venue.Level) bool {
	return slices.EqualFunc(a, b, func(x, y venue.Level) bool { return x.Price.Equal(y.Price) && x.Size.Equal(y.Size) })
}
