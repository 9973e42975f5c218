package daemon_test

// The second round of the hostile-clients suite: names, rebinding, limits,
// scopes and error bodies, each against a daemon on real sockets (the
// helpers are hostile_test.go's).

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/venues"
)

// TestHostileScopeAcrossColons: a token scoped to "*:trades:*" subscribes
// to a Coinbase level2 stream whose symbol spells ":trades:". Promise: each
// part of a pattern matches its own part of the stream, so '*' never
// reaches across a ':' — unauthorized; its real trades stream is acked.
func TestHostileScopeAcrossColons(t *testing.T) {
	h := startHostile(t, twoVenues+"tokens:\n  - {name: t, token: secret-t, streams: [\"*:trades:*\"]}\n")
	ws, _, err := wsDial(t, websocket.DefaultDialer, h, "", "secret-t")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{"coinbase:level2:X:trades:Y", "coinbase:level2:BTC-USD:trades:BTC-USD", "kraken:level2:BTC/USD:trades:"} {
		if r := replyTo(t, ws, "x", `{"op":"subscribe","id":"x","streams":["`+st+`"]}`); r["code"] != "unauthorized" {
			t.Errorf("%s under *:trades:*: %v, want unauthorized", st, r)
		}
	}
	if r := replyTo(t, ws, "ok", `{"op":"subscribe","id":"ok","streams":["coinbase:trades:BTC-USD"]}`); r["type"] != "ack" {
		t.Errorf("coinbase:trades:BTC-USD under *:trades:*: %v, want ack", r)
	}
	resp, body := get(t, h.URL("http")+"/v1/books/coinbase/X:trades:Y", "secret-t")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("/v1/books/coinbase/X:trades:Y under *:trades:*: %s %s, want 403", resp.Status, body)
	}
}

// request makes a request of method with host as its Host and hdr as
// header pairs, and returns the response and its body.
func request(t *testing.T, method, url, host string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// TestHostileRebinding: without tokens, a page on an attacker's name whose
// DNS now points at 127.0.0.1 reads the daemon: Host and Origin are both
// the attacker's name. Promise: any Host other than a loopback name or the
// listen address is 403 host_not_allowed, on every route and the
// websocket upgrade; a websocket's Origin is checked against those names,
// not against the Host the page itself set; a page on localhost is served.
func TestHostileRebinding(t *testing.T) {
	h := startHostile(t, twoVenues)
	h.src.Publish(book("coinbase:level2:BTC-USD"))
	_, port, _ := net.SplitHostPort(h.Addr)
	evil := "attacker.example:" + port
	if !testutil.Poll(10*time.Second, func() bool {
		resp, _ := request(t, "GET", h.URL("http")+"/v1/books/coinbase/BTC-USD", "")
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatal("no book within 10s")
	}
	for _, route := range []string{"/v1/books/coinbase/BTC-USD", "/v1/coverage", "/v1/subscribers", "/v1/claimcheck/stats", "/metrics", "/"} {
		resp, body := request(t, "GET", h.URL("http")+route, evil)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with Host %s: %s", route, evil, resp.Status)
			continue
		}
		errorBody(t, route, resp, body, "host_not_allowed")
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port} {
		if resp, body := request(t, "GET", h.URL("http")+"/v1/books/coinbase/BTC-USD", host); resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %s %s", host, resp.Status, body)
		}
	}
	dial := func(host, origin string) (*http.Response, error) {
		hdr := http.Header{}
		if host != "" {
			hdr.Set("Host", host)
		}
		if origin != "" {
			hdr.Set("Origin", origin)
		}
		ws, resp, err := websocket.DefaultDialer.Dial(h.URL("ws")+"/v1/stream", hdr)
		if ws != nil {
			ws.Close()
		}
		return resp, err
	}
	for _, tc := range []struct{ host, origin, code string }{
		{evil, "http://" + evil, "host_not_allowed"},
		{evil, "", "host_not_allowed"},
		{"", "http://" + evil, "origin_not_allowed"},
		{"localhost:" + port, "http://" + evil, "origin_not_allowed"},
		{"", "null", "origin_not_allowed"},
	} {
		resp, err := dial(tc.host, tc.origin)
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("upgrade with Host %q, Origin %q: err %v, response %v; want 403", tc.host, tc.origin, err, resp)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		errorBody(t, "upgrade Host "+tc.host+" Origin "+tc.origin, resp, body, tc.code)
	}
	for _, origin := range []string{"", "http://localhost:5173", "http://127.0.0.1:" + port} {
		if resp, err := dial("", origin); err != nil {
			t.Errorf("upgrade with Origin %q: %v %v", origin, err, resp)
		}
	}
}

