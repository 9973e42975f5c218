package daemon_test

// The hostile-clients suite: each TestHostile* runs one attack
// against a daemon started by daemontest, over real sockets, and asserts
// the promise docs/security.md states. Run it alone with
//
//	go test -race -run Hostile ./internal/daemon/ ./cmd/fanoutd/
//
// (the capture and configuration attacks are in cmd/fanoutd/hostile_test.go).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// hostile is a daemon on a test source named coinbase and one named kraken;
// src and kraken are the sources, through which a test publishes.
type hostile struct {
	*daemontest.Running
	src, kraken *testsource.Source
}

func startHostile(t *testing.T, yml string) *hostile {
	t.Helper()
	h := &hostile{}
	var mu sync.Mutex
	cb := venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) {
		mu.Lock()
		defer mu.Unlock()
		h.src = testsource.New("coinbase", c)
		return h.src, nil
	}}
	kr := venues.Venue{Name: "kraken", New: func(c venue.Config) (venue.Adapter, error) {
		mu.Lock()
		defer mu.Unlock()
		h.kraken = testsource.New("kraken", c)
		return h.kraken, nil
	}}
	h.Running = daemontest.Start(t, yml, daemon.Options{Venues: []venues.Venue{cb, kr}})
	return h
}

const twoVenues = "venues:\n  coinbase:\n    symbols: [BTC-USD]\n  kraken:\n    symbols: [BTC/USD]\n"

// wsDial opens /v1/stream+query with secret as bearer token (none if
// empty); the connection is closed when the test ends.
func wsDial(t *testing.T, d *websocket.Dialer, h *hostile, query, secret string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	hdr := http.Header{}
	if secret != "" {
		hdr.Set("Authorization", "Bearer "+secret)
	}
	ws, resp, err := d.Dial(h.URL("ws")+"/v1/stream"+query, hdr)
	if ws != nil {
		t.Cleanup(func() { ws.Close() })
	}
	return ws, resp, err
}

func objects(t *testing.T, ws *websocket.Conn) []map[string]any {
	t.Helper()
	return testutil.Objects(t, ws, 10*time.Second)
}

// replyTo sends cmd and returns the reply whose id is id, skipping
// anything else.
func replyTo(t *testing.T, ws *websocket.Conn, id, cmd string) map[string]any {
	t.Helper()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(cmd)); err != nil {
		t.Fatal(err)
	}
	for {
		for _, o := range objects(t, ws) {
			if o["id"] == id {
				return o
			}
		}
	}
}

