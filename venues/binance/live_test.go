package binance_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/binance"
	"github.com/fanoutd/fanoutd/venues/binance/binancetest"
)

// startLive runs an adapter against m with all three channels, until its
// level2 stream is covered.
func startLive(t *testing.T, m *binancetest.Mock, rec venue.Recorder) (*venuetest.Sink, venue.Adapter) {
	t.Helper()
	ad, sink := venuetest.Start(t, m, venue.Config{Recorder: rec})
	waitCovered(t, sink, ad, venue.NewStream("binance", venue.Level2, m.Symbol()))
	return sink, ad
}

// waitCovered waits until ad's coverage lists stream (an event of it reached
// the sink: coverage is observed before the event is passed on).
func waitCovered(t *testing.T, sink *venuetest.Sink, ad venue.Adapter, stream venue.Stream) {
	t.Helper()
	sink.WaitFor(t, venuetest.Wait, string(stream)+" covered", func() bool {
		for _, sc := range ad.Coverage().Streams {
			if sc.Stream == stream {
				return true
			}
		}
		return false
	})
}

// TestRecordedCaptureReplays checks that a capture alone (websocket frames
// and the generated REST snapshot frames, with a gap and a reconnect in
// between) rebuilds the same book through a fresh decoder, with no network.
func TestRecordedCaptureReplays(t *testing.T) {
	m := &binancetest.Mock{}
	rec := &venuetest.Recorder{}
	sink, _ := startLive(t, m, rec)
	l2 := venue.NewStream("binance", venue.Level2, m.Symbol())
	m.Step(10)
	m.DropNextUpdate()
	m.Step(10)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	from := sink.NumNotices()
	m.Server().CloseAll()
	_, i := sink.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	sink.WaitNotice(t, venuetest.Wait, i, notice.LinkUp)
	m.Step(10)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)

	frames := rec.Records()
	snapshots := 0
	for _, f := range frames {
		if bytes.Contains(f.Frame, []byte(`@depthSnapshot","generated":true,"data":{"lastUpdateId":`)) {
			snapshots++
		}
	}
	if snapshots < 3 { // start, the gap, the reconnect
		t.Fatalf("capture holds %d generated snapshot frames, want at least 3", snapshots)
	}
	// The link drop is in the capture, once, between the frames before it
	// and the reconnect's.
	if _, disconnects := rec.Counts(); disconnects != 1 {
		t.Fatalf("capture holds %d disconnects, want 1", disconnects)
	}
	if first, last := frames[0], frames[len(frames)-1]; first.Disconnect || last.Disconnect {
		t.Fatalf("a disconnect at the capture's start or end")
	}
	replay := venuetest.NewSink()
	d := binance.NewDecoder(venue.Config{Sink: replay})
	for _, f := range frames {
		if f.Disconnect {
			d.LinkDown(f.At)
			continue
		}
		d.Frame(f.At, f.Frame)
	}
	if got := replay.Book(l2); !got.Equal(m.Book()) {
		t.Fatalf("replayed book differs from the venue's")
	}
	replay.Check(t)
	// Trades and tickers flowed too.
	kinds := map[venue.Kind]int{}
	for _, e := range sink.Events() {
		kinds[e.Kind]++
	}
	if kinds[venue.KindTrade] == 0 || kinds[venue.KindTicker] == 0 {
		t.Errorf("events by kind = %v, want trades and tickers", kinds)
	}
	sink.Check(t)
}

// TestServerShutdownReconnects: the serverShutdown event makes the adapter
// drop the link and reconnect at once.
func TestServerShutdownReconnects(t *testing.T) {
	m := &binancetest.Mock{}
	sink, _ := startLive(t, m, nil)
	from := sink.NumNotices()
	accepted := m.Server().Accepted()
	m.ServerShutdown()
	n, i := sink.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	if n.Details["reason"] != "serverShutdown" {
		t.Errorf("link_down reason = %v, want serverShutdown", n.Details["reason"])
	}
	m.Server().WaitAccepted(t, accepted+1, venuetest.Wait)
	sink.WaitNotice(t, venuetest.Wait, i, notice.LinkUp)
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, venue.NewStream("binance", venue.Level2, m.Symbol()), m.Book)
	sink.Check(t)
}

