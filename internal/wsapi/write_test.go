package wsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/rawio"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

func TestAppendFrameHeader(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []byte
	}{
		{0, []byte{0x81, 0}},
		{125, []byte{0x81, 125}},
		{126, []byte{0x81, 126, 0, 126}},
		{0xffff, []byte{0x81, 126, 0xff, 0xff}},
		{0x10000, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0}},
	} {
		got := appendFrameHeader(nil, websocket.TextMessage, tc.n)
		if !bytes.Equal(got, tc.want) {
			t.Errorf("header of %d bytes: % x, want % x", tc.n, got, tc.want)
		}
		if h := frameHeaderLen(len(got) + tc.n); h != len(got) {
			t.Errorf("frameHeaderLen(%d) = %d, want %d", len(got)+tc.n, h, len(got))
		}
	}
	b := appendBatch(nil, []*subscriber.Message{{Data: []byte(`{"a":1}`)}, {Data: []byte(`{"b":2}`)}})
	if want := "\x81\x0f{\"a\":1}\n{\"b\":2}"; string(b) != want {
		t.Errorf("appendBatch = %q, want %q", b, want)
	}
}

// TestWritePoolBackedUpSocket has the write pool write to a client that
// does not read for a while, with a small send buffer, so that
// non-blocking writes leave frame tails for the connection's writer
// goroutine; every event must then arrive once, in order, in well-formed
// frames, and the client's pings must be answered. With and without
// io_uring.
func TestWritePoolBackedUpSocket(t *testing.T) {
	t.Run("write", func(t *testing.T) { testWritePoolBackedUpSocket(t, false) })
	t.Run("io_uring", func(t *testing.T) { testWritePoolBackedUpSocket(t, true) })
	// Options.Uring where io_uring cannot be set up: the pool writes with
	// write(2).
	t.Run("io_uring_unavailable", func(t *testing.T) {
		defer func(f func(uint32) (*rawio.Ring, error)) { openRing = f }(openRing)
		openRing = func(uint32) (*rawio.Ring, error) { return nil, errors.New("io_uring_setup: operation not permitted") }
		testWritePoolBackedUpSocket(t, true)
	})
}

func testWritePoolBackedUpSocket(t *testing.T, uring bool) {
	feed, ws := poolClient(t, Options{WriteDelay: time.Millisecond, SendBuffer: 4096, Uring: uring}, 0)
	const events = 3000
	for i := range events {
		feed.Publish(&venue.Event{Kind: venue.KindTrade, Stream: "coinbase:trades:BTC-USD", TradeID: strings.Repeat("x", 150),
			Price: decimal.New(int64(i), -2), Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: time.Now(), VenueTime: time.Now()})
	}
	time.Sleep(100 * time.Millisecond) // the client reads nothing: the socket backs up
	pongs := make(chan struct{}, 1)
	ws.SetPongHandler(func(string) error { pongs <- struct{}{}; return nil })
	if err := ws.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for got := 0; got < events; {
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, m, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("after %d events: %v", got, err)
		}
		for _, line := range bytes.Split(m, []byte("\n")) {
			var ev struct{ Seq uint64 }
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("object %q: %v", line, err)
			}
			if last != 0 && ev.Seq != last+1 {
				t.Fatalf("seq %d after %d", ev.Seq, last)
			}
			last = ev.Seq
			got++
		}
	}
	go ws.ReadMessage() // the pong is handled by a read
	select {
	case <-pongs:
	case <-time.After(5 * time.Second):
		t.Fatal("ping not answered")
	}
}

// TestWritePoolLargeFrames writes events far larger than the batch bound
// and the socket's send buffer through the write pool, with and without
// io_uring: each must arrive whole and in order (a send that takes part
// of a frame leaves the rest to the connection's writer goroutine). With
// events of 10 kB and a 16 kB bound, each batch stops below the bound
// with more queued.
func TestWritePoolLargeFrames(t *testing.T) {
	for _, size := range []int{100_000, 10_000} {
		for _, uring := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%d", map[bool]string{false: "write", true: "io_uring"}[uring], size), func(t *testing.T) {
				testWritePoolLargeFrames(t, uring, size)
			})
		}
	}
}

