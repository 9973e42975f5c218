package venue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBookKeyScale: the book's keys change form as prices call for it
// (a finer price rescales, one that fits no uint64 at the scale widens,
// an empty book starts over), and the book keeps the same levels as one
// driven in decimals throughout.
func TestBookKeyScale(t *testing.T) {
	type step struct {
		s        BookSide
		px, sz   Fixed
		wide     bool
		scale    uint8 // when not wide
		wantLen  [2]int
		wantBest [2]Fixed
	}
	var fb, db Book
	check := func(i int, wide bool, scale uint8) {
		t.Helper()
		if fb.wide != wide || !wide && fb.scale != scale {
			t.Fatalf("step %d: wide %v scale %d, want %v %d", i, fb.wide, fb.scale, wide, scale)
		}
		if !fb.Equal(&db) || !db.Equal(&fb) || fb.Crossed() != db.Crossed() {
			t.Fatalf("step %d: books differ", i)
		}
		for _, s := range []BookSide{Bid, Ask} {
			for j := range fb.Len(s) {
				if !fb.Level(s, j).Price.Equal(db.Level(s, j).Price) {
					t.Fatalf("step %d: side %d level %d differs", i, s, j)
				}
			}
		}
	}
	steps := []struct {
		s     BookSide
		px    Fixed
		wide  bool
		scale uint8
	}{
		{Bid, Fixed{430001, 1}, false, 11},            // 43000.1: scale 16-5
		{Bid, Fixed{4300010, 2}, false, 11},           // the same price, more digits
		{Bid, Fixed{4299995, 2}, false, 11},           // 42999.95
		{Ask, Fixed{43000123456789, 9}, false, 11},    // 43000.123456789: fits, 9 <= 11
		{Ask, Fixed{430001234567891, 10}, false, 11},  // 10 digits
		{Ask, Fixed{4300012345678912, 12}, false, 12}, // finer: rescaled, 4.3e16 fits
		{Bid, Fixed{4300012345678912, 13}, false, 13}, // 4300.0…: finer again, 4.3e17 fits
		{Bid, Fixed{42000, 0}, false, 13},             // coarser: fits
		{Ask, Fixed{2000000000, 0}, true, 0},          // 2e9·10^13 overflows: wide
		{Bid, Fixed{1, 18}, true, 0},                  // wide takes anything keyed
		{Ask, Fixed{43001, 0}, true, 0},
	}
	for i, st := range steps {
		sz := Fixed{M: int64(i + 1), Scale: 1}
		fb.SetFixed(st.s, st.px, sz)
		db.Set(st.s, st.px.Decimal(), sz.Decimal())
		check(i, st.wide, st.scale)
	}
	if fb.BestFixed(Bid); fb.Len(Bid) != 5 || fb.Len(Ask) != 5 {
		t.Fatalf("lengths %d %d", fb.Len(Bid), fb.Len(Ask))
	}
	if sz, ok := fb.Get(Bid, Fixed{4300010, 2}.Decimal()); !ok || !sz.Equal(Fixed{2, 1}.Decimal()) {
		t.Fatalf("Get 43000.1 after widening: %v %v", sz, ok)
	}
	// Emptied, the book takes a scale for its next first price.
	for _, s := range []BookSide{Bid, Ask} {
		for fb.Len(s) > 0 {
			l, _ := fb.LevelFixed(s, 0)
			fb.SetFixed(s, l.Price, Fixed{})
			db.Set(s, l.Price.Decimal(), Fixed{}.Decimal())
		}
	}
	fb.SetFixed(Ask, Fixed{5, 8}, Fixed{1, 0}) // 0.00000005
	db.Set(Ask, Fixed{5, 8}.Decimal(), Fixed{1, 0}.Decimal())
	check(len(steps), false, 16)
	// A finer price that cannot rescale (a key would overflow) widens.
	fb.SetFixed(Ask, Fixed{9e15, 0}, Fixed{1, 0})
	db.Set(Ask, Fixed{9e15, 0}.Decimal(), Fixed{1, 0}.Decimal())
	check(len(steps)+1, true, 0)
	fb.Reset()
	if fb.wide {
		t.Fatal("Reset leaves the book wide")
	}
}

