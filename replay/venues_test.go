package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/binance"
	"github.com/fanoutd/fanoutd/venues/binance/binancetest"
	"github.com/fanoutd/fanoutd/venues/bybit"
	"github.com/fanoutd/fanoutd/venues/bybit/bybittest"
	"github.com/fanoutd/fanoutd/venues/coinbase"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
	"github.com/fanoutd/fanoutd/venues/kraken"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
	"github.com/fanoutd/fanoutd/venues/okx"
	"github.com/fanoutd/fanoutd/venues/okx/okxtest"
)

var update = flag.Bool("update", false, "regenerate testdata/replay captures by recording the mock venues")

// venueCase is one venue's mock (to record from) and decoder (to replay
// through).
type venueCase struct {
	name    string
	mock    func() venuetest.Venue
	decoder func(venue.Config) venue.Decoder
}

var venueCases = []venueCase{
	{"binance", func() venuetest.Venue { return &binancetest.Mock{} }, func(c venue.Config) venue.Decoder { return binance.NewDecoder(c) }},
	{"bybit", func() venuetest.Venue { return bybittest.New() }, func(c venue.Config) venue.Decoder { return bybit.NewDecoder(c) }},
	{"okx", func() venuetest.Venue { return okxtest.New() }, func(c venue.Config) venue.Decoder { return okx.NewDecoder(c) }},
	{"coinbase", func() venuetest.Venue { return &coinbasetest.Mock{} }, func(c venue.Config) venue.Decoder { return coinbase.NewDecoder(c) }},
	{"kraken", func() venuetest.Venue { return &krakentest.Mock{} }, func(c venue.Config) venue.Decoder { return kraken.NewDecoder(c) }},
}

const captureFrames = 10000 // book updates per testdata capture

// tee hands everything to several sinks, in order.
type tee []venue.Sink

func (t tee) Event(ev *venue.Event) {
	for _, s := range t {
		s.Event(ev)
	}
}

func (t tee) Notice(n notice.Notice) {
	for _, s := range t {
		s.Notice(n)
	}
}

// recording is what recordLive produced.
type recording struct {
	capture string      // the segment file
	live    []byte      // the live run's --export form
	book    *venue.Book // the venue's true book at the end
	frames  int64
}

// recordLive runs vc's adapter against its mock with a Recorder and an
// export sink attached, steps the mock's book, drops the link once half
// way, and returns the capture, the live normalized stream and the true
// final book.
func recordLive(t *testing.T, vc venueCase, steps int) recording {
	t.Helper()
	return recordWith(t, vc, steps, []venue.Channel{venue.Level2}, nil)
}

