package venue

import (
	"math/rand/v2"
	"testing"
)

// TestAppendFixed: a Fixed encodes as its decimal does.
func TestAppendFixed(t *testing.T) {
	for _, f := range []Fixed{{}, {0, 8}, {1, 0}, {35130000, 8}, {100, 2}, {123450, 3}, {7, 18}, {-15, 1}, {1<<63 - 1, 0}, {1<<63 - 1, 18}} {
		got, want := string(AppendFixed(nil, f)), string(AppendDecimal(nil, f.Decimal()))
		if got != want || want != f.Decimal().String() {
			t.Errorf("%+v: AppendFixed %q, AppendDecimal %q, String %q", f, got, want, f.Decimal().String())
		}
		if g, ok := FixedOf(f.Decimal()); f.M < 1e18 && (!ok || g.Cmp(f) != 0 && f.M >= 0) {
			t.Errorf("FixedOf(%s) = %+v, %v", f.Decimal(), g, ok)
		}
	}
}

// TestSetFixedMatchesSet drives a book in fixed point and one in decimals
// with the same changes (at mixed scales) and compares them, their tops
// and their snapshots throughout.
func TestSetFixedMatchesSet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var fb, db Book
	fx := func(ticks, scale int64) Fixed {
		// ticks of 0.01 at the given scale (2…8)
		m := ticks
		for range scale - 2 {
			m *= 10
		}
		return Fixed{M: m, Scale: uint8(scale)}
	}
	for round := range 3000 {
		if round%1000 == 0 {
			var bids, asks []FixedLevel
			for i := range int64(40) {
				bids = append(bids, FixedLevel{fx(10000-1-i, 2+i%7), fx(1+r.Int64N(500), 4)})
				asks = append(asks, FixedLevel{fx(10000+i, 8), fx(1+r.Int64N(500), 2)})
			}
			fb.ReplaceFixed(bids, asks)
			db.Replace(fixedLevels(bids), fixedLevels(asks))
		}
		s := BookSide(r.IntN(2))
		px := fx(9950+r.Int64N(100), 2+r.Int64N(7))
		if s == Ask {
			px = fx(10000+r.Int64N(50), 2+r.Int64N(7))
		} else {
			px = fx(9950+r.Int64N(50), 2+r.Int64N(7))
		}
		sz := fx(r.Int64N(3)*r.Int64N(1000), 2+r.Int64N(7))
		if fb.SetFixed(s, px, sz) != db.Set(s, px.Decimal(), sz.Decimal()) {
			t.Fatalf("round %d: changed differs", round)
		}
		if !fb.Equal(&db) || !db.Equal(&fb) {
			t.Fatalf("round %d: books differ", round)
		}
		var a, b Book
		a.Apply(fb.SnapshotFixed("x:level2:y"))
		b.Apply(fb.Snapshot("x:level2:y"))
		if !a.Equal(&db) || !b.Equal(&db) || fb.Crossed() != db.Crossed() {
			t.Fatalf("round %d: snapshots differ", round)
		}
		if string(fb.SnapshotFixed("s").AppendJSON(nil)) != string(db.Snapshot("s").AppendJSON(nil)) {
			t.Fatalf("round %d: encodings differ", round)
		}
	}
}

// TestApplyFixedAllocs: an update in fixed point to a book costs no
// allocation.
func TestApplyFixedAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	var b Book
	var bids, asks []FixedLevel
	for i := range int64(100) {
		bids = append(bids, FixedLevel{Fixed{M: 10000 - i, Scale: 2}, Fixed{M: 5, Scale: 1}})
		asks = append(asks, FixedLevel{Fixed{M: 10001 + i, Scale: 2}, Fixed{M: 5, Scale: 1}})
	}
	b.ReplaceFixed(bids, asks)
	ev := &Event{Kind: KindBook, FixedBids: make([]FixedLevel, 2), FixedAsks: make([]FixedLevel, 1)}
	n := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		n++
		ev.FixedBids[0] = FixedLevel{Fixed{M: 10000 - n%10, Scale: 2}, Fixed{M: n % 3, Scale: 4}}
		ev.FixedBids[1] = FixedLevel{Fixed{M: 999990 - n%10, Scale: 4}, Fixed{M: 1 + n%3, Scale: 4}}
		ev.FixedAsks[0] = FixedLevel{Fixed{M: 10001 + n%10, Scale: 2}, Fixed{M: 1 + n%5, Scale: 8}}
		b.Apply(ev)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per update, want 0", allocs)
	}
}