// TestBookKeyModel drives a book in fixed point with prices of random
// magnitude and scale (so that it rescales and widens, and Reset and
// snapshots start it over) and one in decimals, and compares them.
func TestBookKeyModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var fb, db Book
	lim := 0 // the finest scale of the current round of prices
	price := func(s BookSide) Fixed {
		scale := uint8(max(lim-4, 0) + r.IntN(min(lim, 4)+1))
		m := int64(1 + r.IntN(200))
		if s == Ask {
			m += 1000 // most asks above most bids
		}
		for range r.IntN(3) { // trailing zeros, now and then
			if scale < MaxScale {
				m, scale = m*10, scale+1
			}
		}
		if r.IntN(3000) == 0 {
			m = r.Int64N(1 << 62) // too large for most scales: widens
		}
		return Fixed{M: m, Scale: scale}
	}
	wide, rescaled := 0, 0
	for round := range 20000 {
		if round%2500 == 0 {
			lim = round / 2500 * 18 / 7
			var bids, asks []FixedLevel
			for range 30 {
				bids = append(bids, FixedLevel{price(Bid), Fixed{M: 1 + r.Int64N(9), Scale: 1}})
				asks = append(asks, FixedLevel{price(Ask), Fixed{M: 1 + r.Int64N(9), Scale: 1}})
			}
			fb.ReplaceFixed(bids, asks)
			db.Replace(fixedLevels(bids), fixedLevels(asks))
		}
		s := BookSide(r.IntN(2))
		px := price(s)
		sz := Fixed{M: r.Int64N(3), Scale: uint8(r.IntN(4))}
		scale, wasWide := fb.scale, fb.wide
		if fb.SetFixed(s, px, sz) != db.Set(s, px.Decimal(), sz.Decimal()) {
			t.Fatalf("round %d: changed differs", round)
		}
		if fb.wide && !wasWide {
			wide++
		} else if !fb.wide && !wasWide && fb.scale != scale {
			rescaled++
		}
		if !fb.Equal(&db) || !db.Equal(&fb) || fb.Crossed() != db.Crossed() {
			t.Fatalf("round %d: books differ", round)
		}
		if round%97 == 0 {
			for _, s := range []BookSide{Bid, Ask} {
				for j := range fb.Len(s) {
					if !fb.Level(s, j).Price.Equal(db.Level(s, j).Price) {
						t.Fatalf("round %d: side %d level %d differs", round, s, j)
					}
				}
			}
		}
	}
	t.Logf("%d widenings, %d rescales", wide, rescaled)
	if wide == 0 || rescaled == 0 {
		t.Fatalf("the model never widened (%d) or rescaled (%d)", wide, rescaled)
	}
}

// FuzzBookKey applies the changes the input spells (side, price
// coefficient and scale, size) to a book in fixed point and one in
// decimals, and compares them after each.
func FuzzBookKey(f *testing.F) {
	f.Add([]byte{0, 1, 1, 1, 1, 2, 2, 1, 0, 0xff, 18, 1, 1, 3, 0, 0})
	f.Add([]byte{1, 50, 0, 2, 1, 5, 17, 1, 0, 0x7f, 0, 3, 1, 50, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		var fb, db Book
		for i := 0; i+4 <= len(in); i += 4 {
			s := BookSide(in[i] & 1)
			m := int64(in[i+1])
			if in[i]&2 != 0 {
				m <<= 8 * (in[i] >> 2 & 7) // up to 2^63: some fit no scale
			}
			px := Fixed{M: m, Scale: in[i+2] % (MaxScale + 1)}
			sz := Fixed{M: int64(in[i+3] % 4), Scale: 1}
			if in[i] == 0xff {
				fb.Reset()
				db.Reset()
				continue
			}
			if fb.SetFixed(s, px, sz) != db.Set(s, px.Decimal(), sz.Decimal()) {
				t.Fatalf("op %d: changed differs", i/4)
			}
			if !fb.Equal(&db) || !db.Equal(&fb) || fb.Crossed() != db.Crossed() {
				t.Fatalf("op %d: books differ", i/4)
			}
			for _, side := range []BookSide{Bid, Ask} {
				for j := range fb.Len(side) {
					if !fb.Level(side, j).Price.Equal(db.Level(side, j).Price) {
						t.Fatalf("op %d: side %d level %d differs", i/4, side, j)
					}
				}
			}
		}
	})
}

// TestBookKeyDecimalExponent: a decimal price with a positive exponent
// keys as the same price written out.
func TestBookKeyDecimalExponent(t *testing.T) {
	var b Book
	b.Set(Bid, d("4999.5"), d("1"))
	b.Set(Bid, d("5E+3"), d("2"))
	if sz, ok := b.Get(Bid, d("5000")); !ok || !sz.Equal(d("2")) || b.slow {
		t.Fatalf("Get 5000: %v %v, slow %v", sz, ok, b.slow)
	}
	if best, _ := b.Best(Bid); !best.Price.Equal(d("5000")) {
		t.Fatalf("best bid %s", best.Price)
	}
}

