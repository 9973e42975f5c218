package wsapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/notice"
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
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, m, err := ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(m, []byte("\n")) {
		var o map[string]any
		if err := json.Unmarshal(line, &o); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, o)
	}
	return out
}

func token(name, secret string, venues ...string) api.Token {
	return api.Token{Name: name, Digest: sha256.Sum256([]byte(secret)), Venues: venues}
}

// TestNameBelongsToItsToken: a token cannot attach under a name another
// token created: it is refused with 409 name_taken before the upgrade,
// the owner's connection stays and keeps its events, and the listing
// for each token holds only its own subscribers. (On main, token A got B's
// subscriber, its Coinbase events and the power to unsubscribe them, and
// B was closed with 4001.)
func TestNameBelongsToItsToken(t *testing.T) {
	auth := api.NewAuth([]api.Token{token("A", "secret-a", "kraken"), token("B", "secret-b")})
	hub, srv, url := testServer(t, Options{Auth: auth})
	b, _, err := dial(t, websocket.DefaultDialer, url+"?name=deskB", "secret-b")
	if err != nil {
		t.Fatal(err)
	}
	if got := command(t, b, `{"op":"subscribe","id":"1","streams":["coinbase:trades:BTC-USD"]}`); got[0]["type"] != "ack" {
		t.Fatalf("subscribe: %v", got)
	}
	command(t, b, `{"op":"ping","id":"p"}`) // the reader is past the subscribe: it is in effect

	_, resp, err := dial(t, websocket.DefaultDialer, url+"?name=deskB", "secret-a")
	if err == nil || resp == nil || resp.StatusCode != http.StatusConflict {
		t.Fatalf("token A attached under B's name: err %v, response %v", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	var e struct{ Code api.Code }
	if json.Unmarshal(body, &e); e.Code != api.CodeNameTaken {
		t.Fatalf("refusal body %s, want code name_taken", body)
	}

	hub.Feed("coinbase").Publish(&venue.Event{Kind: venue.KindTrade, Stream: "coinbase:trades:BTC-USD", TradeID: "1",
		Price: decimal.New(1, 0), Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: time.Now()})
	if got := readObjects(t, b); got[0]["type"] != "trade" {
		t.Fatalf("owner's connection got %v, want its trade", got)
	}

	a, _, err := dial(t, websocket.DefaultDialer, url+"?name=deskA", "secret-a")
	if err != nil {
		t.Fatal(err)
	}
	command(t, a, `{"op":"ping","id":"p"}`) // the session is up
	ids := func(tok *api.Token) (out []string) {
		for _, s := range srv.Subscribers(tok) {
			out = append(out, s.ID()+"/"+strings.Join(streamStrings(s.Streams()), ","))
		}
		return out
	}
	if got := ids(&api.Token{Name: "A"}); len(got) != 1 || got[0] != "deskA/" {
		t.Fatalf("token A lists %v, want only deskA", got)
	}
	if got := ids(&api.Token{Name: "B"}); len(got) != 1 || got[0] != "deskB/coinbase:trades:BTC-USD" {
		t.Fatalf("token B lists %v, want only deskB", got)
	}
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

// TestUnreadRepliesClose: a client that sends junk and never reads is
// closed once its unread replies pass the bound, rather than growing the
// server's memory by a reply per message. (On main the replies went on the
// unbounded notice queue: 24 MB of junk made 1.9 GB.)
func TestUnreadRepliesClose(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	// Reaching the default bound (1 MiB of replies) takes about 10,000
	// junk messages, each answered on a goroutine of its own: 2 to 4 s on
	// a loaded machine, close to the 5 s this test once waited. The wait
	// stays half the write timeout: the close is not a stuck write's.
	const writeTimeout = time.Minute
	_, srv, url := testServer(t, Options{Metrics: m, SendBuffer: 4096, WriteTimeout: writeTimeout})
	ws, _, err := dial(t, smallReadBuffer, url, "")
	if err != nil {
		t.Fatal(err)
	}
	command(t, ws, `{"op":"ping","id":"p"}`) // the session is up
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the flood: 16-byte junk messages as fast as they go, until the connection fails
		defer wg.Done()
		junk := []byte("not json at all!")
		for ctx.Err() == nil && ws.WriteMessage(websocket.TextMessage, junk) == nil {
		}
	}()
	defer wg.Wait()
	defer ws.Close()
	defer cancel()
	start := time.Now()
	for srv.Sessions() > 0 {
		if time.Since(start) > writeTimeout/2 {
			t.Fatalf("a client that reads none of its replies is still connected after %v", writeTimeout/2)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := testutil.ToFloat64(m.closes.WithLabelValues("unread_replies")); n != 1 {
		t.Fatalf("closes{reason=unread_replies} = %v, want 1", n)
	}
}

// TestParseErrorsRateLimited: messages that do not parse are charged to
// the command rate like commands: past the burst they get rate_limited,
// one reply each, and the command after them is refused too. (On main
// every bad message got bad_request and cost nothing.)
func TestParseErrorsRateLimited(t *testing.T) {
	_, _, url := testServer(t, Options{Limits: Limits{CommandsPerSecond: 0.001, CommandBurst: 5}})
	ws, _, err := dial(t, websocket.DefaultDialer, url, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		ws.WriteMessage(websocket.TextMessage, []byte("junk"))
	}
	ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"ping","id":"p"}`))
	var codes []string
	for len(codes) < 9 {
		for _, o := range readObjects(t, ws) {
			code, _ := o["code"].(string)
			codes = append(codes, code)
		}
	}
	want := "bad_request bad_request bad_request bad_request bad_request rate_limited rate_limited rate_limited rate_limited"
	if got := strings.Join(codes, " "); got != want {
		t.Fatalf("replies %s\nwant    %s", got, want)
	}
}

// TestBatchBound: while a client is not reading, replies and daemon
// notices pile up; when it reads, no message it gets is past
// max_batch_bytes unless it holds a single object. (On main every queued
// notice went into one batch: 356–369 KB with a 64 KB bound.)
func TestBatchBound(t *testing.T) {
	const bound = 4096
	hub, _, url := testServer(t, Options{SendBuffer: 4096, MaxBatchBytes: bound})
	ws, _, err := dial(t, smallReadBuffer, url, "")
	if err != nil {
		t.Fatal(err)
	}
	command(t, ws, `{"op":"ping","id":"p"}`)
	const notices, junk = 1000, 300
	n := notice.Must(notice.Shutdown, "", "", time.Now(), strings.Repeat("x", 100), nil)
	for range notices {
		hub.Broadcast(n)
	}
	for range junk {
		ws.WriteMessage(websocket.TextMessage, []byte("junk"))
	}
	for got := 0; got < notices+junk; {
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, m, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("after %d objects: %v", got, err)
		}
		k := bytes.Count(m, []byte("\n")) + 1
		if len(m) > bound && k > 1 {
			t.Fatalf("a message of %d bytes holding %d objects; max_batch_bytes is %d", len(m), k, bound)
		}
		got += k
	}
}

// TestNamedTTL: a named subscriber whose connection went away is
// forgotten after Options.NamedTTL, removed from its feeds, and counted.
// (On main 1,000 one-off names stayed registered for good.)
func TestNamedTTL(t *testing.T) {
	hub, _, url := testServer(t, Options{NamedTTL: 50 * time.Millisecond})
	ws, _, err := dial(t, websocket.DefaultDialer, url+"?name=oneoff", "")
	if err != nil {
		t.Fatal(err)
	}
	command(t, ws, `{"op":"subscribe","id":"1","streams":["coinbase:trades:BTC-USD"]}`)
	command(t, ws, `{"op":"ping","id":"p"}`)
	sub := hub.Registry().Named("oneoff")
	if sub == nil {
		t.Fatal("not registered")
	}
	ws.Close()
	deadline := time.Now().Add(5 * time.Second)
	for hub.Registry().Named("oneoff") != nil {
		if time.Now().After(deadline) {
			t.Fatal("named subscriber still registered 5s after its connection closed, with a 50ms time to live")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := hub.Feed("coinbase").State(sub); ok || hub.Expired() != 1 {
		t.Fatalf("after expiry: still in the feed %v, Expired() = %d", ok, hub.Expired())
	}
}
