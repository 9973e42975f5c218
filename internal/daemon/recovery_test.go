package daemon_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// dialStalledClient connects to the daemon's stream route with a small
// receive buffer, subscribes to streams and reads nothing until the
// returned start is called.
func dialStalledClient(t *testing.T, base string, streams ...string) (*wsClient, func()) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	nd := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			// An Ethernet-sized segment, so that the kernel advertises the
			// window reopening when the client reads again.
			syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1448)
		})
	}}
	d.NetDialContext = nd.DialContext
	ws, _, err := d.Dial(base+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteJSON(map[string]any{"op": "subscribe", "id": "1", "streams": streams}); err != nil {
		t.Fatal(err)
	}
	c := &wsClient{t: t, ws: ws, done: make(chan struct{})}
	gate := make(chan struct{})
	var once sync.Once
	start := func() { once.Do(func() { close(gate) }) }
	go func() {
		defer close(c.done)
		<-gate
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			c.mu.Lock()
			for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
				c.msgs = append(c.msgs, bytes.Clone(l))
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { ws.Close(); start(); <-c.done })
	return c, start
}

// bigBook is a level2 snapshot of n levels a side: its wire form is many
// times an update's, so a few lost updates are fewer bytes than the book.
func bigBook(n int) *venue.Event {
	ev := &venue.Event{Kind: venue.KindBook, Stream: l2BTC, Snapshot: true}
	for i := range n {
		ev.Bids = append(ev.Bids, venue.Level{Price: decimal.New(int64(1000-i), 0), Size: decimal.New(int64(1+i%5), 0)})
		ev.Asks = append(ev.Asks, venue.Level{Price: decimal.New(int64(1001+i), 0), Size: decimal.New(int64(1+i%7), 0)})
	}
	return ev
}

// recoveryDaemon starts a daemon on a testsource coinbase with the given
// extra YAML and returns it and the source.
func recoveryDaemon(t *testing.T, extra string) (*daemontest.Running, func() *testsource.Source) {
	t.Helper()
	var src *testsource.Source
	ch := make(chan *testsource.Source, 1)
	d := daemontest.Start(t, "websocket:\n  send_buffer_bytes: 4096\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n    max_queue_len: 200\n    max_queue_bytes: 0\n"+extra,
		daemon.Options{Venues: []venues.Venue{{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) {
			s := testsource.New("coinbase", c)
			ch <- s
			return s, nil
		}}}})
	return d, func() *testsource.Source {
		if src == nil {
			src = <-ch
		}
		return src
	}
}

// stepper publishes, on each call, one level2 update and, every third
// call, a trade.
func stepper(src *testsource.Source) func() {
	i := 0
	return func() {
		i++
		src.Publish(&venue.Event{Kind: venue.KindBook, Stream: l2BTC,
			Bids: []venue.Level{lv(900+int64(i%50), int64(i%4))}})
		if i%3 == 0 {
			src.Publish(&venue.Event{Kind: venue.KindTrade, Stream: trBTC, TradeID: fmt.Sprint(i), Price: decimal.New(100, 0), Size: decimal.New(1, 0), Side: venue.SideBuy})
		}
	}
}

// rangeOf reads a resumed notice's detail key (gaps, recovered) as stream
// → [first, last].
func rangeOf(m wireMsg, key string) map[string][2]uint64 {
	out := map[string][2]uint64{}
	raw, _ := m.Details[key].(map[string]any)
	for st, g := range raw {
		r := g.([]any)
		out[st] = [2]uint64{uint64(r[0].(float64)), uint64(r[1].(float64))}
	}
	return out
}

// dataSeqs returns the seqs of st's events in ms, in order, snapshots
// left out.
func dataSeqs(ms []wireMsg, st string) []uint64 {
	var out []uint64
	for _, m := range ms {
		if m.Stream == st && m.Type != "notice" && m.Type != "ack" && !m.Snapshot {
			out = append(out, m.Seq)
		}
	}
	return out
}

func span(a, b uint64) []uint64 {
	var out []uint64
	for s := a; s <= b; s++ {
		out = append(out, s)
	}
	return out
}

