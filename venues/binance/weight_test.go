package binance_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues/binance"
	"github.com/fanoutd/fanoutd/venues/binance/binancetest"
)

// The weight tests run Binance's limits a minute to the second: the mock
// allows 500 weight a second (Binance: 6000 a minute), the adapter spends
// at most 250 (half, as in production). At depth 1000 a snapshot weighs
// 50: 20 books are 1000 weight, four seconds' worth.
const (
	testLimit  = 500
	testBudget = 250
	testDepth  = 1000
	nBooks     = 20
)

// startWeighed runs an adapter for nBooks symbols' level2 against a mock
// with the scaled weight limit, and waits for every book.
func startWeighed(t *testing.T, otherWeight int) (*binancetest.Mock, *venuetest.Sink, []venue.Stream) {
	t.Helper()
	m := &binancetest.Mock{WeightLimit: testLimit, WeightWindow: time.Second, OtherWeight: otherWeight}
	for i := range nBooks {
		m.Symbols = append(m.Symbols, fmt.Sprintf("S%02dUSDT", i))
	}
	m.Start(t)
	sink := venuetest.NewSink()
	var streams []venue.Stream
	for _, s := range m.Symbols {
		streams = append(streams, venue.NewStream(binance.Name, venue.Level2, s))
	}
	venuetest.StartAdapter(t, func(cfg venue.Config) (*binance.Adapter, error) {
		ad, err := m.NewAdapter(cfg)
		if err != nil {
			return nil, err
		}
		a := ad.(*binance.Adapter)
		binance.SetWeightBudget(a, testBudget, time.Second)
		return a, nil
	}, venue.Config{Sink: sink, Symbols: m.Symbols, Channels: []venue.Channel{venue.Level2}, Depth: testDepth})
	waitSnapshots(t, sink, 0, streams)
	return m, sink, streams
}

// waitSnapshots waits for a snapshot of every stream after event from.
func waitSnapshots(t *testing.T, sink *venuetest.Sink, from int, streams []venue.Stream) {
	t.Helper()
	for _, st := range streams {
		sink.WaitEvent(t, 3*venuetest.Wait, from, "a snapshot of "+string(st), func(e *venue.Event) bool {
			return e.Stream == st && e.Snapshot
		})
	}
}

// depthTimes returns when the mock served depth requests, from request i.
func depthTimes(m *binancetest.Mock, from int) []time.Time {
	var out []time.Time
	reqs, at := m.Requests(), m.RequestTimes()
	for i := from; i < len(reqs); i++ {
		if strings.HasPrefix(reqs[i], "/api/v3/depth?") {
			out = append(out, at[i])
		}
	}
	return out
}

// Snapshots are paced to the weight budget: 20 books at start and again
// after a reconnect, never a 429 or 418, and the rebuild after the
// reconnect spread over the seconds the budget needs (not all at once).
func TestSnapshotsPacedToWeight(t *testing.T) {
	m, sink, streams := startWeighed(t, 0)
	if got := len(depthTimes(m, 0)); got != nBooks {
		t.Errorf("%d depth requests for %d books", got, nBooks)
	}
	from, ev, req := sink.NumNotices(), sink.NumEvents(), len(m.Requests())
	m.Server().CloseAll()
	sink.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	waitSnapshots(t, sink, ev, streams)
	ts := depthTimes(m, req)
	if len(ts) != nBooks {
		t.Fatalf("%d depth requests after the reconnect, want %d", len(ts), nBooks)
	}
	// 1000 weight at 250 a second from a full bucket of 250: 3 s at least.
	t.Logf("%d snapshots after the reconnect over %v", len(ts), ts[len(ts)-1].Sub(ts[0]))
	if spread := ts[len(ts)-1].Sub(ts[0]); spread < 2500*time.Millisecond {
		t.Errorf("the %d snapshots after the reconnect came within %v: not paced", nBooks, spread)
	}
	if n, b := m.Answers(http.StatusTooManyRequests), m.Answers(http.StatusTeapot); n+b > 0 {
		t.Errorf("the mock answered %d 429s and %d 418s", n, b)
	}
	for _, n := range sink.Notices() {
		if n.Kind == notice.RateLimited {
			t.Errorf("rate_limited: %v", n.Details)
		}
	}
	sink.Check(t)
}