// TestSubscribeLaterAndUnsubscribe: a symbol added after start is validated
// and subscribed with its own request; unsubscribing forgets its coverage.
// Several quick Subscribe calls stay under Binance's message rate (the mock
// disconnects past 5 messages a second).
func TestSubscribeLaterAndUnsubscribe(t *testing.T) {
	m := &binancetest.Mock{Symbols: []string{"BTCUSDT", "ETHUSDT", "BNBBTC", "LTCBTC", "XRPUSDT", "ADAUSDT", "DOGEUSDT"}}
	sink, ad := startLive(t, m, nil)
	for _, s := range m.Symbols[1:] {
		if err := ad.Subscribe(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range m.Symbols[1:] {
		waitCovered(t, sink, ad, venue.NewStream("binance", venue.Level2, s))
	}
	if err := ad.Unsubscribe("DOGEUSDT"); err != nil {
		t.Fatal(err)
	}
	for _, sc := range ad.Coverage().Streams {
		if strings.Contains(string(sc.Stream), "DOGEUSDT") {
			t.Errorf("coverage still lists %s after Unsubscribe", sc.Stream)
		}
	}
	if n := m.Server().Accepted(); n != 1 {
		t.Errorf("%d connections, want 1 (the mock disconnects past 5 messages/s)", n)
	}
	for _, n := range sink.Notices() {
		if n.Kind == notice.LinkDown || n.Kind == notice.Refusal {
			t.Errorf("unexpected %s: %s", n.Kind, n.Message)
		}
	}
	sink.Check(t)
}

// TestRefusalFromExchangeInfo: one unknown symbol among good ones is named
// in a refusal; the good ones are subscribed.
func TestRefusalFromExchangeInfo(t *testing.T) {
	m := &binancetest.Mock{}
	ad, sink := venuetest.Start(t, m, venue.Config{Symbols: []string{"BTCUSDT", "NOPEUSDT", "ETHUSDT"}, Channels: []venue.Channel{venue.Level2}})
	n, _ := sink.WaitNotice(t, venuetest.Wait, 0, notice.Refusal)
	if n.Details["symbol"] != "NOPEUSDT" {
		t.Errorf("refusal details = %v, want symbol NOPEUSDT", n.Details)
	}
	waitCovered(t, sink, ad, "binance:level2:BTCUSDT")
	waitCovered(t, sink, ad, "binance:level2:ETHUSDT")
	for _, r := range m.Requests() {
		if strings.Contains(r, "depth") && strings.Contains(r, "NOPEUSDT") {
			t.Errorf("fetched a snapshot for a refused symbol: %s", r)
		}
	}
}

// TestSnapshotRateLimitedThenRetried: a 429 on the depth snapshot is a
// rate_limited notice, a 502 is retried quietly, and the book still
// arrives.
func TestSnapshotRateLimitedThenRetried(t *testing.T) {
	m := &binancetest.Mock{}
	m.Start(t)
	m.FailDepth(1, 429, `{"code":-1003,"msg":"Too many requests; current limit of IP is 6000 request weight per 1 MINUTE."}`, 1)
	m.FailDepth(1, 502, `<html>bad gateway</html>`, 0)
	sink := venuetest.NewSink()
	ad := venuetest.StartAdapter(t, m.NewAdapter, venue.Config{Sink: sink, Symbols: []string{m.Symbol()}, Channels: []venue.Channel{venue.Level2}})
	n, _ := sink.WaitNotice(t, venuetest.Wait, 0, notice.RateLimited)
	if n.Details["status"] != 429 || n.Details["retry_after_s"] != 1 {
		t.Errorf("rate_limited details = %v", n.Details)
	}
	l2 := venue.NewStream("binance", venue.Level2, m.Symbol())
	waitCovered(t, sink, ad, l2)
	m.Step(5)
	sink.WaitBook(t, venuetest.Wait, l2, m.Book)
	depth := 0
	for _, r := range m.Requests() {
		if strings.HasPrefix(r, "/api/v3/depth?") {
			depth++
			if !strings.Contains(r, "limit=5000") || !strings.Contains(r, "symbol=BTCUSDT") {
				t.Errorf("depth request %s, want symbol=BTCUSDT&limit=5000", r)
			}
		}
	}
	if depth != 3 {
		t.Errorf("%d depth requests, want 3 (429, 502, then the snapshot)", depth)
	}
	sink.Check(t)
}