// TestBookReplaceFixedModel: a snapshot sorted best first (the fill's own
// path, with rescales, widenings, prices with no key and zero sizes among
// its levels) and one in any order build the book that SetFixedText builds
// level by level, with the same texts, and SnapshotFixed hands it back.
func TestBookReplaceFixedModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var rb, sb Book
	rb.KeepText(true)
	side := func(s BookSide, n int) ([]FixedLevel, []LevelText) {
		var src []FixedLevel
		for range n {
			px := Fixed{M: 1 + r.Int64N(5000), Scale: uint8(r.IntN(4))}
			if s == Ask {
				px.M += 100000 << px.Scale // above every bid
			}
			switch r.IntN(40) {
			case 0:
				px = Fixed{M: px.M * 1e12, Scale: MaxScale} // rescales
			case 1:
				px.M <<= 40 // widens a fine book
			case 2:
				px.M = -px.M // no key: the book turns slow
			}
			src = append(src, FixedLevel{px, Fixed{M: r.Int64N(4), Scale: 1}})
		}
		if r.IntN(4) != 0 { // best first, one level a price
			slices.SortFunc(src, func(a, c FixedLevel) int {
				if s == Bid {
					return c.Price.Decimal().Cmp(a.Price.Decimal())
				}
				return a.Price.Decimal().Cmp(c.Price.Decimal())
			})
			src = slices.CompactFunc(src, func(a, c FixedLevel) bool { return a.Price.Decimal().Equal(c.Price.Decimal()) })
		}
		txt := make([]LevelText, len(src))
		for i, l := range src {
			txt[i] = LevelText{Price: fmt.Append(nil, l.Price.M, "e-", l.Price.Scale), Size: fmt.Append(nil, l.Size.M)}
		}
		return src, txt
	}
	sorted := 0
	for round := range 3000 {
		bids, bt := side(Bid, r.IntN(30))
		asks, at := side(Ask, r.IntN(30))
		if sortedBestFirst(Bid, bids) && sortedBestFirst(Ask, asks) {
			sorted++
		}
		// rb is reused (a Reset book keeps its slots' memory and its scale);
		// sb starts at the scale rb starts at.
		sb = Book{scale: rb.scale}
		sb.KeepText(true)
		rb.ReplaceFixedText(bids, asks, bt, at)
		for _, sd := range []struct {
			s   BookSide
			src []FixedLevel
			txt []LevelText
		}{{Bid, bids, bt}, {Ask, asks, at}} {
			// In the fill's order, so that the keys take the same scale; a
			// sorted fill skips zero sizes, which SetFixedText would key.
			if sortedBestFirst(sd.s, sd.src) {
				for i := len(sd.src) - 1; i >= 0; i-- {
					if !sd.src[i].Size.IsZero() {
						sb.SetFixedText(sd.s, sd.src[i].Price, sd.src[i].Size, sd.txt[i])
					}
				}
			} else {
				for i := range sd.src {
					sb.SetFixedText(sd.s, sd.src[i].Price, sd.src[i].Size, sd.txt[i])
				}
			}
		}
		if !rb.Equal(&sb) || !sb.Equal(&rb) || rb.Crossed() != sb.Crossed() || rb.slow != sb.slow {
			t.Fatalf("round %d: books differ", round)
		}
		if !rb.slow { // a slow book's keys are not used
			for _, l := range [][2]*ladder{{&rb.bids, &sb.bids}, {&rb.asks, &sb.asks}} {
				if rb.wide != sb.wide || rb.scale != sb.scale || !slices.Equal(l[0].keys, l[1].keys) || !slices.Equal(l[0].his, l[1].his) {
					t.Fatalf("round %d: keys differ (wide %v, %v; scale %d, %d)", round, rb.wide, sb.wide, rb.scale, sb.scale)
				}
			}
		}
		for _, s := range []BookSide{Bid, Ask} {
			for j := range rb.Len(s) {
				a, _ := rb.AppendLevelText(nil, s, j)
				c, _ := sb.AppendLevelText(nil, s, j)
				if !rb.Level(s, j).Price.Equal(sb.Level(s, j).Price) || !rb.slow && string(a) != string(c) { // setSlow keeps no text
					t.Fatalf("round %d: side %d level %d differs: text %q, want %q", round, s, j, a, c)
				}
			}
		}
		ev := rb.SnapshotFixed("x")
		var cb Book
		cb.Apply(ev)
		if !cb.Equal(&rb) {
			t.Fatalf("round %d: SnapshotFixed does not rebuild the book", round)
		}
	}
	if sorted < 1000 {
		t.Fatalf("only %d of the snapshots were sorted", sorted)
	}
}
