package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/venue"
)

// TestConflatedStalledSubscriber: a token scoped to derived channels gets
// them and nothing else; a snapshot op on a derived stream is not_level2;
// a stalled subscriber of conflated streams holds at most its bound plus
// one message per conflated stream, is never told dropping, has its
// replaced messages counted in /v1/subscribers and /metrics, and once it
// reads again its newest message of each stream is the current state.
func TestConflatedStalledSubscriber(t *testing.T) {
	td := startDaemon(t, fmt.Sprintf(`
websocket:
  send_buffer_bytes: 4096
tokens:
  - name: desk
    sha256: %x
    streams: ["coinbase:quote:*", "coinbase:book_snapshot_*"]
venues:
  coinbase:
    symbols: [BTC-USD]
    max_queue_len: 20
    max_queue_bytes: 0
`, sha256.Sum256([]byte("desk-secret"))))
	hdr := http.Header{"Authorization": {"Bearer desk-secret"}}
	const quote, snap = "coinbase:quote:BTC-USD", "coinbase:book_snapshot_3_0ms:BTC-USD"
	td.bookSnapshot()

	// Scopes with derived channels.
	a := dial(t, td.url(""), dialOpts{header: hdr})
	for _, c := range []struct{ stream, code string }{
		{string(l2), "unauthorized"}, {"coinbase:trade_bar_1s:BTC-USD", "unauthorized"},
		{quote, ""}, {"coinbase:book_snapshot_10_100ms:BTC-USD", ""},
	} {
		a.send(map[string]any{"op": "subscribe", "id": c.stream, "streams": []string{c.stream}})
		r := a.reply(c.stream)
		if c.code == "" && r.Type != "ack" || c.code != "" && r.Code != c.code {
			t.Fatalf("subscribe %s: %+v, want %q", c.stream, r, c.code)
		}
	}
	a.send(map[string]any{"op": "snapshot", "id": "s", "stream": quote})
	if r := a.reply("s"); r.Code != "not_level2" {
		t.Fatalf("snapshot of %s: %+v, want not_level2", quote, r)
	}
	a.ws.Close()

	// A stalled subscriber of two conflated streams.
	c := dial(t, td.url(""), dialOpts{header: hdr, readBuf: 4096, paused: true})
	c.send(map[string]any{"op": "subscribe", "id": "1", "streams": []string{quote, snap}})
	var sub interface{ Len() int }
	checkFor(t, 10*time.Second, "subscribed", func() bool {
		for _, s := range td.d.Hub().Registry().All() {
			if slices.Contains(s.Streams(), venue.Stream(snap)) {
				if m := s.Resolve(); m != nil {
					sub = m
					return true
				}
			}
		}
		return false
	})
	top := func(i int) {
		td.src.Publish(&venue.Event{Kind: venue.KindBook, Stream: l2, RecvTime: t0,
			Bids: []venue.Level{lvl(99, int64(1+i%50))}, Asks: []venue.Level{lvl(101, int64(1+i%40))}})
	}
	feed := td.d.Hub().Feed("coinbase")
	for i := 0; feed.Counters().Replaced.Load() < 200; i++ {
		if i > 200000 {
			t.Fatal("nothing was replaced")
		}
		top(i)
		if n := sub.Len(); n > 20+2 {
			t.Fatalf("the stalled queue holds %d messages, want at most the bound plus one per conflated stream", n)
		}
	}
	if n := feed.Counters().Dropping.Load(); n != 0 {
		t.Fatalf("%d subscribers dropping on conflated streams", n)
	}

	code, body := httpGet(t, "http://"+td.addr+"/v1/subscribers", hdr)
	var views []daemon.SubscriberView
	if err := json.Unmarshal([]byte(body), &views); code != 200 || err != nil {
		t.Fatalf("/v1/subscribers: %d %s", code, body)
	}
	var replaced uint64
	for _, v := range views {
		if slices.Contains(v.Streams, venue.Stream(snap)) {
			replaced = v.Replaced
		}
	}
	if replaced == 0 {
		t.Fatalf("/v1/subscribers: no replaced_total for the stalled subscriber: %s", body)
	}
	if n := metric(t, td.addr, `fanoutd_conflated_replaced_total{venue="coinbase"}`); n < float64(replaced) {
		t.Fatalf("fanoutd_conflated_replaced_total %v, the subscriber's replaced_total %d", n, replaced)
	}

	// It reads again: the last change of the top is what it ends with.
	c.start()
	td.src.Publish(&venue.Event{Kind: venue.KindBook, Stream: l2, RecvTime: t0,
		Bids: []venue.Level{lvl(99, 777)}, Asks: []venue.Level{lvl(101, 555)}})
	var gotQuote, gotSnap bool
	ws := c.until(func(w wire) bool {
		gotQuote = gotQuote || w.Stream == quote && w.BidSize == "777"
		gotSnap = gotSnap || w.Stream == snap && len(w.Bids) > 0 && w.Bids[0] == [2]string{"99", "777"}
		return gotQuote && gotSnap
	})
	last, got := map[string]uint64{}, map[string]uint64{}
	for _, w := range ws {
		if w.Type == "notice" && w.Kind == "dropping" {
			t.Fatalf("dropping notice for conflated streams: %+v", w)
		}
		if w.Stream == quote || w.Stream == snap {
			if w.Seq <= last[w.Stream] {
				t.Fatalf("%s: seq %d after %d", w.Stream, w.Seq, last[w.Stream])
			}
			last[w.Stream] = w.Seq
			got[w.Stream]++
		}
	}
	if got[quote]+got[snap] >= last[quote]+last[snap] {
		t.Fatalf("received %v of seqs up to %v: nothing was replaced", got, last)
	}
}

// metric returns the value of the sample named by series in GET /metrics.
func metric(t *testing.T, addr, series string) float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics", nil)
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if name, v, ok := strings.Cut(sc.Text(), " "); ok && name == series {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", series)
	return 0
}
