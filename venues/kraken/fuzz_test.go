package kraken_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/kraken"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
)

// FuzzDecoder feeds arbitrary frames (split on newlines) to a decoder that
// already holds a verified MATIC/USD book, then the docs' next update. It
// must never panic, and what it publishes must keep the stream's
// invariants (snapshot first, no update on a book known wrong, never
// crossed).
func FuzzDecoder(f *testing.F) {
	files, _ := filepath.Glob(testdata.Path("*.jsonl"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			f.Add(l)
			f.Add(l[:len(l)/2])
			f.Add(l[:len(l)-1])
		}
	}
	_, snap, ups := (&krakentest.Mock{Sym: "MATIC/USD", PricePrec: 4}).Frames(5)
	f.Add(snap)
	for _, u := range ups {
		f.Add(u)
		f.Add(u[:len(u)*2/3])
	}
	pair, err := os.ReadFile(testdata.Path("book_doc_MATIC-USD_snapshot_update.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(pair), []byte("\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		sink := venuetest.NewSink()
		d := kraken.NewDecoder(venue.Config{Sink: sink, Depth: 10})
		d.Frame(recv, lines[0])
		for _, fr := range bytes.Split(in, []byte("\n")) {
			d.Frame(recv, fr)
		}
		d.Frame(recv, lines[1])
		sink.Check(t)
	})
}
