package venue

import (
	"math/bits"
	"slices"
	"unsafe"

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
// non-zero size. The zero Book is an empty book ready to use. Every
// adapter keeps its books in this type.
//
// Each side is a slice kept sorted worst price first and best price last,
// so the changes that dominate a live feed (levels near the top) insert and
// remove at the end of the slice and move little memory; a price is found
// by binary search.
//
// A side is its levels' keys in a []uint64 and, beside them, the indices
// of the slots holding their values: neither holds a pointer, so inserting
// and removing is a plain memmove with no GC write barriers, and a probe of
// the search reads an 8-byte key. The key is the
// price times 10^scale as a uint64, scale being the book's own (chosen on
// its first price to leave room for prices 100 times larger, and made
// finer when a finer price arrives and every key still fits), so a probe
// of the binary search is one integer compare; a price that fits no such
// scale turns the book wide until it empties: every key becomes the price
// at 10^-18 as a 128-bit integer, compared in two machine words (the high
// words in a third slice, kept only while the book is wide). A slot
// holds the price and size in fixed point (SetFixed, ReplaceFixed), or the
// index of their decimals (Set, Replace, or the cache of a fixed level's,
// built on the first read that hands one out) in a table apart, so that
// slots hold no pointer either; and, in a book that keeps text (KeepText),
// where the text the venue wrote for them is. A price
// that has no key (negative, more than 18 significant digits, finer than
// 1e-18) switches the book to decimal.Decimal.Cmp until Reset; no venue's
// spot prices do that.
//
// A Book is not safe for concurrent use.
type Book struct {
	bids ladder // ascending: best (highest) last
	asks ladder // descending: best (lowest) last
	slow bool   // some price has no key: compare decimals
	wide bool   // keys are 128-bit at 10^-18, not key.lo at 10^-scale
	// scale is the fraction digits of the keys while the book is not wide.
	scale uint8

	slots []slot  // the values of the levels, by level.slot
	free  []int32 // unused slots
	decs  []Level // the decimals of the slots that have them, by slot.dec-1
	dfree []int32 // unused entries of decs

	// The text of the levels, while KeepText is on: one arena per book
	// rather than a string per level (an allocation per update), appended
	// to and compacted into spare when most of it is dead.
	keepText    bool
	text, spare []byte
	dead        int // bytes of text no level refers to
}

// ladder is one side's levels, worst first: level i has key keys[i]
// (key.lo), his[i] (key.hi) while the book is wide, and values in slot
// slots[i]; his is empty while the book is not wide.
type ladder struct {
	keys  []uint64
	his   []uint64
	slots []int32
}

// insert puts a level with key k and slot n at index i. A live feed
// inserts near the best (the end), so a short move is a loop over both
// slices rather than a memmove call for each.
func (l *ladder) insert(i int, k priceKey, n int32, wide bool) {
	m := len(l.keys)
	if m == cap(l.keys) || m == cap(l.slots) {
		l.keys = slices.Grow(l.keys, 1)
		l.slots = slices.Grow(l.slots, 1)
	}
	keys, slots := l.keys[:m+1], l.slots[:m+1]
	if m-i <= 8 {
		for j := m; j > i; j-- {
			keys[j], slots[j] = keys[j-1], slots[j-1]
		}
	} else {
		copy(keys[i+1:], keys[i:m])
		copy(slots[i+1:], slots[i:m])
	}
	keys[i], slots[i] = k.lo, n
	l.keys, l.slots = keys, slots
	if wide {
		l.his = slices.Insert(l.his, i, k.hi)
	}
}

// push appends a level with key k and slot n (a new best).
func (l *ladder) push(k priceKey, n int32, wide bool) {
	l.keys = append(l.keys, k.lo)
	l.slots = append(l.slots, n)
	if wide {
		l.his = append(l.his, k.hi)
	}
}

// del removes the levels from index i to j; a short move is a loop, as in
// insert.
func (l *ladder) del(i, j int) {
	if len(l.his) > 0 {
		l.his = slices.Delete(l.his, i, j)
	}
	m := len(l.keys)
	n := m - (j - i)
	keys, slots := l.keys, l.slots[:m]
	if m-j <= 8 {
		for ; j < m; i, j = i+1, j+1 {
			keys[i], slots[i] = keys[j], slots[j]
		}
	} else {
		copy(keys[i:], keys[j:])
		copy(slots[i:], slots[j:])
	}
	l.keys, l.slots = keys[:n], slots[:n]
}

// key returns level i's key.
func (l *ladder) key(i int, wide bool) priceKey {
	if wide {
		return priceKey{l.his[i], l.keys[i]}
	}
	return priceKey{lo: l.keys[i]}
}

func (l *ladder) reset() {
	l.keys, l.his, l.slots = l.keys[:0], l.his[:0], l.slots[:0]
}

// slot holds one level's values, and no pointer (the GC does not scan a
// book's slots). A level set with decimals (Set, Replace) holds them in
// the book's decs at dec-1; one set in fixed point holds px and sz, and an
// entry of decs, once a read hands its decimals out, is their cache (have
// says which are built). txt, pl and sl place the price and size text in
// the book's arena (pl 0: none kept).
type slot struct {
	px, sz Fixed
	dec    int32 // 1 + index in Book.decs; 0: none
	fixed  bool
	have   uint8 // fixed levels: haveP | haveS
	txt    uint32
	pl, sl uint32
}

const (
	haveP = 1 << iota
	haveS
)

// newDec stores l in decs and returns its slot.dec.
func (b *Book) newDec(l Level) int32 {
	if n := len(b.dfree); n > 0 {
		i := b.dfree[n-1]
		b.dfree = b.dfree[:n-1]
		b.decs[i] = l
		return i + 1
	}
	b.decs = append(b.decs, l)
	return int32(len(b.decs))
}

// decOf returns p's decimals, building and caching those not built yet.
func (b *Book) decOf(p *slot) Level {
	if !p.fixed {
		return b.decs[p.dec-1]
	}
	if p.have != haveP|haveS {
		if p.dec == 0 {
			p.dec = b.newDec(Level{})
		}
		d := &b.decs[p.dec-1]
		if p.have&haveP == 0 {
			d.Price = p.px.Decimal()
		}
		if p.have&haveS == 0 {
			d.Size = p.sz.Decimal()
		}
		p.have = haveP | haveS
	}
	return b.decs[p.dec-1]
}

// fixOf returns p in fixed point, and false if it has none.
func (b *Book) fixOf(p *slot) (FixedLevel, bool) {
	if p.fixed {
		return FixedLevel{p.px, p.sz}, true
	}
	l := b.decs[p.dec-1]
	px, ok1 := FixedOf(l.Price)
	sz, ok2 := FixedOf(l.Size)
	return FixedLevel{px, sz}, ok1 && ok2
}

// LevelText is the text a venue wrote for a level's price and size, for
// the books whose venue computes a checksum over it (OKX).
type LevelText struct{ Price, Size []byte }

// ChangeKind says what a change did to a level.
type ChangeKind uint8

// What SetFixedText can do to a level.
const (
	Unchanged ChangeKind = iota // a removal of a price the side lacks
	Added                       // a new level: every rank from Rank on moved
	Removed                     // a level went: every rank from Rank on moved
	Resized                     // a new size (and text) at a level that stays
)

// Change is what a change did to its side: the level's rank (0 is the
// best) and, for Resized, the length of the level's text before it
// (price, size and one byte between them; 0 when none was kept), so that a
// checksum kept over the top of the book can be patched where it changed.
type Change struct {
	Kind    ChangeKind
	Rank    int
	OldText int
}

// priceKey is a non-negative price times 10^18, as a 128-bit integer; in
// a book that is not wide, hi is 0 and lo the price times 10^Book.scale.
type priceKey struct{ hi, lo uint64 }

var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

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

func (b *Book) side(s BookSide) *ladder {
	if s == Bid {
		return &b.bids
	}
	return &b.asks
}

// at returns slot n.
func (b *Book) at(n int32) *slot { return &b.slots[n] }

// key computes price's key, switching the book to slow comparison if it
// has none.
func (b *Book) key(price decimal.Decimal) priceKey {
	f, ok := FixedOf(price)
	var k priceKey
	if ok {
		k, ok = b.fixedKey(f)
	}
	if !ok {
		b.slow = true
	}
	return k
}

// fixedKey returns f's key in the book's form, and false if f has none
// (negative, or finer than 10^-18). A price that does not fit the scale
// first rescales or widens the book's keys (refit).
func (b *Book) fixedKey(f Fixed) (priceKey, bool) {
	if lo, ok := b.narrowKey(f); ok {
		return priceKey{lo: lo}, true
	}
	return b.refit(f)
}

// narrowKey is fixedKey's common case, small enough to inline: f's key
// (key.lo) in a book that is neither slow nor wide, and false if f does not
// fit the scale as it is.
func (b *Book) narrowKey(f Fixed) (uint64, bool) {
	if b.slow || b.wide || f.Scale > b.scale || f.M < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(f.M), pow10[b.scale-f.Scale])
	return lo, hi == 0
}

