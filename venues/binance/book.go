package binance

import (
	"slices"

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

// lvl is a parsed level with its book key.
type lvl struct {
	key int64
	venue.Level
}

// ladder is one side of a book: levels sorted by key ascending, best last.
// Asks are keyed by the negated price so that both sides sort the same way.
type ladder struct {
	keys   []int64
	levels []venue.Level
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

func (l *ladder) set(k int64, lv venue.Level) {
	i, found := l.search(k)
	switch {
	case lv.Size.IsZero():
		if found {
			l.keys = slices.Delete(l.keys, i, i+1)
			l.levels = slices.Delete(l.levels, i, i+1)
		}
	case found:
		l.levels[i].Size = lv.Size
	default:
		l.keys = slices.Insert(l.keys, i, k)
		l.levels = slices.Insert(l.levels, i, lv)
	}
}

// book is a Binance level2 book. It holds what venue.Book holds, keyed by
// integer price: venue.Book compares shopspring decimals (a big.Int compare
// per probe), which made book maintenance most of the cost of a frame on a
// 5000-level book; an int64 compare is a single instruction. The published
// events carry the decimals, so consumers keep venue.Books equal to this.
// The zero book is empty and ready to use.
type book struct {
	bids, asks ladder
}

func (b *book) reset() {
	b.bids.keys, b.bids.levels = b.bids.keys[:0], b.bids.levels[:0]
	b.asks.keys, b.asks.levels = b.asks.keys[:0], b.asks.levels[:0]
}

func (b *book) setBid(l *lvl) { b.bids.set(l.key, l.Level) }
func (b *book) setAsk(l *lvl) { b.asks.set(-l.key, l.Level) }

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
			l.set(sign*src[i].key, src[i].Level)
		}
		return
	}
	for i := len(src) - 1; i >= 0; i-- {
		if !src[i].Size.IsZero() {
			l.keys = append(l.keys, sign*src[i].key)
			l.levels = append(l.levels, src[i].Level)
		}
	}
}

// crossed reports whether the best bid is at or above the best ask.
func (b *book) crossed() bool {
	nb, na := len(b.bids.keys), len(b.asks.keys)
	return nb > 0 && na > 0 && b.bids.keys[nb-1] >= -b.asks.keys[na-1]
}

// snapshot returns a snapshot event of the whole book, best first.
func (b *book) snapshot(stream venue.Stream) *venue.Event {
	ev := &venue.Event{Kind: venue.KindBook, Stream: stream, Snapshot: true}
	ev.Bids = make([]venue.Level, len(b.bids.levels))
	for i, l := range b.bids.levels {
		ev.Bids[len(ev.Bids)-1-i] = l
	}
	ev.Asks = make([]venue.Level, len(b.asks.levels))
	for i, l := range b.asks.levels {
		ev.Asks[len(ev.Asks)-1-i] = l
	}
	return ev
}