// TestStalledReaderRecovers: a reader that stalls on a trades and a level2
// stream, over a real socket, drops; once it reads again it has every seq
// of both, in order, with no duplicate, and resumed.recovered names both.
// With a window shorter than the loss, it is told the gaps and sent the
// book, exactly as without recovery.
func TestStalledReaderRecovers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int
	}{{"within the window", 1000}, {"past the window", 5}} {
		t.Run(tc.name, func(t *testing.T) {
			d, srcOf := recoveryDaemon(t, fmt.Sprintf("recovery:\n  max_events_per_stream: %d\n", tc.window))
			src := srcOf()
			src.Publish(bigBook(500)) // level2 seq 1
			ws, start := dialStalledClient(t, d.URL("ws"), l2BTC, trBTC)
			var sub *subscriber.Subscriber
			waitFor(t, 10*time.Second, "subscribed", func() bool {
				for _, s := range d.Hub().Registry().All() {
					if s.NumStreams() == 2 {
						sub = s
						return true
					}
				}
				return false
			})
			feed := d.Hub().Feed("coinbase")
			step := stepper(src)
			for n := 0; feed.Counters().Dropping.Load() == 0; n++ {
				if n > 100000 {
					t.Fatal("the stalled reader never dropped")
				}
				step()
			}
			// Lose at least 40 deliveries (about 30 updates and 10 trades),
			// more than the small window holds of either stream: counted, not
			// stepped, as the socket's buffers take a varying share.
			for n := 0; feed.Counters().Dropped.Load() < 40; n++ {
				if n > 100000 {
					t.Fatal("the stalled reader stopped dropping")
				}
				step()
			}
			start()
			waitFor(t, 20*time.Second, "the stalled reader to drain", func() bool {
				c := sub.Resolve()
				return c != nil && c.Len() == 0
			})
			for range 6 {
				step()
			}
			lastL2, lastTr := feed.Seq(l2BTC), feed.Seq(trBTC)
			waitFor(t, 20*time.Second, "the last events", func() bool {
				ms := ws.all()
				return lastOf(ms, l2BTC) == lastL2 && lastOf(ms, trBTC) == lastTr
			})
			ms := ws.all()
			at := slices.IndexFunc(ms, func(m wireMsg) bool { return m.Kind == "resumed" })
			if at < 0 || ms[at].Details["reason"] != "drained" {
				t.Fatal("no resumed notice")
			}
			if !slices.ContainsFunc(ms[:at], func(m wireMsg) bool { return m.Kind == "dropping" }) {
				t.Fatal("no dropping notice before resumed")
			}
			res := ms[at]
			trades, updates := dataSeqs(ms, trBTC), dataSeqs(ms, l2BTC)
			snapAfter := slices.ContainsFunc(ms[at:], func(m wireMsg) bool { return m.Stream == l2BTC && m.Snapshot })
			if tc.window == 1000 {
				rec := rangeOf(res, "recovered")
				if _, ok := rec[trBTC]; !ok || len(rangeOf(res, "gaps")) != 0 {
					t.Fatalf("resumed %+v: want trades and level2 recovered, no gap", res.Details)
				}
				if _, ok := rec[l2BTC]; !ok {
					t.Fatalf("resumed %+v: want level2 recovered", res.Details)
				}
				if !slices.Equal(trades, span(1, lastTr)) {
					t.Fatalf("trades %v, want 1..%d", trades, lastTr)
				}
				if !slices.Equal(updates, span(2, lastL2)) {
					t.Fatalf("level2 updates %v, want 2..%d", updates, lastL2)
				}
				if snapAfter {
					t.Fatal("a snapshot beside the recovered updates")
				}
				if k := feed.RecoveryCounters(); k.Served.Load() != 2 {
					t.Fatalf("recoveries counted %d, want 2", k.Served.Load())
				}
				return
			}
			if _, ok := res.Details["recovered"]; ok {
				t.Fatalf("resumed %+v: recovered past the window", res.Details)
			}
			gaps := rangeOf(res, "gaps")
			for _, st := range []string{trBTC, l2BTC} {
				g, ok := gaps[st]
				if !ok {
					t.Fatalf("no gap for %s: %+v", st, res.Details)
				}
				got := dataSeqs(ms, st)
				first := uint64(1)
				if st == l2BTC {
					first = 2
				}
				var want []uint64
				for s := first; s <= feed.Seq(venue.Stream(st)); s++ {
					if s < g[0] || s > g[1] {
						want = append(want, s)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s: %v, want every seq but the gap %v", st, got, g)
				}
			}
			if !snapAfter {
				t.Fatal("no snapshot after resumed")
			}
		})
	}
}