// refit is fixedKey for a price that does not fit the book's keys as they
// are: an empty book takes a scale that fits it; a finer price makes the
// scale finer if every key still fits; anything else widens the book.
func (b *Book) refit(f Fixed) (priceKey, bool) {
	if f.M < 0 || f.Scale > MaxScale {
		return priceKey{}, false
	}
	if len(b.bids.keys)+len(b.asks.keys) == 0 {
		b.wide, b.scale = false, scaleFor(f)
	}
	if b.wide {
		return f.key()
	}
	for f.Scale > b.scale && f.M%10 == 0 { // trailing zeros: the same price
		f.M /= 10
		f.Scale--
	}
	if f.Scale <= b.scale || b.rescale(f.Scale) {
		if hi, lo := bits.Mul64(uint64(f.M), pow10[b.scale-f.Scale]); hi == 0 {
			return priceKey{lo: lo}, true
		}
	}
	b.widen()
	return f.key()
}

// scaleFor returns the scale for a book's first price f: as fine as keeps
// 100·f below 10^18 (and so in a uint64), at least f's own and at most
// MaxScale.
func scaleFor(f Fixed) uint8 {
	intDigits := numDigits(uint64(f.M)) - int(f.Scale)
	return uint8(min(max(16-max(intDigits, 0), int(f.Scale)), MaxScale))
}

