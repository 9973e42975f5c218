package okx

import (
	"hash/crc32"
	"slices"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/scan"
	"github.com/fanoutd/fanoutd/venue"
)

// level is one price level of the decoder's book. Prices are kept as an
// integer key in units of 10^-scale of the book, so search and ordering
// never touch big.Int. The size lives apart, in the book's vals at slot: a
// level holds no pointer, so inserting and deleting in the sorted slice is
// a plain memmove (with decimals inline, the GC write barriers on every
// moved pointer took half the decode time).
type level struct {
	key  int64
	slot int32  // index of the level's decimals in book.vals
	txt  uint32 // offset of "price:size", as OKX wrote them, in the book's text
	tl   uint32 // its length; 0 when the book keeps no text
}

// vals are a level's size as OKX wrote it, in fixed point, or in big when
// it is too long for that. (The price is the level's key at the book's
// scale.)
type vals struct {
	sz  venue.Fixed
	big *decimal.Decimal
}

// decimal returns the size as a decimal.
func (v *vals) decimal() decimal.Decimal {
	if v.big != nil {
		return *v.big
	}
	return v.sz.Decimal()
}

// side is one side of a book, worst price first and best last (like
// venue.Book), so changes near the top move little memory.
type side struct {
	bid bool
	lv  []level
}

