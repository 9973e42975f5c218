package venuetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Venue is one venue's side of the conformance suite: a mock of the venue
// (built on Server) that can inject faults, and a way to build the adapter
// against it. Each venue's tests implement it next to the adapter.
//
// The mock keeps a true book for Symbol, changes it on Step and sends the
// venue's update frames for each change to every connection subscribed to
// it; a new subscription gets the venue's snapshot (or, for Binance, the
// REST snapshot bridge applies).
type Venue interface {
	// Name is the venue's name ("coinbase").
	Name() string
	// Symbol is a symbol the mock serves; RefusedSymbol one it refuses the
	// way the venue does (for Binance: absent from exchangeInfo).
	Symbol() string
	RefusedSymbol() string
	// Start starts the mock for one test (a Server bound to t).
	Start(t *testing.T)
	// NewAdapter builds the adapter pointed at the running mock, from cfg
	// (Sink, Symbols, Channels set by Run) with the endpoints filled in and
	// ReadTimeout/PingInterval short enough that silence is detected
	// within about a second.
	NewAdapter(cfg venue.Config) (venue.Adapter, error)
	// Step changes the true book n times, sending one update frame per
	// change to every subscribed connection, and returns once they are
	// written.
	Step(n int)
	// Book returns the true book for Symbol as a correct adapter holds it
	// (truncated to the subscribed depth where the venue limits depth).
	Book() *venue.Book
	// DropNextUpdate makes the next update frame for Symbol not be sent
	// (a gap); the true book still changes.
	DropNextUpdate()
	// CorruptNextChecksum makes the next update frame carry a wrong
	// checksum; it returns false if the venue has no checksum.
	CorruptNextChecksum() bool
	// Server returns the running mock server (to close connections, go
	// silent, count connections).
	Server() *Server
	// Garbage returns frames that do not parse, or parse into something
	// impossible, for the venue; the first does not parse.
	Garbage() [][]byte
	// NewDecoder builds the venue's decoder as replay does (its
	// NewDecoder), writing to cfg.Sink.
	NewDecoder(cfg venue.Config) venue.Decoder
}

// Wait is how long Run waits for anything to happen.
const Wait = 10 * time.Second

