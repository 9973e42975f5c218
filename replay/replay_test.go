package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/shopspring/decimal"
	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 123456700, time.UTC)

func TestTimeFormat(t *testing.T) {
	got := string(AppendTime(nil, t0))
	if got != "2026-11-29T12:00:00.1234567Z" || len(got) != TimeLen {
		t.Fatalf("AppendTime = %q", got)
	}
	back, err := ParseTime([]byte(got))
	if err != nil || !back.Equal(t0) {
		t.Fatalf("ParseTime = %v, %v", back, err)
	}
	if _, err := ParseTime([]byte("2026-02-31T12:00:00.1234567Z")); err == nil {
		t.Fatal("February 31st accepted")
	}
	if tt, err := ParseTime([]byte("2026-11-29T12:00:00Z")); err != nil || !tt.Equal(t0.Truncate(time.Second)) {
		t.Fatalf("RFC 3339 fallback: %v %v", tt, err)
	}
}

func TestWriterReaderRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	frames := []string{`{"a":1}`, "{\"b\":\n2}", `{"c":"x y"}`}
	for i, f := range frames {
		if err := w.Frame(t0.Add(time.Duration(i)*time.Millisecond), []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	w.Disconnect()
	w.Frame(t0.Add(time.Second), []byte(`{"d":4}`))
	r := NewReader(&buf, "x.jsonl")
	var got []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Disconnect {
			got = append(got, "<disconnect>")
			continue
		}
		got = append(got, string(rec.Frame))
	}
	want := []string{`{"a":1}`, `{"b": 2}`, `{"c":"x y"}`, "<disconnect>", `{"d":4}`}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestReaderErrorsNameFileAndLine(t *testing.T) {
	in := "2026-11-29T12:00:00.1234567Z {}\nnot-a-time {}\nnospace\n2026-11-29T12:00:00.1234567Z {\"ok\":1}\n"
	r := NewReader(strings.NewReader(in), "cap.jsonl")
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := r.Next()
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !strings.Contains(err.Error(), "cap.jsonl:2:") {
		t.Fatalf("line 2: %v", err)
	}
	if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "cap.jsonl:3:") {
		t.Fatalf("line 3: %v", err)
	}
	rec, err := r.Next()
	if err != nil || string(rec.Frame) != `{"ok":1}` || rec.Line != 4 {
		t.Fatalf("reading did not continue after bad lines: %+v %v", rec, err)
	}
}

func TestReaderLineTooLong(t *testing.T) {
	long := "2026-11-29T12:00:00.1234567Z " + strings.Repeat("x", 5000) + "\n2026-11-29T12:00:00.1234567Z {}\n"
	r := NewReader(strings.NewReader(long), "big.jsonl")
	r.max = 1000
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "big.jsonl:1:") {
		t.Fatalf("long line: %v", err)
	}
	if rec, err := r.Next(); err != nil || rec.Line != 2 {
		t.Fatalf("after long line: %+v %v", rec, err)
	}
}

func TestOpenGzipWithMeta(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.jsonl.gz")
	f, _ := os.Create(p)
	zw := gzip.NewWriter(f)
	zw.Comment = MetaComment(Meta{Venue: "kraken", Endpoint: "wss://ws.kraken.com/v2", Subscriptions: []string{"BTC/USD", "ÉTH"}})
	NewWriter(zw).Frame(t0, []byte(`{"x":1}`))
	zw.Close()
	f.Close()
	cf, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	if cf.Meta.Venue != "kraken" || cf.Meta.Subscriptions[1] != "ÉTH" {
		t.Fatalf("meta %+v", cf.Meta)
	}
	if rec, err := cf.Next(); err != nil || string(rec.Frame) != `{"x":1}` {
		t.Fatalf("record %+v %v", rec, err)
	}
	// Plain file with a sidecar.
	p2 := filepath.Join(dir, "d.jsonl")
	os.WriteFile(p2, []byte("2026-11-29T12:00:00.1234567Z {}\n"), 0o644)
	os.WriteFile(p2+".meta.json", []byte(`{"venue":"okx"}`), 0o644)
	cf2, err := Open(p2)
	if err != nil || cf2.Meta.Venue != "okx" {
		t.Fatalf("sidecar: %+v %v", cf2, err)
	}
	cf2.Close()
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("2026-11-29T12:00:00.1234567Z {\"a\":1}\n\n2026-11-29T12:00:00.1234568Z {}\n"))
	f.Add([]byte("2026-11-29T12:00:00.12345"))
	f.Add([]byte("\x00\xff\xfe\n\r\n"))
	f.Add([]byte("9999-99-99T99:99:99.9999999Z x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b), "fuzz")
		r.max = 4096
		for range 10000 {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			var le *LineError
			if err != nil && !errors.As(err, &le) {
				t.Fatalf("error without file and line: %v", err)
			}
			if err == nil && !rec.Disconnect && len(rec.Frame) == 0 {
				t.Fatal("frame record without a frame")
			}
		}
	})
}

