package venue

import (
	"slices"

	"github.com/shopspring/decimal"
)

// BookSide is the bid or the ask side of a book.
type BookSide uint8

// The two sides of a book.
const (
	Bid BookSide = iota
	Ask
)

// Book is a level2 order book: for each side, the price levels with a
// non-zero size. The zero Book is an empty book ready to use.
//
// Each side is a slice kept sorted worst price first and best price last,
// so the changes that dominate a live feed (levels near the top) insert and
// remove at the end of the slice and move little memory; a price is found
// by binary search. A tree or a map was rejected: for books of at most a
// few thousand levels the sorted slice is smaller, has no per-level
// allocation and reads top-N without walking pointers.
//
// Prices are compared with decimal.Decimal.Cmp, which is allocation-free
// when both prices carry the same exponent (the venue's own tick formatting
// gives that); adapters that receive mixed formatting should rescale to the
// instrument's precision before applying.
//
// A Book is not safe for concurrent use.
type Book struct {
	bids []Level // ascending: best (highest) last
	asks []Level // descending: best (lowest) last
}

// better reports whether price a is better than b on side s.
func better(s BookSide, a, b decimal.Decimal) bool {
	if s == Bid {
		return a.Cmp(b) > 0
	}
	return a.Cmp(b) < 0
}

func (b *Book) side(s BookSide) *[]Level {
	if s == Bid {
		return &b.bids
	}
	return &b.asks
}

// search returns the index of price in levels (worst first), and whether
// it is there; if not, the index where it would be inserted.
func search(s BookSide, levels []Level, price decimal.Decimal) (int, bool) {
	lo, hi := 0, len(levels)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c := levels[m].Price.Cmp(price)
		if c == 0 {
			return m, true
		}
		if (s == Bid) == (c < 0) { // levels[m] is worse than price
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, false
}

// Set puts an absolute size at price on side s; a zero size removes the
// level. It reports whether the book changed.
func (b *Book) Set(s BookSide, price, size decimal.Decimal) bool {
	p := b.side(s)
	i, found := search(s, *p, price)
	if size.IsZero() {
		if !found {
			return false
		}
		*p = slices.Delete(*p, i, i+1)
		return true
	}
	if found {
		(*p)[i].Size = size
		return true
	}
	*p = slices.Insert(*p, i, Level{Price: price, Size: size})
	return true
}

// Get returns the size at price on side s, and whether the level exists.
func (b *Book) Get(s BookSide, price decimal.Decimal) (decimal.Decimal, bool) {
	p := b.side(s)
	i, found := search(s, *p, price)
	if !found {
		return decimal.Decimal{}, false
	}
	return (*p)[i].Size, true
}

// Reset empties the book, keeping its memory.
func (b *Book) Reset() {
	b.bids = b.bids[:0]
	b.asks = b.asks[:0]
}

// Replace makes bids and asks the whole book, in any order; levels of size
// zero are ignored and a price given twice keeps its last size.
func (b *Book) Replace(bids, asks []Level) {
	b.Reset()
	b.bids = fill(Bid, b.bids, bids)
	b.asks = fill(Ask, b.asks, asks)
}

func fill(s BookSide, dst, src []Level) []Level {
	// Venues send snapshots best first; reversing that is the common case
	// and is linear. Anything else falls back to Set per level.
	sorted := true
	for i := 1; i < len(src) && sorted; i++ {
		sorted = better(s, src[i-1].Price, src[i].Price)
	}
	if sorted {
		for i := len(src) - 1; i >= 0; i-- {
			if !src[i].Size.IsZero() {
				dst = append(dst, src[i])
			}
		}
		return dst
	}
	tmp := Book{}
	for _, l := range src {
		tmp.Set(s, l.Price, l.Size)
	}
	return append(dst, *tmp.side(s)...)
}

// Apply applies a book event: a snapshot replaces the book, an update sets
// each level it names. It ignores events of other kinds.
func (b *Book) Apply(e *Event) {
	if e.Kind != KindBook {
		return
	}
	if e.Snapshot {
		b.Replace(e.Bids, e.Asks)
		return
	}
	for _, l := range e.Bids {
		b.Set(Bid, l.Price, l.Size)
	}
	for _, l := range e.Asks {
		b.Set(Ask, l.Price, l.Size)
	}
}

// Len returns the number of levels on side s.
func (b *Book) Len(s BookSide) int { return len(*b.side(s)) }

// Best returns the best level of side s, and false if the side is empty.
func (b *Book) Best(s BookSide) (Level, bool) {
	p := *b.side(s)
	if len(p) == 0 {
		return Level{}, false
	}
	return p[len(p)-1], true
}

// Crossed reports whether the best bid is at or above the best ask, which a
// correct book never is.
func (b *Book) Crossed() bool {
	bid, ok1 := b.Best(Bid)
	ask, ok2 := b.Best(Ask)
	return ok1 && ok2 && bid.Price.Cmp(ask.Price) >= 0
}

// Top appends up to n levels of side s to dst, best first, and returns the
// extended slice; n <= 0 means all.
func (b *Book) Top(dst []Level, s BookSide, n int) []Level {
	p := *b.side(s)
	if n <= 0 || n > len(p) {
		n = len(p)
	}
	for i := len(p) - 1; i >= len(p)-n; i-- {
		dst = append(dst, p[i])
	}
	return dst
}

// Level returns the i-th best level of side s (0 is the best); i must be
// below Len(s).
func (b *Book) Level(s BookSide, i int) Level {
	p := *b.side(s)
	return p[len(p)-1-i]
}

// Truncate removes every level of side s beyond the best depth and appends
// each removed level to dst with size zero (best first), returning the
// extended slice. Venues whose books are depth-limited (Kraken) drop such
// levels without saying so; the removals let a consumer of our updates do
// the same.
func (b *Book) Truncate(dst []Level, s BookSide, depth int) []Level {
	p := b.side(s)
	extra := len(*p) - depth
	if depth < 0 || extra <= 0 {
		return dst
	}
	for i := extra - 1; i >= 0; i-- {
		dst = append(dst, Level{Price: (*p)[i].Price})
	}
	*p = slices.Delete(*p, 0, extra)
	return dst
}

// Snapshot returns a snapshot event of the whole book for stream, with
// copies of the levels (best first), so the event stays valid while the
// book changes. Seq, VenueSeq and the times are the caller's to set.
func (b *Book) Snapshot(stream Stream) *Event {
	return &Event{
		Kind:     KindBook,
		Stream:   stream,
		Snapshot: true,
		Bids:     b.Top(make([]Level, 0, len(b.bids)), Bid, 0),
		Asks:     b.Top(make([]Level, 0, len(b.asks)), Ask, 0),
	}
}

// Equal reports whether b and o hold the same levels with equal sizes.
func (b *Book) Equal(o *Book) bool {
	eq := func(x, y []Level) bool {
		return slices.EqualFunc(x, y, func(a, c Level) bool {
			return a.Price.Equal(c.Price) && a.Size.Equal(c.Size)
		})
	}
	return eq(b.bids, o.bids) && eq(b.asks, o.asks)
}
