package venuetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// fakeTB records what a helper reports instead of failing the test; Fatal
// ends the goroutine, as testing's does. Run it with failures.
type fakeTB struct {
	testing.TB // nil: a method not overridden here panics

	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatal(args ...any) { f.Errorf("%s", fmt.Sprint(args...)); runtime.Goexit() }

func (f *fakeTB) Fatalf(format string, args ...any) { f.Errorf(format, args...); runtime.Goexit() }

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// failures runs fn with a fakeTB, then its cleanups, last first, and
// returns what was reported.
func failures(fn func(tb testing.TB)) []string {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	return f.errs
}

func TestDirFrames(t *testing.T) {
	d := Dir(t.TempDir())
	if err := os.WriteFile(d.Path("c.jsonl"), []byte("  {\"a\":1}\n\n\t{\"b\":2}  \r\n{\"c\":3}"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := d.Frames(t, "c.jsonl")
	if len(got) != 3 || string(got[0]) != `{"a":1}` || string(got[1]) != `{"b":2}` || string(got[2]) != `{"c":3}` {
		t.Fatalf("Frames = %q", got)
	}
	if errs := failures(func(tb testing.TB) { d.Frames(tb, "missing.jsonl") }); len(errs) != 1 {
		t.Fatalf("Frames of a missing file reported %q, want one failure", errs)
	}
	if err := os.WriteFile(d.Path("long.jsonl"), []byte(strings.Repeat("x", 1<<20+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := failures(func(tb testing.TB) { d.Frames(tb, "long.jsonl") }); len(errs) != 1 || !strings.Contains(errs[0], "too long") {
		t.Fatalf("Frames of a 1 MiB line reported %q, want token too long", errs)
	}
}

func TestDirGolden(t *testing.T) {
	d := Dir(t.TempDir())
	out := []byte("one\ntwo\nthree\n")
	if errs := failures(func(tb testing.TB) { d.Golden(tb, "sub/x.golden", out, false) }); len(errs) != 1 || !strings.Contains(errs[0], "-update to create it") {
		t.Fatalf("missing golden file reported %q", errs)
	}
	if errs := failures(func(tb testing.TB) { d.Golden(tb, "sub/x.golden", out, true) }); len(errs) != 0 {
		t.Fatalf("update reported %q", errs)
	}
	if b, err := os.ReadFile(filepath.Join(string(d), "sub", "x.golden")); err != nil || string(b) != string(out) {
		t.Fatalf("update wrote %q, %v", b, err)
	}
	if errs := failures(func(tb testing.TB) { d.Golden(tb, "sub/x.golden", out, false) }); len(errs) != 0 {
		t.Fatalf("the same output reported %q", errs)
	}
	for _, c := range []struct {
		got, line string
	}{
		{"one\nTWO\nthree\n", "at line 2 (run with -update after checking the diff)\n got: TWO\nwant: two\n"},
		{"one\ntwo\n", "at line 3 (run with -update after checking the diff)\n got: (end of output)\nwant: three\n"},
		{"one\ntwo\nthree\nfour\n", "at line 4 (run with -update after checking the diff)\n got: four\nwant: (end of output)\n"},
		{"one\ntwo\nthree", "at line 3 (run with -update after checking the diff)\n got: three\nwant: three\n"},
	} {
		errs := failures(func(tb testing.TB) { d.Golden(tb, "sub/x.golden", []byte(c.got), false) })
		if len(errs) != 1 || !strings.Contains(errs[0], d.Path("sub/x.golden")) || !strings.Contains(errs[0], c.line) || !strings.HasSuffix(errs[0], "all of got:\n"+c.got) {
			t.Errorf("got %q reported %q, want one failure naming the file and %q", c.got, errs, c.line)
		}
	}
}

type fakeDecoder struct {
	cfg    venue.Config
	frames []string
	at     []time.Time
}

func (d *fakeDecoder) Frame(recv time.Time, frame []byte) {
	d.frames = append(d.frames, string(frame))
	d.at = append(d.at, recv)
}

func (d *fakeDecoder) LinkDown(time.Time) {}

func TestDecode(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d, sink := Decode(func(cfg venue.Config) *fakeDecoder { return &fakeDecoder{cfg: cfg} },
		venue.Config{Depth: 25}, t0, time.Millisecond, []byte("a"), []byte("b"), []byte("c"))
	if d.cfg.Sink != venue.Sink(sink) || d.cfg.Depth != 25 {
		t.Errorf("decoder config = %+v, want the returned sink and depth 25", d.cfg)
	}
	if strings.Join(d.frames, "") != "abc" {
		t.Errorf("frames %q, want a b c", d.frames)
	}
	for i, at := range d.at {
		if want := t0.Add(time.Duration(i) * time.Millisecond); !at.Equal(want) {
			t.Errorf("frame %d received at %v, want %v", i, at, want)
		}
	}
}

func TestSinkAppendJSONLines(t *testing.T) {
	one := decimal.New(1, 0)
	s := NewSink()
	ev := &venue.Event{Kind: venue.KindBook, Stream: "x:level2:Y", Snapshot: true, Bids: []venue.Level{{Price: one, Size: one}}}
	n := notice.Must(notice.LinkDown, "x", "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "down", nil)
	s.Notice(n)
	s.Event(ev)
	want := string(ev.AppendJSON(nil)) + "\n" + string(n.AppendJSON(nil)) + "\n"
	if got := string(s.AppendJSONLines([]byte("prefix\n"))); got != "prefix\n"+want {
		t.Fatalf("AppendJSONLines =\n%s\nwant the event, then the notice:\n%s", got, want)
	}
}

// fakeAdapter emits a snapshot for each configured symbol's level2 stream
// from its own goroutine once started.
type fakeAdapter struct {
	cfg     venue.Config
	stopErr error
	wg      sync.WaitGroup
	stopped chan struct{}

	mu    sync.Mutex // protects state
	state string
}

func (a *fakeAdapter) Venue() string { return "fake" }

func (a *fakeAdapter) Start(ctx context.Context) error {
	a.mu.Lock()
	a.state = "started"
	a.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		time.Sleep(10 * time.Millisecond) // Start must wait, not find the snapshot there
		for _, s := range a.cfg.Symbols {
			a.cfg.Sink.Event(&venue.Event{Kind: venue.KindBook, Stream: venue.NewStream("fake", venue.Level2, s), Snapshot: true})
		}
		select {
		case <-ctx.Done():
		case <-a.stopped:
		}
	}()
	return nil
}

func (a *fakeAdapter) Stop(context.Context) error {
	close(a.stopped)
	a.wg.Wait()
	a.mu.Lock()
	a.state = "stopped"
	a.mu.Unlock()
	return a.stopErr
}

func (a *fakeAdapter) Subscribe(...string) error   { return nil }
func (a *fakeAdapter) Unsubscribe(...string) error { return nil }
func (a *fakeAdapter) Coverage() venue.Coverage    { return venue.Coverage{} }

func (a *fakeAdapter) State() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state
}

// fakeVenue is just enough of a Venue for Start.
type fakeVenue struct {
	Venue   // nil: only what Start calls is here
	started bool
	ad      *fakeAdapter
}

func (v *fakeVenue) Name() string       { return "fake" }
func (v *fakeVenue) Symbol() string     { return "SYM" }
func (v *fakeVenue) Start(t *testing.T) { v.started = true }

func (v *fakeVenue) NewAdapter(cfg venue.Config) (venue.Adapter, error) {
	v.ad = &fakeAdapter{cfg: cfg, stopped: make(chan struct{})}
	return v.ad, nil
}

func TestStart(t *testing.T) {
	v := &fakeVenue{}
	t.Run("run", func(t *testing.T) {
		ad, sink := Start(t, v, venue.Config{Depth: 7})
		if !v.started || ad != venue.Adapter(v.ad) || v.ad.State() != "started" {
			t.Fatalf("mock started %v, adapter %v state %q", v.started, ad, v.ad.State())
		}
		if v.ad.cfg.Sink != venue.Sink(sink) || len(v.ad.cfg.Symbols) != 1 || v.ad.cfg.Symbols[0] != "SYM" || v.ad.cfg.Depth != 7 {
			t.Fatalf("adapter config = %+v, want the returned sink, symbol SYM and depth 7", v.ad.cfg)
		}
		if sink.NumEvents() != 1 {
			t.Fatalf("%d events when Start returned, want the snapshot", sink.NumEvents())
		}
	})
	if v.ad.State() != "stopped" {
		t.Fatalf("adapter %q after the test, want stopped", v.ad.State())
	}
}

func TestStartAdapterFailures(t *testing.T) {
	errs := failures(func(tb testing.TB) {
		StartAdapter(tb, func(venue.Config) (*fakeAdapter, error) { return nil, errors.New("bad config") }, venue.Config{})
	})
	if len(errs) != 1 || errs[0] != "NewAdapter: bad config" {
		t.Errorf("a failing NewAdapter reported %q", errs)
	}
	var ad *fakeAdapter
	errs = failures(func(tb testing.TB) {
		ad = StartAdapter(tb, func(cfg venue.Config) (*fakeAdapter, error) {
			return &fakeAdapter{cfg: cfg, stopped: make(chan struct{}), stopErr: errors.New("stuck")}, nil
		}, venue.Config{Sink: NewSink()})
	})
	if len(errs) != 1 || errs[0] != "Stop: stuck" || ad.State() != "stopped" {
		t.Errorf("a failing Stop reported %q (adapter %q)", errs, ad.State())
	}
}

func TestRecorder(t *testing.T) {
	var r Recorder
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	buf := []byte("frame 1")
	r.Frame("x", t0, buf)
	copy(buf, "FRAME") // the frame is only valid during the call
	go func() {
		time.Sleep(10 * time.Millisecond)
		r.Disconnect("x", t0.Add(time.Second))
		r.Frame("x", t0.Add(2*time.Second), []byte{})
	}()
	r.WaitFor(t, time.Second, "three records", func(rs []Record) bool { return len(rs) == 3 })
	rs := r.Records()
	if string(rs[0].Frame) != "frame 1" || rs[0].Venue != "x" || !rs[0].At.Equal(t0) || rs[0].Disconnect {
		t.Errorf("first record = %+v, want a copy of frame 1 at t0", rs[0])
	}
	if !rs[1].Disconnect || rs[1].Frame != nil || !rs[1].At.Equal(t0.Add(time.Second)) {
		t.Errorf("second record = %+v, want the disconnect", rs[1])
	}
	if rs[2].Disconnect || len(rs[2].Frame) != 0 {
		t.Errorf("third record = %+v, want an empty frame", rs[2])
	}
	if f, d := r.Counts(); f != 2 || d != 1 {
		t.Errorf("Counts = %d frames, %d disconnects; want 2 and 1", f, d)
	}
	errs := failures(func(tb testing.TB) {
		r.WaitFor(tb, 10*time.Millisecond, "a fourth record", func(rs []Record) bool { return len(rs) > 3 })
	})
	if len(errs) != 1 || !strings.Contains(errs[0], "waiting for a fourth record") {
		t.Errorf("a wait that times out reported %q", errs)
	}
}