// rescale makes scale the book's (finer than its own) and reports true,
// or changes nothing and reports false if some key would not fit.
func (b *Book) rescale(scale uint8) bool {
	m := pow10[scale-b.scale]
	for _, keys := range [2][]uint64{b.bids.keys, b.asks.keys} {
		for _, k := range keys {
			if hi, _ := bits.Mul64(k, m); hi != 0 {
				return false
			}
		}
	}
	for _, keys := range [2][]uint64{b.bids.keys, b.asks.keys} {
		for i := range keys {
			keys[i] *= m
		}
	}
	b.scale = scale
	return true
}

// widen turns every key into its 128-bit form at 10^-18.
func (b *Book) widen() {
	m := pow10[MaxScale-b.scale]
	for _, l := range [2]*ladder{&b.bids, &b.asks} {
		l.his = l.his[:0]
		for i := range l.keys {
			hi, lo := bits.Mul64(l.keys[i], m)
			l.keys[i] = lo
			l.his = append(l.his, hi)
		}
	}
	b.wide = true
}

// search returns the index of price (whose key is k) in levels (worst
// first), and whether it is there; if not, the index where it would be
// inserted. A slow book compares the decimals, any other the keys.
func (b *Book) search(s BookSide, levels *ladder, price decimal.Decimal, k priceKey) (int, bool) {
	if !b.slow {
		return b.searchKey(s, levels, k)
	}
	lo, hi := 0, len(levels.slots)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c := b.decAt(levels.slots[m]).Price.Cmp(price)
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
func (b *Book) searchKey(s BookSide, levels *ladder, k priceKey) (int, bool) {
	if b.wide {
		return searchWide(s, levels, k)
	}
	return searchNarrow(s, levels.keys, k.lo)
}

// searchNarrow is searchKey for a book that is not wide: a lower bound with
// one uint64 compare per probe, the equality tested once at the end. A
// probe m lies in [lo, hi) within keys, so it reads keys[m] through base
// without the bounds check.
func searchNarrow(s BookSide, keys []uint64, k uint64) (int, bool) {
	base := unsafe.Pointer(unsafe.SliceData(keys))
	at := func(m int) uint64 { return *(*uint64)(unsafe.Add(base, uintptr(m)*8)) }
	lo, hi := 0, len(keys)
	if s == Bid { // ascending: the first level not below k
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if at(m) < k {
				lo = m + 1
			} else {
				hi = m
			}
		}
	} else { // descending: the first level not above k
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if k < at(m) {
				lo = m + 1
			} else {
				hi = m
			}
		}
	}
	return lo, lo < len(keys) && keys[lo] == k
}

