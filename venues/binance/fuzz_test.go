package binance_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/binance"
)

// FuzzDecoder feeds arbitrary frames (one per line) to a decoder whose
// books are synced from the real snapshots, and checks that it never
// panics and never publishes a stream a consumer could not trust: no
// update before a snapshot, none after a resync before a new snapshot, no
// crossed book (venuetest.Sink's invariants).
func FuzzDecoder(f *testing.F) {
	var seeds [][]byte
	names, _ := filepath.Glob(testdata.Path("*.jsonl"))
	for _, name := range names {
		for _, l := range testdata.Frames(f, filepath.Base(name)) {
			if strings.Contains(name, "rest_depth") {
				if len(l) > 2000 { // keep seeds small: a short prefix, closed
					i := bytes.Index(l[1000:], []byte("]],")) + 1000
					l = append(bytes.Clone(l[:i+2]), `],"asks":[]}`...)
				}
				l = snapshotFrame("blzeth", l)
			}
			seeds = append(seeds, l)
		}
	}
	seeds = append(seeds,
		[]byte(`{"result":null,"id":1}`),
		[]byte(`{"error":{"code":2,"msg":"Invalid request: invalid stream"},"id":2}`),
		[]byte(`{"stream":"!serverShutdown","data":{"e":"serverShutdown","E":1}}`),
		[]byte(`{"e":"depthUpdate","E":1633998514469,"s":"BLZETH","U":281916628,"u":281916628,"b":[],"a":[["0.00006615","0.00000000"]]}`),
		[]byte(`{"u":499869768,"s":"NKNUSDT","b":"0.35210000","B":"672.00000000","a":"0.35260000","A":"3199.00000000"}`),
	)
	for _, s := range seeds {
		f.Add(s)
		for _, cut := range []int{1, len(s) / 3, len(s) / 2, len(s) - 1} {
			if cut > 0 && cut < len(s) {
				f.Add(s[:cut])
			}
		}
	}
	// A small book keeps each run cheap: five levels a side at BLZETH's
	// prices, with the real snapshot's lastUpdateId, so the seeds' BLZETH
	// events chain to it.
	snap := []byte(`{"lastUpdateId":281916627,"bids":[["0.00006547","100.00000000"],["0.00006542","1528.00000000"],["0.00006540","170.00000000"],["0.00006538","5715.00000000"],["0.00006537","4002.00000000"]],"asks":[["0.00006555","1528.00000000"],["0.00006556","100.00000000"],["0.00006560","1528.00000000"],["0.00006561","4015.00000000"],["0.00006615","1528.00000000"]]}`)
	f.Fuzz(func(t *testing.T, in []byte) {
		sink := venuetest.NewSink()
		d := binance.NewDecoder(venue.Config{Sink: sink})
		now := time.Unix(1633998514, 0)
		d.Frame(now, snapshotFrame("blzeth", snap))
		for _, frame := range bytes.Split(in, []byte("\n")) {
			now = now.Add(time.Millisecond)
			d.Frame(now, frame)
		}
		d.LinkDown(now)
		d.Frame(now, in)
		sink.Check(t)
	})
}

// TestFuzzCorpusIsSmall keeps committed crashers from bloating the tree.
func TestFuzzCorpusIsSmall(t *testing.T) {
	filepath.Walk("testdata/fuzz", func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && info.Size() > 64<<10 {
			t.Errorf("%s is %d bytes", p, info.Size())
		}
		return nil
	})
}