// TestHostileQueryLimit: a reattach whose query passes Go's 10,000
// parameters (or carries a ';'), which url.Values silently drops whole.
// Promise: 400 bad_request on the upgrade (not an ephemeral connection),
// 400 invalid_query on the other routes — never the query ignored.
func TestHostileQueryLimit(t *testing.T) {
	h := startHostile(t, twoVenues)
	huge := "?name=desk" + strings.Repeat("&last=coinbase:trades:BTC-USD:1", 10000)
	for _, q := range []string{huge, "?name=desk;x", "?name=desk&last=%zz"} {
		_, resp, err := wsDial(t, websocket.DefaultDialer, h, q, "")
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("upgrade with a %d-byte query %.30q: err %v, response %v; want 400", len(q), q, err, resp)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		errorBody(t, "upgrade", resp, body, "bad_request")
	}
	if h.Hub().Registry().Named("desk") != nil {
		t.Error("a refused query created the named subscriber")
	}
	books := "/v1/books/coinbase/BTC-USD?depth=1" + strings.Repeat("&x=1", 10000)
	for _, route := range []string{books, "/v1/coverage?a=1;b=2", "/v1/subscribers?%zz"} {
		resp, body := request(t, "GET", h.URL("http")+route, "")
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%.40s: %s", route, resp.Status)
			continue
		}
		errorBody(t, route[:min(len(route), 40)], resp, body, "invalid_query")
	}
}

// TestHostileHTTPErrorBodies: a 900 KB URL, other methods, the token in
// the query. Promise: an error body never echoes more than a short part of
// the URL; a 405 is the one JSON error body with Allow; every answer is
// X-Content-Type-Options: nosniff; ?token= opens only the websocket
// upgrade.
func TestHostileHTTPErrorBodies(t *testing.T) {
	h := startHostile(t, twoVenues+"tokens:\n  - {name: a, token: secret-a}\n")
	long := strings.Repeat("A", 900<<10)
	for _, route := range []string{"/v1/books/coinbase/" + long, "/v1/books/" + long + "/BTC-USD", "/v1/snapshots/coinbase/" + long, "/v1/claims/default/" + long, "/v1/claims/" + long + "/x"} {
		resp, body := request(t, "GET", h.URL("http")+route, "", "Authorization", "Bearer secret-a")
		if resp.StatusCode/100 != 4 || len(body) > 1024 {
			t.Errorf("%.30s… (%d bytes): %s, %d-byte body", route, len(route), resp.Status, len(body))
		}
	}
	for _, method := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		for _, route := range []string{"/v1/coverage", "/v1/stream", "/v1/books/coinbase/BTC-USD", "/healthz"} {
			resp, body := request(t, method, h.URL("http")+route, "", "Authorization", "Bearer secret-a")
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") == "" {
				t.Errorf("%s %s: %s, Allow %q", method, route, resp.Status, resp.Header.Get("Allow"))
				continue
			}
			errorBody(t, method+" "+route, resp, body, "method_not_allowed")
		}
	}
	for _, route := range []string{"/v1/coverage", "/v1/subscribers", "/v1/books/coinbase/BTC-USD", "/v1/claimcheck/stats", "/readyz", "/v1/nope", "/v1/snapshots/coinbase/BTC-USD"} {
		for _, secret := range []string{"secret-a", ""} {
			resp, _ := request(t, "GET", h.URL("http")+route, "", "Authorization", "Bearer "+secret)
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s (token %q): %s without X-Content-Type-Options: nosniff", route, secret, resp.Status)
			}
		}
	}
	for _, route := range []string{"/v1/coverage", "/v1/subscribers", "/v1/books/coinbase/BTC-USD", "/v1/claimcheck/stats", "/v1/snapshots/coinbase/BTC-USD"} {
		resp, body := request(t, "GET", h.URL("http")+route+"?token=secret-a", "")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s?token=<valid>: %s, want 401 (the query token is the websocket's only)", route, resp.Status)
			continue
		}
		errorBody(t, route, resp, body, "unauthenticated")
	}
	if _, resp, err := wsDial(t, websocket.DefaultDialer, h, "?token=secret-a", ""); err != nil {
		t.Errorf("upgrade with ?token=: %v %v", err, resp)
	}
}