// Run runs the conformance suite against v.
func Run(t *testing.T, v Venue) {
	t.Run("SnapshotThenUpdates", func(t *testing.T) {
		h := start(t, v)
		h.recovered(t, v, 20)
	})
	t.Run("GapResyncs", func(t *testing.T) {
		h := start(t, v)
		from := h.sink.NumNotices()
		v.DropNextUpdate()
		v.Step(5)
		n, _ := h.sink.WaitNotice(t, Wait, from, notice.BookResync)
		if n.Stream != "" && n.Stream != string(h.l2) {
			t.Errorf("book_resync names stream %q, want %q", n.Stream, h.l2)
		}
		h.recovered(t, v, 5)
	})
	t.Run("ChecksumResyncs", func(t *testing.T) {
		h := start(t, v)
		if !v.CorruptNextChecksum() {
			t.Skipf("%s sends no checksum", v.Name())
		}
		from := h.sink.NumNotices()
		v.Step(3)
		h.sink.WaitNotice(t, Wait, from, notice.BookResync)
		h.recovered(t, v, 3)
	})
	t.Run("ReconnectsAfterClose", func(t *testing.T) {
		h := start(t, v)
		h.reconnects(t, v, v.Server().CloseAll, nil)
		h.recovered(t, v, 5)
	})
	t.Run("SilenceReconnects", func(t *testing.T) {
		h := start(t, v)
		h.reconnects(t, v, func() { v.Server().SetSilent(true) }, func() { v.Server().SetSilent(false) })
		h.recovered(t, v, 5)
	})
	t.Run("UnsubscribeThenSubscribe", func(t *testing.T) {
		h := start(t, v)
		if err := h.ad.Unsubscribe(v.Symbol()); err != nil {
			t.Fatal(err)
		}
		from := h.sink.NumEvents()
		if err := h.ad.Subscribe(v.Symbol()); err != nil {
			t.Fatal(err)
		}
		h.sink.WaitEvent(t, Wait, from, "a snapshot of "+string(h.l2)+" after subscribing again", func(ev *venue.Event) bool {
			return ev.Stream == h.l2 && ev.Snapshot
		})
		h.recovered(t, v, 5)
	})
	t.Run("RefusedSymbol", func(t *testing.T) {
		h := start(t, v)
		// A symbol no stream can carry is the caller's error, the same
		// on every venue (venue.CheckSymbols); nothing is asked.
		if err := h.ad.Subscribe(v.Symbol(), "not a symbol"); !errors.Is(err, venue.ErrBadSymbol) ||
			!strings.HasPrefix(err.Error(), v.Name()+": bad symbol ") {
			t.Errorf("Subscribe of a malformed symbol = %v, want %s: bad symbol (venue.ErrBadSymbol)", err, v.Name())
		}
		from := h.sink.NumNotices()
		if err := h.ad.Subscribe(v.RefusedSymbol()); err != nil {
			t.Fatalf("Subscribe(%q) = %v; a refusal is a notice, not an error", v.RefusedSymbol(), err)
		}
		n, _ := h.sink.WaitNotice(t, Wait, from, notice.Refusal)
		if n.Venue != v.Name() {
			t.Errorf("refusal venue = %q, want %q", n.Venue, v.Name())
		}
		// The link stays up and the good symbol keeps flowing.
		h.recovered(t, v, 5)
	})
	t.Run("GarbageIsReported", func(t *testing.T) {
		h := start(t, v)
		from := h.sink.NumNotices()
		for _, g := range v.Garbage() {
			v.Server().Broadcast(g)
		}
		h.sink.WaitNotice(t, Wait, from, notice.DataQuality)
		h.recovered(t, v, 5)
		// The frames came in one burst: one notice, however many were bad.
		if dq := kindsSince(h.sink, from, notice.DataQuality); len(dq) != 1 {
			t.Errorf("%d data_quality notices for one burst of garbage, want 1: %v", len(dq), dq)
		}
	})
	t.Run("BadFramesOnePerBurst", func(t *testing.T) {
		v.Start(t)
		badFramesOnePerBurst(t, v)
	})
	t.Run("CoverageFromObservation", func(t *testing.T) {
		h := start(t, v)
		v.Step(3)
		h.sink.WaitBook(t, Wait, h.l2, v.Book)
		cov := h.ad.Coverage()
		if cov.Venue != v.Name() || cov.Link != venue.LinkUp.String() {
			t.Fatalf("coverage = %+v, want venue %s link up", cov, v.Name())
		}
		found := false
		for _, sc := range cov.Streams {
			found = found || sc.Stream == h.l2
		}
		if !found {
			t.Fatalf("coverage streams %+v lack %s after its events arrived", cov.Streams, h.l2)
		}
		from := h.sink.NumNotices()
		v.Server().SetSilent(true)
		h.sink.WaitNotice(t, Wait, from, notice.LinkDown)
		if cov := h.ad.Coverage(); len(cov.Streams) != 0 {
			t.Fatalf("coverage after link down = %+v, want no streams", cov.Streams)
		}
		v.Server().SetSilent(false)
	})
}