// get makes a request with secret as bearer token (none if empty).
func get(t *testing.T, url, secret string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// errorBody checks that body is exactly the one error body with code.
func errorBody(t *testing.T, what string, resp *http.Response, body []byte, code string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Errorf("%s: body %q is not JSON", what, body)
		return
	}
	msg, _ := m["message"].(string)
	if len(m) != 3 || m["type"] != "error" || m["code"] != code || msg == "" {
		t.Errorf("%s: body %s, want {\"type\":\"error\",\"code\":%q,\"message\":…}", what, body, code)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
}

func trade(st venue.Stream, id string) *venue.Event {
	return &venue.Event{Kind: venue.KindTrade, Stream: st, TradeID: id, Price: decimal.New(1, 0), Size: decimal.New(1, 0), Side: venue.SideBuy}
}

func book(st venue.Stream) *venue.Event {
	lv := func(p int64) []venue.Level { return []venue.Level{{Price: decimal.New(p, 0), Size: decimal.New(1, 0)}} }
	return &venue.Event{Kind: venue.KindBook, Stream: st, Snapshot: true, Bids: lv(100), Asks: lv(101)}
}

// metric is the sum of the samples of the named metric whose labels
// include every one of labels (name, value pairs).
func metric(t *testing.T, h *hostile, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := h.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	samples:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue samples
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

// TestHostileNameTakeover: token A, allowed only kraken,
// asks for token B's named subscriber. Promise: HTTP 409 name_taken before
// the upgrade, B stays attached and keeps its Coinbase events, A cannot
// subscribe to Coinbase itself, and GET /v1/subscribers shows A only its
// own subscriber.
func TestHostileNameTakeover(t *testing.T) {
	h := startHostile(t, twoVenues+"tokens:\n  - {name: a, token: secret-a, venues: [kraken]}\n  - {name: b, token: secret-b}\n")
	b, _, err := wsDial(t, websocket.DefaultDialer, h, "?name=deskB", "secret-b")
	if err != nil {
		t.Fatal(err)
	}
	if r := replyTo(t, b, "1", `{"op":"subscribe","id":"1","streams":["coinbase:trades:BTC-USD"]}`); r["type"] != "ack" {
		t.Fatalf("B's subscribe: %v", r)
	}
	for _, q := range []string{"?name=deskB", "?name=deskB&token=secret-a"} {
		secret := "secret-a"
		if strings.Contains(q, "token=") {
			secret = ""
		}
		_, resp, err := wsDial(t, websocket.DefaultDialer, h, q, secret)
		if err == nil || resp == nil || resp.StatusCode != http.StatusConflict {
			t.Fatalf("token A on %s: err %v, response %v; want 409", q, err, resp)
		}
		body, _ := io.ReadAll(resp.Body)
		errorBody(t, "takeover "+q, resp, body, "name_taken")
	}
	h.src.Publish(trade("coinbase:trades:BTC-USD", "t1"))
	got := false
	for !got {
		for _, o := range objects(t, b) {
			if o["type"] == "notice" || o["type"] == "error" {
				t.Fatalf("owner got %v after the takeover attempt", o)
			}
			got = got || o["type"] == "trade"
		}
	}
	if r := replyTo(t, b, "p", `{"op":"ping","id":"p"}`); r["type"] != "pong" {
		t.Fatalf("owner after the attempt: %v", r)
	}

	a, _, err := wsDial(t, websocket.DefaultDialer, h, "?name=deskA", "secret-a")
	if err != nil {
		t.Fatal(err)
	}
	if r := replyTo(t, a, "c", `{"op":"subscribe","id":"c","streams":["coinbase:trades:BTC-USD"]}`); r["code"] != "unauthorized" {
		t.Fatalf("token A subscribing to Coinbase: %v, want unauthorized", r)
	}

	list := func(secret string) (out []daemon.SubscriberView) {
		_, body := get(t, h.URL("http")+"/v1/subscribers", secret)
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return out
	}
	if got := list("secret-a"); len(got) != 1 || got[0].ID != "deskA" || len(got[0].Streams) != 0 {
		t.Fatalf("token A lists %+v, want only its own deskA", got)
	}
	if got := list("secret-b"); len(got) != 1 || got[0].ID != "deskB" || len(got[0].Streams) != 1 {
		t.Fatalf("token B lists %+v, want its deskB", got)
	}
}

// claimOf publishes a coinbase level2 snapshot and waits for its claim.
func claimOf(t *testing.T, h *hostile, st venue.Stream) string {
	t.Helper()
	h.src.Publish(book(st))
	var url string
	if !testutil.Poll(10*time.Second, func() bool {
		c, ok := h.LatestClaim(st)
		url = c.URL
		return ok
	}) {
		t.Fatalf("no claim of %s within 10s", st)
	}
	return url
}

const claimYML = "claim_check:\n  pack_max_age_ms: 20\n  snapshot_interval_ms: 50\n"

// TestHostileClaimScopes: a token limited to kraken asks
// for a Coinbase snapshot claim, and for every claim of the packs it can
// name by changing the index of a claim id it holds. Promise: 403
// unauthorized on /v1/claims for every claim whose stream is outside its
// scopes, as on /v1/books and /v1/snapshots; its own kraken claim is
// served.
func TestHostileClaimScopes(t *testing.T) {
	h := startHostile(t, twoVenues+"claim_check:\n  pack_max_age_ms: 300\n  snapshot_interval_ms: 50\n"+
		"tokens:\n  - {name: k, token: secret-k, venues: [kraken]}\n  - {name: all, token: secret-all}\n")
	h.kraken.Publish(book("kraken:level2:BTC/USD")) // in the same pack as the Coinbase book, most likely
	cbURL := claimOf(t, h, "coinbase:level2:BTC-USD")
	krURL := ""
	if !testutil.Poll(10*time.Second, func() bool {
		c, ok := h.LatestClaim("kraken:level2:BTC/USD")
		krURL = c.URL
		return ok
	}) {
		t.Fatal("no kraken claim within 10s")
	}
	if resp, _ := get(t, h.URL("http")+cbURL, "secret-all"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the claim with an all-scopes token: %s", resp.Status)
	}
	for _, path := range []string{"/v1/books/coinbase/BTC-USD", "/v1/snapshots/coinbase/BTC-USD", "/v1/snapshots/coinbase/BTC-USD/latest", cbURL} {
		resp, body := get(t, h.URL("http")+path, "secret-k")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with a kraken-only token: %s %.80s", path, resp.Status, body)
			continue
		}
		errorBody(t, path, resp, body, "unauthorized")
	}
	if resp, _ := get(t, h.URL("http")+krURL, "secret-k"); resp.StatusCode != http.StatusOK {
		t.Fatalf("its own kraken claim with the kraken-only token: %s", resp.Status)
	}
	// Enumerate: every index of both packs.
	tried := 0
	for _, u := range []string{cbURL, krURL} {
		tenant, raw, _ := strings.Cut(strings.TrimPrefix(u, "/v1/claims/"), "/")
		id, err := claimcheck.ParseClaimID(raw)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		for i := range id.Count {
			sib := id
			sib.Index = i
			path := "/v1/claims/" + tenant + "/" + sib.String()
			resp, body := get(t, h.URL("http")+path, "secret-all")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s with an all-scopes token: %s", path, resp.Status)
			}
			var ev struct{ Stream string }
			json.Unmarshal(body, &ev)
			resp, body = get(t, h.URL("http")+path, "secret-k")
			tried++
			switch kraken := strings.HasPrefix(ev.Stream, "kraken:"); {
			case kraken && resp.StatusCode != http.StatusOK:
				t.Errorf("%s (%s) with the kraken-only token: %s", path, ev.Stream, resp.Status)
			case !kraken && resp.StatusCode != http.StatusForbidden:
				t.Errorf("%s (%s) with the kraken-only token: %s %.80s, want 403", path, ev.Stream, resp.Status, body)
			}
		}
	}
	t.Logf("%d claims enumerated", tried)
}

