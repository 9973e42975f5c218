package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

const (
	l2 = venue.Stream("coinbase:level2:BTC-USD")
	tr = venue.Stream("coinbase:trades:BTC-USD")
)

// testDaemon is a daemon on 127.0.0.1:0 fed by a test source as coinbase.
type testDaemon struct {
	t      *testing.T
	d      *daemon.Daemon
	src    *testsource.Source
	addr   string
	cancel context.CancelFunc
	done   chan error
}

// startDaemon runs a daemon on the YAML config yml (listen is forced to
// 127.0.0.1:0) and stops it when the test ends.
func startDaemon(t *testing.T, yml string) *testDaemon {
	t.Helper()
	cfg, err := config.Parse([]byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	tempClaimStore(t, cfg)
	td := &testDaemon{t: t, done: make(chan error, 1)}
	src := venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) {
		td.src = testsource.New("coinbase", c)
		return td.src, nil
	}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	td.d, err = daemon.New(daemon.Options{Config: cfg, Venues: []venues.Venue{src}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	td.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	td.cancel = cancel
	go func() { td.done <- td.d.Run(ctx, ln) }()
	t.Cleanup(func() { td.stop() })
	return td
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// stop shuts the daemon down and returns Run's error.
func (td *testDaemon) stop() error {
	td.cancel()
	select {
	case err := <-td.done:
		td.done <- err
		return err
	case <-time.After(20 * time.Second):
		td.t.Fatal("daemon did not stop")
		return nil
	}
}

func (td *testDaemon) url(q string) string {
	u := "ws://" + td.addr + "/v1/stream"
	if q != "" {
		u += "?" + q
	}
	return u
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func lvl(p, s int64) venue.Level {
	return venue.Level{Price: decimal.New(p, 0), Size: decimal.New(s, 0)}
}

func (td *testDaemon) bookSnapshot() {
	td.src.Publish(&venue.Event{Kind: venue.KindBook, Stream: l2, Snapshot: true, RecvTime: t0,
		Bids: []venue.Level{lvl(99, 1), lvl(98, 2)}, Asks: []venue.Level{lvl(101, 1), lvl(102, 2)}})
}

// bookUpdate publishes an update; pad makes the event larger.
func (td *testDaemon) bookUpdate(i int, pad int) {
	ev := &venue.Event{Kind: venue.KindBook, Stream: l2, RecvTime: t0,
		Bids: []venue.Level{lvl(97, int64(1+i%5))}, Asks: []venue.Level{lvl(103, int64(1+i%4))}}
	for j := 0; j < pad; j++ {
		ev.Bids = append(ev.Bids, lvl(int64(50-j), int64(1+i%7)))
	}
	td.src.Publish(ev)
}

func (td *testDaemon) trade(i int) {
	td.src.Publish(&venue.Event{Kind: venue.KindTrade, Stream: tr, TradeID: "t", Price: decimal.New(int64(100+i), 0),
		Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: t0})
}

// checkFor is testutil.WaitFor, the one polling helper of the tests.
var checkFor = testutil.WaitFor

// wire is one decoded server object.
type wire struct {
	Type     string         `json:"type"`
	ID       string         `json:"id"`
	Code     string         `json:"code"`
	Message  string         `json:"message"`
	Kind     string         `json:"kind"`
	Stream   string         `json:"stream"`
	Streams  []string       `json:"streams"`
	Seq      uint64         `json:"seq"`
	Snapshot bool           `json:"snapshot"`
	Details  map[string]any `json:"details"`
	Bids     [][2]string    `json:"bids"`
	Bid      string         `json:"bid"`      // a quote
	BidSize  string         `json:"bid_size"` // a quote
	Claim    map[string]any `json:"claim"`    // a snapshot op's ack (claims.go)
}

// client is a websocket client reading on its own goroutine into a channel.
type client struct {
	t    *testing.T
	ws   *websocket.Conn
	msgs chan wire
	err  chan error // the read error that ended the reader
	mu   sync.Mutex
	seen []wire // every object read by next, in order
}

type dialOpts struct {
	header  http.Header
	readBuf int  // shrink the socket receive buffer
	paused  bool // do not start reading until resume
}

func dialRaw(t *testing.T, url string, o dialOpts) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	if o.readBuf > 0 {
		// Set before connect, with an Ethernet-sized MSS: with loopback's
		// 64 KiB MSS above the buffer the kernel does not advertise the
		// window reopening, and a client reading again after a stall waits
		// for the daemon's zero-window probe, backed off to more than the
		// 10 s that next waits once the stall passed about 10 s.
		nd := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) {
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, o.readBuf)
				syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1448)
			})
		}}
		d.NetDialContext = nd.DialContext
	}
	return d.Dial(url, o.header)
}

func dial(t *testing.T, url string, o dialOpts) *client {
	t.Helper()
	ws, resp, err := dialRaw(t, url, o)
	if err != nil {
		status := ""
		if resp != nil {
			status = resp.Status
		}
		t.Fatalf("dial %s: %v %s", url, err, status)
	}
	c := &client{t: t, ws: ws, msgs: make(chan wire, 1<<16), err: make(chan error, 1)}
	t.Cleanup(func() { ws.Close() })
	if !o.paused {
		c.start()
	}
	return c
}

// start launches the reader.
func (c *client) start() {
	go func() {
		for {
			_, b, err := c.ws.ReadMessage()
			if err != nil {
				c.err <- err
				close(c.msgs)
				return
			}
			for _, line := range bytes.Split(b, []byte{'\n'}) {
				var w wire
				if err := json.Unmarshal(line, &w); err != nil {
					c.err <- errors.New("bad object: " + string(line))
					close(c.msgs)
					return
				}
				c.msgs <- w
			}
		}
	}()
}

func (c *client) send(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// next returns the next object, failing the test after 10 s.
func (c *client) next() wire {
	c.t.Helper()
	select {
	case w, ok := <-c.msgs:
		if !ok {
			c.t.Fatalf("connection ended: %v", <-c.err)
		}
		c.mu.Lock()
		c.seen = append(c.seen, w)
		c.mu.Unlock()
		return w
	case <-time.After(10 * time.Second):
		c.t.Fatal("no message within 10s")
	}
	return wire{}
}

// until reads until pred holds and returns everything read, pred's match last.
func (c *client) until(pred func(wire) bool) []wire {
	c.t.Helper()
	var out []wire
	for {
		w := c.next()
		out = append(out, w)
		if pred(w) {
			return out
		}
	}
}

// reply reads until the reply (ack, pong or error) with id.
func (c *client) reply(id string) wire {
	c.t.Helper()
	ws := c.until(func(w wire) bool { return w.ID == id && (w.Type == "ack" || w.Type == "pong" || w.Type == "error") })
	return ws[len(ws)-1]
}

// closeErr waits for the connection to end and returns the read error.
func (c *client) closeErr() error {
	c.t.Helper()
	for {
		select {
		case _, ok := <-c.msgs:
			if !ok {
				return <-c.err
			}
		case <-time.After(10 * time.Second):
			c.t.Fatal("connection did not end within 10s")
		}
	}
}

func httpGet(t *testing.T, url string, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
