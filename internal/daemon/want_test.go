package daemon_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/cluster"
	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// reply returns the first reply (ack or error) with id that c received.
func (c *wsClient) reply(id string) (wireMsg, bool) {
	for _, m := range c.all() {
		if (m.Type == "ack" || m.Type == "error") && m.ID == id {
			return m, true
		}
	}
	return wireMsg{}, false
}

func (c *wsClient) send(t *testing.T, op, id string, streams ...string) wireMsg {
	t.Helper()
	if err := c.ws.WriteJSON(map[string]any{"op": op, "id": id, "streams": streams}); err != nil {
		t.Fatal(err)
	}
	var r wireMsg
	waitFor(t, 10*time.Second, "the reply to "+id, func() bool { var ok bool; r, ok = c.reply(id); return ok })
	return r
}

// TestClusterEdgeAsksForSymbol: a subscriber on an edge asks for a symbol
// the ingest is not configured with. The edge asks the ingest
// (P.want.<venue>), which decides as a local subscribe would and
// subscribes its venue: the subscriber gets the ack, then the book and
// updates. A symbol off the venue's instrument list, a channel the
// ingest does not serve, and a symbol past the ingest's max_symbols are
// refused with the ingest's code, as the subscribe's error reply. The
// ingest holds the symbol while the edge renews it (well past
// cluster.WantLapse and unsubscribe_after), and unsubscribes it at the
// venue once the edge's last subscriber left and unsubscribe_after passed.
func TestClusterEdgeAsksForSymbol(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	url := natstest.Run(t).ClientURL()
	src := &source{}
	const grace = time.Second
	ingest := daemontest.Start(t, fmt.Sprintf("cluster:\n  role: ingest\n  node: in-1\n  nats_url: %s\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n    max_symbols: 2\n    channels: [level2, trades]\n    unsubscribe_after: %s\n", url, grace),
		daemon.Options{Venues: []venues.Venue{src.adapter()}})
	src.mu.Lock()
	vsrc := src.src
	src.mu.Unlock()
	vsrc.SetInstruments([]string{"BTC-USD", "ETH-USD", "SOL-USD"})
	edge := daemontest.Start(t, fmt.Sprintf(edgeOnlyYAML, url), daemon.Options{})
	waitReady(t, edge)
	c := dialSub(t, edge.URL("ws"))

	const l2ETH = "coinbase:level2:ETH-USD"
	if r := c.send(t, "subscribe", "1", l2ETH); r.Type != "ack" {
		t.Fatalf("subscribe %s: %s", l2ETH, r.raw)
	}
	asked := time.Now()
	if !slices.Contains(vsrc.Symbols(), "ETH-USD") {
		t.Fatalf("the ingest's venue subscribes %v after the ack, want ETH-USD among them", vsrc.Symbols())
	}
	vsrc.Publish(&venue.Event{Kind: venue.KindBook, Stream: l2ETH, Snapshot: true, Bids: []venue.Level{lv(10, 1)}, Asks: []venue.Level{lv(11, 1)}})
	vsrc.Publish(&venue.Event{Kind: venue.KindBook, Stream: l2ETH, Bids: []venue.Level{lv(10, 3)}})
	waitFor(t, 10*time.Second, "ETH-USD's book on the edge", func() bool { _, last := bookOf(t, c.all(), l2ETH); return last == 2 })
	got, _ := bookOf(t, c.all(), l2ETH)
	want, ok := getBook(t, ingest.URL("http"), "coinbase", "ETH-USD")
	if !ok || !sameBook(got, want) {
		t.Fatalf("the subscriber's ETH-USD book differs from the ingest's %v", want)
	}

	for _, tc := range []struct{ id, stream, code string }{
		{"2", "coinbase:level2:NOPE-USD", "unknown_symbol"},  // not an instrument
		{"3", "coinbase:ticker:ETH-USD", "unknown_stream"},   // the ingest serves level2 and trades only
		{"4", "coinbase:trades:SOL-USD", "too_many_symbols"}, // BTC-USD and ETH-USD: max_symbols
	} {
		r := c.send(t, "subscribe", tc.id, tc.stream)
		if r.Type != "error" || r.Code != tc.code {
			t.Fatalf("subscribe %s: %s, want the error %s", tc.stream, r.raw, tc.code)
		}
	}
	if s := vsrc.Symbols(); !slices.Equal(s, []string{"BTC-USD", "ETH-USD"}) {
		t.Fatalf("the ingest's venue subscribes %v, want BTC-USD and ETH-USD", s)
	}

	// The renewals hold ETH-USD: a want lapses in WantLapse, then the
	// grace, and the sweep runs every second.
	for time.Since(asked) < cluster.WantLapse+grace+2*time.Second {
		if !slices.Contains(vsrc.Symbols(), "ETH-USD") {
			t.Fatalf("the ingest unsubscribed ETH-USD %v after the edge asked, while its subscriber holds it", time.Since(asked))
		}
		time.Sleep(100 * time.Millisecond) // asserting that nothing happens meanwhile
	}
	if r := c.send(t, "unsubscribe", "5", l2ETH); r.Type != "ack" {
		t.Fatalf("unsubscribe: %s", r.raw)
	}
	left := time.Now()
	waitFor(t, 20*time.Second, "the ingest to unsubscribe ETH-USD", func() bool { return !slices.Contains(vsrc.Symbols(), "ETH-USD") })
	if took := time.Since(left); took < grace {
		t.Fatalf("ETH-USD unsubscribed %v after its last subscriber left, before unsubscribe_after (%v)", took, grace)
	}
}