// smallRcvBuf dials with a 4 KiB receive buffer: a client that does not
// read backs the server's socket up at once.
var smallRcvBuf = &websocket.Dialer{NetDialContext: (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
}}).DialContext}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestHostileJunkNeverRead: a client floods junk frames,
// or pings past the command rate, and never reads a reply. Promise: it is closed with unread_replies
// (4002) once limits.max_reply_bytes of replies are unwritten, and the
// daemon's heap does not grow with what it sent (it grew by a reply per
// frame: 24 MB of junk made 1.9 GB).
func TestHostileJunkNeverRead(t *testing.T) {
	for _, tc := range []struct{ name, frame string }{
		{"junk", strings.Repeat("j", 512)},
		{"pings", `{"op":"ping","id":"` + strings.Repeat("p", 60) + `"}`}, // rate_limited past the burst: a reply each all the same
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHostile(t, twoVenues+"websocket:\n  send_buffer_bytes: 4096\nlimits:\n  max_reply_bytes: 65536\n")
			ws, _, err := wsDial(t, smallRcvBuf, h, "", "")
			if err != nil {
				t.Fatal(err)
			}
			if r := replyTo(t, ws, "p", `{"op":"ping","id":"p"}`); r["type"] != "pong" {
				t.Fatal(r)
			}
			before := heapInUse()
			frame := []byte(tc.frame)
			sent := 0
			for start := time.Now(); time.Since(start) < 20*time.Second; sent += len(frame) {
				if err := ws.WriteMessage(websocket.TextMessage, frame); err != nil {
					break // the daemon closed the connection
				}
			}
			unread := func() float64 { return metric(t, h, "fanoutd_closes_total", "reason", "unread_replies") }
			if !testutil.Poll(5*time.Second, func() bool { return unread() == 1 }) {
				t.Fatalf("after %d bytes never read: closes{unread_replies} = %v, want 1", sent, unread())
			}
			grew := int64(heapInUse()) - int64(before)
			t.Logf("sent %d bytes; heap in use grew %d bytes", sent, grew)
			if grew > 16<<20 {
				t.Fatalf("heap in use grew %d bytes while a client sent %d bytes and read nothing", grew, sent)
			}
			if n := metric(t, h, "fanoutd_connections"); n != 0 {
				t.Fatalf("%v connections open after the close", n)
			}
		})
	}
}

