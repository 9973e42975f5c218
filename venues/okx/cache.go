package okx

import "github.com/shopspring/decimal"

// decCache is a direct-mapped cache from the text of a price or size to its
// decimal. A decimal costs two allocations (a big.Int and its one-word
// array); OKX feeds repeat the same sizes and re-add the same prices often
// (about half the non-zero sizes in the 2022 BTC-USDT capture repeat one of
// the last thousand), and a decimal is immutable, so one value can be
// shared by the book and any number of events. A map was rejected: it
// grows, and evicting from it costs more than the allocations it saves.
type decCache struct {
	e [2048]decEntry
}

type decEntry struct {
	d    decimal.Decimal
	kind uint8 // cachePrice or cacheSize; 0 is empty
	n    uint8
	txt  [22]byte
}

const (
	cachePrice uint8 = iota + 1
	cacheSize
)

// get returns m*10^exp, which txt spells, from the cache or new. A price's
// exp is its book's scale, so the same text may need another exponent in
// another book: the exponent is part of the match.
func (c *decCache) get(kind uint8, txt []byte, m int64, exp int32) decimal.Decimal {
	if c == nil || len(txt) > len(decEntry{}.txt) {
		return decimal.New(m, exp)
	}
	h := uint32(2166136261) ^ uint32(kind)
	for _, b := range txt {
		h = (h ^ uint32(b)) * 16777619
	}
	e := &c.e[h&uint32(len(c.e)-1)]
	if e.kind == kind && int(e.n) == len(txt) && string(e.txt[:e.n]) == string(txt) && e.d.Exponent() == exp {
		return e.d
	}
	d := decimal.New(m, exp)
	e.d, e.kind, e.n = d, kind, uint8(copy(e.txt[:], txt))
	return d
}
