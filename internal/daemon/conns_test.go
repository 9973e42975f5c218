package daemon_test

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
)

// keepAlive opens a connection, makes one GET with header auth (if not
// empty) and returns the connection, left open and idle.
func keepAlive(t *testing.T, addr, path, auth string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c
}

// closedWithin reports whether the server closed c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	ne, timeout := err.(net.Error)
	return err != nil && !(timeout && ne.Timeout())
}

// TestIdleKeepAliveClosed: an idle keep-alive connection is closed after
// http.idle_timeout (it never was before: issue 11, item 5).
func TestIdleKeepAliveClosed(t *testing.T) {
	d := daemontest.Start(t, "venues: {}\nhttp:\n  idle_timeout: 200ms\n", daemon.Options{})
	c := keepAlive(t, d.Addr, "/healthz", "")
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("an idle keep-alive connection was still open 10s after a 200ms idle timeout")
	}
}

// TestAnonymousIdleConnectionsCapped: past http.max_anonymous_connections,
// an idle connection that never presented a valid token is closed; one
// that did is kept.
func TestAnonymousIdleConnectionsCapped(t *testing.T) {
	d := daemontest.Start(t, "venues: {}\ntokens:\n  - {name: a, token: s3cret}\nhttp:\n  max_anonymous_connections: 3\n", daemon.Options{})
	var anon []net.Conn
	for range 5 {
		anon = append(anon, keepAlive(t, d.Addr, "/healthz", ""))
	}
	authed := keepAlive(t, d.Addr, "/v1/coverage", "s3cret")
	closed := 0
	for _, c := range anon {
		if closedWithin(c, 300*time.Millisecond) {
			closed++
		}
	}
	if closed != 2 {
		t.Fatalf("%d of 5 anonymous idle connections closed, want 2 (cap 3)", closed)
	}
	if closedWithin(authed, 300*time.Millisecond) {
		t.Fatal("a connection that presented a valid token was closed")
	}
}