// TestHostileParseErrorsCharged: frames that do not parse
// are charged to the command rate. Promise: past the burst each gets
// rate_limited, one reply per frame, and a valid command after them is
// refused too.
func TestHostileParseErrorsCharged(t *testing.T) {
	h := startHostile(t, twoVenues+"limits:\n  commands_per_second: 0.001\n  command_burst: 5\n")
	ws, _, err := wsDial(t, websocket.DefaultDialer, h, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		ws.WriteMessage(websocket.TextMessage, []byte("{junk"))
	}
	ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"ping","id":"p"}`))
	var codes []string
	for len(codes) < 9 {
		for _, o := range objects(t, ws) {
			code, _ := o["code"].(string)
			codes = append(codes, code)
		}
	}
	want := "bad_request bad_request bad_request bad_request bad_request rate_limited rate_limited rate_limited rate_limited"
	if got := strings.Join(codes, " "); got != want {
		t.Fatalf("replies %s\nwant    %s", got, want)
	}
}

// TestHostileBatchBound: notices and replies pile up while
// a client does not read. Promise: no message it then reads is past
// websocket.max_batch_bytes unless it holds one object.
func TestHostileBatchBound(t *testing.T) {
	const bound = 4096
	h := startHostile(t, twoVenues+fmt.Sprintf("websocket:\n  send_buffer_bytes: 4096\n  max_batch_bytes: %d\n", bound))
	ws, _, err := wsDial(t, smallRcvBuf, h, "", "")
	if err != nil {
		t.Fatal(err)
	}
	replyTo(t, ws, "p", `{"op":"ping","id":"p"}`)
	const notices, junk = 1000, 30
	n := notice.Must(notice.Shutdown, "", "", time.Now(), strings.Repeat("x", 100), nil)
	for range notices {
		h.Hub().Broadcast(n)
	}
	for range junk {
		ws.WriteMessage(websocket.TextMessage, []byte("junk"))
	}
	for got := 0; got < notices+junk; {
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
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

// TestHostileInventedSymbols: a client asks for symbols
// that do not exist. Promise: an unknown one is refused (unknown_symbol)
// where the venue lists its instruments; otherwise past
// venues.<v>.max_symbols a new one is refused (too_many_symbols), the
// venue never subscribes more than max_symbols, and the connection stays
// usable.
func TestHostileInventedSymbols(t *testing.T) {
	h := startHostile(t, "venues:\n  coinbase:\n    symbols: [BTC-USD]\n    max_symbols: 3\n  kraken:\n    symbols: [BTC/USD]\n")
	ws, _, err := wsDial(t, websocket.DefaultDialer, h, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for i := range 20 {
		id := fmt.Sprint(i)
		r := replyTo(t, ws, id, fmt.Sprintf(`{"op":"subscribe","id":%q,"streams":["coinbase:trades:INVENTED%d-USD"]}`, id, i))
		code, _ := r["code"].(string)
		if r["type"] == "ack" {
			code = "ack"
		}
		codes = append(codes, code)
		time.Sleep(60 * time.Millisecond) // within the default command rate
	}
	want := "ack ack" + strings.Repeat(" too_many_symbols", 18)
	if got := strings.Join(codes, " "); got != want {
		t.Fatalf("replies %s\nwant    %s", got, want)
	}
	if n := len(h.src.Symbols()); n > 3 {
		t.Fatalf("the venue subscribes %d symbols, max_symbols 3", n)
	}
	// One command with 400 invented symbols: all or nothing.
	var sts []string
	for i := range 400 {
		sts = append(sts, fmt.Sprintf("coinbase:level2:BULK%d-USD", i))
	}
	cmd, _ := json.Marshal(map[string]any{"op": "subscribe", "id": "bulk", "streams": sts})
	if r := replyTo(t, ws, "bulk", string(cmd)); r["type"] != "error" {
		t.Fatalf("400 invented symbols in one subscribe: %v", r)
	}
	if n := len(h.src.Symbols()); n > 3 {
		t.Fatalf("the venue subscribes %d symbols after the bulk subscribe, max_symbols 3", n)
	}
	h.src.SetInstruments([]string{"BTC-USD", "ETH-USD"})
	if r := replyTo(t, ws, "u", `{"op":"subscribe","id":"u","streams":["kraken:trades:BTC/USD","coinbase:trades:NOPE-USD"]}`); r["code"] != "unknown_symbol" {
		t.Fatalf("an invented symbol on a venue with an instrument list: %v", r)
	}
	if r := replyTo(t, ws, "p", `{"op":"ping","id":"p"}`); r["type"] != "pong" {
		t.Fatalf("after the refusals: %v", r)
	}
}

// keepAliveConn opens a connection, makes one GET of path (with the token
// if not empty) and leaves the connection open and idle.
func keepAliveConn(t *testing.T, addr, path, secret string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c
}

// serverClosed reports whether the peer closed c within d.
func serverClosed(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	ne, timeout := err.(net.Error)
	return err != nil && !(timeout && ne.Timeout())
}

// TestHostileIdleKeepAlive: 100 keep-alive connections
// left idle after one request. Promise: all closed after
// http.idle_timeout; without a token, those past
// http.max_anonymous_connections are closed at once, and one that
// presented a valid token is kept.
func TestHostileIdleKeepAlive(t *testing.T) {
	t.Run("idle_timeout", func(t *testing.T) {
		h := startHostile(t, twoVenues+"http:\n  idle_timeout: 300ms\n")
		var cs []net.Conn
		for range 100 {
			cs = append(cs, keepAliveConn(t, h.Addr, "/healthz", ""))
		}
		for i, c := range cs {
			if !serverClosed(c, 10*time.Second) {
				t.Fatalf("idle keep-alive connection %d still open 10s after a 300ms idle timeout", i)
			}
		}
	})
	t.Run("anonymous_cap", func(t *testing.T) {
		h := startHostile(t, twoVenues+"tokens:\n  - {name: a, token: s3cret}\nhttp:\n  max_anonymous_connections: 10\n")
		var anon []net.Conn
		for range 50 {
			anon = append(anon, keepAliveConn(t, h.Addr, "/healthz", ""))
		}
		authed := keepAliveConn(t, h.Addr, "/v1/coverage", "s3cret")
		closed := 0
		for _, c := range anon {
			if serverClosed(c, 300*time.Millisecond) {
				closed++
			}
		}
		if closed != 40 {
			t.Fatalf("%d of 50 anonymous idle connections closed, want 40 (cap 10)", closed)
		}
		if serverClosed(authed, 300*time.Millisecond) {
			t.Fatal("a connection that presented a valid token was closed")
		}
	})
}

// TestHostileNamedExpire: 50 one-off names. Promise: each
// is forgotten websocket.named_ttl after its connection left, and counted
// (fanoutd_named_expired_total).
func TestHostileNamedExpire(t *testing.T) {
	h := startHostile(t, twoVenues+"websocket:\n  named_ttl: 1s\n")
	const n = 50
	for i := range n {
		ws, _, err := wsDial(t, websocket.DefaultDialer, h, fmt.Sprintf("?name=oneoff-%d", i), "")
		if err != nil {
			t.Fatal(err)
		}
		replyTo(t, ws, "1", `{"op":"subscribe","id":"1","streams":["coinbase:trades:BTC-USD"]}`)
		ws.Close()
	}
	if !testutil.Poll(15*time.Second, func() bool { return metric(t, h, "fanoutd_named_expired_total") == n }) {
		t.Fatalf("fanoutd_named_expired_total = %v 15s after %d names left with a 1s time to live", metric(t, h, "fanoutd_named_expired_total"), n)
	}
	for i := range n {
		if h.Hub().Registry().Named(fmt.Sprintf("oneoff-%d", i)) != nil {
			t.Fatalf("oneoff-%d still registered after it expired", i)
		}
	}
	if got := metric(t, h, "fanoutd_subscribers", "kind", "named"); got != 0 {
		t.Fatalf("fanoutd_subscribers{kind=named} = %v after expiry", got)
	}
}

// TestHostileMalformedFrames (held): frames that are not commands, and
// frames past limits.max_message_bytes. Promise: one error reply each with
// its code, the connection stays; one past 16× the limit closes it with
// 1009.
func TestHostileMalformedFrames(t *testing.T) {
	h := startHostile(t, twoVenues+"limits:\n  max_message_bytes: 1024\n  command_burst: 1000\n  commands_per_second: 1000\n")
	ws, _, err := wsDial(t, websocket.DefaultDialer, h, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct{ frame, code string }{
		{"", "bad_request"},
		{"not json", "bad_request"},
		{"null", "bad_request"},
		{"[1,2,3]", "bad_request"},
		{`"ping"`, "bad_request"},
		{"12345", "bad_request"},
		{`{"op":"ping","id":"p"`, "bad_request"},
		{strings.Repeat("[", 512), "bad_request"},
		{strings.Repeat(`{"a":`, 200), "bad_request"},
		{"{\"op\":\"ping\",\"id\":\"\xff\xfe\"}", ""}, // invalid UTF-8: a reply of some kind
		{`{"op":"ping","id":1}`, "bad_request"},
		{`{"op":"ping","id":"` + strings.Repeat("x", 65) + `"}`, "bad_request"},
		{`{"op":"fly","id":"x"}`, "unknown_op"},
		{`{"op":"subscribe","id":"x"}`, "bad_request"},
		{`{"op":"subscribe","id":"x","streams":[]}`, "bad_request"},
		{`{"op":"subscribe","id":"x","streams":"coinbase:trades:BTC-USD"}`, "bad_request"},
		{`{"op":"subscribe","id":"x","streams":["no-colons"]}`, "bad_request"},
		{`{"op":"subscribe","id":"x","streams":["nowhere:trades:BTC-USD"]}`, "unknown_stream"},
		{`{"op":"subscribe","id":"x","streams":["coinbase:level3:BTC-USD"]}`, ""},
		{`{"op":"snapshot","id":"x","stream":"coinbase:trades:BTC-USD"}`, ""},
		{`{"op":"ping","id":"x","op":"subscribe"}`, ""},
		{"{\"op\":\"ping\",\"id\":\"x\"}\x00garbage", ""},
		{`{"op":"subscribe","id":"big","streams":["coinbase:trades:` + strings.Repeat("A", 1100) + `"]}`, "message_too_large"},
	} {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(tc.frame)); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		o := objects(t, ws)[0]
		if tc.code != "" && o["code"] != tc.code {
			t.Errorf("frame %d %.40q: reply %v, want code %s", i, tc.frame, o, tc.code)
		}
		if o["type"] != "error" && o["type"] != "ack" && o["type"] != "pong" {
			t.Errorf("frame %d %.40q: reply %v", i, tc.frame, o)
		}
	}
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte{0, 1, 2, 0xff}); err != nil {
		t.Fatal(err)
	}
	objects(t, ws)
	if r := replyTo(t, ws, "alive", `{"op":"ping","id":"alive"}`); r["type"] != "pong" {
		t.Fatalf("after the malformed frames: %v", r)
	}
	// Past 16 × max_message_bytes: closed with 1009.
	ws.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("x"), 16*1024+1))
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
			t.Fatalf("a frame past 16× max_message_bytes: %v, want close 1009", err)
		}
		break
	}
}

// rawUpgrade upgrades a plain TCP connection to a websocket by hand.
func rawUpgrade(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	key := make([]byte, 16)
	rand.Read(key)
	fmt.Fprintf(c, "GET /v1/stream HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n", addr, base64.StdEncoding.EncodeToString(key))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return c, br
}

// frame is a client frame: fin, rsv bits (in the top nibble's low
// three bits), opcode, masked or not.
func frame(fin bool, rsv, op byte, masked bool, payload []byte) []byte {
	b0 := op | rsv<<4
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	mbit := byte(0)
	if masked {
		mbit = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		out = append(out, mbit|byte(n))
	case n < 1<<16:
		out = append(out, mbit|126, byte(n>>8), byte(n))
	default:
		out = append(out, mbit|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	if !masked {
		return append(out, payload...)
	}
	mask := []byte{0x12, 0x34, 0x56, 0x78}
	out = append(out, mask...)
	for i, c := range payload {
		out = append(out, c^mask[i%4])
	}
	return out
}

// readFrames reads server frames until one satisfies stop, the
// connection closes, or 5s pass; it returns the close code (0 if none)
// and the text payloads.
func readFrames(c net.Conn, br *bufio.Reader) (closeCode int, texts []string, closed bool) {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		var hdr [2]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			ne, ok := err.(net.Error)
			return 0, texts, !(ok && ne.Timeout())
		}
		n := uint64(hdr[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			io.ReadFull(br, b[:])
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			io.ReadFull(br, b[:])
			n = binary.BigEndian.Uint64(b[:])
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			return 0, texts, true
		}
		switch hdr[0] & 0x0f {
		case 0x1:
			texts = append(texts, string(p))
			if strings.Contains(string(p), `"id":"end"`) {
				return 0, texts, false
			}
		case 0x8:
			if len(p) >= 2 {
				closeCode = int(binary.BigEndian.Uint16(p))
			}
			return closeCode, texts, true
		case 0xA:
			texts = append(texts, "pong:"+string(p))
		}
	}
}

// TestHostileRawFrames (held): hand-made websocket frames after a real
// upgrade. Promise: a fragmented message is reassembled and answered; a
// ping is answered with a pong carrying its payload; every protocol
// violation closes that connection (1002 where a close frame is sent) and
// nothing else.
func TestHostileRawFrames(t *testing.T) {
	h := startHostile(t, twoVenues)
	mk := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	ping := []byte(`{"op":"ping","id":"end"}`)

	t.Run("fragmented", func(t *testing.T) {
		c, br := rawUpgrade(t, h.Addr)
		c.Write(mk(frame(false, 0, 0x1, true, ping[:5]), frame(false, 0, 0x0, true, ping[5:12]),
			frame(true, 0x0, 0x9, true, []byte("mid")), // a control frame between fragments is allowed
			frame(true, 0, 0x0, true, ping[12:])))
		_, texts, closed := readFrames(c, br)
		if closed || !strings.Contains(strings.Join(texts, "|"), `"type":"pong","id":"end"`) || !strings.Contains(strings.Join(texts, "|"), "pong:mid") {
			t.Fatalf("a fragmented ping: %q closed %v", texts, closed)
		}
	})
	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"unmasked", frame(true, 0, 0x1, false, ping)},
		{"rsv1", frame(true, 1, 0x1, true, ping)},
		{"rsv3", frame(true, 4, 0x1, true, ping)},
		{"opcode3", frame(true, 0, 0x3, true, ping)},
		{"opcodeB", frame(true, 0, 0xB, true, nil)},
		{"continuation_first", frame(true, 0, 0x0, true, ping)},
		{"text_inside_fragments", mk(frame(false, 0, 0x1, true, ping[:5]), frame(true, 0, 0x1, true, ping))},
		{"fragmented_ping", frame(false, 0, 0x9, true, []byte("x"))},
		{"long_ping", frame(true, 0, 0x9, true, bytes.Repeat([]byte("x"), 126))},
		{"long_close", frame(true, 0, 0x8, true, bytes.Repeat([]byte("x"), 200))},
		{"close_one_byte", frame(true, 0, 0x8, true, []byte{3})},
		{"close_code_999", frame(true, 0, 0x8, true, []byte{0x03, 0xe7})},
		{"close_code_1005", frame(true, 0, 0x8, true, []byte{0x03, 0xed})},
		{"length_2^63", append([]byte{0x81, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1, 2, 3, 4)},
		{"length_2^64-1", append([]byte{0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1, 2, 3, 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := rawUpgrade(t, h.Addr)
			c.Write(tc.bytes)
			c.Write(frame(true, 0, 0x1, true, ping)) // answered only if the violation went unnoticed
			code, texts, closed := readFrames(c, br)
			if !closed {
				t.Fatalf("connection still open after %s: %q", tc.name, texts)
			}
			if code != 0 && code != websocket.CloseProtocolError && code != websocket.CloseMessageTooBig {
				t.Fatalf("%s: close code %d", tc.name, code)
			}
			t.Logf("%s: closed, code %d, %d replies before", tc.name, code, len(texts))
		})
	}
	ws, _, err := wsDial(t, websocket.DefaultDialer, h, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if r := replyTo(t, ws, "p", `{"op":"ping","id":"p"}`); r["type"] != "pong" {
		t.Fatalf("the daemon after the bad frames: %v", r)
	}
}

// TestHostileAuth (held): every authenticated route without a token, with
// a wrong one, with a malformed header. Promise: 401 unauthenticated with
// WWW-Authenticate and the one error body; the open routes stay open.
func TestHostileAuth(t *testing.T) {
	h := startHostile(t, twoVenues+claimYML+"tokens:\n  - {name: a, token: secret-a}\n")
	claim := claimOf(t, h, "coinbase:level2:BTC-USD") // a real claim: id syntax is checked before the token
	if resp, _ := get(t, h.URL("http")+claim, "secret-a"); resp.StatusCode != http.StatusOK {
		t.Fatalf("%s with the token: %s", claim, resp.Status)
	}
	routes := []string{"/v1/stream", "/v1/coverage", "/v1/subscribers", "/v1/books/coinbase/BTC-USD", "/v1/books/kraken/BTC/USD",
		claim, "/v1/snapshots/coinbase/BTC-USD", "/v1/snapshots/coinbase/BTC-USD/latest",
		"/v1/claimcheck/stats"}
	for _, route := range routes {
		for _, cred := range [][2]string{
			{"", ""},
			{"Authorization", "Bearer wrong"},
			{"Authorization", "Bearer "},
			{"Authorization", "Bearer secret-ab"},
			{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:secret-a"))},
			{"Authorization", "secret-a"},
			{"Authorization", "Bearer " + strings.Repeat("x", 8000)},
			{"X-Token", "secret-a"},
		} {
			u := h.URL("http") + route
			resp, body := get(t, u, "", cred[0], cred[1])
			what := fmt.Sprintf("%s with %s %.20q", route, cred[0], cred[1])
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: %s", what, resp.Status)
				continue
			}
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: no WWW-Authenticate", what)
			}
			errorBody(t, what, resp, body, "unauthenticated")
		}
		sep := "?"
		if strings.Contains(route, "?") {
			sep = "&"
		}
		if resp, body := get(t, h.URL("http")+route+sep+"token=wrong", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s?token=wrong: %s %s", route, resp.Status, body)
		}
	}
	for _, open := range []string{"/healthz", "/readyz", "/metrics"} {
		if resp, _ := get(t, h.URL("http")+open, ""); resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s without a token: %s", open, resp.Status)
		}
	}
	if resp, _ := get(t, h.URL("http")+"/v1/coverage", "secret-a"); resp.StatusCode != http.StatusOK {
		t.Errorf("/v1/coverage with the token: %s", resp.Status)
	}
}

// rawGet sends path verbatim (no client-side cleaning) and returns the
// status line's code, the headers and the body.
func rawGet(t *testing.T, addr, path, secret string) (int, http.Header, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", path, addr, secret)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// TestHostilePathTraversal (held): dot-dot paths, plain and encoded, on
// every route, with a valid token, against a claim store in a directory
// whose parent holds a secret file. Promise: nothing outside the routes is
// served — every answer is a redirect to a cleaned path, or 400, 404 or
// 405 with the one error body — and the secret never appears.
func TestHostilePathTraversal(t *testing.T) {
	dir := t.TempDir()
	const secret = "TOPSECRET-do-not-serve"
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte(secret), 0o600)
	os.MkdirAll(filepath.Join(dir, "claims"), 0o755)
	h := startHostile(t, twoVenues+"tokens:\n  - {name: a, token: secret-a}\nclaim_check:\n  stores:\n    - {kind: dir, path: "+filepath.Join(dir, "claims")+"}\n")
	var paths []string
	for _, route := range []string{"/v1/books/", "/v1/books/coinbase/", "/v1/claims/", "/v1/claims/default/", "/v1/snapshots/", "/v1/snapshots/coinbase/", "/v1/stream/", "/v1/coverage/", "/v1/subscribers/", "/v1/claimcheck/"} {
		for _, dots := range []string{"../..", "../../secret.txt", "%2e%2e/%2e%2e/secret.txt", "..%2f..%2fsecret.txt", "..%2F..%2F..%2Fetc%2Fpasswd",
			"%252e%252e%252fsecret.txt", "....//....//secret.txt", "..\\..\\secret.txt", ".%2e/.%2e/secret.txt", "%2e%2e%5c%2e%2e%5csecret.txt", "../", "..;/secret.txt"} {
			paths = append(paths, route+dots)
		}
	}
	paths = append(paths, "/v1/claims/../", "/v1/claims/default/..", "/v1/books/../..", "/v1/claims/%2e%2e/%2e%2e", "/%2e%2e/%2e%2e/secret.txt", "/v1/../../../../etc/passwd", "/v1/claims/default/claims%2ftenant=default")
	for _, p := range paths {
		code, hdr, body := rawGet(t, h.Addr, p, "secret-a")
		if bytes.Contains(body, []byte(secret)) || bytes.Contains(body, []byte("root:")) {
			t.Fatalf("%s served a file outside the routes: %s", p, body)
		}
		switch {
		case code == http.StatusMovedPermanently || code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect:
			if loc := hdr.Get("Location"); strings.Contains(loc+"/", "/../") {
				t.Errorf("%s: redirect to %q", p, loc)
			}
		case code == http.StatusOK && strings.HasPrefix(p, "/v1/snapshots/coinbase/") && bytes.HasSuffix(bytes.TrimSpace(body), []byte(`"claims":[]}`)):
			// an encoded slash is part of the symbol: a stream with no claims, not a path
		case code == http.StatusNotFound && !bytes.HasPrefix(body, []byte("{")):
			// the mux's own 404 for a path no route matches
		case code == http.StatusBadRequest || code == http.StatusNotFound || code == http.StatusForbidden || code == http.StatusMethodNotAllowed:
			var m map[string]any
			if json.Unmarshal(body, &m) != nil || m["type"] != "error" {
				t.Errorf("%s: %d %s", p, code, body)
			}
		default:
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
}

// TestHostileRange (held): Range edge cases on the claim route. Promise:
// one satisfiable range → 206 with Content-Range and exactly those bytes;
// a range starting past the end or -0 → 416 with bytes */len (also when
// the start overflows 64 bits); a suffix past the start is the whole claim;
// several
// ranges, another unit or bad syntax → the whole claim (200).
func TestHostileRange(t *testing.T) {
	h := startHostile(t, twoVenues+claimYML)
	url := h.URL("http") + claimOf(t, h, "coinbase:level2:BTC-USD")
	_, whole := get(t, url, "")
	n := len(whole)
	if n < 10 {
		t.Fatalf("claim of %d bytes", n)
	}
	full := fmt.Sprintf("bytes */%d", n)
	for _, tc := range []struct {
		rng    string
		status int
		body   []byte // nil: the whole claim
	}{
		{"bytes=0-0", 206, whole[:1]},
		{"bytes=-1", 206, whole[n-1:]},
		{"bytes=0-", 206, whole},
		{fmt.Sprintf("bytes=%d-", n-1), 206, whole[n-1:]},
		{fmt.Sprintf("bytes=0-%d", n*1000), 206, whole},
		{fmt.Sprintf("bytes=-%d", n*1000), 206, whole},
		{"bytes=3-5", 206, whole[3:6]},
		{fmt.Sprintf("bytes=%d-", n), 416, nil},
		{fmt.Sprintf("bytes=%d-%d", n+5, n+10), 416, nil},
		{"bytes=-0", 416, nil},
		{"bytes=18446744073709551615-", 416, nil},
		{"bytes=5-2", 200, nil},
		{"bytes=0-1,3-4", 200, nil},
		{"bytes=0-1,0-1,0-1,0-1,0-1,0-1,0-1,0-1,0-1,0-1", 200, nil},
		{"items=0-1", 200, nil},
		{"bytes=abc", 200, nil},
		{"bytes=-", 200, nil},
		{"bytes=--1", 200, nil},
		{"bytes=-18446744073709551616", 206, whole},  // a suffix longer than the claim is all of it
		{"bytes=99999999999999999999999-", 416, nil}, // starts past the end
		{"bytes= 0-1", 206, whole[:2]},
		{"bytes=0x10-", 200, nil},
		{"bytes=" + strings.Repeat("0-1,", 5000) + "0-1", 200, nil},
	} {
		resp, body := get(t, url, "", "Range", tc.rng)
		what := fmt.Sprintf("Range %.40q", tc.rng)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %s, want %d", what, resp.Status, tc.status)
			continue
		}
		switch tc.status {
		case 206:
			if !bytes.Equal(body, tc.body) {
				t.Errorf("%s: %d bytes, want %d", what, len(body), len(tc.body))
			}
			if cr := resp.Header.Get("Content-Range"); !strings.HasSuffix(cr, fmt.Sprintf("/%d", n)) {
				t.Errorf("%s: Content-Range %q", what, cr)
			}
		case 416:
			if cr := resp.Header.Get("Content-Range"); cr != full {
				t.Errorf("%s: Content-Range %q, want %q", what, cr, full)
			}
			errorBody(t, what, resp, body, "range_not_satisfiable")
		case 200:
			if !bytes.Equal(body, whole) {
				t.Errorf("%s: %d bytes, want the whole %d", what, len(body), n)
			}
		}
	}
}

// TestHostileShutdown200 (held): shutdown with 200 subscribers attached.
// Promise: every one gets the shutdown notice and then close 1001.
func TestHostileShutdown200(t *testing.T) {
	h := startHostile(t, twoVenues)
	const n = 200
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		q := ""
		if i%2 == 1 {
			q = fmt.Sprintf("?name=s%d", i)
		}
		ws, _, err := wsDial(t, websocket.DefaultDialer, h, q, "")
		if err != nil {
			t.Fatal(err)
		}
		if r := replyTo(t, ws, "1", `{"op":"subscribe","id":"1","streams":["coinbase:trades:BTC-USD"]}`); r["type"] != "ack" {
			t.Fatal(r)
		}
		conns[i] = ws
	}
	for i := range 100 {
		h.src.Publish(trade("coinbase:trades:BTC-USD", fmt.Sprint(i)))
	}
	type result struct {
		notice bool
		err    error
	}
	results := make(chan result, n)
	for _, ws := range conns {
		go func() {
			var r result
			ws.SetReadDeadline(time.Now().Add(20 * time.Second))
			for {
				_, m, err := ws.ReadMessage()
				if err != nil {
					r.err = err
					break
				}
				r.notice = r.notice || bytes.Contains(m, []byte(`"kind":"shutdown"`))
			}
			results <- r
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	noNotice, not1001 := 0, 0
	var sample error
	for range n {
		r := <-results
		if !r.notice {
			noNotice++
		}
		if !websocket.IsCloseError(r.err, websocket.CloseGoingAway) {
			not1001++
			sample = r.err
		}
	}
	if noNotice > 0 || not1001 > 0 {
		t.Fatalf("of %d subscribers: %d got no shutdown notice, %d were not closed with 1001 (e.g. %v)", n, noNotice, not1001, sample)
	}
}