func testWritePoolLargeFrames(t *testing.T, uring bool, size int) {
	feed, ws := poolClient(t, Options{WriteDelay: time.Millisecond, SendBuffer: 4096, MaxBatchBytes: 16384, Uring: uring}, 64<<20)
	const events = 20
	for i := range events {
		feed.Publish(&venue.Event{Kind: venue.KindTrade, Stream: "coinbase:trades:BTC-USD", TradeID: strings.Repeat(string(rune('a'+i)), size),
			Price: decimal.New(int64(i), -2), Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: time.Now(), VenueTime: time.Now()})
	}
	for i := 0; i < events; {
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, m, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("after %d events: %v", i, err)
		}
		for _, line := range bytes.Split(m, []byte("\n")) {
			var ev struct{ ID string }
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			if want := strings.Repeat(string(rune('a'+i)), size); ev.ID != want {
				t.Fatalf("event %d: id of %d bytes starting %.10q", i, len(ev.ID), ev.ID)
			}
			i++
		}
	}
}

// poolClient serves a hub with one coinbase feed (queue byte bound
// maxQueueBytes, 0 for the default) through a server with o, and returns
// the feed and a client subscribed to coinbase:trades:BTC-USD. All is
// closed when the test ends.
func poolClient(t *testing.T, o Options, maxQueueBytes int) (*fanout.Feed, *websocket.Conn) {
	t.Helper()
	feed, url, _ := poolServer(t, o, maxQueueBytes)
	return feed, dialSubscribed(t, url)
}

// poolServer is poolClient's server: it returns the feed, the websocket
// URL and the server's metrics (on a registry of their own).
func poolServer(t *testing.T, o Options, maxQueueBytes int) (*fanout.Feed, string, *Metrics) {
	t.Helper()
	hub := fanout.NewHub(subscriber.NewRegistry())
	feed, _ := hub.AddFeed(fanout.Options{Venue: "coinbase", MaxQueueLen: 1 << 20, MaxQueueBytes: maxQueueBytes})
	o.Hub, o.Logger, o.Metrics = hub, discardLogger(), NewMetrics(prometheus.NewRegistry())
	srv := NewServer(o)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	return feed, "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/stream", o.Metrics
}

// dialSubscribed connects a client to url and subscribes it to
// coinbase:trades:BTC-USD; it is closed when the test ends.
func dialSubscribed(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	subscribed(t, ws)
	return ws
}