// searchWide is searchKey for a wide book: a lower bound with one
// branch-free 128-bit compare per probe, the equality tested once at the
// end.
func searchWide(s BookSide, levels *ladder, k priceKey) (int, bool) {
	lo, hi := 0, len(levels.keys)
	if s == Bid { // ascending: the first level not below k
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if levels.key(m, true).less(k) {
				lo = m + 1
			} else {
				hi = m
			}
		}
	} else { // descending: the first level not above k
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if k.less(levels.key(m, true)) {
				lo = m + 1
			} else {
				hi = m
			}
		}
	}
	return lo, lo < len(levels.keys) && levels.key(lo, true) == k
}

// less reports whether k is below o, by a 128-bit subtraction's borrow.
func (k priceKey) less(o priceKey) bool {
	_, borrow := bits.Sub64(k.lo, o.lo, 0)
	_, borrow = bits.Sub64(k.hi, o.hi, borrow)
	return borrow != 0
}

// newSlot returns a cleared slot's index.
func (b *Book) newSlot() int32 {
	if n := len(b.free); n > 0 {
		i := b.free[n-1]
		b.free = b.free[:n-1]
		return i
	}
	b.slots = append(b.slots, slot{})
	return int32(len(b.slots) - 1)
}

// freeSlot gives slot n (and its text) back.
func (b *Book) freeSlot(n int32) {
	p := b.at(n)
	if p.pl != 0 {
		b.dropText(p)
	}
	if p.dec != 0 {
		b.decs[p.dec-1] = Level{} // let the decimals go
		b.dfree = append(b.dfree, p.dec-1)
	}
	*p = slot{}
	b.free = append(b.free, n)
}

// remove deletes the level at index i of side p.
func (b *Book) remove(p *ladder, i int) {
	b.freeSlot(p.slots[i])
	p.del(i, i+1)
}

// Set puts an absolute size at price on side s; a zero size removes the
// level. It reports whether the book changed.
func (b *Book) Set(s BookSide, price, size decimal.Decimal) bool {
	k := b.key(price)
	p := b.side(s)
	i, found := b.search(s, p, price, k)
	if size.IsZero() {
		if !found {
			return false
		}
		b.remove(p, i)
		return true
	}
	if found {
		l := b.at(p.slots[i])
		if l.pl != 0 {
			b.dropText(l)
			l.pl = 0
		}
		price := b.decOf(l).Price
		if l.dec == 0 {
			l.dec = b.newDec(Level{})
		}
		b.decs[l.dec-1] = Level{Price: price, Size: size}
		l.fixed = false
		return true
	}
	n := b.newSlot()
	d := b.newDec(Level{Price: price, Size: size})
	*b.at(n) = slot{dec: d}
	p.insert(i, k, n, b.wide)
	return true
}

// SetFixed is Set in fixed point: it builds no decimal (and allocates
// nothing unless the book grows past its capacity) when price has a key,
// which every venue's spot price has.
func (b *Book) SetFixed(s BookSide, price, size Fixed) bool {
	return b.setFixed(s, price, size, nil).Kind != Unchanged
}

// SetFixedText is SetFixed that also keeps t as the level's text when the
// book keeps text (KeepText), and says what it changed.
func (b *Book) SetFixedText(s BookSide, price, size Fixed, t LevelText) Change {
	return b.setFixed(s, price, size, &t)
}

