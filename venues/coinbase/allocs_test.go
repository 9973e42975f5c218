//go:build !race

package coinbase_test

import (
	"strconv"
	"testing"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/coinbase"
)

// A level2 update costs no allocation, whatever its price and size: the
// levels are fixed point and the event is reused (venue.Sink).
func TestUpdateAllocs(t *testing.T) {
	d := coinbase.NewDecoder(venue.Config{Sink: &countSink{}})
	d.Frame(t0, l2(0, "snapshot", "bid", "100", "1", "offer", "101", "2"))
	frames := [][]byte{l2(1, "update", "bid", "100.5", "3"), l2(2, "update", "bid", "100.5", "0")}
	seq := 3
	for i := range 1000 { // sizes never seen before, some removals
		size := "0"
		if i%3 > 0 {
			size = "3." + strconv.Itoa(i)
		}
		frames = append(frames, l2(seq+i, "update", "bid", "100."+strconv.Itoa(i%7), size))
	}
	d.Frame(t0, frames[0])
	d.Frame(t0, frames[1])
	i := 2
	got := testing.AllocsPerRun(500, func() {
		d.Frame(t0, frames[i])
		i++
	})
	if got != 0 {
		t.Fatalf("%.1f allocations per update frame, want 0", got)
	}
	if d.BadFrames() != 0 {
		t.Fatalf("%d bad frames", d.BadFrames())
	}
}
