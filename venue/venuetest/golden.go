package venuetest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// Dir is a venue's directory of recorded frames and golden files, relative
// to the venue's package ("../../testdata/venues/kraken"). A venue's tests
// declare it once:
//
//	const testdata venuetest.Dir = "../../testdata/venues/kraken"
type Dir string

// Path returns the path of name (a file name or a glob pattern) in d.
func (d Dir) Path(name string) string { return filepath.Join(string(d), name) }

// Frames returns the frames of the JSON-lines capture name in d: every
// line, white space trimmed, in order; empty lines are left out. It fails
// t if the file cannot be read or a line is longer than 1 MiB.
func (d Dir) Frames(t testing.TB, name string) [][]byte {
	t.Helper()
	f, err := os.Open(d.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, bytes.Clone(l))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", d.Path(name), err)
	}
	return out
}

// Golden compares got with the golden file name in d and fails t, naming
// the first line that differs, if they are not the same bytes. With update
// set (a venue's -update flag) it writes got to the file instead, creating
// its directory, and checks nothing.
func (d Dir) Golden(t testing.TB, name string, got []byte, update bool) {
	t.Helper()
	path := d.Path(name)
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := lines(got), lines(want)
	i := 0
	for i < len(gl) && i < len(wl) && bytes.Equal(gl[i], wl[i]) {
		i++
	}
	line := func(ls [][]byte) []byte {
		if i < len(ls) {
			return ls[i]
		}
		return []byte("(end of output)")
	}
	t.Errorf("output differs from %s at line %d (run with -update after checking the diff)\n got: %.2000s\nwant: %.2000s\nall of got:\n%.4000s",
		path, i+1, bytes.TrimSuffix(line(gl), []byte("\n")), bytes.TrimSuffix(line(wl), []byte("\n")), got)
}

// lines splits b after each newline; a final newline ends the last line.
func lines(b []byte) [][]byte {
	ls := bytes.SplitAfter(b, []byte("\n"))
	if len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// Decode builds a decoder with newDecoder from cfg, its Sink set to a new
// Sink, and feeds it frames, frame i received at start + i*step. It returns
// the decoder and the sink and checks nothing: the caller calls Check when
// the frames should keep the stream's invariants.
func Decode[D venue.Decoder](newDecoder func(venue.Config) D, cfg venue.Config, start time.Time, step time.Duration, frames ...[]byte) (D, *Sink) {
	sink := NewSink()
	cfg.Sink = sink
	d := newDecoder(cfg)
	for i, f := range frames {
		d.Frame(start.Add(time.Duration(i)*step), f)
	}
	return d, sink
}
