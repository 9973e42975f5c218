package bybit_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/bybit"
)

// quiet drops every log line: decoders and adapters under test log nothing.
var quiet = slog.New(slog.DiscardHandler)

// FuzzDecoder feeds the decoder any sequence of frames (the input split at
// newlines). It must never panic, and what it emits must keep the stream
// invariants venuetest.Sink checks: a book's first event is a snapshot, no
// update follows a resync before a snapshot, no book crosses.
//
// Seeds: every recorded frame, whole and truncated, and each capture file
// whole (so snapshot→delta sequences are explored).
func FuzzDecoder(f *testing.F) {
	files, _ := filepath.Glob(testdata.Path("*.jsonl"))
	for _, name := range files {
		whole, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(whole)
		for _, fr := range bytes.Split(whole, []byte("\n")) {
			f.Add(fr)
			for _, cut := range []int{1, len(fr) / 3, len(fr) / 2, len(fr) - 1} {
				if cut > 0 && cut < len(fr) {
					f.Add(fr[:cut])
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		sink := venuetest.NewSink()
		for _, depth := range []int{1, 50} {
			d := bybit.NewDecoder(venue.Config{Sink: sink, Depth: depth, Logger: quiet})
			for i, fr := range bytes.Split(in, []byte("\n")) {
				d.Frame(recv0.Add(time.Duration(i)*time.Second), fr)
			}
			d.LinkDown(recv0)
		}
		sink.Check(t)
	})
}