// setFixed is SetFixedText with the text by pointer (nil: none), so that
// its arguments fit the registers.
func (b *Book) setFixed(s BookSide, price, size Fixed, t *LevelText) Change {
	p := b.side(s)
	var k priceKey
	var i int
	var found bool
	if lo, ok := b.narrowKey(price); ok {
		k = priceKey{lo: lo}
		i, found = searchNarrow(s, p.keys, lo)
	} else {
		if !b.slow {
			k, ok = b.fixedKey(price)
		}
		if !ok {
			return b.setSlow(s, price, size)
		}
		i, found = b.searchKey(s, p, k)
	}
	rank := len(p.keys) - 1 - i
	if size.IsZero() {
		if !found {
			return Change{}
		}
		b.remove(p, i)
		return Change{Kind: Removed, Rank: rank}
	}
	if found {
		l := b.at(p.slots[i])
		old := 0
		if l.pl != 0 {
			old = int(l.pl) + 1 + int(l.sl)
			b.dropText(l)
		}
		if !l.fixed {
			l.px, l.have = price, haveP // l.Price stays: an equal price
		}
		l.sz, l.fixed = size, true
		l.have &^= haveS
		b.addText(l, t)
		return Change{Kind: Resized, Rank: rank, OldText: old}
	}
	n := b.newSlot()
	l := b.at(n)
	l.px, l.sz, l.fixed = price, size, true
	b.addText(l, t)
	p.insert(i, k, n, b.wide)
	return Change{Kind: Added, Rank: rank + 1}
}

// setSlow is SetFixedText for a price with no key or a slow book, through
// decimals; it keeps no text.
func (b *Book) setSlow(s BookSide, price, size Fixed) Change {
	pd := price.Decimal()
	p := b.side(s)
	i, found := b.search(s, p, pd, b.key(pd))
	rank := len(p.keys) - 1 - i
	if !b.Set(s, pd, size.Decimal()) {
		return Change{}
	}
	switch {
	case size.IsZero():
		return Change{Kind: Removed, Rank: rank}
	case found:
		return Change{Kind: Resized, Rank: rank}
	}
	return Change{Kind: Added, Rank: rank + 1}
}

// KeepText sets whether the book keeps the text given to SetFixedText and
// ReplaceFixedText. It takes effect for the levels set from then on; call
// it after Reset.
func (b *Book) KeepText(on bool) { b.keepText = on }

// addText records t as l's text, if the book keeps text and t is not nil.
func (b *Book) addText(l *slot, t *LevelText) {
	if !b.keepText || t == nil || len(t.Price) == 0 {
		l.pl = 0
		return
	}
	l.txt, l.pl, l.sl = uint32(len(b.text)), uint32(len(t.Price)), uint32(len(t.Size))
	b.text = append(b.text, t.Price...)
	b.text = append(b.text, ':') // AppendLevelText hands out "price:size" whole
	b.text = append(b.text, t.Size...)
}

// dropText marks l's text dead, compacting the arena when most of it is.
func (b *Book) dropText(l *slot) {
	b.dead += int(l.pl) + 1 + int(l.sl)
	l.pl = 0
	if b.dead > 4096 && b.dead > len(b.text)/2 {
		b.compact()
	}
}

// compact copies the live texts to the spare arena and swaps the two.
func (b *Book) compact() {
	out := b.spare[:0]
	for _, slots := range [2][]int32{b.bids.slots, b.asks.slots} {
		for _, n := range slots {
			p := b.at(n)
			if p.pl == 0 {
				continue
			}
			off := len(out)
			out = append(out, b.text[p.txt:p.txt+p.pl+1+p.sl]...)
			p.txt = uint32(off)
		}
	}
	b.spare, b.text, b.dead = b.text[:0], out, 0
}

// LevelText returns the text kept for the i-th best level of side s (0 is
// the best), and false if none is kept; i must be below Len(s).
func (b *Book) LevelText(s BookSide, i int) (LevelText, bool) {
	p := b.side(s)
	l := b.at(p.slots[len(p.slots)-1-i])
	if l.pl == 0 {
		return LevelText{}, false
	}
	end := l.txt + l.pl
	return LevelText{Price: b.text[l.txt:end], Size: b.text[end+1 : end+1+l.sl]}, true
}

// AppendLevelText appends the text kept for the i-th best level of side s
// as price, ':' and size (OKX's checksum form), and false (dst unchanged)
// if none is kept; i must be below Len(s).
func (b *Book) AppendLevelText(dst []byte, s BookSide, i int) ([]byte, bool) {
	p := b.side(s)
	l := b.at(p.slots[len(p.slots)-1-i])
	if l.pl == 0 {
		return dst, false
	}
	return append(dst, b.text[l.txt:l.txt+l.pl+1+l.sl]...), true
}

// Get returns the size at price on side s, and whether the level exists.
func (b *Book) Get(s BookSide, price decimal.Decimal) (decimal.Decimal, bool) {
	p := b.side(s)
	i, found := b.search(s, p, price, b.key(price))
	if !found {
		return decimal.Decimal{}, false
	}
	return b.decAt(p.slots[i]).Size, true
}