// TestHostileCoverageScopes: a kraken-only token, and one scoped to
// Coinbase trades, read /v1/coverage and /v1/claimcheck/stats while
// another token holds streams of both venues. Promise: coverage lists only
// the venues and streams within the token's scopes; the node-wide
// claim-check statistics are 403 unauthorized to a token with scopes and
// served to one without.
func TestHostileCoverageScopes(t *testing.T) {
	h := startHostile(t, twoVenues+"tokens:\n  - {name: k, token: secret-k, venues: [kraken]}\n"+
		"  - {name: c, token: secret-c, streams: [\"coinbase:trades:*\"]}\n  - {name: all, token: secret-all}\n")
	ws, _, err := wsDial(t, websocket.DefaultDialer, h, "", "secret-all")
	if err != nil {
		t.Fatal(err)
	}
	if r := replyTo(t, ws, "1", `{"op":"subscribe","id":"1","streams":["coinbase:trades:SECRET-USD","coinbase:level2:BTC-USD","kraken:trades:BTC/USD"]}`); r["type"] != "ack" {
		t.Fatalf("subscribe: %v", r)
	}
	h.src.Publish(trade("coinbase:trades:SECRET-USD", "1"))
	h.src.Publish(book("coinbase:level2:BTC-USD"))
	h.kraken.Publish(trade("kraken:trades:BTC/USD", "1"))
	coverage := func(secret string) map[string][]string {
		resp, body := get(t, h.URL("http")+"/v1/coverage", secret)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/v1/coverage: %s %s", resp.Status, body)
		}
		var cov []struct {
			Venue   string
			Streams []struct{ Stream string }
		}
		if err := json.Unmarshal(body, &cov); err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, c := range cov {
			out[c.Venue] = []string{}
			for _, s := range c.Streams {
				out[c.Venue] = append(out[c.Venue], s.Stream)
			}
		}
		return out
	}
	if !testutil.Poll(10*time.Second, func() bool {
		all := coverage("secret-all")
		return len(all["coinbase"]) == 2 && len(all["kraken"]) == 1
	}) {
		t.Fatalf("coverage of the unscoped token: %v", coverage("secret-all"))
	}
	if got := coverage("secret-k"); len(got) != 1 || !slices.Equal(got["kraken"], []string{"kraken:trades:BTC/USD"}) {
		t.Errorf("the kraken-only token sees %v", got)
	}
	if got := coverage("secret-c"); len(got) != 1 || !slices.Equal(got["coinbase"], []string{"coinbase:trades:SECRET-USD"}) {
		t.Errorf("the coinbase:trades:* token sees %v", got)
	}
	for _, secret := range []string{"secret-k", "secret-c"} {
		resp, body := get(t, h.URL("http")+"/v1/claimcheck/stats", secret)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("/v1/claimcheck/stats with a scoped token: %s %s", resp.Status, body)
			continue
		}
		errorBody(t, "stats", resp, body, "unauthorized")
	}
	if resp, body := get(t, h.URL("http")+"/v1/claimcheck/stats", "secret-all"); resp.StatusCode != http.StatusOK {
		t.Errorf("/v1/claimcheck/stats with the unscoped token: %s %s", resp.Status, body)
	}
}