// recordWith is recordLive on channels, calling extra (if set) after every
// 100 steps of the book to send the mock's other frames (trades, tickers).
func recordWith(t *testing.T, vc venueCase, steps int, channels []venue.Channel, extra func(m venuetest.Venue, i int)) recording {
	t.Helper()
	m := vc.mock()
	m.Start(t)
	dir := t.TempDir()
	var mu sync.Mutex
	var segs []replay.Segment
	rec, err := replay.NewRecorder(replay.RecorderOptions{Dir: dir, MaxBytes: 1 << 40, Version: "test",
		Meta: func(string) replay.Meta {
			return replay.Meta{Endpoint: m.Server().URL, Subscriptions: []string{m.Symbol()}}
		},
		OnSegment: func(s replay.Segment) { mu.Lock(); segs = append(segs, s); mu.Unlock() },
		OnError:   func(v string, err error) { t.Errorf("recorder: %s: %v", v, err) }})
	if err != nil {
		t.Fatal(err)
	}
	var live bytes.Buffer
	check := venuetest.NewSink()
	export := replay.NewExportSink(&live)
	ad, err := m.NewAdapter(venue.Config{Sink: tee{check, export}, Recorder: rec, Symbols: []string{m.Symbol()}, Channels: channels})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := venue.NewStream(vc.name, venue.Level2, m.Symbol())
	snapshots := func() int {
		n := 0
		for _, e := range check.Events() {
			if e.Stream == l2 && e.Snapshot {
				n++
			}
		}
		return n
	}
	waitSnapshots := func(n int) {
		deadline := time.Now().Add(venuetest.Wait)
		for snapshots() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no snapshot %d", vc.name, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitSnapshots(1)
	if extra != nil {
		// The other channels' subscriptions follow level2's; let them be
		// answered before the book starts moving (a generator, not a test).
		time.Sleep(300 * time.Millisecond)
	}
	for i := 0; i < steps; i += 100 {
		m.Step(100)
		if extra != nil {
			extra(m, i)
		}
		if i == steps/2 { // a link drop inside the capture: an empty line, a resync
			check.WaitBook(t, venuetest.Wait, l2, m.Book)
			accepted := m.Server().Accepted()
			m.Server().CloseAll()
			m.Server().WaitAccepted(t, accepted+1, venuetest.Wait)
			waitSnapshots(2)
		}
	}
	check.WaitBook(t, venuetest.Wait, l2, m.Book)
	stopRecording(t, ad, rec)
	export.Flush()
	check.Check(t)
	mu.Lock()
	defer mu.Unlock()
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	return recording{capture: segs[0].Path, live: live.Bytes(), book: m.Book(), frames: segs[0].Frames}
}

// playCapture replays path through vc's decoder into sink at max speed.
func playCapture(t *testing.T, vc venueCase, path string, sink venue.Sink) replay.Stats {
	t.Helper()
	st, err := replay.Play(context.Background(), replay.PlayerOptions{
		NewDecoder: func(v string, s venue.Sink) (venue.Decoder, error) {
			if v != vc.name {
				return nil, fmt.Errorf("capture of %q, want %q", v, vc.name)
			}
			return vc.decoder(venue.Config{Sink: s}), nil
		},
		Sink: func(string) (venue.Sink, error) { return sink, nil },
	}, []replay.Source{replay.FileSource(path, "")})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

var recvTime = regexp.MustCompile(`,"recv_time":"[^"]*"`)

// eventsOnly returns the event lines of an export, receive times removed.
func eventsOnly(b []byte) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(l, `{"type":"notice"`) {
			continue
		}
		out = append(out, recvTime.ReplaceAllString(l, ""))
	}
	return out
}

// TestRoundTrip records a live run against each mock venue and replays the
// recording: the normalized event streams are identical, receive times
// aside.
func TestRoundTrip(t *testing.T) {
	for _, vc := range venueCases {
		t.Run(vc.name, func(t *testing.T) {
			r := recordLive(t, vc, 1000)
			var out bytes.Buffer
			export := replay.NewExportSink(&out)
			playCapture(t, vc, r.capture, export)
			export.Flush()
			live, replayed := eventsOnly(r.live), eventsOnly(out.Bytes())
			if len(live) < 1000 {
				t.Fatalf("live run produced %d events", len(live))
			}
			if len(live) != len(replayed) {
				t.Fatalf("live %d events, replay %d", len(live), len(replayed))
			}
			for i := range live {
				if live[i] != replayed[i] {
					t.Fatalf("event %d differs:\nlive   %s\nreplay %s", i, live[i], replayed[i])
				}
			}
			// Coverage is the decoder's: live and replay announce the same.
			liveCov, replayCov := coverageOnly(t, r.live), coverageOnly(t, out.Bytes())
			if len(liveCov) == 0 || fmt.Sprint(liveCov) != fmt.Sprint(replayCov) {
				t.Fatalf("coverage_change live %v, replay %v", liveCov, replayCov)
			}
		})
	}
}

func capturePath(v string) string { return filepath.Join("..", "testdata", "replay", v+".jsonl.gz") }
func bookPath(v string) string    { return filepath.Join("..", "testdata", "replay", v+".book.json") }