// Reset empties the book, keeping its memory and its KeepText setting.
func (b *Book) Reset() {
	b.bids.reset()
	b.asks.reset()
	b.slow, b.wide = false, false
	clear(b.decs) // let the decimals go
	b.decs, b.dfree = b.decs[:0], b.dfree[:0]
	b.slots, b.free = b.slots[:0], b.free[:0]
	b.text, b.dead = b.text[:0], 0
}

// Replace makes bids and asks the whole book, in any order; levels of size
// zero are ignored and a price given twice keeps its last size.
func (b *Book) Replace(bids, asks []Level) {
	b.Reset()
	b.fill(Bid, bids)
	b.fill(Ask, asks)
}

func (b *Book) fill(s BookSide, src []Level) {
	// Venues send snapshots best first; reversing that is the common case
	// and is linear. Anything else falls back to Set per level.
	sorted := true
	for i := 1; i < len(src) && sorted; i++ {
		sorted = better(s, src[i-1].Price, src[i].Price)
	}
	if !sorted {
		for _, l := range src {
			b.Set(s, l.Price, l.Size)
		}
		return
	}
	p := b.side(s)
	for i := len(src) - 1; i >= 0; i-- {
		if !src[i].Size.IsZero() {
			k := b.key(src[i].Price) // may rescale the levels so far
			n := b.newSlot()
			d := b.newDec(src[i])
			*b.at(n) = slot{dec: d}
			p.push(k, n, b.wide)
		}
	}
}

// ReplaceFixed is Replace in fixed point.
func (b *Book) ReplaceFixed(bids, asks []FixedLevel) { b.ReplaceFixedText(bids, asks, nil, nil) }

// ReplaceFixedText is ReplaceFixed that also keeps each level's text, when
// the book keeps text: bidText[i] is the text of bids[i] (nil: none).
func (b *Book) ReplaceFixedText(bids, asks []FixedLevel, bidText, askText []LevelText) {
	b.Reset()
	b.fillFixed(Bid, bids, bidText)
	b.fillFixed(Ask, asks, askText)
}

func (b *Book) fillFixed(s BookSide, src []FixedLevel, txt []LevelText) {
	text := func(i int) *LevelText {
		if txt == nil {
			return nil
		}
		return &txt[i]
	}
	if !sortedBestFirst(s, src) {
		for i := range src {
			b.setFixed(s, src[i].Price, src[i].Size, text(i))
		}
		return
	}
	p := b.side(s)
	for i := len(src) - 1; i >= 0; i-- {
		if i = b.pushNarrow(p, src, txt, i); i < 0 {
			break
		}
		b.pushLevel(p, &src[i], text(i))
	}
}

// sortedBestFirst reports whether src's prices are strictly best first for
// side s, the order in which venues send snapshots.
func sortedBestFirst(s BookSide, src []FixedLevel) bool {
	for i := 1; i < len(src); i++ {
		a, c := src[i-1].Price, src[i].Price // want a better than c
		if s == Ask {
			a, c = c, a
		}
		if a.Scale == c.Scale { // Cmp's own first case, here because Cmp is too large to inline
			if a.M <= c.M {
				return false
			}
		} else if a.Cmp(c) <= 0 {
			return false
		}
	}
	return true
}

