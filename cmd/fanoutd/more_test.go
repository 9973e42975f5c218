package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func TestConnectionsPerTokenAndOrigin(t *testing.T) {
	td := startDaemon(t, `
tokens:
  - name: one
    token: abc
origins: ["https://desk.example.com"]
limits:
  max_connections_per_token: 1
venues:
  coinbase:
    symbols: [BTC-USD]
`)
	h := http.Header{"Authorization": {"Bearer abc"}}
	dial(t, td.url(""), dialOpts{header: h})
	_, resp, err := dialRaw(t, td.url(""), dialOpts{header: h})
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second connection: %v %v, want 429", err, resp)
	}
	_, resp, err = dialRaw(t, td.url("token=abc"), dialOpts{header: http.Header{"Origin": {"https://evil.example.com"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("bad origin: %v %v, want 403", err, resp)
	}
	_, body := httpGet(t, "http://"+td.addr+"/metrics", nil)
	for _, want := range []string{`fanoutd_refusals_total{code="too_many_connections"} 1`, `fanoutd_refusals_total{code="origin_not_allowed"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestTailPrintsEventsAndNotices(t *testing.T) {
	td := startDaemon(t, baseConfig)
	td.bookSnapshot()
	var out, errb syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- tail(ctx, []string{"--url", td.url(""), "--name", "tailer", string(l2)}, &out, &errb) }()
	checkFor(t, 10*time.Second, "tail's snapshot", func() bool { return strings.Contains(out.String(), "book SNAPSHOT") })
	td.bookUpdate(1, 0)
	checkFor(t, 10*time.Second, "tail's update", func() bool { return strings.Contains(out.String(), "#2 book update") })
	go td.stop()
	checkFor(t, 10*time.Second, "tail's shutdown notice", func() bool { return strings.Contains(out.String(), "NOTICE SHUTDOWN") })
	if code := <-done; code != 0 {
		t.Fatalf("tail exit %d: %s", code, errb.String())
	}
	cancel()
	if !strings.Contains(out.String(), "closed: 1001") {
		t.Errorf("tail output lacks the close:\n%s", out.String())
	}
}

func TestWriteTimeoutDetachesNamedKeepsSubscriptions(t *testing.T) {
	td := startDaemon(t, `
websocket:
  write_timeout: 200ms
  send_buffer_bytes: 4096
venues:
  coinbase:
    symbols: [BTC-USD]
    max_queue_len: 1000000
    max_queue_bytes: 0
`)
	td.bookSnapshot()
	c := dial(t, td.url("name=slow"), dialOpts{readBuf: 4096, paused: true})
	c.send(map[string]any{"op": "subscribe", "id": "1", "streams": []string{string(l2)}})
	sub := func() bool { s := td.d.Hub().Registry().Named("slow"); return s != nil && s.NumStreams() == 1 }
	checkFor(t, 5*time.Second, "subscribed", sub)
	s := td.d.Hub().Registry().Named("slow")
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; s.Resolve() != nil; i++ {
		if time.Now().After(deadline) {
			t.Fatal("a connection that stopped reading was not closed")
		}
		td.bookUpdate(i, 50)
		if i%50 == 49 {
			time.Sleep(5 * time.Millisecond) // pace the publisher; the condition is polled above
		}
	}
	if s.NumStreams() != 1 {
		t.Fatalf("named subscriber lost its subscription: %v", s.Streams())
	}
	checkFor(t, 5*time.Second, "close counted", func() bool {
		_, body := httpGet(t, "http://"+td.addr+"/metrics", nil)
		return strings.Contains(body, `fanoutd_closes_total{reason="write_timeout"} 1`)
	})
}

func TestServerPingsKeepConnectionAlive(t *testing.T) {
	// 250ms: the server closes a client silent for two intervals, and a
	// loaded machine can hold the test client's pong that long.
	td := startDaemon(t, "websocket:\n  ping_interval: 250ms\n"+baseConfig)
	c := dial(t, td.url(""), dialOpts{paused: true})
	var pings atomic.Int32
	c.ws.SetPingHandler(func(data string) error {
		pings.Add(1)
		return c.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	c.start()
	checkFor(t, 10*time.Second, "three server pings", func() bool { return pings.Load() >= 3 })
	c.send(map[string]any{"op": "ping", "id": "alive"})
	if w := c.reply("alive"); w.Type != "pong" {
		t.Fatalf("got %+v", w)
	}
}