// TestNamedAwayRecovers: a named subscriber away while its stream goes
// on, reattaching with last=, gets every trade it missed (those written
// to its old socket and never read included), in order, before anything
// newer; away longer than the window, it is told the gaps and sent the
// book, as without recovery.
func TestNamedAwayRecovers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int
	}{{"within the window", 10000}, {"past the window", 20}} {
		t.Run(tc.name, func(t *testing.T) {
			src := &source{}
			d := daemontest.Start(t, fmt.Sprintf("venues:\n  coinbase:\n    symbols: [BTC-USD]\nrecovery:\n  max_events_per_stream: %d\n", tc.window),
				daemon.Options{Venues: []venues.Venue{src.adapter()}})
			src.step()
			a := dialNamed(t, d.URL("ws"), "desk1", nil, l2BTC, trBTC)
			stop := src.run(t)
			waitFor(t, 10*time.Second, "trades", func() bool { return lastOf(a.all(), trBTC) > 20 })
			a.ws.Close()
			<-a.done
			ms := a.all()
			// The client read all the level2 events it received, and the
			// trades up to 5 before the last it received.
			read, readL2 := lastOf(ms, trBTC)-5, lastOf(ms, l2BTC)
			feed := d.Hub().Feed("coinbase")
			away := feed.Seq(trBTC)
			// Away for at least 0.5 s and long enough to pass a window of 20.
			time.Sleep(500 * time.Millisecond)
			waitFor(t, 10*time.Second, "trades while away", func() bool { return feed.Seq(trBTC) > away+40 })
			b := dialNamed(t, d.URL("ws"), "desk1", map[string]uint64{trBTC: read, l2BTC: readL2})
			waitFor(t, 10*time.Second, "events after the reattach", func() bool { return lastOf(b.all(), trBTC) > 0 })
			stop()
			last, lastL2 := feed.Seq(trBTC), feed.Seq(l2BTC)
			waitFor(t, 10*time.Second, "the last events", func() bool {
				return lastOf(b.all(), trBTC) == last && lastOf(b.all(), l2BTC) == lastL2
			})
			got := b.all()
			if len(got) == 0 || got[0].Kind != "resumed" || got[0].Details["reason"] != "reattached" {
				t.Fatalf("first on reattach: %+v", got[:min(len(got), 1)])
			}
			trades := dataSeqs(got, trBTC)
			if tc.window == 10000 {
				if r := rangeOf(got[0], "recovered")[trBTC]; r[0] != read+1 {
					t.Fatalf("recovered %+v, want trades from %d", got[0].Details, read+1)
				}
				if _, ok := rangeOf(got[0], "gaps")[trBTC]; ok {
					t.Fatalf("a trades gap beside its recovery: %+v", got[0].Details)
				}
				if !slices.Equal(trades, span(read+1, last)) {
					t.Fatalf("trades after the reattach %v, want %d..%d", trades, read+1, last)
				}
				if k := feed.RecoveryCounters(); k.Served.Load() == 0 || k.Events.Load() == 0 || k.Bytes.Load() == 0 {
					t.Fatalf("recovery counters served %d, events %d, bytes %d", k.Served.Load(), k.Events.Load(), k.Bytes.Load())
				}
				r, err := http.Get(d.URL("http") + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(r.Body)
				r.Body.Close()
				for _, m := range []string{`fanoutd_recovery_events{venue="coinbase"}`, `fanoutd_recovery_bytes{venue="coinbase"}`,
					`fanoutd_recoveries_total{venue="coinbase"}`, `fanoutd_recoveries_refused_total{reason="window",venue="coinbase"}`} {
					if !bytes.Contains(body, []byte(m)) {
						t.Errorf("/metrics has no %s", m)
					}
				}
			} else {
				if _, ok := got[0].Details["recovered"]; ok {
					t.Fatalf("resumed %+v: recovered past the window", got[0].Details)
				}
				g := rangeOf(got[0], "gaps")[trBTC]
				if g[0] != read+1 || len(trades) == 0 || trades[0] != g[1]+1 || !slices.Equal(trades, span(g[1]+1, last)) {
					t.Fatalf("gap %v, trades after it %v", g, trades)
				}
				if !slices.ContainsFunc(got, func(m wireMsg) bool { return m.Stream == l2BTC && m.Snapshot }) {
					t.Fatal("no level2 snapshot on reattach")
				}
			}
			// The book stays whole either way: updates follow updates or a
			// snapshot (bookOf fails otherwise), and match the daemon's.
			b.ws.Close()
			<-b.done
			var upTo []wireMsg // what the client read on its first connection
			for _, m := range ms {
				if m.Stream != l2BTC || m.Seq <= readL2 {
					upTo = append(upTo, m)
				}
			}
			book, _ := bookOf(t, append(upTo, got...), l2BTC)
			hb, ok := getBook(t, d.URL("http"), "coinbase", "BTC-USD")
			if !ok || !sameBook(book, hb) {
				t.Fatalf("the subscriber's book differs from the daemon's")
			}
		})
	}
}
