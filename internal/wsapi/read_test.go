package wsapi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/rawio"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/subscriber"
)

// clientFrame is one masked client frame (RFC 6455, 5.2) of op.
func clientFrame(op byte, fin bool, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var b []byte
	switch n := len(payload); {
	case n < 126:
		b = []byte{b0, 0x80 | byte(n)}
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16([]byte{b0, 0x80 | 126}, uint16(n))
	default:
		b = binary.BigEndian.AppendUint64([]byte{b0, 0x80 | 127}, uint64(n))
	}
	key := [4]byte{0x1b, 0x7e, 0x33, 0xc4}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i&3])
	}
	return b
}

// withReaders runs f with the poller and with a reader goroutine per
// connection.
func withReaders(t *testing.T, f func(t *testing.T)) {
	for _, polled := range []bool{true, false} {
		name := "goroutine"
		if polled {
			name = "poller"
		}
		t.Run(name, func(t *testing.T) {
			defer func(v bool) { usePoller = v }(usePoller)
			usePoller = polled
			f(t)
		})
	}
}

// readServer is a server with a write pool and its metrics.
func readServer(t testing.TB, o Options) (*Server, string, *Metrics) {
	t.Helper()
	hub := fanout.NewHub(subscriber.NewRegistry())
	if _, err := hub.AddFeed(fanout.Options{Venue: "coinbase"}); err != nil {
		t.Fatal(err)
	}
	o.Hub, o.Logger, o.Metrics = hub, discardLogger(), NewMetrics(prometheus.NewRegistry())
	if o.WriteDelay == 0 {
		o.WriteDelay = time.Millisecond
	}
	srv := NewServer(o)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	return srv, "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/stream", o.Metrics
}

// closeCode reads until the server's close frame and returns its code.
func closeCode(t *testing.T, ws *websocket.Conn) int {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if ce, ok := errors.AsType[*websocket.CloseError](err); ok {
			return ce.Code
		}
		if err != nil {
			t.Fatalf("no close frame: %v", err)
		}
	}
}

// TestReadFrames: what the session's reader answers, frame by frame, read
// by the poller's goroutines or a reader goroutine alike.
func TestReadFrames(t *testing.T) {
	withReaders(t, func(t *testing.T) {
		srv, url, m := readServer(t, Options{})
		lim := srv.o.Limits.MaxMessageBytes
		dialRaw := func(t *testing.T) *websocket.Conn {
			ws, _, err := websocket.DefaultDialer.Dial(url, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.Close() })
			return ws
		}
		t.Run("fragmented with a ping between", func(t *testing.T) {
			ws := dialRaw(t)
			pong := make(chan string, 1)
			ws.SetPongHandler(func(p string) error { pong <- p; return nil })
			msg := []byte(`{"op":"ping","id":"frag"}`)
			var b []byte
			b = append(b, clientFrame(websocket.TextMessage, false, msg[:5])...)
			b = append(b, clientFrame(websocket.PingMessage, true, []byte("hello"))...)
			b = append(b, clientFrame(0, false, msg[5:12])...)
			b = append(b, clientFrame(0, true, msg[12:])...)
			// One byte a write: the reader waits inside frames and headers.
			for i := range b {
				if _, err := ws.NetConn().Write(b[i : i+1]); err != nil {
					t.Fatal(err)
				}
			}
			objs := readObjects(t, ws)
			if len(objs) != 1 || objs[0]["type"] != "pong" || objs[0]["id"] != "frag" {
				t.Fatalf("reply %v", objs)
			}
			select {
			case p := <-pong:
				if p != "hello" {
					t.Fatalf("pong %q", p)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no pong")
			}
		})
		t.Run("too long for max_message_bytes", func(t *testing.T) {
			ws := dialRaw(t)
			ws.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("x"), lim+1))
			objs := command(t, ws, `{"op":"ping","id":"after"}`)
			if len(objs) == 1 { // the two replies may share a message, or not
				objs = append(objs, readObjects(t, ws)...)
			}
			if objs[0]["code"] != "message_too_large" || objs[1]["id"] != "after" {
				t.Fatalf("replies %v", objs)
			}
		})
		for _, tc := range []struct {
			name   string
			frames []byte
			code   int
			reason CloseReason
		}{
			{"past the read limit", clientFrame(websocket.TextMessage, true, make([]byte, 16*lim+1)), websocket.CloseMessageTooBig, MessageTooLarge},
			{"past the read limit over fragments", append(clientFrame(websocket.TextMessage, false, make([]byte, 8*lim)),
				clientFrame(0, true, make([]byte, 8*lim+1))...), websocket.CloseMessageTooBig, MessageTooLarge},
			{"unmasked", []byte{0x81, 0x01, 'x'}, websocket.CloseProtocolError, ClientClosed},
			{"bad opcode", clientFrame(3, true, nil), websocket.CloseProtocolError, ClientClosed},
			{"reserved bit", append([]byte{0xc1}, clientFrame(0, true, []byte("x"))[1:]...), websocket.CloseProtocolError, ClientClosed},
			{"continuation first", clientFrame(0, true, []byte("x")), websocket.CloseProtocolError, ClientClosed},
			{"data inside a message", append(clientFrame(websocket.TextMessage, false, []byte("x")),
				clientFrame(websocket.TextMessage, true, []byte("y"))...), websocket.CloseProtocolError, ClientClosed},
			{"fragmented ping", clientFrame(websocket.PingMessage, false, nil), websocket.CloseProtocolError, ClientClosed},
			{"long ping", clientFrame(websocket.PingMessage, true, make([]byte, 126)), websocket.CloseProtocolError, ClientClosed},
			{"bad close code", clientFrame(websocket.CloseMessage, true, []byte{0x03, 0xe7}), websocket.CloseProtocolError, ClientClosed},
			{"close", clientFrame(websocket.CloseMessage, true, websocket.FormatCloseMessage(4321, "bye")), 4321, ClientClosed},
			{"close without a code", clientFrame(websocket.CloseMessage, true, nil), websocket.CloseNoStatusReceived, ClientClosed},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := promtest.ToFloat64(m.closes.WithLabelValues(tc.reason.String()))
				ws := dialRaw(t)
				if _, err := ws.NetConn().Write(tc.frames); err != nil {
					t.Fatal(err)
				}
				if got := closeCode(t, ws); got != tc.code {
					t.Fatalf("close code %d, want %d", got, tc.code)
				}
				testutil.WaitFor(t, 10*time.Second, "the close counted", func() bool {
					return promtest.ToFloat64(m.closes.WithLabelValues(tc.reason.String())) == before+1
				})
			})
		}
	})
}

