package binance

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/scan"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
)

// TestBookMatchesVenueBook drives a book through the decoder's fixed-point
// path (replace, lvl.set) and another through decimals (Replace, Set) with
// the same random changes and snapshots, and compares them throughout.
func TestBookMatchesVenueBook(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	mk := func(ticks int64, sz int64) lvl {
		m := ticks * 1e6
		return lvl{FixedLevel: venue.FixedLevel{Price: venue.Fixed{M: m, Scale: 8}, Size: venue.Fixed{M: sz, Scale: 8}}}
	}
	var b venue.Book
	var fixed []venue.FixedLevel
	var want venue.Book
	for round := range 2000 {
		if round%500 == 0 { // a snapshot, best first, with a duplicate
			var bids, asks []lvl
			for i := range int64(50) {
				bids = append(bids, mk(10000-1-i, 1+r.Int64N(1e9)))
				asks = append(asks, mk(10000+i, 1+r.Int64N(1e9)))
			}
			if round == 1000 {
				r.Shuffle(len(bids), func(i, j int) { bids[i], bids[j] = bids[j], bids[i] })
			}
			fixed = replace(&b, bids, asks, fixed)
			lv := func(s []lvl) (out []venue.Level) {
				for _, l := range s {
					out = append(out, l.level())
				}
				return out
			}
			want.Replace(lv(bids), lv(asks))
		}
		l := mk(9900+r.Int64N(200), r.Int64N(3)*r.Int64N(1e9))
		if l.Price.M < 10000*1e8 {
			l.set(&b, venue.Bid)
			want.Set(venue.Bid, l.level().Price, l.level().Size)
		} else {
			l.set(&b, venue.Ask)
			want.Set(venue.Ask, l.level().Price, l.level().Size)
		}
		var got venue.Book
		got.Apply(b.SnapshotFixed("x:level2:y"))
		if !got.Equal(&want) || !b.Equal(&want) {
			t.Fatalf("round %d: books differ", round)
		}
		if b.Crossed() != want.Crossed() {
			t.Fatalf("round %d: crossed %v, want %v", round, b.Crossed(), want.Crossed())
		}
	}
}

func TestPriceFits(t *testing.T) {
	for _, c := range []struct {
		in   string
		good bool
	}{
		{"0.35130000", true}, {"100", true}, {"1.5", true},
		{"0.000000001", false}, {"92233720369", false}, {"92233720368", true}, {"92233720367.1", true},
	} {
		m, frac, _, st := scan.Coef([]byte(c.in))
		if ok := priceFits(uint64(m), frac); st != scan.OK || ok != c.good {
			t.Errorf("priceFits(%s) = %v; want %v", c.in, ok, c.good)
		}
	}
}

// TestBigValues: sizes past 18 digits are kept as decimals by the book,
// and prices past 2^58 (once the interning cache's bound) stay exact.
func TestBigValues(t *testing.T) {
	sink := venuetest.NewSink()
	d := NewDecoder(venue.Config{Sink: sink})
	now := time.Now()
	d.Frame(now, []byte(`{"stream":"x@depthSnapshot","generated":true,"data":{"lastUpdateId":1,"bids":[["1.00000000","123456789012.00000000"],["0.50000000","1.00000000"]],"asks":[["3000000000.00000000","1.00000000"],["2000000000.00000000","2.00000000"]]}}`))
	d.Frame(now, []byte(`{"stream":"x@depth","data":{"e":"depthUpdate","E":1,"s":"X","U":2,"u":2,"b":[["0.50000000","999999999999.00000000"]],"a":[["2000000000.00000000","0.00000000"]]}}`))
	d.Frame(now, []byte(`{"stream":"x@depth","data":{"e":"depthUpdate","E":1,"s":"X","U":3,"u":3,"b":[["1.00000000","0.00000000"]],"a":[]}}`))
	s := d.syms["x"]
	got := s.book.SnapshotFixed("binance:level2:X")
	want := &venue.Book{}
	want.Set(venue.Bid, decimal.RequireFromString("0.5"), decimal.RequireFromString("999999999999"))
	want.Set(venue.Ask, decimal.RequireFromString("3000000000"), decimal.RequireFromString("1"))
	var b venue.Book
	b.Apply(got)
	if !b.Equal(want) || got.HasFixed() {
		t.Fatalf("book = %+v %+v, fixed %v: want decimals for a big size", got.Bids, got.Asks, got.HasFixed())
	}
	if c := sink.Book("binance:level2:X"); !c.Equal(want) {
		t.Fatalf("consumer book differs")
	}
}
