package wsapi

import (
	"crypto/sha256"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// testServer serves a hub with coinbase and kraken feeds through a server
// with o; it returns the hub, the server and its websocket URL.
func testServer(t *testing.T, o Options) (*fanout.Hub, *Server, string) {
	t.Helper()
	hub := fanout.NewHub(subscriber.NewRegistry())
	for _, v := range []string{"coinbase", "kraken"} {
		if _, err := hub.AddFeed(fanout.Options{Venue: v}); err != nil {
			t.Fatal(err)
		}
	}
	o.Hub, o.Logger = hub, discardLogger()
	if o.Metrics == nil {
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	srv := NewServer(o)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	return hub, srv, "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/stream"
}

// dial connects with secret as bearer token (none if empty); the
// connection is closed when the test ends.
func dial(t *testing.T, d *websocket.Dialer, url, secret string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	if secret != "" {
		h.Set("Authorization", "Bearer "+secret)
	}
	ws, resp, err := d.Dial(url, h)
	if ws != nil {
		t.Cleanup(func() { ws.Close() })
	}
	return ws, resp, err
}

// command sends cmd and returns the next message's objects.
func command(t *testing.T, ws *websocket.Conn, cmd string) []map[string]any {
	t.Helper()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(cmd)); err != nil {
		t.Fatal(err)
	}
	return readObjects(t, ws)
}

func readObjects(t *testing.T, ws *websocket.Conn) []map[string]any {
	t.Helper()
	return testutil.Objects(t, ws, 5*time.Second)
}

func token(name, secret string, venues ...string) api.Token {
	return api.Token{Name: name, Digest: sha256.Sum256([]byte(secret)), Venues: venues}
}

func streamStrings(sts []venue.Stream) []string {
	out := make([]string, len(sts))
	for i, st := range sts {
		out[i] = string(st)
	}
	return out
}

// TestNameWithoutAuth: without tokens a name is anyone's, as before: a
// second connection takes it over.
func TestNameWithoutAuth(t *testing.T) {
	_, srv, url := testServer(t, Options{})
	first, _, err := dial(t, websocket.DefaultDialer, url+"?name=desk", "")
	if err != nil {
		t.Fatal(err)
	}
	command(t, first, `{"op":"ping","id":"p"}`)
	second, _, err := dial(t, websocket.DefaultDialer, url+"?name=desk", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := command(t, second, `{"op":"ping","id":"p"}`); got[len(got)-1]["type"] != "pong" {
		t.Fatalf("second connection: %v", got)
	}
	if got := readObjects(t, first); got[0]["code"] != string(api.CodeTakenOver) {
		t.Fatalf("first connection got %v, want taken_over", got)
	}
	if _, _, err := first.ReadMessage(); !websocket.IsCloseError(err, CloseCodeTakenOver) {
		t.Fatalf("first connection closed with %v, want 4001", err)
	}
	if len(srv.Subscribers(nil)) != 1 {
		t.Fatalf("listing without auth: %d subscribers, want 1", len(srv.Subscribers(nil)))
	}
}

// smallReadBuffer dials with a 4 KiB socket receive buffer, so that a
// client that does not read backs the server's socket up at once.
var smallReadBuffer = &websocket.Dialer{NetDialContext: (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
}}).DialContext}