// find returns the index of key, and whether it is there; if not, where it
// would be inserted.
func (s *side) find(key int64) (int, bool) {
	lo, hi := 0, len(s.lv)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k := s.lv[m].key
		if k == key {
			return m, true
		}
		if (k < key) == s.bid { // lv[m] is worse than key
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, false
}

// best returns the i-th best level (0 is the best).
func (s *side) best(i int) *level { return &s.lv[len(s.lv)-1-i] }

// book is an OKX order book as the decoder keeps it: exact, keyed by
// integer price, with the original text of every level while the venue
// sends checksums.
//
// The text lives in one arena per book rather than a string per level: a
// string per level would cost an allocation per update; the arena is
// appended to and compacted when most of it is dead, so it costs none in
// the steady state. Without checksums (OKX sends 0) the text is not kept
// at all: keepText follows the snapshot's checksum.
type book struct {
	scale      int32 // price decimals of every key and px
	bids, asks side
	keepText   bool
	text       []byte  // arena of level texts
	spare      []byte  // the other arena, reused by compaction
	dead       int     // bytes of text no level refers to
	vals       []vals  // sizes of the levels, by slot
	free       []int32 // unused slots of vals
	nbig       int     // vals with a big size

	// The checksum string as of the last checksum, where each pair of
	// levels starts in it, the CRC state at every csBlock bytes of it, its
	// CRC, and the first rank (on either side) that may have changed
	// since: checksum rebuilds and rehashes only from there.
	cstr    []byte
	coff    [checksumDepth]int32
	cst     []uint32 // cst[j] is the CRC of cstr[:j*csBlock]
	csSum   uint32
	csDirty int
	csFrom  int // first byte of cstr patched since (noPatch when none)
}

const noPatch = 1 << 30

// touch records that the level at rank (0 is the best) changed, appeared
// or went, which moves every rank after it.
func (b *book) touch(rank int) {
	if rank < b.csDirty {
		b.csDirty = rank
	}
}

// patch records a new size (and text) at an existing level of rank whose
// text in cstr was oldLen bytes long: while cstr still holds that rank,
// the new text replaces the old in place, and only the hash is redone
// from there; otherwise it is a touch.
func (b *book) patch(bid bool, rank, oldLen int) {
	if rank >= b.csDirty {
		return // not in the top 25, or rebuilt from an earlier rank anyway
	}
	if oldLen == 0 || !b.keepText {
		b.touch(rank)
		return
	}
	pos := int(b.coff[rank])
	if rank > 0 {
		pos++ // the ':' before the pair
	}
	if !bid && rank < len(b.bids.lv) {
		pos += int(b.bids.best(rank).tl) + 1 // the bid at rank, and ':'
	}
	l := b.side(bid).best(rank)
	txt := b.text[l.txt : l.txt+l.tl]
	if d := len(txt) - oldLen; d != 0 {
		end, n := pos+oldLen, len(b.cstr)
		if d > 0 {
			b.cstr = slices.Grow(b.cstr, d)[:n+d]
		}
		copy(b.cstr[end+d:], b.cstr[end:n]) // what follows, moved
		b.cstr = b.cstr[:n+d]
		for j := rank + 1; j < checksumDepth; j++ {
			b.coff[j] += int32(d)
		}
	}
	copy(b.cstr[pos:], txt)
	b.csFrom = min(b.csFrom, pos)
}

// newSlot stores sz and returns its slot.
func (b *book) newSlot(sz vals) int32 {
	if sz.big != nil {
		b.nbig++
	}
	if n := len(b.free); n > 0 {
		s := b.free[n-1]
		b.free = b.free[:n-1]
		b.vals[s] = sz
		return s
	}
	b.vals = append(b.vals, sz)
	return int32(len(b.vals) - 1)
}

func (b *book) freeSlot(s int32) {
	if b.vals[s].big != nil {
		b.nbig--
	}
	b.vals[s] = vals{} // let a big size go
	b.free = append(b.free, s)
}

// price returns the price of key in fixed point.
func (b *book) price(key int64) venue.Fixed { return venue.Fixed{M: key, Scale: uint8(b.scale)} }

func newBook() *book { return &book{bids: side{bid: true}, csFrom: noPatch} }

func (b *book) side(bid bool) *side {
	if bid {
		return &b.bids
	}
	return &b.asks
}

// reset empties the book, keeping its memory.
func (b *book) reset(scale int32, keepText bool) {
	b.scale, b.keepText = scale, keepText
	b.bids.lv, b.asks.lv = b.bids.lv[:0], b.asks.lv[:0]
	b.text, b.dead = b.text[:0], 0
	clear(b.vals)
	b.vals, b.free, b.nbig = b.vals[:0], b.free[:0], 0
	b.csDirty, b.csFrom, b.cst = 0, noPatch, b.cst[:0]
}

// maxKey is the largest price key in magnitude (keys are never negative).
func (b *book) maxKey() int64 {
	var m int64
	if n := len(b.bids.lv); n > 0 {
		m = b.bids.lv[n-1].key // best bid is the highest
	}
	if len(b.asks.lv) > 0 {
		m = max(m, b.asks.lv[0].key) // worst ask is the highest
	}
	return m
}

// canRescale reports whether every key fits at scale to.
func (b *book) canRescale(to int32) bool {
	if to <= b.scale {
		return true
	}
	_, ok := scan.ScaleUp(b.maxKey(), int(to-b.scale))
	return ok
}

// rescale moves every key to scale to (> b.scale); canRescale must have
// said yes. It happens only when a price arrives with more decimals than
// any before.
func (b *book) rescale(to int32) {
	if to <= b.scale {
		return
	}
	p := scan.Pow10(int(to - b.scale))
	for _, s := range []*side{&b.bids, &b.asks} {
		for i := range s.lv {
			s.lv[i].key *= p
		}
	}
	b.scale = to
	b.csDirty = 0 // formatted prices (no kept text) may change
}

// addText appends "px:sz" to the arena and returns its offset and length.
func (b *book) addText(px, sz []byte) (uint32, uint32) {
	if !b.keepText {
		return 0, 0
	}
	off := len(b.text)
	b.text = append(b.text, px...)
	b.text = append(b.text, ':')
	b.text = append(b.text, sz...)
	return uint32(off), uint32(len(b.text) - off)
}

func (b *book) dropText(l *level) {
	b.dead += int(l.tl)
	if b.dead > 4096 && b.dead > len(b.text)/2 {
		b.compact(l)
	}
}

// compact copies the live texts to the spare arena and swaps the two;
// skip's text is dead already.
func (b *book) compact(skip *level) {
	out := b.spare[:0]
	for _, s := range []*side{&b.bids, &b.asks} {
		for i := range s.lv {
			l := &s.lv[i]
			if l == skip || l.tl == 0 {
				continue
			}
			off := len(out)
			out = append(out, b.text[l.txt:l.txt+l.tl]...)
			l.txt = uint32(off)
		}
	}
	if skip != nil {
		skip.tl = 0
	}
	b.spare, b.text, b.dead = b.text[:0], out, 0
}

// set puts size sz (non-zero) at key.
func (b *book) set(bid bool, key int64, sz vals, pxText, szText []byte) {
	s := b.side(bid)
	i, found := s.find(key)
	if found {
		rank := len(s.lv) - 1 - i
		l := &s.lv[i]
		oldLen := l.tl
		if l.tl != 0 {
			b.dropText(l)
		}

		v := &b.vals[l.slot]
		if v.big != nil {
			b.nbig--
		}
		if sz.big != nil {
			b.nbig++
		}
		*v = sz
		l.txt, l.tl = b.addText(pxText, szText)
		b.patch(bid, rank, int(oldLen))
		return
	}
	b.touch(len(s.lv) - i)
	off, n := b.addText(pxText, szText)
	s.lv = slices.Insert(s.lv, i, level{key: key, slot: b.newSlot(sz), txt: off, tl: n})
}

// fill appends levels that are already in order, best first and without
// zero sizes, as a snapshot sends them; it reports false (and changes
// nothing) if they are not strictly ordered.
func (b *book) fill(bid bool, ls []rawLevel) bool {
	s := b.side(bid)
	if len(s.lv) != 0 {
		return false
	}
	for i := 1; i < len(ls); i++ {
		k0, _ := scan.ScaleUp(ls[i-1].pm, int(b.scale-ls[i-1].pf))
		k1, _ := scan.ScaleUp(ls[i].pm, int(b.scale-ls[i].pf))
		if (k1 < k0) != bid || k1 == k0 || ls[i].zero() || ls[0].zero() {
			return false
		}
	}
	b.csDirty = 0
	s.lv = slices.Grow(s.lv, len(ls))[:len(ls)]
	for i := range ls {
		l := &ls[i]
		key, _ := scan.ScaleUp(l.pm, int(b.scale-l.pf))
		off, n := b.addText(l.px, l.sz)
		s.lv[len(ls)-1-i] = level{key: key, slot: b.newSlot(l.vals()), txt: off, tl: n}
	}
	return true
}

// remove deletes the level at key if present.
func (b *book) remove(bid bool, key int64) {
	s := b.side(bid)
	i, found := s.find(key)
	if !found {
		return
	}
	b.touch(len(s.lv) - 1 - i)
	l := &s.lv[i]
	if l.tl != 0 {
		b.dropText(l)
	}
	b.freeSlot(l.slot)
	s.lv = slices.Delete(s.lv, i, i+1)
}

// crossed reports whether the best bid is at or above the best ask.
func (b *book) crossed() bool {
	nb, na := len(b.bids.lv), len(b.asks.lv)
	return nb > 0 && na > 0 && b.bids.lv[nb-1].key >= b.asks.lv[na-1].key
}

// checksumDepth is how many levels per side OKX's checksum covers.
const checksumDepth = 25

// csBlock is the stride of the kept CRC states: long enough for the CLMUL
// path of hash/crc32 (64 bytes and more), short enough that little is
// rehashed before the first change (128 and 64 measured no better).
const csBlock = 256

// checksum returns the signed CRC32 of OKX's checksum string — bid:ask
// pairs interleaved best first over the top 25 of each side, the longer
// side continuing alone. Without kept text (the snapshot came with no
// checksum) it formats the decimals, which matches OKX's own text whenever
// OKX writes no trailing zeros.
//
// The string is a function of the top 25 levels of each side, and every
// change to them goes through set, remove, fill, reset or rescale, which
// lower csDirty to the first rank they touch: the string before that
// rank's pair is as it was, and so are the CRC states of the blocks
// before it. Only the rest is rebuilt, and rehashed from there or from
// the first byte a size change patched in place (csFrom), if earlier.
func (b *book) checksum() int32 {
	r, from := b.csDirty, b.csFrom
	if r >= checksumDepth && from == noPatch {
		return int32(b.csSum)
	}
	s := b.cstr
	if r < checksumDepth {
		s = s[:b.coff[r]] // coff[0] is always 0
		from = min(from, len(s))
		nb, na := len(b.bids.lv), len(b.asks.lv)
		for i := r; i < checksumDepth; i++ {
			b.coff[i] = int32(len(s))
			if i < nb {
				s = b.appendLevel(s, b.bids.best(i), len(s) > 0)
			}
			if i < na {
				s = b.appendLevel(s, b.asks.best(i), len(s) > 0)
			}
		}
		b.cstr = s
	}
	if len(b.cst) == 0 {
		b.cst = append(b.cst, 0)
	}
	j := from / csBlock // the block where the change starts
	b.cst = b.cst[:j+1]
	crc := b.cst[j]
	p := j * csBlock
	for ; p+csBlock <= len(s); p += csBlock {
		crc = crc32.Update(crc, crc32.IEEETable, s[p:p+csBlock])
		b.cst = append(b.cst, crc)
	}
	crc = crc32.Update(crc, crc32.IEEETable, s[p:])
	b.csSum, b.csDirty, b.csFrom = crc, checksumDepth, noPatch
	return int32(crc)
}

// checksumString appends the whole checksum string to buf, for tests.
func (b *book) checksumString(buf []byte) []byte {
	for i := 0; i < checksumDepth; i++ {
		if i < len(b.bids.lv) {
			buf = b.appendLevel(buf, b.bids.best(i), len(buf) > 0)
		}
		if i < len(b.asks.lv) {
			buf = b.appendLevel(buf, b.asks.best(i), len(buf) > 0)
		}
	}
	return buf
}

// appendLevel appends l's "px:sz", after a ':' if sep.
func (b *book) appendLevel(buf []byte, l *level, sep bool) []byte {
	if sep {
		buf = append(buf, ':')
	}
	if l.tl != 0 {
		return append(buf, b.text[l.txt:l.txt+l.tl]...)
	}
	v := &b.vals[l.slot]
	buf = venue.AppendFixed(buf, b.price(l.key))
	buf = append(buf, ':')
	if v.big != nil {
		return append(buf, v.big.String()...)
	}
	return venue.AppendFixed(buf, v.sz)
}

// levels appends the whole side, best first, as venue levels.
func (b *book) levels(dst []venue.Level, bid bool) []venue.Level {
	s := b.side(bid)
	for i := len(s.lv) - 1; i >= 0; i-- {
		dst = append(dst, venue.Level{Price: b.price(s.lv[i].key).Decimal(), Size: b.vals[s.lv[i].slot].decimal()})
	}
	return dst
}

// fixedLevels appends the whole side, best first, in fixed point; the book
// must hold no big size (nbig 0).
func (b *book) fixedLevels(dst []venue.FixedLevel, bid bool) []venue.FixedLevel {
	s := b.side(bid)
	for i := len(s.lv) - 1; i >= 0; i-- {
		dst = append(dst, venue.FixedLevel{Price: b.price(s.lv[i].key), Size: b.vals[s.lv[i].slot].sz})
	}
	return dst
}

// Checksum returns OKX's signed CRC32 of a checksum string; exported for
// tests and tools that verify recorded frames.
func Checksum(s []byte) int32 { return int32(crc32.ChecksumIEEE(s)) }
