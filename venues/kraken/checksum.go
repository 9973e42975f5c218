package kraken

import (
	"hash/crc32"
	"strconv"

	"github.com/fanoutd/fanoutd/venue"
)

// checksum computes Kraken's v2 book checksum over bk: for the top 10 asks
// (best first) then the top 10 bids (best first), each price and then qty
// written with the instrument's precision, the decimal point removed and
// leading zeros stripped, concatenated, CRC32 (IEEE).
//
// Because every price in bk carries exponent -pp and every size -qp (the
// decoder rescales on the way in), "written with the precision, point
// removed, leading zeros stripped" is exactly the decimal text of the
// coefficient, which strconv writes without allocating. Formatting through
// float64 was rejected: it drops trailing zeros and the sum is wrong (the
// docs' MATIC example only verifies with precision formatting).
func (d *Decoder) checksum(bk *bookState) uint32 {
	if cap(d.ck) < 2*2*checksumLevels*digitWidth+digitWidth {
		d.ck = make([]byte, 0, 2*2*checksumLevels*digitWidth+digitWidth)
	}
	buf := d.ck[:0]
	for _, s := range [2]venue.BookSide{venue.Ask, venue.Bid} {
		n := min(checksumLevels, bk.b.Len(s))
		for i := 0; i < n; i++ {
			l, _ := bk.b.LevelFixed(s, i) // every level is fixed point (see update)
			buf = d.digits.append(buf, l.Price.M)
			buf = d.digits.append(buf, l.Size.M)
		}
	}
	d.ck = buf
	return crc32.ChecksumIEEE(buf)
}

// digitCache remembers the decimal text of recently written coefficients.
// The checksum rewrites the same 20 levels after every message and only one
// or two of them changed, so most values are found here; a direct-mapped
// table was chosen over a map because a lookup is a multiply, a compare and
// a copy, with no hashing of its own and nothing to evict.
type digitCache struct {
	v [digitSlots]int64
	n [digitSlots]uint8 // 0: empty
	b [digitSlots][digitWidth]byte
}

const (
	digitBits  = 9
	digitSlots = 1 << digitBits
	digitWidth = 24 // an int64 is at most 20 bytes of text; 24 copies as three words
)

// append appends the decimal text of v to dst. A hit copies a fixed 24
// bytes and then shortens dst, which compiles to three moves instead of a
// call to memmove.
func (c *digitCache) append(dst []byte, v int64) []byte {
	h := uint64(v) * 0x9e3779b97f4a7c15 >> (64 - digitBits)
	if n := int(c.n[h]); n != 0 && c.v[h] == v {
		l := len(dst)
		if cap(dst)-l >= digitWidth {
			dst = dst[:l+digitWidth]
			*(*[digitWidth]byte)(dst[l:]) = c.b[h]
			return dst[:l+n]
		}
		return append(dst, c.b[h][:n]...)
	}
	start := len(dst)
	dst = strconv.AppendInt(dst, v, 10)
	if n := len(dst) - start; n <= digitWidth {
		copy(c.b[h][:], dst[start:])
		c.v[h], c.n[h] = v, uint8(n)
	}
	return dst
}
