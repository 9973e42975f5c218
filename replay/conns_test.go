package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/coinbase"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

// byStream splits an export's event lines (receive times removed) by
// stream: the order within a stream is one connection's, which replay
// keeps; across connections it is the decode lock's, which a capture does
// not record.
func byStream(t *testing.T, b []byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, l := range eventsOnly(b) {
		i := strings.Index(l, `"stream":"`)
		if i < 0 {
			t.Fatalf("event with no stream: %s", l)
		}
		s := l[i+len(`"stream":"`):]
		s = s[:strings.IndexByte(s, '"')]
		out[s] = append(out[s], l)
	}
	return out
}

// A venue spread over several connections records one capture per
// connection, and replaying them together rebuilds every book as the live
// run had it: Coinbase with 40 level2 products (16 a connection, so 3),
// one connection dropped half way. Each stream's events are the live
// ones, every book is exact, and the replayed drop costs only the dropped
// connection's books, as it did live.
func TestRecordConnectionsReplayExactly(t *testing.T) {
	m := &coinbasetest.Mock{}
	syms := m.Serve(40)
	m.Start(t)
	dir := t.TempDir()
	var mu sync.Mutex
	var segs []replay.Segment
	rec, err := replay.NewRecorder(replay.RecorderOptions{Dir: dir, MaxBytes: 1 << 40, Version: "test",
		Meta:      func(string) replay.Meta { return replay.Meta{Endpoint: m.Server().URL, Subscriptions: syms} },
		OnSegment: func(s replay.Segment) { mu.Lock(); segs = append(segs, s); mu.Unlock() },
		OnError:   func(v string, err error) { t.Errorf("recorder: %s: %v", v, err) }})
	if err != nil {
		t.Fatal(err)
	}
	var live bytes.Buffer
	check := venuetest.NewSink()
	export := replay.NewExportSink(&live)
	ad, err := m.NewAdapter(venue.Config{Sink: tee{check, export}, Recorder: rec, Symbols: syms})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := func(s string) venue.Stream { return venue.NewStream(coinbase.Name, venue.Level2, s) }
	trueBook := func(s string) func() *venue.Book {
		if s == coinbasetest.Symbol {
			return m.Book
		}
		return func() *venue.Book { return m.ProductBook(s) }
	}
	step := func() {
		m.Step(20)
		m.StepProducts(10, syms[1:]...)
		for _, s := range syms {
			check.WaitBook(t, venuetest.Wait, l2(s), trueBook(s))
		}
	}
	step()
	if n := len(m.Level2()); n != 3 {
		t.Fatalf("level2 on %d connections, want 3", n)
	}
	from := check.NumNotices()
	had := m.CloseConnOf("P30-USD")
	if len(had) == 0 || len(had) > coinbasetest.DefaultMaxL2 {
		t.Fatalf("the dropped connection had %v", had)
	}
	check.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	check.WaitNotice(t, venuetest.Wait, from, notice.LinkUp)
	step()
	noNotice := func(sink *venuetest.Sink, kinds ...notice.Kind) {
		t.Helper()
		for _, n := range sink.Notices() {
			if slices.Contains(kinds, n.Kind) {
				t.Errorf("%s: %s", n.Kind, n.Message)
			}
		}
	}
	noNotice(check, notice.BookResync, notice.Refusal)
	stopRecording(t, ad, rec)
	export.Flush()
	check.Check(t)

	// One segment per connection, each naming its connection and listing
	// its own products.
	mu.Lock()
	defer mu.Unlock()
	if len(segs) != 3 {
		t.Fatalf("%d segments, want 3 (one per connection): %v", len(segs), segs)
	}
	slices.SortFunc(segs, func(a, b replay.Segment) int { return a.Conn - b.Conn })
	var paths, listed []string
	for i, s := range segs {
		base := filepath.Base(s.Path)
		wantPrefix := fmt.Sprintf("coinbase-c%d-", i)
		if i == 0 {
			wantPrefix = "coinbase-2" // connection 0 keeps the unnumbered name: coinbase-<start>
		}
		if s.Conn != i || !strings.HasPrefix(base, wantPrefix) {
			t.Errorf("segment %d: conn %d, %s; want conn %d named %s…", i, s.Conn, base, i, wantPrefix)
		}
		f, err := replay.Open(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		meta := f.Meta
		f.Close()
		if meta.Venue != coinbase.Name || meta.Connection != i || len(meta.Subscriptions) == 0 || len(meta.Subscriptions) > coinbasetest.DefaultMaxL2 {
			t.Errorf("segment %d meta %+v", i, meta)
		}
		listed = append(listed, meta.Subscriptions...)
		paths = append(paths, s.Path)
	}
	slices.Sort(listed)
	want := slices.Sorted(slices.Values(syms))
	if !slices.Equal(listed, want) {
		t.Errorf("the segments list %v, want each product once: %v", listed, want)
	}

	// Replay the three together, serially and in parallel.
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			sink := venuetest.NewSink()
			var out bytes.Buffer
			exp := replay.NewExportSink(&out)
			var srcs []replay.Source
			for _, p := range paths {
				srcs = append(srcs, replay.FileSource(p, ""))
			}
			decoders := 0
			st, err := replay.Play(context.Background(), replay.PlayerOptions{
				Parallel: parallel,
				NewDecoder: func(v string, s venue.Sink) (venue.Decoder, error) {
					decoders++
					return coinbase.NewDecoder(venue.Config{Sink: s}), nil
				},
				Sink: func(string) (venue.Sink, error) { return tee{sink, exp}, nil },
			}, srcs)
			if err != nil {
				t.Fatal(err)
			}
			exp.Flush()
			if decoders != 3 {
				t.Errorf("%d decoders, want one per capture", decoders)
			}
			// The drop, then each connection's stop.
			if st.Disconnects != 4 {
				t.Errorf("%d disconnects replayed, want 4", st.Disconnects)
			}
			sink.Check(t)
			for _, s := range syms {
				got, tb := sink.Book(l2(s)), trueBook(s)()
				if got == nil {
					t.Errorf("%s: no replayed book", s)
					continue
				}
				g, w := got.Snapshot(""), tb.Snapshot("")
				if fmt.Sprint(venuetest.Strings(g.Bids), venuetest.Strings(g.Asks)) != fmt.Sprint(venuetest.Strings(w.Bids), venuetest.Strings(w.Asks)) {
					t.Errorf("%s: replayed book differs from the true book", s)
				}
			}
			noNotice(sink, notice.BookResync, notice.Refusal, notice.DataQuality)
			// The mid-run link_down names the dropped connection's streams.
			var downs []notice.Notice
			for _, n := range sink.Notices() {
				if n.Kind == notice.LinkDown {
					downs = append(downs, n)
				}
			}
			if len(downs) == 0 {
				t.Fatal("no link_down replayed")
			}
			first := downs[0]
			streams, _ := first.Details["streams"].([]string)
			var l2s []string
			for _, st := range streams {
				if s, err := venue.ParseStream(st); err == nil && s.Channel() == venue.Level2 {
					l2s = append(l2s, s.Symbol())
				}
			}
			if !slices.Equal(l2s, slices.Sorted(slices.Values(had))) {
				t.Errorf("the replayed drop names level2 of %v; the connection had %v", l2s, had)
			}
			// Each stream's events are the live run's, receive times aside.
			lv, rp := byStream(t, live.Bytes()), byStream(t, out.Bytes())
			if len(lv) < len(syms) {
				t.Fatalf("the live run has %d streams", len(lv))
			}
			for s, evs := range lv {
				if !slices.Equal(evs, rp[s]) {
					t.Errorf("%s: live %d events, replay %d, or they differ", s, len(evs), len(rp[s]))
				}
			}
			if len(rp) != len(lv) {
				t.Errorf("replay has %d streams, live %d", len(rp), len(lv))
			}
		})
	}
}
