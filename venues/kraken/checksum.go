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
	buf := d.ck[:0]
	for _, s := range [2]venue.BookSide{venue.Ask, venue.Bid} {
		n := min(checksumLevels, bk.b.Len(s))
		for i := 0; i < n; i++ {
			l := bk.b.Level(s, i)
			buf = strconv.AppendInt(buf, l.Price.CoefficientInt64(), 10)
			buf = strconv.AppendInt(buf, l.Size.CoefficientInt64(), 10)
		}
	}
	d.ck = buf
	return crc32.ChecksumIEEE(buf)
}
