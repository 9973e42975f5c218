package bybit

import (
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/scan"
)

// parseFixed reads a plain decimal ("63982.70", "0", "-1.5") into a
// mantissa and exponent without allocating (scan.Fixed). ok is false when
// b is not such a decimal or has more than 18 significant digits (the slow
// path takes those).
func parseFixed(b []byte) (m int64, exp int32, ok bool) {
	u, frac, neg, st := scan.Fixed(b)
	if st != scan.OK || u >= 1e18 {
		return 0, 0, false
	}
	m = int64(u)
	if neg {
		m = -m
	}
	return m, -int32(frac), true
}

// decCacheBits sizes decCache: 1024 slots of 40 bytes, enough for the
// prices of a 200-level book and the sizes that recur.
const decCacheBits = 10

// decCache hands out one shared decimal.Decimal per (mantissa, exponent)
// it has seen recently. decimal.New allocates a big.Int each time; on a
// book feed the same prices (and many sizes) recur frame after frame, so a
// direct-mapped cache turns most of those allocations into a lookup.
// Decimals are immutable, so sharing one between events is safe. A map was
// rejected: it grows without a bound and hashes slower than this.
type decCache struct {
	slots [1 << decCacheBits]decSlot
}

type decSlot struct {
	m   int64
	exp int32
	ok  bool
	d   decimal.Decimal
}

func (c *decCache) get(m int64, exp int32) decimal.Decimal {
	h := (uint64(m)*0x9E3779B97F4A7C15 ^ uint64(uint32(exp))*0xC2B2AE3D27D4EB4F) >> (64 - decCacheBits)
	sl := &c.slots[h]
	if sl.ok && sl.m == m && sl.exp == exp {
		return sl.d
	}
	d := decimal.New(m, exp)
	*sl = decSlot{m: m, exp: exp, ok: true, d: d}
	return d
}