// TestGenerateCaptures rewrites testdata/replay from the mock venues when
// run with -update.
func TestGenerateCaptures(t *testing.T) {
	if !*update {
		t.Skip("run with -update to regenerate testdata/replay")
	}
	for _, vc := range venueCases {
		t.Run(vc.name, func(t *testing.T) {
			r := recordLive(t, vc, captureFrames)
			data, err := os.ReadFile(r.capture)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(capturePath(vc.name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			snap := r.book.Snapshot(venue.NewStream(vc.name, venue.Level2, "X"))
			book := map[string]any{"bids": venuetest.Strings(snap.Bids), "asks": venuetest.Strings(snap.Asks)}
			b, _ := json.MarshalIndent(book, "", " ")
			if err := os.WriteFile(bookPath(vc.name), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d frames", vc.name, r.frames)
		})
	}
}

// TestReplayCaptures replays each venue's testdata capture and compares the
// final book with the one recorded beside it, exactly.
func TestReplayCaptures(t *testing.T) {
	for _, vc := range venueCases {
		t.Run(vc.name, func(t *testing.T) {
			f, err := replay.Open(capturePath(vc.name))
			if err != nil {
				t.Fatalf("%v (regenerate with go test ./replay -run TestGenerateCaptures -update)", err)
			}
			meta := f.Meta
			f.Close()
			sink := venuetest.NewSink()
			st := playCapture(t, vc, capturePath(vc.name), sink)
			if st.Frames < captureFrames {
				t.Fatalf("capture holds %d frames, want at least %d", st.Frames, captureFrames)
			}
			if st.Disconnects < 1 {
				t.Fatalf("capture holds no disconnect")
			}
			sink.Check(t)
			var want struct{ Bids, Asks [][2]string }
			b, err := os.ReadFile(bookPath(vc.name))
			if err != nil {
				t.Fatal(err)
			}
			json.Unmarshal(b, &want)
			got := sink.Book(venue.NewStream(vc.name, venue.Level2, meta.Subscriptions[0]))
			gotSnap := got.Snapshot("x:level2:y")
			if fmt.Sprint(venuetest.Strings(gotSnap.Bids)) != fmt.Sprint(want.Bids) || fmt.Sprint(venuetest.Strings(gotSnap.Asks)) != fmt.Sprint(want.Asks) {
				t.Fatalf("replayed book differs from %s:\n got bids %v\nwant bids %v", bookPath(vc.name), venuetest.Strings(gotSnap.Bids), want.Bids)
			}
		})
	}
}

// BenchmarkExport measures replay --export on each venue's testdata
// capture: read, gunzip, decode, keep books, encode every event. One op is
// one whole capture.
func BenchmarkExport(b *testing.B) {
	for _, vc := range venueCases {
		b.Run(vc.name, func(b *testing.B) {
			var frames int64
			for b.Loop() {
				export := replay.NewExportSink(io.Discard)
				st, err := replay.Play(context.Background(), replay.PlayerOptions{
					NewDecoder: func(_ string, s venue.Sink) (venue.Decoder, error) { return vc.decoder(venue.Config{Sink: s}), nil },
					Sink:       func(string) (venue.Sink, error) { return export, nil },
				}, []replay.Source{replay.FileSource(capturePath(vc.name), "")})
				if err != nil {
					b.Fatal(err)
				}
				export.Flush()
				frames += st.Frames
			}
			b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}

// coverageOnly returns the coverage_change notices of an export, as
// "stream live" lines.
func coverageOnly(t *testing.T, b []byte) []string {
	var out []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"kind":"coverage_change"`)) {
			continue
		}
		var n notice.Notice
		if err := json.Unmarshal(line, &n); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out = append(out, fmt.Sprint(n.Details["stream"], " ", n.Details["live"]))
	}
	return out
}

// stopRecording stops the adapter, then closes its recorder (the last
// segments are written).
func stopRecording(t *testing.T, ad venue.Adapter, rec *replay.Recorder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), venuetest.Wait)
	defer cancel()
	if err := ad.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
