package venuetest

import (
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
	// impossible, for the venue.
	Garbage() [][]byte
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
	t.Run("RefusedSymbol", func(t *testing.T) {
		h := start(t, v)
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