// toyDecoder turns frames {"s":stream,"p":price} into trades.
type toyDecoder struct {
	sink    venue.Sink
	mu      sync.Mutex
	downs   int
	frames  int
	lastRcv time.Time
}

func (d *toyDecoder) Frame(recv time.Time, frame []byte) {
	var w struct{ S, P string }
	if err := json.Unmarshal(frame, &w); err != nil || w.S == "" {
		return
	}
	price, err := decimal.NewFromString(w.P)
	if err != nil {
		return
	}
	d.mu.Lock()
	d.frames++
	d.lastRcv = recv
	d.mu.Unlock()
	d.sink.Event(&venue.Event{Kind: venue.KindTrade, Stream: venue.Stream(w.S), Price: price, Size: decimal.New(1, 0), RecvTime: recv})
}

func (d *toyDecoder) LinkDown(time.Time) {
	d.mu.Lock()
	d.downs++
	d.mu.Unlock()
}

type memSink struct {
	mu      sync.Mutex
	events  []*venue.Event
	notices []notice.Notice
}

func (s *memSink) Event(ev *venue.Event) {
	s.mu.Lock()
	s.events = append(s.events, ev.Clone())
	s.mu.Unlock()
}
func (s *memSink) Notice(n notice.Notice) {
	s.mu.Lock()
	s.notices = append(s.notices, n)
	s.mu.Unlock()
}

func writeCapture(t *testing.T, dir, name, venueName string, lines ...string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	os.WriteFile(p, []byte(b.String()), 0o644)
	os.WriteFile(p+".meta.json", []byte(`{"venue":"`+venueName+`"}`), 0o644)
	return p
}

func playOpts(sink *memSink, decs map[string]*toyDecoder) PlayerOptions {
	return PlayerOptions{
		NewDecoder: func(v string, s venue.Sink) (venue.Decoder, error) {
			d := &toyDecoder{sink: s}
			decs[v] = d
			return d, nil
		},
		Sink: func(string) (venue.Sink, error) { return sink, nil },
	}
}

func TestPlayMergesInTimeOrderAndEnds(t *testing.T) {
	dir := t.TempDir()
	a := writeCapture(t, dir, "a.jsonl", "va",
		`2026-11-29T12:00:00.0000001Z {"s":"va:trades:X","p":"1"}`,
		`2026-11-29T12:00:00.0000003Z {"s":"va:trades:X","p":"3"}`,
		``,
		`2026-11-29T12:00:00.0000005Z {"s":"va:trades:X","p":"5"}`)
	b := writeCapture(t, dir, "b.jsonl", "vb",
		`2026-11-29T12:00:00.0000002Z {"s":"vb:trades:Y","p":"2"}`,
		`2026-11-29T12:00:00.0000004Z {"s":"vb:trades:Y","p":"4"}`)
	sink := &memSink{}
	decs := map[string]*toyDecoder{}
	st, err := Play(context.Background(), playOpts(sink, decs), []Source{FileSource(a, ""), FileSource(b, "")})
	if err != nil {
		t.Fatal(err)
	}
	var prices []string
	for _, e := range sink.events {
		prices = append(prices, e.Price.String())
	}
	if !slices.Equal(prices, []string{"1", "2", "3", "4", "5"}) {
		t.Fatalf("order %v", prices)
	}
	if st.Frames != 5 || st.Disconnects != 1 || decs["va"].downs != 1 {
		t.Fatalf("stats %+v downs %d", st, decs["va"].downs)
	}
	var kinds []string
	for _, n := range sink.notices {
		kinds = append(kinds, n.Kind.String()+":"+n.Stream)
	}
	want := []string{"link_down:", "replay_end:vb:trades:Y", "replay_end:va:trades:X"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("notices %v, want %v", kinds, want)
	}
}

