package okx

import (
	"hash/crc32"
	"slices"

	"github.com/fanoutd/fanoutd/venue"
)

// checksumDepth is how many levels per side OKX's checksum covers.
const checksumDepth = 25

// csBlock is the stride of the kept CRC states: long enough for the CLMUL
// path of hash/crc32 (64 bytes and more), short enough that little is
// rehashed before the first change (128 and 64 measured no better).

// noPatch is checksum.from when no size was patched in place.
const csBlock = 256

const noPatch = 1 << 30

// checksum is what a book's checksum keeps between frames: the checksum
// string as of the last checksum, where each pair of levels starts in it,
// the CRC state at every csBlock bytes of it, its CRC, and the first rank
// (on either side) that may have changed since: sum rebuilds and rehashes
// only from there. The zero checksum has everything to build.
type checksum struct {
	cstr  []byte
	coff  [checksumDepth]int32
	cst   []uint32 // cst[j] is the CRC of cstr[:j*csBlock]
	sum   uint32
	dirty int // first rank changed since the last sum
	from  int // first byte of cstr patched since (noPatch when none)
}

// reset makes everything dirty, as after a new snapshot.
func (c *checksum) reset() {
	c.dirty, c.from, c.cst = 0, noPatch, c.cst[:0]
}

// touch records that the level at rank (0 is the best) changed, appeared
// or went, which moves every rank after it.
func (c *checksum) touch(rank int) {
	if rank < c.dirty {
		c.dirty = rank
	}
}

// changed records ch, a change to side s of b: a new size at a level that
// stays in the top 25 is patched into cstr in place while cstr still holds
// that rank (only the hash is redone from there); anything else is a
// touch.
func (c *checksum) changed(b *venue.Book, s venue.BookSide, ch venue.Change) {
	switch {
	case ch.Kind == venue.Unchanged || ch.Rank >= c.dirty:
		return // not in the top 25, or rebuilt from an earlier rank anyway
	case ch.Kind != venue.Resized || ch.OldText == 0:
		c.touch(ch.Rank)
		return
	}
	t, ok := b.LevelText(s, ch.Rank)
	if !ok {
		c.touch(ch.Rank)
		return
	}
	rank, oldLen := ch.Rank, ch.OldText
	pos := int(c.coff[rank])
	if rank > 0 {
		pos++ // the ':' before the pair
	}
	if s == venue.Ask && rank < b.Len(venue.Bid) {
		bt, _ := b.LevelText(venue.Bid, rank)
		pos += len(bt.Price) + 1 + len(bt.Size) + 1 // the bid at rank, and ':'
	}
	if d := len(t.Price) + 1 + len(t.Size) - oldLen; d != 0 {
		end, n := pos+oldLen, len(c.cstr)
		if d > 0 {
			c.cstr = slices.Grow(c.cstr, d)[:n+d]
		}
		copy(c.cstr[end+d:], c.cstr[end:n]) // what follows, moved
		c.cstr = c.cstr[:n+d]
		for j := rank + 1; j < checksumDepth; j++ {
			c.coff[j] += int32(d)
		}
	}
	p := pos + copy(c.cstr[pos:], t.Price)
	c.cstr[p] = ':'
	copy(c.cstr[p+1:], t.Size)
	c.from = min(c.from, pos)
}

// compute returns the signed CRC32 of OKX's checksum string of b — bid:ask
// pairs interleaved best first over the top 25 of each side, the longer
// side continuing alone. Without kept text (the snapshot came with no
// checksum) it formats the values, which matches OKX's own text whenever
// OKX writes no trailing zeros.
//
// The string is a function of the top 25 levels of each side, and every
// change to them is recorded (changed, touch, reset) from the first rank
// it touches: the string before that rank's pair is as it was, and so are
// the CRC states of the blocks before it. Only the rest is rebuilt, and
// rehashed from there or from the first byte a size change patched in
// place (from), if earlier.
func (c *checksum) compute(b *venue.Book) int32 {
	r, from := c.dirty, c.from
	if r >= checksumDepth && from == noPatch {
		return int32(c.sum)
	}
	s := c.cstr
	if r < checksumDepth {
		s = s[:c.coff[r]] // coff[0] is always 0
		from = min(from, len(s))
		nb, na := b.Len(venue.Bid), b.Len(venue.Ask)
		for i := r; i < checksumDepth; i++ {
			c.coff[i] = int32(len(s))
			if i < nb {
				s = appendLevel(s, b, venue.Bid, i, len(s) > 0)
			}
			if i < na {
				s = appendLevel(s, b, venue.Ask, i, len(s) > 0)
			}
		}
		c.cstr = s
	}
	if len(c.cst) == 0 {
		c.cst = append(c.cst, 0)
	}
	j := from / csBlock // the block where the change starts
	c.cst = c.cst[:j+1]
	crc := c.cst[j]
	p := j * csBlock
	for ; p+csBlock <= len(s); p += csBlock {
		crc = crc32.Update(crc, crc32.IEEETable, s[p:p+csBlock])
		c.cst = append(c.cst, crc)
	}
	crc = crc32.Update(crc, crc32.IEEETable, s[p:])
	c.sum, c.dirty, c.from = crc, checksumDepth, noPatch
	return int32(crc)
}

// checksumString appends the whole checksum string of b to buf, for tests.
func checksumString(buf []byte, b *venue.Book) []byte {
	for i := 0; i < checksumDepth; i++ {
		if i < b.Len(venue.Bid) {
			buf = appendLevel(buf, b, venue.Bid, i, len(buf) > 0)
		}
		if i < b.Len(venue.Ask) {
			buf = appendLevel(buf, b, venue.Ask, i, len(buf) > 0)
		}
	}
	return buf
}

// appendLevel appends the i-th best level of side s as "px:sz", after a
// ':' if sep: the text OKX wrote if the book kept it, else the values.
func appendLevel(buf []byte, b *venue.Book, s venue.BookSide, i int, sep bool) []byte {
	if sep {
		buf = append(buf, ':')
	}
	if buf, ok := b.AppendLevelText(buf, s, i); ok {
		return buf
	}
	if l, ok := b.LevelFixed(s, i); ok {
		buf = venue.AppendFixed(buf, l.Price)
		buf = append(buf, ':')
		return venue.AppendFixed(buf, l.Size)
	}
	l := b.Level(s, i) // a size too long for fixed point
	buf = venue.AppendDecimal(buf, l.Price)
	buf = append(buf, ':')
	return venue.AppendDecimal(buf, l.Size)
}

// Checksum returns OKX's signed CRC32 of a checksum string; exported for
// tests and tools that verify recorded frames.
func Checksum(s []byte) int32 { return int32(crc32.ChecksumIEEE(s)) }