// TestReadTimeout: a client that answers no ping is closed after two
// ping intervals; one that answers stays.
func TestReadTimeout(t *testing.T) {
	withReaders(t, func(t *testing.T) {
		srv, url, m := readServer(t, Options{PingInterval: 200 * time.Millisecond})
		silent := dialSubscribed(t, url) // never reads: its pings go unanswered
		alive := dialSubscribed(t, url)
		aliveErr := make(chan error, 1)
		go func() {
			for {
				if _, _, err := alive.ReadMessage(); err != nil {
					aliveErr <- err
					return
				}
			}
		}()
		testutil.WaitFor(t, 20*time.Second, "the silent client closed", func() bool {
			return promtest.ToFloat64(m.closes.WithLabelValues(ReadTimeout.String())) == 1
		})
		_ = silent
		// The answering client outlives several more deadlines.
		start := time.Now()
		testutil.WaitFor(t, 20*time.Second, "1 s more", func() bool { return time.Since(start) > time.Second })
		select {
		case err := <-aliveErr:
			t.Fatalf("answering client closed: %v", err)
		default:
		}
		if n := srv.Sessions(); n != 1 {
			t.Fatalf("%d sessions, want 1", n)
		}
		alive.Close()
		<-aliveErr
	})
}

// TestIdleConnectionsHoldNoGoroutine: with the poller, a subscribed
// connection that has nothing to read and nothing to write holds no
// goroutine and no read buffer (it is parked), and wakes for a command.
func TestIdleConnectionsHoldNoGoroutine(t *testing.T) {
	p, err := rawio.NewPoller(func(uint64) {})
	if err != nil {
		t.Skip(err)
	}
	p.Close()
	srv, url, _ := readServer(t, Options{PingInterval: time.Hour})
	const n = 50
	base := runtime.NumGoroutine()
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		conns[i] = dialSubscribed(t, url)
	}
	parked := func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, s := range srv.sessions {
			s.w.stateMu.Lock()
			writing := s.w.running
			s.w.stateMu.Unlock()
			if s.rstate.Load() != rParked || writing {
				return false
			}
		}
		return len(srv.sessions) == n
	}
	testutil.WaitFor(t, 10*time.Second, "every connection parked", parked)
	// The poller's goroutine and the client side's, not one a connection.
	if g := runtime.NumGoroutine() - base; g > n/2 {
		t.Fatalf("%d more goroutines for %d idle connections", g, n)
	}
	if objs := command(t, conns[7], `{"op":"ping","id":"w"}`); objs[0]["id"] != "w" {
		t.Fatalf("reply %v", objs)
	}
	testutil.WaitFor(t, 10*time.Second, "parked again", parked)
}

// FuzzReadFrames: whatever a client sends after the handshake, the
// session's reader neither panics (a panic would close with
// internal_error) nor keeps the connection once the client is gone.
func FuzzReadFrames(f *testing.F) {
	for _, b := range [][]byte{
		clientFrame(websocket.TextMessage, true, []byte(`{"op":"ping","id":"1"}`)),
		append(clientFrame(websocket.TextMessage, false, []byte(`{"op":"pi`)), clientFrame(0, true, []byte(`ng","id":"2"}`))...),
		clientFrame(websocket.PingMessage, true, []byte("p")),
		clientFrame(websocket.PongMessage, true, nil),
		clientFrame(websocket.CloseMessage, true, websocket.FormatCloseMessage(1000, "")),
		clientFrame(websocket.BinaryMessage, true, make([]byte, 300)),
		{0x81, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x81},
	} {
		f.Add(b)
	}
	srv, url, m := readServer(f, Options{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ws, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.NetConn().Write(b)
		ws.Close()
		testutil.WaitFor(t, 10*time.Second, "the session ended", func() bool { return srv.Sessions() == 0 })
		if v := promtest.ToFloat64(m.closes.WithLabelValues(InternalError.String())); v != 0 {
			t.Fatalf("%x: internal_error", b)
		}
	})
}

// TestParkedReadAlloc: a parked connection woken by a pong reads it,
// moves its read deadline and parks again without allocating: the read
// buffer is the pool's, and nothing stays with the connection.
func TestParkedReadAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	srv, _, _ := readServer(t, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	s := newSession(srv, server, nil, false)
	s.idle = time.AfterFunc(time.Hour, func() {})
	defer s.idle.Stop()
	pong := clientFrame(websocket.PongMessage, true, nil)
	read := func() {
		client.Write(pong)
		if s.readFrames(true) {
			t.Fatal("the read ended the connection")
		}
	}
	read()
	if allocs := testing.AllocsPerRun(100, read); allocs != 0 {
		t.Fatalf("%v allocations per parked read, want 0", allocs)
	}
}