func TestPlayNeedsVenue(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.jsonl")
	os.WriteFile(p, []byte("2026-11-29T12:00:00.0000001Z {}\n"), 0o644)
	_, err := Play(context.Background(), playOpts(&memSink{}, map[string]*toyDecoder{}), []Source{FileSource(p, "")})
	if err == nil || !strings.Contains(err.Error(), "--venue") {
		t.Fatalf("err %v", err)
	}
	if _, err := Play(context.Background(), playOpts(&memSink{}, map[string]*toyDecoder{}), []Source{FileSource(p, "vz")}); err != nil {
		t.Fatalf("--venue override: %v", err)
	}
}

func TestPlayPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		p := writeCapture(t, dir, "a.jsonl", "va",
			`2026-11-29T12:00:00.0000000Z {"s":"va:trades:X","p":"1"}`,
			`2026-11-29T12:00:10.0000000Z {"s":"va:trades:X","p":"2"}`)
		for _, tc := range []struct {
			speed float64
			want  time.Duration
		}{{1, 10 * time.Second}, {5, 2 * time.Second}, {0, 0}} {
			o := playOpts(&memSink{}, map[string]*toyDecoder{})
			o.Speed = tc.speed
			start := time.Now()
			if _, err := Play(context.Background(), o, []Source{FileSource(p, "")}); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(start); got != tc.want {
				t.Errorf("speed %v took %v, want %v", tc.speed, got, tc.want)
			}
		}
	})
}

func TestPlayWaitsForStartAndLoops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		p := writeCapture(t, dir, "a.jsonl", "va",
			`2026-11-29T12:00:00.0000000Z {"s":"va:trades:X","p":"1"}`,
			`2026-11-29T12:00:01.0000000Z {"s":"va:trades:X","p":"2"}`)
		sink := &memSink{}
		o := playOpts(sink, map[string]*toyDecoder{})
		o.Speed, o.Loop = 1, true
		start := make(chan struct{})
		o.Start = start
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := Play(ctx, o, []Source{FileSource(p, "")})
			done <- err
		}()
		time.Sleep(time.Hour)
		synctest.Wait()
		if len(sink.events) != 0 {
			t.Fatal("played before start")
		}
		close(start)
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		sink.mu.Lock()
		n := len(sink.events)
		sink.mu.Unlock()
		if n < 4 {
			t.Fatalf("%d events after 3.5 s of looping a 1 s capture, want at least 4", n)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("loop ended with %v", err)
		}
	})
}

func TestExportSinkAssignsSeq(t *testing.T) {
	var buf bytes.Buffer
	s := NewExportSink(&buf)
	for range 3 {
		s.Event(&venue.Event{Kind: venue.KindTrade, Stream: "va:trades:X", Price: decimal.New(1, 0), Size: decimal.New(1, 0), RecvTime: t0})
	}
	s.Notice(notice.Must(notice.ReplayEnd, "va", "va:trades:X", t0, "end", nil))
	s.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[2], `"seq":3`) || !strings.Contains(lines[3], `"kind":"replay_end"`) {
		t.Fatalf("export:\n%s", buf.String())
	}
}

