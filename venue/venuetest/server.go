// Package venuetest holds what every venue adapter's tests share: a mock
// venue server (a real websocket server on 127.0.0.1:0, with plain HTTP
// routes for REST), a recording Sink that checks the event stream's
// invariants, and Run, the conformance suite every adapter passes.
//
// For a venue's own tests it also holds the plumbing they would otherwise
// each write again: Dir reads recorded frames and compares golden files,
// Decode runs frames through a fresh decoder, Start and StartAdapter run
// an adapter (against a mock) for the length of a test, and Recorder
// keeps what an adapter records.
//
// A mock venue speaks the venue's protocol from recorded or generated
// frames; it is not a mock of fanoutd's code. The per-venue dialect lives
// next to each adapter and implements Venue.
package venuetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Handler is a mock venue's protocol: what it does when a client connects
// and when the client sends a message. Calls for one connection are
// sequential; different connections run concurrently.
type Handler interface {
	Connected(c *Conn)
	Message(c *Conn, msg []byte)
}

// Server is a mock venue server on 127.0.0.1:0. Websocket upgrades are
// accepted on every path; other requests go to the routes added with
// HandleHTTP.
type Server struct {
	// URL is the websocket base URL, ws://127.0.0.1:port.
	URL string
	// HTTPURL is the same server as http://127.0.0.1:port.
	HTTPURL string

	h   Handler
	srv *httptest.Server
	mux *http.ServeMux

	mu       sync.Mutex // protects the fields below
	conns    map[*Conn]struct{}
	accepted int
	silent   bool
	changed  chan struct{} // closed and replaced when accepted changes
}

// Conn is one client connection to the mock.
type Conn struct {
	// Request is the upgrade request (path and query carry the Binance
	// combined-stream subscription, for example).
	Request *http.Request
	// N is the connection's number on its server, from 1.
	N int

	s  *Server
	ws *websocket.Conn

	wmu sync.Mutex // serialises writes
}

// NewServer starts a mock server for h; it stops when t ends.
func NewServer(t testing.TB, h Handler) *Server {
	s := &Server{h: h, mux: http.NewServeMux(), conns: map[*Conn]struct{}{}, changed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.HTTPURL = s.srv.URL
	s.URL = "ws" + strings.TrimPrefix(s.srv.URL, "http")
	t.Cleanup(func() {
		s.CloseAll()
		s.srv.Close()
	})
	return s
}

// HandleHTTP adds a plain HTTP route (REST endpoints).
func (s *Server) HandleHTTP(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.mux.ServeHTTP(w, r)
		return
	}
	c := &Conn{Request: r, s: s}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true,
		OnPingReceived: func(context.Context, []byte) bool {
			return !s.Silent() // a silent venue answers no pings either
		},
	})
	if err != nil {
		return
	}
	ws.SetReadLimit(64 << 20)
	c.ws = ws
	s.mu.Lock()
	s.accepted++
	c.N = s.accepted
	s.conns[c] = struct{}{}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		ws.CloseNow()
	}()
	s.h.Connected(c)
	for {
		_, msg, err := ws.Read(context.Background())
		if err != nil {
			return
		}
		if s.Silent() {
			continue
		}
		s.h.Message(c, msg)
	}
}

// Send writes one text frame to the client. A silent server sends nothing
// and reports no error.
func (c *Conn) Send(frame []byte) error {
	if c.s.Silent() {
		return nil
	}
	return c.write(websocket.MessageText, frame)
}

// SendBinary writes one binary frame (venues that compress, or garbage).
func (c *Conn) SendBinary(frame []byte) error {
	if c.s.Silent() {
		return nil
	}
	return c.write(websocket.MessageBinary, frame)
}

func (c *Conn) write(typ websocket.MessageType, frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.ws.Write(ctx, typ, frame)
}

// Ping sends a websocket ping and waits for the pong.
func (c *Conn) Ping(ctx context.Context) error { return c.ws.Ping(ctx) }

// Close closes the connection with a close frame carrying code and reason
// (a venue's forced disconnect).
func (c *Conn) Close(code websocket.StatusCode, reason string) { c.ws.Close(code, reason) }

// Drop closes the TCP connection without a close frame.
func (c *Conn) Drop() { c.ws.CloseNow() }

// Conns returns the open connections, oldest first.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	for i := 1; i < len(out); i++ { // tiny insertion sort by N
		for j := i; j > 0 && out[j].N < out[j-1].N; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Accepted returns how many connections the server has accepted in all.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// WaitAccepted waits until the server has accepted at least n connections
// in all, failing t after timeout.
func (s *Server) WaitAccepted(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got, ch := s.accepted, s.changed
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("venuetest: %d connections accepted after %v, want %d", got, timeout, n)
		}
	}
}

// Broadcast sends frame to every open connection.
func (s *Server) Broadcast(frame []byte) {
	for _, c := range s.Conns() {
		c.Send(frame)
	}
}

// CloseAll drops every open connection without a close frame.
func (s *Server) CloseAll() {
	for _, c := range s.Conns() {
		c.Drop()
	}
}

// SetSilent makes the server stop sending frames, answering pings and
// reading requests (true), or resume (false): a venue that hangs.
func (s *Server) SetSilent(on bool) {
	s.mu.Lock()
	s.silent = on
	s.mu.Unlock()
}

// Silent reports whether the server is silent.
func (s *Server) Silent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.silent
}
