//go:build !race

package coinbase_test

import (
	"testing"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/coinbase"
)

// A level2 update whose price and size were seen before costs one
// allocation: the event, with its levels.
func TestUpdateAllocs(t *testing.T) {
	d := coinbase.NewDecoder(venue.Config{Sink: &countSink{}})
	d.Frame(t0, l2(0, "snapshot", "bid", "100", "1", "offer", "101", "2"))
	frames := [][]byte{l2(1, "update", "bid", "100.5", "3"), l2(2, "update", "bid", "100.5", "0")}
	seq := 3
	for i := range 1000 { // enough frames, numbered on, to warm the caches
		frames = append(frames, l2(seq+i, "update", "bid", "100.5", []string{"3", "0"}[i%2]))
	}
	d.Frame(t0, frames[0])
	d.Frame(t0, frames[1])
	i := 2
	got := testing.AllocsPerRun(500, func() {
		d.Frame(t0, frames[i])
		i++
	})
	if got > 1 {
		t.Fatalf("%.1f allocations per update frame, want at most 1", got)
	}
	if d.BadFrames() != 0 {
		t.Fatalf("%d bad frames", d.BadFrames())
	}
}