// TestPlayAligns: with Align, captures of two venues recorded an hour
// apart play together, paced from the same start; a venue's two captures
// (consecutive segments) keep their relative times. Without it the later
// venue waits the hour.
func TestPlayAligns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		a1 := writeCapture(t, dir, "a1.jsonl", "va",
			`2026-11-29T12:00:00.0000000Z {"s":"va:trades:X","p":"1"}`,
			`2026-11-29T12:00:02.0000000Z {"s":"va:trades:X","p":"3"}`)
		a2 := writeCapture(t, dir, "a2.jsonl", "va",
			`2026-11-29T12:00:04.0000000Z {"s":"va:trades:X","p":"5"}`)
		b := writeCapture(t, dir, "b.jsonl", "vb",
			`2026-11-29T13:00:01.0000000Z {"s":"vb:trades:Y","p":"2"}`,
			`2026-11-29T13:00:04.0000000Z {"s":"vb:trades:Y","p":"4"}`)
		for _, tc := range []struct {
			align bool
			want  time.Duration
			order []string
		}{
			{true, 4 * time.Second, []string{"2", "1", "3", "4", "5"}}, // equal times: source order
			{false, time.Hour + 4*time.Second, []string{"1", "3", "5", "2", "4"}},
		} {
			sink := &memSink{}
			o := playOpts(sink, map[string]*toyDecoder{})
			o.Speed, o.Align = 1, tc.align
			start := time.Now()
			if _, err := Play(context.Background(), o, []Source{FileSource(b, ""), FileSource(a1, ""), FileSource(a2, "")}); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(start); got != tc.want {
				t.Errorf("align %v: took %v, want %v", tc.align, got, tc.want)
			}
			var prices []string
			for _, e := range sink.events {
				prices = append(prices, e.Price.String())
			}
			if !slices.Equal(prices, tc.order) {
				t.Errorf("align %v: order %v, want %v", tc.align, prices, tc.order)
			}
		}
	})
}

// TestPlayLiveLinks: with LiveLinks a disconnect line inside a capture is
// a link_down followed, at the next frame, by a link_up; the disconnect
// that ends the capture sends none, looped or not. Without it every
// disconnect line is a link_down.
func TestPlayLiveLinks(t *testing.T) {
	dir := t.TempDir()
	p := writeCapture(t, dir, "a.jsonl", "va",
		`2026-11-29T12:00:00.0000001Z {"s":"va:trades:X","p":"1"}`,
		``,
		`2026-11-29T12:00:00.0000003Z {"s":"va:trades:X","p":"3"}`,
		``)
	kinds := func(sink *memSink) []string {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		var ks []string
		for _, n := range sink.notices {
			if err := notice.CheckDetails(n); err != nil {
				t.Fatal(err)
			}
			ks = append(ks, n.Kind.String())
		}
		return ks
	}
	for _, tc := range []struct {
		live bool
		want []string
	}{
		{true, []string{"link_down", "link_up", "replay_end"}},
		{false, []string{"link_down", "link_down", "replay_end"}},
	} {
		sink := &memSink{}
		decs := map[string]*toyDecoder{}
		o := playOpts(sink, decs)
		o.LiveLinks = tc.live
		st, err := Play(context.Background(), o, []Source{FileSource(p, "")})
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(sink); !slices.Equal(got, tc.want) {
			t.Errorf("live %v: notices %v, want %v", tc.live, got, tc.want)
		}
		if st.Disconnects != 2 || decs["va"].downs != 2 {
			t.Errorf("live %v: %d disconnects, decoder told %d times", tc.live, st.Disconnects, decs["va"].downs)
		}
	}
	// Looped: one link_down and one link_up per pass.
	synctest.Test(t, func(t *testing.T) {
		sink := &memSink{}
		o := playOpts(sink, map[string]*toyDecoder{})
		o.LiveLinks, o.Loop, o.Speed = true, true, 1
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := Play(ctx, o, []Source{FileSource(p, "")})
			done <- err
		}()
		for {
			time.Sleep(time.Millisecond)
			synctest.Wait()
			sink.mu.Lock()
			n := len(sink.events)
			sink.mu.Unlock()
			if n >= 6 { // three passes
				break
			}
		}
		cancel()
		<-done
		ks := kinds(sink)
		downs, ups := 0, 0
		for i, k := range ks {
			switch k {
			case "link_down":
				downs++
				if i+1 < len(ks) && ks[i+1] != "link_up" {
					t.Fatalf("link_down followed by %s: %v", ks[i+1], ks)
				}
			case "link_up":
				ups++
			}
		}
		if downs < 2 || downs-ups > 1 {
			t.Fatalf("%d link_down, %d link_up over three passes: %v", downs, ups, ks)
		}
	})
}