// TestHostileEdgeLimitsFirst: on an edge with max_streams_per_connection
// 10, a subscribe of 30 symbols the ingest does not have. Promise: refused
// too_many_streams, and the ingest was asked for none of them (its venue
// subscribes only what it was configured with); a subscribe within the
// limit is asked for and acked.
func TestHostileEdgeLimitsFirst(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	url := natstest.Run(t).ClientURL()
	src := &source{}
	daemontest.Start(t, fmt.Sprintf("cluster:\n  role: ingest\n  node: in-1\n  nats_url: %s\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n    max_symbols: 1000\n", url),
		daemon.Options{Venues: []venues.Venue{src.adapter()}})
	src.mu.Lock()
	vsrc := src.src
	src.mu.Unlock()
	edge := daemontest.Start(t, fmt.Sprintf(edgeOnlyYAML, url)+"limits:\n  max_streams_per_connection: 10\n", daemon.Options{})
	waitReady(t, edge)
	c := dialSub(t, edge.URL("ws"))
	var many []string
	for i := range 30 {
		many = append(many, fmt.Sprintf("coinbase:trades:S%d-USD", i))
	}
	if r := c.send(t, "subscribe", "many", many...); r.Type != "error" || r.Code != "too_many_streams" {
		t.Fatalf("subscribe of 30 streams past max_streams_per_connection 10: %s", r.raw)
	}
	if r := c.send(t, "subscribe", "bad", "coinbase:trades:S1-USD", "coinbase:nope:X"); r.Type != "error" {
		t.Fatalf("subscribe with a malformed stream: %s", r.raw)
	}
	if r := c.send(t, "subscribe", "one", "coinbase:trades:ETH-USD"); r.Type != "ack" {
		t.Fatalf("subscribe of one new symbol: %s", r.raw)
	}
	if s := vsrc.Symbols(); !slices.Equal(s, []string{"BTC-USD", "ETH-USD"}) {
		t.Fatalf("the ingest's venue subscribes %v after refused subscribes, want only BTC-USD and ETH-USD", s)
	}
}

// TestHostileNamedCaps: one token opens names until refused, then another
// token does, each name detached with streams held (as they are kept for
// named_ttl). Promise: a new name past limits.max_named_per_token is 429
// too_many_named before the upgrade, and past limits.max_named for every
// token together likewise; each refusal is counted
// (fanoutd_refusals_total{code="too_many_named"}); an existing name still
// reattaches, and a name forgotten makes room.
func TestHostileNamedCaps(t *testing.T) {
	h := startHostile(t, twoVenues+"limits:\n  max_named_per_token: 5\n  max_named: 8\n"+
		"tokens:\n  - {name: a, token: secret-a}\n  - {name: b, token: secret-b}\n")
	open := func(name, secret string) (*http.Response, error) {
		ws, resp, err := wsDial(t, websocket.DefaultDialer, h, "?name="+name, secret)
		if err == nil {
			replyTo(t, ws, "1", `{"op":"subscribe","id":"1","streams":["coinbase:level2:BTC-USD","coinbase:trades:BTC-USD"]}`)
			ws.Close()
		}
		return resp, err
	}
	refused := func(what string, resp *http.Response, err error) {
		t.Helper()
		if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%s: err %v, response %v; want 429", what, err, resp)
		}
		body, _ := io.ReadAll(resp.Body)
		errorBody(t, what, resp, body, "too_many_named")
	}
	for i := range 5 {
		if _, err := open(fmt.Sprintf("a%d", i), "secret-a"); err != nil {
			t.Fatalf("token a's name %d: %v", i, err)
		}
	}
	resp, err := open("a5", "secret-a")
	refused("token a's sixth name", resp, err)
	if _, err := open("a0", "secret-a"); err != nil {
		t.Fatalf("reattaching a0 at the limit: %v", err)
	}
	for i := range 3 {
		if _, err := open(fmt.Sprintf("b%d", i), "secret-b"); err != nil {
			t.Fatalf("token b's name %d: %v", i, err)
		}
	}
	resp, err = open("b3", "secret-b")
	refused("the node's ninth name", resp, err)
	if got := metric(t, h, "fanoutd_refusals_total", "code", "too_many_named"); got != 2 {
		t.Errorf("fanoutd_refusals_total{code=too_many_named} = %v, want 2", got)
	}
	if got := metric(t, h, "fanoutd_subscribers", "kind", "named"); got != 8 {
		t.Errorf("fanoutd_subscribers{kind=named} = %v, want 8", got)
	}
	if !testutil.Poll(10*time.Second, func() bool {
		return h.Hub().Registry().Named("b0") != nil && h.Hub().Registry().Named("b0").Resolve() == nil
	}) {
		t.Fatal("b0 still attached")
	}
	h.Hub().Forget("b0")
	if _, err := open("b3", "secret-b"); err != nil {
		t.Fatalf("a name after another was forgotten: %v", err)
	}
}
