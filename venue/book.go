package venue

import (
	"math/bits"
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
// by binary search.
//
// Each level also carries its price as a 128-bit fixed-point integer at
// 10^-18, so the binary search compares two machine words instead of two
// big.Ints. A price that does not fit (negative, more than 18
// significant digits, finer than 1e-18) switches the book to
// decimal.Decimal.Cmp until Reset; no venue's spot prices do that.
//
// A Book is not safe for concurrent use.
type Book struct {
	bids []level // ascending: best (highest) last
	asks []level // descending: best (lowest) last
	slow bool    // some price has no key: compare decimals
}

// level is one level of a side. A level set with decimals (Set, Replace)
// holds them in Level; one set in fixed point (SetFixed, ReplaceFixed)
// holds px and sz, and Level is a cache of their decimals, built on the
// first read that hands a decimal out (have says which are built).
type level struct {
	key    priceKey
	px, sz Fixed
	Level
	fixed bool
	have  uint8 // fixed levels: haveP | haveS
}

const (
	haveP = 1 << iota
	haveS
)

// dec returns p's decimals, building and caching those not built yet.
func (p *level) dec() Level {
	if p.fixed && p.have != haveP|haveS {
		if p.have&haveP == 0 {
			p.Price = p.px.Decimal()
		}
		if p.have&haveS == 0 {
			p.Size = p.sz.Decimal()
		}
		p.have = haveP | haveS
	}
	return p.Level
}

// fix returns p in fixed point, and false if it has none.
func (p *level) fix() (FixedLevel, bool) {
	if p.fixed {
		return FixedLevel{p.px, p.sz}, true
	}
	px, ok1 := FixedOf(p.Price)
	sz, ok2 := FixedOf(p.Size)
	return FixedLevel{px, sz}, ok1 && ok2
}

// priceKey is a non-negative price times 10^18, as a 128-bit integer.
type priceKey struct{ hi, lo uint64 }

var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// keyOf returns d's key, and false if d has none.
func keyOf(d decimal.Decimal) (priceKey, bool) {
	e := int(d.Exponent()) + 18
	if d.Sign() < 0 || e < 0 || e > 19 || d.NumDigits() > 18 {
		return priceKey{}, false
	}
	hi, lo := bits.Mul64(uint64(d.CoefficientInt64()), pow10[e])
	return priceKey{hi, lo}, true
}

func (k priceKey) cmp(o priceKey) int {
	switch {
	case k.hi != o.hi:
		if k.hi < o.hi {
			return -1
		}
		return 1
	case k.lo < o.lo:
		return -1
	case k.lo > o.lo:
		return 1
	}
	return 0
}

// better reports whether price a is better than b on side s.
func better(s BookSide, a, b decimal.Decimal) bool {
	if s == Bid {
		return a.Cmp(b) > 0
	}
	return a.Cmp(b) < 0
}

func (b *Book) side(s BookSide) *[]level {
	if s == Bid {
		return &b.bids
	}
	return &b.asks
}

// key computes price's key, switching the book to slow comparison if it
// has none.
func (b *Book) key(price decimal.Decimal) priceKey {
	k, ok := keyOf(price)
	if !ok {
		b.slow = true
	}
	return k
}

// search returns the index of price (whose key is k) in levels (worst
// first), and whether it is there; if not, the index where it would be
// inserted. A slow book compares the decimals, any other the keys.
func (b *Book) search(s BookSide, levels []level, price decimal.Decimal, k priceKey) (int, bool) {
	if !b.slow {
		return searchKey(s, levels, k)
	}
	lo, hi := 0, len(levels)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c := levels[m].dec().Price.Cmp(price)
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

// searchKey is search by key alone, for a book that is not slow.
func searchKey(s BookSide, levels []level, k priceKey) (int, bool) {
	lo, hi := 0, len(levels)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c := levels[m].key.cmp(k)
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
	k := b.key(price)
	p := b.side(s)
	i, found := b.search(s, *p, price, k)
	if size.IsZero() {
		if !found {
			return false
		}
		*p = slices.Delete(*p, i, i+1)
		return true
	}
	if found {
		l := &(*p)[i]
		l.Price = l.dec().Price
		l.Size, l.fixed = size, false
		return true
	}
	*p = slices.Insert(*p, i, level{key: k, Level: Level{Price: price, Size: size}})
	return true
}

// SetFixed is Set in fixed point: it builds no decimal (and allocates
// nothing unless the side grows past its capacity) when price has a key,
// which every venue's spot price has.
func (b *Book) SetFixed(s BookSide, price, size Fixed) bool {
	k, ok := price.key()
	if !ok || b.slow {
		return b.Set(s, price.Decimal(), size.Decimal())
	}
	p := b.side(s)
	i, found := searchKey(s, *p, k)
	if size.IsZero() {
		if !found {
			return false
		}
		*p = slices.Delete(*p, i, i+1)
		return true
	}
	if found {
		l := &(*p)[i]
		if !l.fixed {
			l.px, l.have = price, haveP // l.Price stays: an equal price
		}
		l.sz, l.fixed = size, true
		l.have &^= haveS
		return true
	}
	*p = slices.Insert(*p, i, level{key: k, px: price, sz: size, fixed: true})
	return true
}

// Get returns the size at price on side s, and whether the level exists.
func (b *Book) Get(s BookSide, price decimal.Decimal) (decimal.Decimal, bool) {
	p := b.side(s)
	i, found := b.search(s, *p, price, b.key(price))
	if !found {
		return decimal.Decimal{}, false
	}
	return (*p)[i].dec().Size, true
}

// Reset empties the book, keeping its memory.
func (b *Book) Reset() {
	b.bids = b.bids[:0]
	b.asks = b.asks[:0]
	b.slow = false
}

// Replace makes bids and asks the whole book, in any order; levels of size
// zero are ignored and a price given twice keeps its last size.
func (b *Book) Replace(bids, asks []Level) {
	b.Reset()
	b.bids = b.fill(Bid, b.bids, bids)
	b.asks = b.fill(Ask, b.asks, asks)
}

func (b *Book) fill(s BookSide, dst []level, src []Level) []level {
	// Venues send snapshots best first; reversing that is the common case
	// and is linear. Anything else falls back to Set per level.
	sorted := true
	for i := 1; i < len(src) && sorted; i++ {
		sorted = better(s, src[i-1].Price, src[i].Price)
	}
	if sorted {
		for i := len(src) - 1; i >= 0; i-- {
			if !src[i].Size.IsZero() {
				dst = append(dst, level{key: b.key(src[i].Price), Level: src[i]})
			}
		}
		return dst
	}
	tmp := Book{}
	for _, l := range src {
		tmp.Set(s, l.Price, l.Size)
	}
	b.slow = b.slow || tmp.slow
	return append(dst, *tmp.side(s)...)
}

// ReplaceFixed is Replace in fixed point.
func (b *Book) ReplaceFixed(bids, asks []FixedLevel) {
	b.Reset()
	b.bids = b.fillFixed(Bid, b.bids, bids)
	b.asks = b.fillFixed(Ask, b.asks, asks)
}

func (b *Book) fillFixed(s BookSide, dst []level, src []FixedLevel) []level {
	sorted := true
	for i := 1; i < len(src) && sorted; i++ {
		c := src[i-1].Price.Cmp(src[i].Price)
		sorted = s == Bid && c > 0 || s == Ask && c < 0
	}
	if sorted {
		for i := len(src) - 1; i >= 0; i-- {
			l := &src[i]
			if l.Size.IsZero() {
				continue
			}
			k, ok := l.Price.key()
			if !ok {
				b.slow = true
				dst = append(dst, level{Level: l.Level()})
				continue
			}
			dst = append(dst, level{key: k, px: l.Price, sz: l.Size, fixed: true})
		}
		return dst
	}
	tmp := Book{}
	for _, l := range src {
		tmp.SetFixed(s, l.Price, l.Size)
	}
	b.slow = b.slow || tmp.slow
	return append(dst, *tmp.side(s)...)
}

// Apply applies a book event: a snapshot replaces the book, an update sets
// each level it names. It ignores events of other kinds.
func (b *Book) Apply(e *Event) {
	if e.Kind != KindBook {
		return
	}
	if e.HasFixed() {
		if e.Snapshot {
			b.ReplaceFixed(e.FixedBids, e.FixedAsks)
			return
		}
		for _, l := range e.FixedBids {
			b.SetFixed(Bid, l.Price, l.Size)
		}
		for _, l := range e.FixedAsks {
			b.SetFixed(Ask, l.Price, l.Size)
		}
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
	return p[len(p)-1].dec(), true
}

// BestFixed returns the best level of side s in fixed point, and false if
// the side is empty or the level has no fixed point form.
func (b *Book) BestFixed(s BookSide) (FixedLevel, bool) {
	p := *b.side(s)
	if len(p) == 0 {
		return FixedLevel{}, false
	}
	return p[len(p)-1].fix()
}

// Crossed reports whether the best bid is at or above the best ask, which a
// correct book never is.
func (b *Book) Crossed() bool {
	if len(b.bids) == 0 || len(b.asks) == 0 {
		return false
	}
	bid, ask := &b.bids[len(b.bids)-1], &b.asks[len(b.asks)-1]
	if !b.slow {
		return bid.key.cmp(ask.key) >= 0
	}
	return bid.dec().Price.Cmp(ask.dec().Price) >= 0
}

// Top appends up to n levels of side s to dst, best first, and returns the
// extended slice; n <= 0 means all.
func (b *Book) Top(dst []Level, s BookSide, n int) []Level {
	p := *b.side(s)
	if n <= 0 || n > len(p) {
		n = len(p)
	}
	for i := len(p) - 1; i >= len(p)-n; i-- {
		dst = append(dst, p[i].dec())
	}
	return dst
}

// Level returns the i-th best level of side s (0 is the best); i must be
// below Len(s).
func (b *Book) Level(s BookSide, i int) Level {
	p := *b.side(s)
	return p[len(p)-1-i].dec()
}

// LevelFixed is Level in fixed point; false if the level has no fixed
// point form.
func (b *Book) LevelFixed(s BookSide, i int) (FixedLevel, bool) {
	p := *b.side(s)
	return p[len(p)-1-i].fix()
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
		dst = append(dst, Level{Price: (*p)[i].dec().Price})
	}
	*p = slices.Delete(*p, 0, extra)
	return dst
}

// TruncateFixed is Truncate in fixed point. It reports false, and
// truncates nothing, if a level to remove has no fixed point form (then
// the caller uses Truncate).
func (b *Book) TruncateFixed(dst []FixedLevel, s BookSide, depth int) ([]FixedLevel, bool) {
	p := b.side(s)
	extra := len(*p) - depth
	if depth < 0 || extra <= 0 {
		return dst, true
	}
	n := len(dst)
	for i := extra - 1; i >= 0; i-- {
		l, ok := (*p)[i].fix()
		if !ok {
			return dst[:n], false
		}
		dst = append(dst, FixedLevel{Price: l.Price})
	}
	*p = slices.Delete(*p, 0, extra)
	return dst, true
}

// Snapshot returns a snapshot event of the whole book for stream, with
// copies of the levels (best first) as decimals in Bids and Asks, so the
// event stays valid while the book changes. Seq, VenueSeq and the times
// are the caller's to set.
func (b *Book) Snapshot(stream Stream) *Event {
	return &Event{
		Kind:     KindBook,
		Stream:   stream,
		Snapshot: true,
		Bids:     b.Top(make([]Level, 0, len(b.bids)), Bid, 0),
		Asks:     b.Top(make([]Level, 0, len(b.asks)), Ask, 0),
	}
}

// SnapshotFixed is Snapshot with the levels in fixed point (FixedBids,
// FixedAsks) when every level has that form, which builds no decimal; else
// it is Snapshot.
func (b *Book) SnapshotFixed(stream Stream) *Event {
	ev := &Event{Kind: KindBook, Stream: stream, Snapshot: true}
	if fb, ok := b.topFixed(Bid); ok {
		if fa, ok := b.topFixed(Ask); ok && len(fb)+len(fa) > 0 {
			ev.FixedBids, ev.FixedAsks = fb, fa
			return ev
		}
	}
	return b.Snapshot(stream)
}

func (b *Book) topFixed(s BookSide) ([]FixedLevel, bool) {
	p := *b.side(s)
	if len(p) == 0 {
		return nil, true
	}
	out := make([]FixedLevel, 0, len(p))
	for i := len(p) - 1; i >= 0; i-- {
		l, ok := p[i].fix()
		if !ok {
			return nil, false
		}
		out = append(out, l)
	}
	return out, true
}

// Equal reports whether b and o hold the same levels with equal sizes.
func (b *Book) Equal(o *Book) bool {
	eq := func(x, y []level) bool {
		return slices.EqualFunc(x, y, func(a, c level) bool {
			if a.fixed && c.fixed {
				return a.px.Cmp(c.px) == 0 && a.sz.Cmp(c.sz) == 0
			}
			return a.dec().Price.Equal(c.dec().Price) && a.dec().Size.Equal(c.dec().Size)
		})
	}
	return eq(b.bids, o.bids) && eq(b.asks, o.asks)
}