// badFramesOnePerBurst feeds the venue's decoder two bursts of bad frames
// at chosen receive times. The first is its first Garbage frame (which does
// not parse) again and again, less than venue.BadFrameQuiet apart for three
// quiet windows, then every Garbage frame: one data_quality notice. The
// second starts venue.BadFrameQuiet after the first ends: one more. Each
// names a stream of the venue or, for a frame of no known stream, the
// connection, and quotes the start of the frame that began its burst.
func badFramesOnePerBurst(t *testing.T, v Venue) {
	t.Helper()
	garbage := v.Garbage()
	sink := NewSink()
	d := v.NewDecoder(venue.Config{Sink: sink, Symbols: []string{v.Symbol()}})
	at := time.Unix(1_800_000_000, 0)
	gap := venue.BadFrameQuiet - time.Millisecond
	const n = 4
	burst := func(gap time.Duration, n int) {
		for i := range n {
			if i > 0 {
				at = at.Add(gap)
			}
			d.Frame(at, garbage[0])
		}
		for _, g := range garbage {
			at = at.Add(time.Millisecond)
			d.Frame(at, g)
		}
	}
	firsts := [][]byte{garbage[0], garbage[0]}
	burst(gap, n)
	if dq := kindsSince(sink, 0, notice.DataQuality); len(dq) != 1 {
		t.Fatalf("a burst of bad frames %v apart (%v in all) gave %d data_quality notices, want 1: %v",
			gap, time.Duration(n-1)*gap, len(dq), dq)
	}
	at = at.Add(venue.BadFrameQuiet) // BadFrameQuiet after the last frame
	burst(time.Millisecond, 1)
	dq := kindsSince(sink, 0, notice.DataQuality)
	if len(dq) != 2 {
		t.Fatalf("a second burst %v after the first gave %d data_quality notices in all, want 2: %v", venue.BadFrameQuiet, len(dq), dq)
	}
	for i, q := range dq {
		if q.Venue != v.Name() {
			t.Errorf("data_quality venue = %q, want %q", q.Venue, v.Name())
		}
		if _, ok := q.Details["connection"]; q.Stream == "" && !ok {
			t.Errorf("data_quality names neither a stream nor a connection: %+v", q)
		} else if q.Stream != "" && venue.Stream(q.Stream).Venue() != v.Name() {
			t.Errorf("data_quality names stream %q of another venue", q.Stream)
		}
		if got, want := q.Details["sample"], venue.Sample(firsts[i]); got != want {
			t.Errorf("data_quality %d sample = %q, want %q", i, got, want)
		}
	}
	if a, b := dq[0].Details["bad_frames"], dq[1].Details["bad_frames"]; fmt.Sprint(a) != "1" || fmt.Sprint(b) == "1" {
		t.Errorf("bad_frames = %v then %v, want 1 then the count so far", a, b)
	}
	sink.Check(t)
}

// kindsSince returns the notices of kind the sink recorded from index from.
func kindsSince(s *Sink, from int, kind notice.Kind) []notice.Notice {
	var out []notice.Notice
	for _, n := range s.Notices()[from:] {
		if n.Kind == kind {
			out = append(out, n)
		}
	}
	return out
}

// recovered steps the venue n times and waits until the consumer's book is
// the venue's again, then checks the stream's invariants.
func (h *harness) recovered(t *testing.T, v Venue, n int) {
	t.Helper()
	v.Step(n)
	h.sink.WaitBook(t, Wait, h.l2, v.Book)
	h.sink.Check(t)
}

// reconnects runs fault, which must cut the link, then waits for link_down,
// a new connection and link_up after it; heal, if set, runs once link_down
// is seen.
func (h *harness) reconnects(t *testing.T, v Venue, fault, heal func()) {
	t.Helper()
	from := h.sink.NumNotices()
	accepted := v.Server().Accepted()
	fault()
	_, i := h.sink.WaitNotice(t, Wait, from, notice.LinkDown)
	if heal != nil {
		heal()
	}
	v.Server().WaitAccepted(t, accepted+1, Wait)
	h.sink.WaitNotice(t, Wait, i, notice.LinkUp)
}

type harness struct {
	sink *Sink
	ad   venue.Adapter
	l2   venue.Stream
}

// start runs v's mock and an adapter subscribed to Symbol's level2 stream,
// and waits for its first snapshot.
func start(t *testing.T, v Venue) *harness {
	t.Helper()
	ad, sink := Start(t, v, venue.Config{Symbols: []string{v.Symbol()}, Channels: []venue.Channel{venue.Level2}})
	return &harness{sink: sink, ad: ad, l2: venue.NewStream(v.Name(), venue.Level2, v.Symbol())}
}

// Strings returns levels as [price, size] strings, as GET /v1/books and
// the testdata books write them.
func Strings(ls []venue.Level) [][2]string {
	out := make([][2]string, len(ls))
	for i, l := range ls {
		out[i] = [2]string{l.Price.String(), l.Size.String()}
	}
	return out
}
