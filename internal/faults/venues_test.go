package faults_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues"
	"github.com/fanoutd/fanoutd/venues/binance/binancetest"
	"github.com/fanoutd/fanoutd/venues/bybit/bybittest"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
	"github.com/fanoutd/fanoutd/venues/okx/okxtest"
)

// mocks are the five venues' mocks, each keeping the true book.
var mocks = []func() venuetest.Venue{
	func() venuetest.Venue { return &binancetest.Mock{} },
	func() venuetest.Venue { return bybittest.New() },
	func() venuetest.Venue { return &coinbasetest.Mock{} },
	func() venuetest.Venue { return &krakentest.Mock{} },
	func() venuetest.Venue { return okxtest.New() },
}

// venueFaults are the faults a venue link can suffer, each injected into
// the mock of a running daemon; the daemon must announce it and rebuild.
var venueFaults = []struct {
	name   string
	inject func(v venuetest.Venue)
	heal   func(v venuetest.Venue)
	notice string // the notice a subscriber must get
}{
	{"drop", func(v venuetest.Venue) { v.Server().CloseAll() }, nil, "link_down"},
	{"stall", func(v venuetest.Venue) { v.Server().SetSilent(true) }, func(v venuetest.Venue) { v.Server().SetSilent(false) }, "link_down"},
	{"garbage", func(v venuetest.Venue) {
		for _, g := range v.Garbage() {
			v.Server().Broadcast(g)
		}
	}, nil, "data_quality"},
	{"gap", func(v venuetest.Venue) { v.DropNextUpdate(); v.Step(3) }, nil, "book_resync"},
}

// knownBroken are the cases known to fail, each with why; an entry goes
// with its fix.
var knownBroken = map[string]string{}

// TestVenueFaults runs a daemon on each venue's mock and injects each
// fault while a subscriber reads the level2 stream. Promise checked: the
// subscriber gets the fault's notice; the daemon's book (/v1/books) is
// exactly the mock's true book again after the resync; the subscriber's
// seqs have no hole (a resync is a snapshot at the next seq, never a
// silent loss); the daemon stays up. A refused symbol is refused (an
// unknown_symbol reply or a refusal notice) while the good one flows.
func TestVenueFaults(t *testing.T) {
	for _, mk := range mocks {
		name := mk().Name()
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, f := range venueFaults {
				t.Run(f.name, func(t *testing.T) {
					if why := knownBroken[name+"/"+f.name]; why != "" {
						t.Skip(why)
					}
					v := mk()
					rd, sub, stream := startOnMock(t, v)
					from := len(sub.snapshot())
					f.inject(v)
					waitFor(t, 15*time.Second, f.notice+" notice", func() bool { return sub.has(from, notice(f.notice)) })
					if f.heal != nil {
						f.heal(v)
					}
					exactAfterSteps(t, rd, v, sub, stream)
				})
			}
			t.Run("refuse", func(t *testing.T) {
				v := mk()
				rd, sub, stream := startOnMock(t, v)
				from := len(sub.snapshot())
				bad := string(venue.NewStream(v.Name(), venue.Level2, v.RefusedSymbol()))
				sub.send(t, "bad", bad)
				waitFor(t, 15*time.Second, "the refusal of "+bad, func() bool {
					return sub.has(from, func(l line) bool {
						return l.Type == "error" && l.ID == "bad" || l.Type == "notice" && l.Kind == "refusal"
					})
				})
				exactAfterSteps(t, rd, v, sub, stream)
			})
		})
	}
}

// startOnMock starts v's mock and a daemon whose only venue is v's adapter
// on it, and a subscriber of v's level2 stream that got its snapshot.
func startOnMock(t *testing.T, v venuetest.Venue) (*daemontest.Running, *subscriber, string) {
	t.Helper()
	v.Start(t)
	yml := fmt.Sprintf("venues:\n  %s:\n    symbols: [%q]\n    channels: [level2]\n", v.Name(), v.Symbol())
	rd := daemontest.Start(t, yml, daemon.Options{Venues: []venues.Venue{{Name: v.Name(), New: v.NewAdapter}}})
	stream := string(venue.NewStream(v.Name(), venue.Level2, v.Symbol()))
	sub := subscribe(t, rd.URL("ws")+"/v1/stream", stream)
	waitFor(t, 15*time.Second, "the first snapshot", func() bool {
		return sub.has(0, func(l line) bool { return l.Stream == stream && l.Snapshot })
	})
	return rd, sub, stream
}

// exactAfterSteps steps the venue until the daemon's book equals the
// mock's true book, then checks the subscriber's seqs.
func exactAfterSteps(t *testing.T, rd *daemontest.Running, v venuetest.Venue, sub *subscriber, stream string) {
	t.Helper()
	var got, want *venue.Book
	defer func() {
		if t.Failed() {
			for _, l := range sub.snapshot() {
				if l.Type == "notice" || l.Snapshot {
					t.Logf("%.300s", l.raw)
				}
			}
			t.Logf("daemon book %v\nvenue book %v", got, want)
		}
	}()
	waitFor(t, 20*time.Second, "the daemon's book to equal the venue's", func() bool {
		v.Step(1)
		time.Sleep(50 * time.Millisecond)
		got, want = daemonBook(t, rd, v), v.Book()
		return got != nil && got.Equal(want)
	})
	// The daemon's book is the venue's; its events reach the subscriber
	// a moment later.
	waitFor(t, 10*time.Second, "the subscriber to receive the events after the fault", func() bool {
		n := 0
		for _, l := range sub.snapshot() {
			if l.Stream == stream && l.Type != "notice" {
				n++
			}
		}
		return n >= 2
	})
	if n := sub.gapless(t, stream); n < 2 {
		t.Errorf("%d events of %s received", n, stream)
	}
	if code, _, _ := httpGet(t, rd.URL("http")+"/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
}

// daemonBook reads the daemon's book of v's symbol from /v1/books; nil if
// it has none.
func daemonBook(t *testing.T, rd *daemontest.Running, v venuetest.Venue) *venue.Book {
	t.Helper()
	code, _, body := httpGet(t, rd.URL("http")+"/v1/books/"+v.Name()+"/"+url.PathEscape(v.Symbol()))
	if code != 200 {
		return nil
	}
	var bv struct{ Bids, Asks [][2]string }
	if err := json.Unmarshal([]byte(body), &bv); err != nil {
		t.Fatalf("/v1/books: %v: %s", err, body)
	}
	conv := func(ls [][2]string) []venue.Level {
		out := make([]venue.Level, len(ls))
		for i, l := range ls {
			out[i] = venue.Level{Price: decimal.RequireFromString(l[0]), Size: decimal.RequireFromString(l[1])}
		}
		return out
	}
	b := &venue.Book{}
	b.Replace(conv(bv.Bids), conv(bv.Asks))
	return b
}
