package daemon_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venues"
)

// dialNamed attaches a named subscriber at base (a ws:// URL), stating
// the last seq read per stream (last), and subscribes it to streams if
// any are given.
func dialNamed(t *testing.T, base, name string, last map[string]uint64, streams ...string) *wsClient {
	t.Helper()
	q := url.Values{"name": {name}}
	for st, seq := range last {
		q.Add("last", fmt.Sprintf("%s:%d", st, seq))
	}
	ws, _, err := websocket.DefaultDialer.Dial(base+"/v1/stream?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return readAll(t, ws, streams)
}

// lastOf returns the seq of the last event of st that c received, and
// the index of that message.
func lastOf(ms []wireMsg, st string) (seq uint64) {
	for _, m := range ms {
		if m.Stream == st && m.Type != "notice" && m.Seq > seq {
			seq = m.Seq
		}
	}
	return seq
}

// checkReattach checks what a reattached connection received: first a
// resumed notice (reason reattached) whose gaps start right after what the
// client stated it read (want) and end right before what follows: the
// trades stream continues at last+1, the level2 stream with a snapshot at
// last. It returns the gaps.
func checkReattach(t *testing.T, ms []wireMsg, want map[string]uint64) map[string][2]uint64 {
	t.Helper()
	if len(ms) == 0 || ms[0].Kind != "resumed" || ms[0].Details["reason"] != "reattached" {
		t.Fatalf("first message on reattach: %+v, want resumed/reattached", ms)
	}
	gaps := map[string][2]uint64{}
	for st, g := range ms[0].Details["gaps"].(map[string]any) {
		r := g.([]any)
		gaps[st] = [2]uint64{uint64(r[0].(float64)), uint64(r[1].(float64))}
	}
	for st, read := range want {
		g, ok := gaps[st]
		if !ok || g[0] != read+1 {
			t.Fatalf("gap of %s: %v, want it to start at %d (gaps %v)", st, g, read+1, gaps)
		}
	}
	if g, ok := gaps[trBTC]; ok {
		for _, m := range ms[1:] {
			if m.Stream == trBTC && m.Type == "trade" {
				if m.Seq != g[1]+1 {
					t.Fatalf("trades continue at %d after the gap %v", m.Seq, g)
				}
				break
			}
		}
	}
	if g, ok := gaps[l2BTC]; ok {
		for _, m := range ms[1:] {
			if m.Stream == l2BTC && m.Type == "book" {
				if !m.Snapshot || m.Seq != g[1] {
					t.Fatalf("level2 after the gap %v: seq %d snapshot %v, want the snapshot at the gap's end", g, m.Seq, m.Snapshot)
				}
				break
			}
		}
	}
	return gaps
}

// TestReattachStatedLastSeq: a named subscriber that read only part of
// what was written to its socket states the last seq it read per stream
// on reattach (last=<stream>:<seq>): the gaps start right after it — the
// events written but never read are named — and end where the new
// connection continues, over real sockets, on one node. Recovery is off
// here: with it, what the window holds is sent again instead
// (TestNamedAwayRecovers).
func TestReattachStatedLastSeq(t *testing.T) {
	src := &source{}
	d := daemontest.Start(t, "venues:\n  coinbase:\n    symbols: [BTC-USD]\nrecovery:\n  max_events_per_stream: 0\n", daemon.Options{Venues: []venues.Venue{src.adapter()}})
	src.step()
	a := dialNamed(t, d.URL("ws"), "desk1", nil, l2BTC, trBTC)
	src.run(t)
	waitFor(t, 10*time.Second, "trades", func() bool { return lastOf(a.all(), trBTC) > 20 })
	a.ws.Close()
	<-a.done
	ms := a.all()
	// The client "read" only up to 10 events before the last it received.
	read := map[string]uint64{trBTC: lastOf(ms, trBTC) - 10, l2BTC: lastOf(ms, l2BTC) - 10}
	time.Sleep(100 * time.Millisecond) // events go on while nothing is attached
	b := dialNamed(t, d.URL("ws"), "desk1", read)
	waitFor(t, 10*time.Second, "events after the reattach", func() bool { return lastOf(b.all(), trBTC) > 0 })
	gaps := checkReattach(t, b.all(), read)
	if gaps[trBTC][1] <= lastOf(ms, trBTC) {
		t.Fatalf("trades gap %v ends before the last event written to the old socket (%d)", gaps[trBTC], lastOf(ms, trBTC))
	}
	// Without a statement the gaps start after what was written to the
	// socket, which may be past what the client read: the gap the
	// statement closes.
	b.ws.Close()
	<-b.done
	got := lastOf(b.all(), trBTC)
	time.Sleep(100 * time.Millisecond)
	c := dialNamed(t, d.URL("ws"), "desk1", nil)
	waitFor(t, 10*time.Second, "events after the second reattach", func() bool { return lastOf(c.all(), trBTC) > 0 })
	if g := checkReattach(t, c.all(), nil)[trBTC]; g[0] <= got {
		t.Fatalf("trades gap %v starts at or before what the client read (%d)", g, got)
	}
}
