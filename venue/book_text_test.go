package venue

import (
	"fmt"
	"testing"
)

// TestBookTextArena: a book that keeps text hands back each level's text
// as set, keeps its arena bounded over a long run of updates (compaction),
// and keeps none once KeepText is off.
func TestBookTextArena(t *testing.T) {
	var b Book
	b.KeepText(true)
	for i := range 20000 {
		key := int64(1000 + i%50)
		px := fmt.Appendf(nil, "%d.%d", key/10, key%10)
		b.SetFixedText(Bid, Fixed{M: key, Scale: 1}, Fixed{M: int64(i) + 1}, LevelText{Price: px, Size: fmt.Append(nil, i+1)})
	}
	if len(b.text) > 64<<10 {
		t.Fatalf("arena grew to %d bytes for 50 levels", len(b.text))
	}
	for i := range b.Len(Bid) {
		l, _ := b.LevelFixed(Bid, i)
		txt, ok := b.LevelText(Bid, i)
		want := fmt.Sprintf("%d.%d:%d", l.Price.M/10, l.Price.M%10, l.Size.M)
		if got := string(txt.Price) + ":" + string(txt.Size); !ok || got != want {
			t.Fatalf("level %d text %q, %v; want %q", i, got, ok, want)
		}
		if got, ok := b.AppendLevelText([]byte("x"), Bid, i); !ok || string(got) != "x"+want {
			t.Fatalf("level %d AppendLevelText %q, %v; want %q", i, got, ok, "x"+want)
		}
	}
	b.Reset()
	b.KeepText(false)
	b.SetFixedText(Bid, Fixed{M: 1}, Fixed{M: 1}, LevelText{Price: []byte("1"), Size: []byte("1")})
	if got, ok := b.AppendLevelText([]byte("x"), Bid, 0); ok || string(got) != "x" {
		t.Fatalf("AppendLevelText %q, %v with KeepText off", got, ok)
	}
	if _, ok := b.LevelText(Bid, 0); ok || len(b.text) != 0 {
		t.Fatalf("text kept with KeepText off")
	}
}

// TestBookChanges: SetFixedText says what it did and at which rank, and
// the old text's length for a new size.
func TestBookChanges(t *testing.T) {
	var b Book
	b.KeepText(true)
	txt := func(p, s string) LevelText { return LevelText{Price: []byte(p), Size: []byte(s)} }
	for _, c := range []struct {
		side    BookSide
		px, sz  int64
		t       LevelText
		want    Change
		wantLen int
	}{
		{Bid, 100, 1, txt("100", "1"), Change{Kind: Added, Rank: 0}, 1},
		{Bid, 99, 2, txt("99", "2"), Change{Kind: Added, Rank: 1}, 2},
		{Bid, 101, 3, txt("101", "3"), Change{Kind: Added, Rank: 0}, 3},
		{Bid, 99, 20, txt("99", "20"), Change{Kind: Resized, Rank: 2, OldText: 4}, 3},
		{Bid, 98, 0, LevelText{}, Change{}, 3},
		{Bid, 100, 0, LevelText{}, Change{Kind: Removed, Rank: 1}, 2},
		{Ask, 102, 1, txt("102", "1"), Change{Kind: Added, Rank: 0}, 1},
	} {
		if got := b.SetFixedText(c.side, Fixed{M: c.px}, Fixed{M: c.sz}, c.t); got != c.want || b.Len(c.side) != c.wantLen {
			t.Fatalf("set %d %d on %d: %+v with %d levels, want %+v with %d", c.px, c.sz, c.side, got, b.Len(c.side), c.want, c.wantLen)
		}
	}
	if tx, _ := b.LevelText(Bid, 1); string(tx.Price) != "99" || string(tx.Size) != "20" {
		t.Fatalf("rank 1 text %q:%q", tx.Price, tx.Size)
	}
}