// pushNarrow pushes src[i], src[i-1], ... onto p (worst first) while each
// price fits the book's narrow keys as they are, and returns the index of
// the first level it did not push (-1: none left). It runs after Reset, so
// the book has no free slot and the new slots are appended in order. It
// writes into the three slices grown by i+1 rather than appending (no
// capacity check a level) and cuts them to what it pushed.
func (b *Book) pushNarrow(p *ladder, src []FixedLevel, txt []LevelText, i int) int {
	if b.slow || b.wide || len(b.free) > 0 || i < 0 {
		return i
	}
	nk, ns := len(p.keys), len(b.slots)
	p.keys, p.slots = slices.Grow(p.keys, i+1), slices.Grow(p.slots, i+1)
	b.slots = slices.Grow(b.slots, i+1)
	keys, idx, slots := p.keys[nk:nk+i+1], p.slots[nk:nk+i+1], b.slots[ns:ns+i+1]
	scale, j, top := b.scale, 0, i
	for ; i >= 0; i-- {
		l := &src[i]
		if l.Size.M == 0 {
			continue
		}
		if l.Price.Scale > scale || l.Price.M < 0 {
			break
		}
		hi, lo := bits.Mul64(uint64(l.Price.M), pow10[scale-l.Price.Scale])
		if hi != 0 || j >= len(keys) || j >= len(idx) || j >= len(slots) {
			break
		}
		keys[j], idx[j] = lo, int32(ns+j)
		// Field by field (a literal is built on the stack and copied); txt
		// and sl mean nothing while pl is 0.
		sl := &slots[j]
		sl.px, sl.sz, sl.dec, sl.fixed, sl.have, sl.pl = l.Price, l.Size, 0, true, 0, 0
		j++
	}
	if txt != nil { // the texts in a pass of their own, which keeps the loop above in registers
		for k, n := top, 0; k > i; k-- {
			if src[k].Size.M != 0 {
				b.addText(&slots[n], &txt[k])
				n++
			}
		}
	}
	p.keys, p.slots, b.slots = p.keys[:nk+j], p.slots[:nk+j], b.slots[:ns+j]
	return i
}

// pushLevel pushes l onto p (unless its size is zero) when pushNarrow
// cannot: its key rescales or widens the book, or it has none and the book
// turns slow.
func (b *Book) pushLevel(p *ladder, l *FixedLevel, t *LevelText) {
	if l.Size.IsZero() {
		return
	}
	var k priceKey
	ok := l.Price.M >= 0 && l.Price.Scale <= MaxScale // it has a key
	if lo, narrow := b.narrowKey(l.Price); narrow {
		k = priceKey{lo: lo}
	} else if ok && !b.slow {
		k, _ = b.fixedKey(l.Price) // may rescale the levels so far
	}
	n := b.newSlot()
	sl := b.at(n)
	if !ok {
		b.slow = true
		d := b.newDec(l.Level())
		*sl = slot{dec: d}
	} else {
		sl.px, sl.sz, sl.fixed = l.Price, l.Size, true
		b.addText(sl, t)
	}
	p.push(k, n, b.wide)
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
func (b *Book) Len(s BookSide) int { return len(b.side(s).slots) }

// Best returns the best level of side s, and false if the side is empty.
func (b *Book) Best(s BookSide) (Level, bool) {
	p := b.side(s).slots
	if len(p) == 0 {
		return Level{}, false
	}
	return b.decAt(p[len(p)-1]), true
}

// decAt returns l's decimals, caching them.
func (b *Book) decAt(n int32) Level { return b.decOf(b.at(n)) }

// BestFixed returns the best level of side s in fixed point, and false if
// the side is empty or the level has no fixed point form.
func (b *Book) BestFixed(s BookSide) (FixedLevel, bool) {
	p := b.side(s).slots
	if len(p) == 0 {
		return FixedLevel{}, false
	}
	return b.fixOf(b.at(p[len(p)-1]))
}

// Crossed reports whether the best bid is at or above the best ask, which a
// correct book never is. The common case (narrow keys) compares the two
// best keys; crossedSlow is the rest, apart so that this one stays small.
func (b *Book) Crossed() bool {
	bk, ak := b.bids.keys, b.asks.keys
	if len(bk) == 0 || len(ak) == 0 {
		return false
	}
	if b.slow || b.wide {
		return b.crossedSlow()
	}
	return bk[len(bk)-1] >= ak[len(ak)-1]
}

// crossedSlow is Crossed for a slow or wide book with both sides non-empty.
func (b *Book) crossedSlow() bool {
	nb, na := len(b.bids.keys)-1, len(b.asks.keys)-1
	if b.slow {
		return b.decAt(b.bids.slots[nb]).Price.Cmp(b.decAt(b.asks.slots[na]).Price) >= 0
	}
	return b.bids.key(nb, true).cmp(b.asks.key(na, true)) >= 0
}

// Top appends up to n levels of side s to dst, best first, and returns the
// extended slice; n <= 0 means all.
func (b *Book) Top(dst []Level, s BookSide, n int) []Level {
	p := b.side(s).slots
	if n <= 0 || n > len(p) {
		n = len(p)
	}
	for i := len(p) - 1; i >= len(p)-n; i-- {
		dst = append(dst, b.decAt(p[i]))
	}
	return dst
}

// Level returns the i-th best level of side s (0 is the best); i must be
// below Len(s).
func (b *Book) Level(s BookSide, i int) Level {
	p := b.side(s).slots
	return b.decAt(p[len(p)-1-i])
}

// LevelFixed is Level in fixed point; false if the level has no fixed
// point form.
func (b *Book) LevelFixed(s BookSide, i int) (FixedLevel, bool) {
	p := b.side(s).slots
	return b.fixOf(b.at(p[len(p)-1-i]))
}

// Truncate removes every level of side s beyond the best depth and appends
// each removed level to dst with size zero (best first), returning the
// extended slice. Venues whose books are depth-limited (Kraken) drop such
// levels without saying so; the removals let a consumer of our updates do
// the same.
func (b *Book) Truncate(dst []Level, s BookSide, depth int) []Level {
	p := b.side(s)
	extra := len(p.slots) - depth
	if depth < 0 || extra <= 0 {
		return dst
	}
	for i := extra - 1; i >= 0; i-- {
		dst = append(dst, Level{Price: b.decAt(p.slots[i]).Price})
	}
	b.drop(p, extra)
	return dst
}

// drop removes the worst n levels of side p.
func (b *Book) drop(p *ladder, n int) {
	for _, sl := range p.slots[:n] {
		b.freeSlot(sl)
	}
	p.del(0, n)
}

// TruncateFixed is Truncate in fixed point. It reports false, and
// truncates nothing, if a level to remove has no fixed point form (then
// the caller uses Truncate).
func (b *Book) TruncateFixed(dst []FixedLevel, s BookSide, depth int) ([]FixedLevel, bool) {
	p := b.side(s)
	extra := len(p.slots) - depth
	if depth < 0 || extra <= 0 {
		return dst, true
	}
	n := len(dst)
	for i := extra - 1; i >= 0; i-- {
		l, ok := b.fixOf(b.at(p.slots[i]))
		if !ok {
			return dst[:n], false
		}
		dst = append(dst, FixedLevel{Price: l.Price})
	}
	b.drop(p, extra)
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
		Bids:     b.Top(make([]Level, 0, len(b.bids.slots)), Bid, 0),
		Asks:     b.Top(make([]Level, 0, len(b.asks.slots)), Ask, 0),
	}
}

