// Package replaytest reads captures whole and writes shifted copies of them,
// for tests that need longer or aligned captures.
package replaytest

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/replay"
)

// Capture is a capture file read whole: its metadata, its records (frames
// copied) and its span, from the first frame's receive time to the last's
// plus a millisecond, by which a copy shifted to follow it starts.
type Capture struct {
	Meta    replay.Meta
	Records []replay.Record
	Span    time.Duration
}

// ReadCapture reads the capture at path.
func ReadCapture(tb testing.TB, path string) Capture {
	tb.Helper()
	in, err := replay.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	c := Capture{Meta: in.Meta}
	var first, last time.Time
	for {
		r, err := in.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		r.Frame = bytes.Clone(r.Frame)
		c.Records = append(c.Records, r)
		if !r.Disconnect {
			if first.IsZero() {
				first = r.Time
			}
			last = r.Time
		}
	}
	c.Span = last.Sub(first) + time.Millisecond
	return c
}

// WriteShifted writes n copies of c into one gzip'ed capture at path with
// c's metadata, copy k (from first) shifted by k spans, so each follows the
// one before; it returns the frames written.
func (c Capture) WriteShifted(tb testing.TB, path string, first, n int) int {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	zw.Comment = replay.MetaComment(c.Meta)
	w := replay.NewWriter(zw)
	frames := 0
	for k := first; k < first+n; k++ {
		for _, r := range c.Records {
			if r.Disconnect {
				err = w.Disconnect()
			} else {
				frames++
				err = w.Frame(r.Time.Add(time.Duration(k)*c.Span), r.Frame)
			}
			if err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return frames
}
