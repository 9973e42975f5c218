package okx_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/okx"
	"github.com/fanoutd/fanoutd/venues/okx/okxtest"
)

// startAdapter runs an adapter on every channel against a fresh mock,
// until its first level2 snapshot and link_up.
func startAdapter(t *testing.T, rec venue.Recorder) (*okxtest.Mock, venue.Adapter, *venuetest.Sink) {
	t.Helper()
	m := okxtest.New()
	ad, sink := venuetest.Start(t, m, venue.Config{Recorder: rec})
	sink.WaitNotice(t, venuetest.Wait, 0, notice.LinkUp)
	return m, ad, sink
}

func l2(m *okxtest.Mock) venue.Stream { return venue.NewStream("okx", venue.Level2, m.Symbol()) }

func TestAllChannelsAndRecorder(t *testing.T) {
	rec := &venuetest.Recorder{}
	m, ad, sink := startAdapter(t, rec)
	m.Step(12)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	var trades, tickers int
	for _, e := range sink.Events() {
		switch e.Kind {
		case venue.KindTrade:
			trades++
		case venue.KindTicker:
			tickers++
			if e.Bid.Cmp(e.Ask) >= 0 {
				t.Errorf("ticker bid %v >= ask %v", e.Bid, e.Ask)
			}
		}
	}
	if trades == 0 || tickers == 0 {
		// Trades and tickers travel on the same connection before the last
		// book update; by the time the book matches they have arrived.
		t.Fatalf("%d trades, %d tickers, want some of each", trades, tickers)
	}
	if f, _ := rec.Counts(); f < 14 {
		t.Fatalf("recorder saw %d frames, want every frame", f)
	}
	cov := ad.Coverage()
	if len(cov.Streams) != 3 {
		t.Fatalf("coverage %+v, want 3 streams", cov.Streams)
	}
	sink.Check(t)
}

func TestKeepaliveTextPing(t *testing.T) {
	rec := &venuetest.Recorder{}
	_, _, sink := startAdapter(t, rec)
	// Nothing is pushed; the adapter's text pings keep the link alive and
	// the mock answers each with "pong".
	rec.WaitFor(t, venuetest.Wait, "5 pongs", func(rs []venuetest.Record) bool {
		pongs := 0
		for _, r := range rs {
			if !r.Disconnect && string(r.Frame) == "pong" {
				pongs++
			}
		}
		return pongs >= 5
	})
	for _, n := range sink.Notices() {
		if n.Kind == notice.LinkDown {
			t.Fatalf("link went down while pings were answered: %v", n.Message)
		}
	}
}

func TestForcedDisconnect64008(t *testing.T) {
	m, _, sink := startAdapter(t, nil)
	from := sink.NumNotices()
	acc := m.Server().Accepted()
	m.ForceDisconnectNotice()
	n, i := sink.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	if r, _ := n.Details["reason"].(string); r == "" || !strings.Contains(r, "64008") {
		t.Fatalf("link_down reason %q, want the 64008 notice", r)
	}
	m.Server().WaitAccepted(t, acc+1, venuetest.Wait)
	sink.WaitNotice(t, venuetest.Wait, i, notice.LinkUp)
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	sink.Check(t)
}

func TestSequenceResetIsLegal(t *testing.T) {
	m, _, sink := startAdapter(t, nil)
	m.Step(3)
	m.ResetSeqNext()
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	for _, n := range sink.Notices() {
		if n.Kind == notice.BookResync {
			t.Fatalf("a sequence reset caused %v", n.Details)
		}
	}
	sink.Check(t)
}

func TestRefusedSymbolNotRetried(t *testing.T) {
	m, ad, sink := startAdapter(t, nil)
	from := sink.NumNotices()
	if err := ad.Subscribe(m.RefusedSymbol()); err != nil {
		t.Fatal(err)
	}
	n, _ := sink.WaitNotice(t, venuetest.Wait, from, notice.Refusal)
	if n.Stream != "okx:level2:"+m.RefusedSymbol() || n.Details["code"] != "60018" {
		t.Fatalf("refusal %+v", n)
	}
	// After a reconnect the refused symbol is not asked for again.
	from = sink.NumNotices()
	m.Server().CloseAll()
	_, i := sink.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	sink.WaitNotice(t, venuetest.Wait, i, notice.LinkUp)
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	for _, n := range sink.Notices()[i:] {
		if n.Kind == notice.Refusal {
			t.Fatalf("refused symbol subscribed again after reconnect")
		}
	}
}

func TestUnsubscribe(t *testing.T) {
	m, ad, sink := startAdapter(t, nil)
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	if err := ad.Unsubscribe(m.Symbol()); err != nil {
		t.Fatal(err)
	}
	if cov := ad.Coverage(); len(cov.Streams) != 0 {
		t.Fatalf("coverage after unsubscribe: %+v", cov.Streams)
	}
	if err := ad.Subscribe(m.Symbol()); err != nil {
		t.Fatal(err)
	}
	m.Step(3)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	sink.Check(t)
}

func TestConfig(t *testing.T) {
	if _, err := okx.New(venue.Config{}); err == nil {
		t.Error("New without a sink succeeded")
	}
	if _, err := okx.New(venue.Config{Sink: venuetest.NewSink(), Symbols: []string{`BAD"SYM`}}); err == nil {
		t.Error("New with a bad symbol succeeded")
	}
	ad, err := okx.New(venue.Config{Sink: venuetest.NewSink()})
	if err != nil {
		t.Fatal(err)
	}
	if ad.Venue() != "okx" || ad.Coverage().Link != "idle" {
		t.Errorf("new adapter: venue %q link %q", ad.Venue(), ad.Coverage().Link)
	}
	if err := ad.Stop(context.Background()); err != nil {
		t.Errorf("Stop before Start: %v", err)
	}
}

// TestRefusedAtStart: a refused symbol among the initial ones does not hold
// link_up back, and the good symbol's book flows.
func TestRefusedAtStart(t *testing.T) {
	m := okxtest.New()
	_, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{m.RefusedSymbol(), m.Symbol()}, Channels: []venue.Channel{venue.Level2}})
	sink.WaitNotice(t, venuetest.Wait, 0, notice.Refusal)
	sink.WaitNotice(t, venuetest.Wait, 0, notice.LinkUp)
	m.Step(4)
	sink.WaitBook(t, venuetest.Wait, l2(m), m.Book)
	sink.Check(t)
}
