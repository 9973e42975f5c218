package okx

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fanoutd/fanoutd/venue"
)

// TestIncrementalChecksum: the book's checksum, which rehashes only from
// the first rank changed since the last one, equals the CRC32 of the
// checksum string built from scratch from an independent model of the
// book, after random runs of sets, removes, snapshots, finer prices and
// resets that touch the top 25 and below it, checked after every run.
func TestIncrementalChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var b venue.Book
	var cs checksum
	const mid = 100000
	var model [2]map[int64]string // side (0 bids) → key → "px:sz" at scale 2
	pxText := func(key int64) []byte { return fmt.Appendf(nil, "%d.%02d", key/100, key%100) }
	var scale int32
	reset := func(keepText bool) {
		scale = 2
		b.Reset()
		b.KeepText(keepText)
		cs.reset()
		model = [2]map[int64]string{{}, {}}
	}
	want := func() int32 {
		var str []byte
		var top [2][]int64
		for s := range 2 {
			for k := range model[s] {
				top[s] = append(top[s], k)
			}
			slices.Sort(top[s])
			if s == 0 {
				slices.Reverse(top[s])
			}
		}
		for i := range checksumDepth {
			for s := range 2 {
				if i < len(top[s]) {
					if len(str) > 0 {
						str = append(str, ':')
					}
					str = append(str, model[s][top[s][i]]...)
				}
			}
		}
		return int32(crc32.ChecksumIEEE(str))
	}
	checks, skipped := 0, 0
	for round := range 3000 {
		switch {
		case round%500 == 0:
			reset(round%1000 == 0) // with and without kept text
			// a filled snapshot of random depth per side
			var lv [2][]venue.FixedLevel
			var txt [2][]venue.LevelText
			for s, bid := range [2]bool{true, false} {
				for i := range rng.IntN(40) {
					key := int64(mid - 1 - i)
					if !bid {
						key = mid + 1 + int64(i)
					}
					sm := 1 + rng.Int64N(1000)
					lv[s] = append(lv[s], venue.FixedLevel{Price: venue.Fixed{M: key, Scale: 2}, Size: venue.Fixed{M: sm}})
					txt[s] = append(txt[s], venue.LevelText{Price: pxText(key), Size: fmt.Append(nil, sm)})
					model[s][key] = string(pxText(key)) + ":" + fmt.Sprint(sm)
				}
			}
			b.ReplaceFixedText(lv[0], lv[1], txt[0], txt[1])
		case round%97 == 0 && scale == 2:
			scale = 3 // prices at 3 decimals from here: the kept text stays
		}
		for range 1 + rng.IntN(6) {
			s := rng.IntN(2)
			bid := s == 0
			d := int64(rng.IntN(60)) // ranks 0–59: in and out of the top 25
			if rng.IntN(3) == 0 {
				d = int64(rng.IntN(5)) // often at the very top
			}
			key := mid - 1 - d
			if !bid {
				key = mid + 1 + d
			}
			bkey := key
			if scale == 3 {
				bkey *= 10
			}
			side := venue.Ask
			if bid {
				side = venue.Bid
			}
			px := venue.Fixed{M: bkey, Scale: uint8(scale)}
			if rng.IntN(4) == 0 {
				cs.changed(&b, side, b.SetFixedText(side, px, venue.Fixed{}, venue.LevelText{}))
				delete(model[s], key)
				continue
			}
			sm := 1 + rng.Int64N(1000)
			cs.changed(&b, side, b.SetFixedText(side, px, venue.Fixed{M: sm}, venue.LevelText{Price: pxText(key), Size: fmt.Append(nil, sm)}))
			model[s][key] = string(pxText(key)) + ":" + fmt.Sprint(sm)
		}
		if cs.dirty >= checksumDepth {
			skipped++
		}
		got := cs.compute(&b)
		w := Checksum(checksumString(nil, &b)) // without kept text: the formatted decimals
		if round%1000 < 500 {
			w = want()
		}
		if got != w {
			t.Fatalf("round %d: checksum %d, want %d (string %q)", round, got, w, checksumString(nil, &b))
		}
		checks++
	}
	if checks < 2000 || skipped == 0 || skipped == checks {
		t.Fatalf("%d checks, %d with nothing to rehash: the test did not cover both", checks, skipped)
	}
}
