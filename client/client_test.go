package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// fakeDaemon is a websocket server speaking enough of the protocol for
// the connection tests: it refuses with refuse (if set), else acks
// subscribes and sends a snapshot, then runs after(conn).
type fakeDaemon struct {
	srv    *httptest.Server
	dials  atomic.Int32
	mu     sync.Mutex
	urls   []string
	refuse func(w http.ResponseWriter) bool
	after  func(ctx context.Context, c *websocket.Conn)
}

func newFake(t *testing.T) *fakeDaemon {
	f := &fakeDaemon{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.dials.Add(1)
		f.mu.Lock()
		f.urls = append(f.urls, r.URL.String())
		f.mu.Unlock()
		if f.refuse != nil && f.refuse(w) {
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		_, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		id := between(string(msg), `"id":"`, `"`)
		c.Write(ctx, websocket.MessageText, []byte(`{"type":"ack","id":"`+id+`","streams":["kraken:level2:BTC/USD"]}`+"\n"+
			`{"type":"book","stream":"kraken:level2:BTC/USD","seq":4,"snapshot":true,"bids":[["100","1"]],"asks":[["101","2"]]}`))
		if f.after != nil {
			f.after(ctx, c)
		}
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeDaemon) url() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/v1/stream" }

func between(s, a, b string) string {
	_, s, _ = strings.Cut(s, a)
	s, _, _ = strings.Cut(s, b)
	return s
}

func TestRefusedTokenDoesNotLoop(t *testing.T) {
	f := newFake(t)
	f.refuse = func(w http.ResponseWriter) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		w.Write([]byte(`{"type":"error","code":"unauthenticated","message":"unknown token"}`))
		return true
	}
	c, _ := New(Options{URLs: []string{f.url(), f.url()}, Token: "wrong", MinBackoff: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.Run(ctx)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnauthenticated || e.HTTPStatus != 401 || !e.Fatal() {
		t.Fatalf("Run: %v, want the fatal unauthenticated error", err)
	}
	if n := f.dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
	if err := c.Subscribe(ctx, "kraken:level2:BTC/USD"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Run: %v", err)
	}
}

func TestTakenOverIsFatal(t *testing.T) {
	f := newFake(t)
	f.after = func(ctx context.Context, c *websocket.Conn) {
		c.Write(ctx, websocket.MessageText, []byte(`{"type":"error","id":"","code":"taken_over","message":"another connection attached as desk1"}`))
		c.Close(CloseTakenOver, "taken over")
	}
	c, _ := New(Options{URLs: []string{f.url()}, Name: "desk1", MinBackoff: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go c.Subscribe(ctx, "kraken:level2:BTC/USD")
	err := c.Run(ctx)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeTakenOver || e.CloseCode != CloseTakenOver {
		t.Fatalf("Run: %v, want taken_over 4001", err)
	}
	if n := f.dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
}

func TestReconnectNextURLStatesLast(t *testing.T) {
	down := newFake(t)
	down.refuse = func(w http.ResponseWriter) bool {
		w.WriteHeader(503)
		w.Write([]byte(`{"type":"error","code":"shutting_down","message":"bye"}`))
		return true
	}
	up := newFake(t)
	var first atomic.Bool
	up.after = func(ctx context.Context, c *websocket.Conn) {
		if !first.Swap(true) {
			c.Write(ctx, websocket.MessageText, []byte(`{"type":"book","stream":"kraken:level2:BTC/USD","seq":5,"bids":[["100","0"]],"asks":[]}`))
			time.Sleep(50 * time.Millisecond)
			c.CloseNow() // a dropped connection
		}
	}
	var states []Reason
	var mu sync.Mutex
	c, _ := New(Options{URLs: []string{up.url(), down.url()}, Name: "desk1", MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Handler: func(m Message) {
			if s, ok := m.(*BookState); ok {
				mu.Lock()
				states = append(states, s.Reason)
				mu.Unlock()
			}
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go c.Run(ctx)
	if err := c.Subscribe(ctx, "kraken:level2:BTC/USD"); err != nil {
		t.Fatal(err)
	}
	for up.dials.Load() < 2 {
		select {
		case <-ctx.Done():
			t.Fatal("no reconnect")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if down.dials.Load() < 1 {
		t.Fatal("the second URL was not tried")
	}
	up.mu.Lock()
	second := up.urls[1]
	up.mu.Unlock()
	if !strings.Contains(second, "name=desk1") || !strings.Contains(second, "last=kraken%3Alevel2%3ABTC%2FUSD%3A5") {
		t.Fatalf("reattach URL %s, want name=desk1 and last=<stream>:5", second)
	}
	b := c.Book("kraken:level2:BTC/USD")
	for {
		if s, _ := b.State(); s == Valid && b.Seq() == 4 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("book not valid again")
		case <-b.Changed():
		case <-time.After(10 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !containsReason(states, ReasonReconnecting) {
		t.Fatalf("states %v: never reconnecting", states)
	}
}

func containsReason(rs []Reason, r Reason) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}