// Another client on the address spends the weight: the venue's 429 and
// Retry-After stop every REST request until it passes (no 418 ban), the
// rate_limited notice says so, and the books still come back.
func TestRetryAfterStopsEveryRequest(t *testing.T) {
	m, sink, streams := startWeighed(t, 0)
	from, ev, req := sink.NumNotices(), sink.NumEvents(), len(m.Requests())
	m.Server().CloseAll()
	sink.WaitNotice(t, venuetest.Wait, from, notice.LinkDown)
	m.SpendWeight(testLimit)
	waitSnapshots(t, sink, ev, streams)
	if n := m.Answers(http.StatusTooManyRequests); n < 1 {
		t.Errorf("%d 429s; the test spent the window", n)
	}
	if b := m.Answers(http.StatusTeapot); b > 0 {
		t.Errorf("the mock banned the adapter (418) %d times: a request during Retry-After", b)
	}
	n, _ := sink.WaitNotice(t, venuetest.Wait, from, notice.RateLimited)
	if n.Details["status"] != 429 || n.Details["retry_after_s"] != 1 {
		t.Errorf("rate_limited %v", n.Details)
	}
	// After the 429 the next request waits for the Retry-After.
	reqs, at := m.Requests(), m.RequestTimes()
	i := slices.IndexFunc(reqs[req:], func(r string) bool { return strings.HasPrefix(r, "/api/v3/depth?") }) + req
	if i+1 < len(at) && at[i+1].Sub(at[i]) < 500*time.Millisecond {
		t.Errorf("a request %v after the 429", at[i+1].Sub(at[i]))
	}
	sink.Check(t)
}

// A 418 ban's Retry-After holds every request for as long.
func TestBanHoldsRequests(t *testing.T) {
	m := &binancetest.Mock{}
	m.Start(t)
	m.FailDepth(1, http.StatusTeapot, `{"code":-1003,"msg":"Way too much request weight used; IP banned until later."}`, 2)
	sink := venuetest.NewSink()
	ad := venuetest.StartAdapter(t, m.NewAdapter, venue.Config{Sink: sink, Symbols: []string{m.Symbol()}, Channels: []venue.Channel{venue.Level2}})
	n, _ := sink.WaitNotice(t, venuetest.Wait, 0, notice.RateLimited)
	if n.Details["status"] != http.StatusTeapot || n.Details["retry_after_s"] != 2 {
		t.Errorf("rate_limited %v", n.Details)
	}
	waitCovered(t, sink, ad, venue.NewStream(binance.Name, venue.Level2, m.Symbol()))
	ts := depthTimes(m, 0)
	if len(ts) != 2 || ts[1].Sub(ts[0]) < 2*time.Second-100*time.Millisecond {
		t.Errorf("depth requests at %v: the second not after the ban's 2 s", ts)
	}
	if b := m.Answers(http.StatusTeapot); b > 0 {
		t.Errorf("%d requests during the ban", b)
	}
}

// Another client on the address spends 300 of the 500 every window: the
// adapter reads what is left from X-MBX-USED-WEIGHT-1M and keeps under the
// limit (no 429), slower.
func TestOthersWeightCounted(t *testing.T) {
	m, sink, _ := startWeighed(t, 300)
	if n, b := m.Answers(http.StatusTooManyRequests), m.Answers(http.StatusTeapot); n+b > 0 {
		t.Errorf("the mock answered %d 429s and %d 418s", n, b)
	}
	ts := depthTimes(m, 0)
	// 200 weight a second is left: 1000 weight takes 4 windows at least.
	t.Logf("%d snapshots over %v", len(ts), ts[len(ts)-1].Sub(ts[0]))
	if spread := ts[len(ts)-1].Sub(ts[0]); spread < 3*time.Second {
		t.Errorf("the %d snapshots came within %v", len(ts), spread)
	}
	sink.Check(t)
}
