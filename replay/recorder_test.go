package replay

import (
	"context"
	"errors"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func readAll(t *testing.T, path string) (Meta, []string) {
	t.Helper()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	for {
		rec, err := f.Next()
		if errors.Is(err, io.EOF) {
			return f.Meta, out
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Disconnect {
			out = append(out, "")
		} else {
			out = append(out, string(rec.Frame))
		}
	}
}

func TestRecorderRotatesAndFlushesOnClose(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var segs []Segment
	r, err := NewRecorder(RecorderOptions{Dir: dir, MaxBytes: 200, Version: "test",
		Meta:      func(v string) Meta { return Meta{Endpoint: "wss://" + v} },
		OnSegment: func(s Segment) { mu.Lock(); segs = append(segs, s); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		r.Frame("okx", t0.Add(time.Duration(i)*time.Millisecond), []byte(`{"frame":"`+strings.Repeat("x", 30)+`"}`))
	}
	r.Disconnect("okx", t0.Add(time.Second))
	r.Frame("kraken", t0, []byte(`{"k":1}`))
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.Frame("okx", t0, []byte(`{}`)) // after Close: ignored, no panic
	mu.Lock()
	defer mu.Unlock()
	if len(segs) < 3 {
		t.Fatalf("%d segments, want rotation by size into several", len(segs))
	}
	var frames int64
	var lines []string
	for _, s := range segs {
		if _, err := os.Stat(s.Path + ".partial"); !os.IsNotExist(err) {
			t.Fatalf("%s.partial left behind", s.Path)
		}
		meta, got := readAll(t, s.Path)
		if meta.Venue != s.Venue || meta.Fanoutd != "test" || meta.Endpoint != "wss://"+s.Venue {
			t.Fatalf("meta %+v", meta)
		}
		if s.Venue == "okx" {
			lines = append(lines, got...)
			frames += s.Frames
		}
	}
	if frames != 10 || len(lines) != 11 || lines[10] != "" {
		t.Fatalf("okx frames %d, lines %d (%q)", frames, len(lines), lines)
	}
	if st := r.Stats(); st.Frames != 11 || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRecorderReportsErrorsAndResumes(t *testing.T) {
	dir := t.TempDir()
	// A file where the venue's directory should be: every open fails.
	blocker := filepath.Join(dir, "bybit")
	os.WriteFile(blocker, []byte("x"), 0o644)
	var mu sync.Mutex
	var errs []string
	now := t0
	r, _ := NewRecorder(RecorderOptions{Dir: dir, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		OnError: func(v string, err error) { mu.Lock(); errs = append(errs, v+": "+err.Error()); mu.Unlock() }})
	r.Frame("bybit", t0, []byte(`{"a":1}`))
	r.Frame("bybit", t0.Add(time.Millisecond), []byte(`{"a":2}`)) // inside the retry hold-off
	// Wait for the writer to take both (the queue is ours to observe).
	if !testutil.Poll(5*time.Second, func() bool { return r.Stats().Dropped >= 2 }) {
		t.Fatalf("frames not dropped: %+v", r.Stats())
	}
	os.Remove(blocker) // the disk is fixed
	r.Frame("bybit", t0.Add(2*time.Second), []byte(`{"a":3}`))
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 1 || !strings.Contains(errs[0], "bybit") {
		t.Fatalf("errors %q, want one report for bybit", errs)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "bybit", "*.jsonl.gz"))
	if len(matches) != 1 {
		t.Fatalf("segments after recovery %v", matches)
	}
	if _, got := readAll(t, matches[0]); len(got) != 1 || got[0] != `{"a":3}` {
		t.Fatalf("recovered segment holds %q", got)
	}
	if st := r.Stats(); st.Errors != 1 || st.Dropped != 2 {
		t.Fatalf("stats %+v", st)
	}
}
