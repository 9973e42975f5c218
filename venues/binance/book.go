package binance

import (
	"slices"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/venue"
)

// priceScale is Binance's price format: eight fraction digits. A book keys
// each price by its value in units of 1e-8, an int64.
const priceScale = 8

var pow10 = [...]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8}

// priceKey returns the book key of a price with mantissa m and frac
// fraction digits, and false if the price has more than eight fraction
// digits or is too large for an int64 key (over 92,233,720,368.5), which
// no Binance spot price is.
func priceKey(m uint64, frac int) (int64, bool) {
	if frac > priceScale {
		return 0, false
	}
	p := pow10[priceScale-frac]
	if m > uint64(1<<63-1)/uint64(p) {
		return 0, false
	}
	return int64(m) * p, true
}

// lvl is a parsed level: its book key, its price as written, and its size
// as an integer (big holds a size with frac bigQty).
type lvl struct {
	key  int64
	size qty
	px   venue.Fixed
	big  decimal.Decimal
}

// zero reports whether l removes its level.
func (l *lvl) zero() bool {
	if l.size.frac == bigQty {
		return l.big.IsZero()
	}
	return l.size.m == 0
}

// fixed returns l in fixed point, and false for a size of frac bigQty.
func (l *lvl) fixed() (venue.FixedLevel, bool) {
	return venue.FixedLevel{Price: l.px, Size: venue.Fixed{M: int64(l.size.m), Scale: l.size.frac}}, l.size.frac != bigQty
}

// level returns l with decimals.
func (l *lvl) level() venue.Level {
	if l.size.frac == bigQty {
		return venue.Level{Price: l.px.Decimal(), Size: l.big}
	}
	f, _ := l.fixed()
	return f.Level()
}

// qty is a size as mantissa × 10^-frac, so that a book holds no pointers:
// moving its levels needs no write barriers and the GC has nothing in it to
// scan. A size too long for that (over 18 significant digits) has frac
// bigQty and its decimal in the ladder's big map.
type qty struct {
	m    uint64
	frac uint8
}

const bigQty = 255

// ladder is one side of a book: levels sorted by key ascending, best last.
// Asks are keyed by the negated price so that both sides sort the same way.
type ladder struct {
	keys  []int64
	sizes []qty
	big   map[int64]decimal.Decimal // sizes with frac bigQty, by key
}

func (l *ladder) search(k int64) (int, bool) {
	lo, hi := 0, len(l.keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l.keys[m] < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(l.keys) && l.keys[lo] == k
}

func (l *ladder) set(k int64, q qty, size decimal.Decimal) {
	i, found := l.search(k)
	if found && l.sizes[i].frac == bigQty {
		delete(l.big, k)
	}
	switch {
	case q.frac == bigQty && size.IsZero() || q.frac != bigQty && q.m == 0:
		if found {
			l.keys = slices.Delete(l.keys, i, i+1)
			l.sizes = slices.Delete(l.sizes, i, i+1)
		}
		return
	case found:
		l.sizes[i] = q
	default:
		l.keys = slices.Insert(l.keys, i, k)
		l.sizes = slices.Insert(l.sizes, i, q)
	}
	if q.frac == bigQty {
		if l.big == nil {
			l.big = map[int64]decimal.Decimal{}
		}
		l.big[k] = size
	}
}

// size returns the decimal size of the i-th level.
func (l *ladder) size(i int) decimal.Decimal {
	q := l.sizes[i]
	if q.frac == bigQty {
		return l.big[l.keys[i]]
	}
	return makeDecimal(q.m, int(q.frac), false)
}

func (l *ladder) reset() {
	l.keys, l.sizes = l.keys[:0], l.sizes[:0]
	clear(l.big)
}

// book is a Binance level2 book. It holds what venue.Book holds, as
// integers: venue.Book compares shopspring decimals (a big.Int compare per
// probe), which made book maintenance most of the cost of a frame on a
// 1000-level book; an int64 compare is a single instruction, and a book
// without pointers costs the GC nothing. The published events carry
// decimals, so consumers keep venue.Books equal to this.
// The zero book is empty and ready to use.
type book struct {
	bids, asks ladder
}

func (b *book) reset() {
	b.bids.reset()
	b.asks.reset()
}

func (b *book) setBid(l *lvl) { b.bids.set(l.key, l.size, l.big) }
func (b *book) setAsk(l *lvl) { b.asks.set(-l.key, l.size, l.big) }

// replace makes bids and asks (in any order) the whole book; a price given
// twice keeps its last size, zero sizes are dropped.
func (b *book) replace(bids, asks []lvl) {
	b.reset()
	fill(&b.bids, bids, 1)
	fill(&b.asks, asks, -1)
}

func fill(l *ladder, src []lvl, sign int64) {
	// Snapshots come best first: strictly descending keys, which reversed
	// is the ladder's order. Anything else goes level by level.
	sorted := true
	for i := 1; i < len(src) && sorted; i++ {
		sorted = sign*src[i-1].key > sign*src[i].key
	}
	if !sorted {
		for i := range src {
			l.set(sign*src[i].key, src[i].size, src[i].big)
		}
		return
	}
	for i := len(src) - 1; i >= 0; i-- {
		if s := &src[i]; !s.zero() {
			l.keys = append(l.keys, sign*s.key)
			l.sizes = append(l.sizes, s.size)
			if s.size.frac == bigQty {
				if l.big == nil {
					l.big = map[int64]decimal.Decimal{}
				}
				l.big[sign*s.key] = s.big
			}
		}
	}
}

// crossed reports whether the best bid is at or above the best ask.
func (b *book) crossed() bool {
	nb, na := len(b.bids.keys), len(b.asks.keys)
	return nb > 0 && na > 0 && b.bids.keys[nb-1] >= -b.asks.keys[na-1]
}

// snapshot returns a snapshot event of the whole book, best first, in
// fixed point (prices at eight fraction digits) unless a size is too long
// for it.
func (b *book) snapshot(stream venue.Stream) *venue.Event {
	ev := &venue.Event{Kind: venue.KindBook, Stream: stream, Snapshot: true}
	if len(b.bids.big) == 0 && len(b.asks.big) == 0 && len(b.bids.keys)+len(b.asks.keys) > 0 {
		ev.FixedBids = b.bids.fixedBestFirst(1)
		ev.FixedAsks = b.asks.fixedBestFirst(-1)
		return ev
	}
	ev.Bids = b.bids.levelsBestFirst(1)
	ev.Asks = b.asks.levelsBestFirst(-1)
	return ev
}

func (l *ladder) fixedBestFirst(sign int64) []venue.FixedLevel {
	out := make([]venue.FixedLevel, len(l.keys))
	for i := range l.keys {
		q := l.sizes[i]
		out[len(out)-1-i] = venue.FixedLevel{
			Price: venue.Fixed{M: sign * l.keys[i], Scale: priceScale},
			Size:  venue.Fixed{M: int64(q.m), Scale: q.frac},
		}
	}
	return out
}

func (l *ladder) levelsBestFirst(sign int64) []venue.Level {
	out := make([]venue.Level, len(l.keys))
	for i := range l.keys {
		out[len(out)-1-i] = venue.Level{Price: makeDecimal(uint64(sign*l.keys[i]), priceScale, false), Size: l.size(i)}
	}
	return out
}