// SnapshotFixed is Snapshot with the levels in fixed point (FixedBids,
// FixedAsks) when every level has that form, which builds no decimal; else
// it is Snapshot.
func (b *Book) SnapshotFixed(stream Stream) *Event {
	ev := &Event{Kind: KindBook, Stream: stream, Snapshot: true}
	if nb, n := len(b.bids.slots), len(b.bids.slots)+len(b.asks.slots); n > 0 {
		out := make([]FixedLevel, n)
		if b.topFixed(out[:nb], Bid) && b.topFixed(out[nb:], Ask) {
			ev.FixedBids, ev.FixedAsks = out[:nb:nb], out[nb:]
			return ev
		}
	}
	return b.Snapshot(stream)
}

// topFixed writes the levels of side s into dst, which has one entry a
// level, best first; false if a level has no fixed point form.
func (b *Book) topFixed(dst []FixedLevel, s BookSide) bool {
	p := b.side(s).slots
	dst = dst[:len(p)]
	for i, n := range p {
		sl := &b.slots[n]
		l := FixedLevel{sl.px, sl.sz}
		if !sl.fixed {
			var ok bool
			if l, ok = b.fixOf(sl); !ok {
				return false
			}
		}
		dst[len(p)-1-i] = l
	}
	return true
}

// Equal reports whether b and o hold the same levels with equal sizes.
func (b *Book) Equal(o *Book) bool {
	eq := func(x, y []int32) bool {
		return slices.EqualFunc(x, y, func(a, c int32) bool {
			if pa, pc := b.at(a), o.at(c); pa.fixed && pc.fixed {
				return pa.px.Cmp(pc.px) == 0 && pa.sz.Cmp(pc.sz) == 0
			}
			da, dc := b.decAt(a), o.decAt(c)
			return da.Price.Equal(dc.Price) && da.Size.Equal(dc.Size)
		})
	}
	return eq(b.bids.slots, o.bids.slots) && eq(b.asks.slots, o.asks.slots)
}