// subscribed subscribes ws to coinbase:trades:BTC-USD and returns once the
// subscription is in place: the ack is queued before the hub subscribes,
// so it is followed by a ping, which the server answers only once the
// subscribe command is done.
func subscribed(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","id":"1","streams":["coinbase:trades:BTC-USD"]}`))
	ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"ping","id":"2"}`))
	for got := ""; !strings.Contains(got, `"pong"`); {
		_, m, err := ws.ReadMessage()
		if err != nil || (!bytes.Contains(m, []byte(`"ack"`)) && !bytes.Contains(m, []byte(`"pong"`))) {
			t.Fatalf("subscribe: %q %v", m, err)
		}
		got += string(m)
	}
}

// TestWritePoolChurn publishes without pause while clients connect,
// read a little and go away (half of them with a reset), with and
// without io_uring: sends are in flight while sockets close under them.
// Nothing may panic, hang or leak (TestMain checks goroutines), every
// session must end, and a client that stays must read a gapless seq.
func TestWritePoolChurn(t *testing.T) {
	for _, uring := range []bool{false, true} {
		t.Run(map[bool]string{false: "write", true: "io_uring"}[uring], func(t *testing.T) {
			hub := fanout.NewHub(subscriber.NewRegistry())
			feed, _ := hub.AddFeed(fanout.Options{Venue: "coinbase", MaxQueueLen: 1 << 20})
			srv := NewServer(Options{Hub: hub, Logger: discardLogger(), WriteDelay: time.Millisecond, SendBuffer: 4096, Uring: uring})
			hs := httptest.NewServer(srv)
			defer hs.Close()
			defer srv.Close()
			url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/stream"
			sub := []byte(`{"op":"subscribe","id":"1","streams":["coinbase:trades:BTC-USD"]}`)

			stop := make(chan struct{})
			published := make(chan struct{})
			go func() {
				defer close(published)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					feed.Publish(&venue.Event{Kind: venue.KindTrade, Stream: "coinbase:trades:BTC-USD", TradeID: strings.Repeat("x", 100),
						Price: decimal.New(int64(i), -2), Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: time.Now(), VenueTime: time.Now()})
					if i%50 == 49 {
						time.Sleep(100 * time.Microsecond)
					}
				}
			}()
			// One client stays and reads everything.
			stay, _, err := websocket.DefaultDialer.Dial(url, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer stay.Close()
			stay.WriteMessage(websocket.TextMessage, sub)
			var last atomic.Uint64
			stayErr := make(chan error, 1)
			go func() {
				for {
					stay.SetReadDeadline(time.Now().Add(5 * time.Second))
					_, m, err := stay.ReadMessage()
					if err != nil {
						stayErr <- err
						return
					}
					for _, line := range bytes.Split(m, []byte("\n")) {
						var ev struct {
							Type string
							Seq  uint64
						}
						if json.Unmarshal(line, &ev) != nil || ev.Type != "trade" {
							continue
						}
						if l := last.Load(); l != 0 && ev.Seq != l+1 {
							stayErr <- fmt.Errorf("seq %d after %d", ev.Seq, l)
							return
						}
						last.Store(ev.Seq)
					}
				}
			}()
			for i := range 60 {
				ws, _, err := websocket.DefaultDialer.Dial(url, nil)
				if err != nil {
					t.Fatal(err)
				}
				ws.WriteMessage(websocket.TextMessage, sub)
				ws.ReadMessage()
				if i%2 == 0 {
					ws.NetConn().(*net.TCPConn).SetLinger(0) // close with a reset
				}
				ws.NetConn().Close()
			}
			close(stop)
			<-published
			select {
			case err := <-stayErr:
				t.Fatalf("the client that stayed: %v", err)
			default:
			}
			if last.Load() == 0 {
				t.Fatal("the client that stayed read no trade")
			}
			deadline := time.Now().Add(5 * time.Second)
			for srv.Sessions() > 1 {
				if time.Now().After(deadline) {
					t.Fatalf("%d sessions still open, want 1", srv.Sessions())
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// slowConn reads at most 1 KiB per call, sleeping pace before each: a
// client that keeps reading, slower than the daemon writes.
type slowConn struct {
	net.Conn
	pace time.Duration
}

func (c slowConn) Read(b []byte) (int, error) {
	time.Sleep(c.pace)
	return c.Conn.Read(b[:min(len(b), 1024)])
}

// slowReader connects to url through a small receive buffer (with an
// Ethernet-sized MSS: with loopback's 64 KiB one above the buffer, the
// kernel would not advertise the window reopening), reading 1 KiB per
// pace, subscribes it to coinbase:trades:BTC-USD and counts the pings it
// answers.
func slowReader(t *testing.T, url string, pace time.Duration, pings *int) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		nd := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) {
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
				syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1448)
			})
		}}
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return slowConn{c, pace}, nil
	}}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	ws.SetPingHandler(func(p string) error {
		*pings++
		return ws.WriteControl(websocket.PongMessage, []byte(p), time.Now().Add(time.Second))
	})
	subscribed(t, ws)
	return ws
}

// publishTrades publishes n trades (about 300 bytes each once encoded)
// to coinbase:trades:BTC-USD, their prices from from+1 on.
func publishTrades(feed *fanout.Feed, from, n int) {
	for i := from + 1; i <= from+n; i++ {
		feed.Publish(&venue.Event{Kind: venue.KindTrade, Stream: "coinbase:trades:BTC-USD", TradeID: strings.Repeat("x", 100),
			Price: decimal.New(int64(i), -2), Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: time.Now(), VenueTime: time.Now()})
	}
}

// readSeqs reads one message from ws and returns the seq of its last
// event, failing the test if ws is closed or an event's seq does not
// follow last.
func readSeqs(t *testing.T, ws *websocket.Conn, last uint64, pings *int) uint64 {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, m, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("closed after seq %d (%d pings): %v", last, *pings, err)
	}
	for _, line := range bytes.Split(m, []byte("\n")) {
		var ev struct{ Seq uint64 }
		if json.Unmarshal(line, &ev) == nil && ev.Seq > 0 {
			if ev.Seq != last+1 {
				t.Fatalf("seq %d after %d", ev.Seq, last)
			}
			last = ev.Seq
		}
	}
	return last
}

// publishAndRead publishes events at once and reads them all from ws in
// seq order; it fails the test if ws is closed.
func publishAndRead(t *testing.T, feed *fanout.Feed, ws *websocket.Conn, events int, pings *int) {
	t.Helper()
	publishTrades(feed, 0, events)
	for last := uint64(0); last < uint64(events); {
		last = readSeqs(t, ws, last, pings)
	}
}

// TestSlowReaderNotCutMidBatch: a batch that a slow but steady reader
// takes longer than the write timeout to accept is not cut off: the
// deadline runs from the socket's last progress, not from the start of
// the write ("the socket accepted nothing for write_timeout").
func TestSlowReaderNotCutMidBatch(t *testing.T) {
	feed, url, _ := poolServer(t, Options{WriteDelay: time.Millisecond, SendBuffer: 4096, MaxBatchBytes: 16384,
		WriteTimeout: time.Second, PingInterval: time.Minute}, 0)
	var pings int
	ws := slowReader(t, url, 100*time.Millisecond, &pings) // about 10 KB/s: a 16 KB batch takes 1.6 s
	publishAndRead(t, feed, ws, 150, &pings)
}

// TestPingsWhileQueueNeverEmpties: a reader that keeps reading but never
// catches up is pinged between batches (it answers, so it is not closed
// for silence after two ping intervals), not only once its queue is
// empty.
func TestPingsWhileQueueNeverEmpties(t *testing.T) {
	// A pong comes back through what the socket buffers hold ahead of its
	// ping (about 15 KB, read 1 KiB per wake-up), and must within one
	// interval: 0.2 s here, but over 1 s on a loaded machine, which failed
	// a 500 ms interval. How fast a pong returns is not what this is about.
	const interval = 2 * time.Second
	feed, url, _ := poolServer(t, Options{WriteDelay: time.Millisecond, SendBuffer: 4096, MaxBatchBytes: 4096,
		PingInterval: interval}, 0)
	var pings int
	ws := slowReader(t, url, 10*time.Millisecond, &pings) // about 100 KB/s
	// The reader is kept backlog events behind (about 90 KB, several
	// times what the socket buffers hold, so its queue never empties)
	// until it answered 2 pings: for however long that takes, not for a
	// fixed amount that a fast reader could drain before.
	const backlog, want = 300, 2
	published := backlog
	publishTrades(feed, 0, published)
	deadline := time.Now().Add(20 * interval)
	for last := uint64(0); last < uint64(published); {
		if pings < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d pings in %v while the queue never emptied, want one each %v", pings, 20*interval, interval)
			}
			publishTrades(feed, published, int(last)+backlog-published)
			published = int(last) + backlog
		}
		last = readSeqs(t, ws, last, &pings)
	}
}

// TestIdlePooledConnectionKeepsAlive: with a write pool, an idle
// connection has no writer goroutine, yet it is pinged every interval (a
// writer goroutine is started for each ping and ends after it), it stays
// open while it answers, and events still reach it.
func TestIdlePooledConnectionKeepsAlive(t *testing.T) {
	hub := fanout.NewHub(subscriber.NewRegistry())
	feed, _ := hub.AddFeed(fanout.Options{Venue: "coinbase", MaxQueueLen: 1 << 20})
	srv := NewServer(Options{Hub: hub, Logger: discardLogger(), WriteDelay: time.Millisecond, PingInterval: time.Second})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	ws := dialSubscribed(t, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/stream")
	var pings atomic.Int32
	ws.SetPingHandler(func(p string) error {
		pings.Add(1)
		return ws.WriteControl(websocket.PongMessage, []byte(p), time.Now().Add(time.Second))
	})
	readErr := make(chan error, 1)
	events := make(chan struct{}, 16)
	go func() {
		for {
			_, m, err := ws.ReadMessage()
			if err != nil {
				readErr <- err
				return
			}
			if bytes.Contains(m, []byte(`"trade"`)) {
				events <- struct{}{}
			}
		}
	}()
	// The session's writer state, read under the lock that guards it.
	sess := func() *session {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, s := range srv.sessions {
			return s
		}
		return nil
	}()
	writing := func() bool {
		sess.w.stateMu.Lock()
		defer sess.w.stateMu.Unlock()
		return sess.w.running
	}
	// Three pings take 3 s; a client silent for two intervals would be
	// closed, so an answered ping that was never sent shows up as a close.
	deadline := time.Now().Add(30 * time.Second)
	sawIdle := false
	for pings.Load() < 3 || !sawIdle {
		select {
		case err := <-readErr:
			t.Fatalf("closed after %d pings: %v", pings.Load(), err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pings, idle writer seen: %v, in 30s", pings.Load(), sawIdle)
		}
		sawIdle = sawIdle || !writing()
		time.Sleep(5 * time.Millisecond)
	}
	feed.Publish(&venue.Event{Kind: venue.KindTrade, Stream: "coinbase:trades:BTC-USD", TradeID: "1",
		Price: decimal.New(1, 0), Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: time.Now(), VenueTime: time.Now()})
	select {
	case <-events:
	case err := <-readErr:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10s")
	}
}
