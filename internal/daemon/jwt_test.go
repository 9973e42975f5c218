package daemon_test

// JWT bearer tokens, their expiry on a live connection (token_expiring,
// refresh, close 4003) and configuration reloads (close 4004), against a
// daemon over real websockets.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/venue"
)

const (
	jwtSecret = "0123456789abcdef0123456789abcdef"
	jwtIss    = "https://idp.example.com"
	cbTrades  = venue.Stream("coinbase:trades:BTC-USD")
	krTrades  = venue.Stream("kraken:trades:BTC/USD")
)

// jwtConfig is twoVenues with static tokens a and b, and JWTs of jwtIss
// for audience fanoutd, by the HMAC key h1 and the keys of jwks (a file).
func jwtConfig(jwks string, extra string) string {
	return twoVenues + "tokens:\n  - {name: a, token: secret-a}\n  - {name: b, token: secret-b}\n" +
		"auth:\n  jwt:\n    issuer: " + jwtIss + "\n    audience: fanoutd\n    jwks_file: " + jwks + "\n" + extra +
		"    keys:\n      - {kid: h1, alg: HS256, secret: " + jwtSecret + "}\n"
}

// writeJWKS writes the key set of the public halves of keys (kid → key).
func writeJWKS(t *testing.T, path string, keys map[string]*ecdsa.PrivateKey) {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	var list []map[string]string
	for kid, k := range keys {
		raw, err := k.PublicKey.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "use": "sig", "x": b64(raw[1:33]), "y": b64(raw[33:])})
	}
	b, _ := json.Marshal(map[string]any{"keys": list})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// mint signs a JWT for sub alice, audience fanoutd, of jwtIss, valid for
// an hour, with claims c on top (a nil value removes the claim), by key
// (a []byte HMAC secret or an *ecdsa.PrivateKey) as kid.
func mint(t *testing.T, kid string, key any, c jwt.MapClaims) string {
	t.Helper()
	full := jwt.MapClaims{"iss": jwtIss, "aud": "fanoutd", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range c {
		if v == nil {
			delete(full, k)
		} else {
			full[k] = v
		}
	}
	var m jwt.SigningMethod = jwt.SigningMethodHS256
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		m = jwt.SigningMethodES256
	}
	tok := jwt.NewWithClaims(m, full)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// next reads objects from ws until one satisfies match, and returns it;
// a close (or nothing for 10 s) fails the test.
func next(t *testing.T, ws *websocket.Conn, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	for {
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, m, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		for _, line := range strings.Split(string(m), "\n") {
			var o map[string]any
			if err := json.Unmarshal([]byte(line), &o); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if match(o) {
				return o
			}
		}
	}
}

// closeCode reads ws until the server closes it and returns the close
// code and the notices met on the way.
func closeCode(t *testing.T, ws *websocket.Conn, within time.Duration) (int, []map[string]any) {
	t.Helper()
	var notices []map[string]any
	ws.SetReadDeadline(time.Now().Add(within))
	for {
		_, m, err := ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code, notices
			}
			t.Fatalf("not closed with a close frame: %v", err)
		}
		for _, line := range strings.Split(string(m), "\n") {
			var o map[string]any
			if json.Unmarshal([]byte(line), &o) == nil && o["type"] == "notice" {
				notices = append(notices, o)
			}
		}
	}
}

func isTrade(id string) func(map[string]any) bool {
	return func(o map[string]any) bool { return o["type"] == "trade" && o["id"] == id }
}

func hasID(id string) func(map[string]any) bool {
	return func(o map[string]any) bool { return o["id"] == id }
}

// subscribeTrades subscribes ws to st and checks the ack.
func subscribeTrades(t *testing.T, ws *websocket.Conn, st venue.Stream) {
	t.Helper()
	if r := replyTo(t, ws, "sub", `{"op":"subscribe","id":"sub","streams":["`+string(st)+`"]}`); r["type"] != "ack" {
		t.Fatalf("subscribe %s: %v", st, r)
	}
	// The ack is queued before the hub subscribes; the reply to a ping
	// sent after it comes once the subscribe command is done.
	if r := replyTo(t, ws, "sub-done", `{"op":"ping","id":"sub-done"}`); r["type"] != "pong" {
		t.Fatalf("ping after subscribe %s: %v", st, r)
	}
}

// delivers publishes trades on src's st until ws receives one: the
// connection is alive and subscribed.
func delivers(t *testing.T, h *hostile, ws *websocket.Conn, st venue.Stream, id string) {
	t.Helper()
	src := h.src
	if st.Venue() == "kraken" {
		src = h.kraken
	}
	src.Publish(trade(st, id))
	next(t, ws, "trade "+id, isTrade(id))
}

func reload(t *testing.T, h *hostile, yml string) error {
	t.Helper()
	cfg, err := config.Parse([]byte(yml), nil)
	if err != nil {
		return err
	}
	return h.Reload(cfg)
}

// TestJWTUpgrade: a JWT of a configured key, issuer and audience opens a
// connection with the scopes its claims carry; an expired one, one of
// another key, for another audience or of another issuer is refused with
// 401 before the upgrade; static tokens still work beside them.
func TestJWTUpgrade(t *testing.T) {
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	e1 := ecKey(t)
	writeJWKS(t, jwks, map[string]*ecdsa.PrivateKey{"e1": e1})
	h := startHostile(t, jwtConfig(jwks, ""))

	for _, key := range []struct {
		kid string
		key any
	}{{"h1", []byte(jwtSecret)}, {"e1", e1}} {
		ws, resp, err := wsDial(t, websocket.DefaultDialer, h, "", mint(t, key.kid, key.key, jwt.MapClaims{"venues": []string{"kraken"}}))
		if err != nil {
			t.Fatalf("%s: %v (%v)", key.kid, err, resp)
		}
		subscribeTrades(t, ws, krTrades)
		delivers(t, h, ws, krTrades, "k-"+key.kid)
		if r := replyTo(t, ws, "c", `{"op":"subscribe","id":"c","streams":["`+string(cbTrades)+`"]}`); r["code"] != "unauthorized" {
			t.Errorf("%s: a stream outside the venues claim: %v", key.kid, r)
		}
	}

	other := ecKey(t)
	for _, tc := range []struct{ name, jwt string }{
		{"expired", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"exp": time.Now().Add(-time.Minute).Unix()})},
		{"wrong key", mint(t, "e1", other, nil)},
		{"wrong HMAC secret", mint(t, "h1", []byte("ffffffffffffffffffffffffffffffff"), nil)},
		{"unknown kid", mint(t, "e2", other, nil)},
		{"wrong audience", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"aud": "billing"})},
		{"wrong issuer", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"iss": "https://idp.evil.example"})},
		{"not valid yet", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"nbf": time.Now().Add(time.Hour).Unix()})},
		{"bad streams claim", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"streams": []string{"coinbase:levl2:*"}})},
	} {
		_, resp, err := wsDial(t, websocket.DefaultDialer, h, "", tc.jwt)
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Errorf("%s: %v, %v; want 401", tc.name, err, resp)
			continue
		}
		// The /v1 routes refuse it the same way.
		r, body := get(t, h.URL("http")+"/v1/subscribers", tc.jwt)
		if r.StatusCode != 401 {
			t.Errorf("%s: /v1/subscribers answered %d", tc.name, r.StatusCode)
		}
		errorBody(t, tc.name, r, body, "unauthenticated")
		if !strings.Contains(string(body), "(the JWT: ") {
			t.Errorf("%s: the 401 does not say why: %s", tc.name, body)
		}
	}
	if _, resp, err := wsDial(t, websocket.DefaultDialer, h, "", "secret-a"); err != nil {
		t.Fatalf("a static token beside JWTs: %v (%v)", err, resp)
	}
}

// TestJWTMaxConnections: a JWT's max_connections claim caps its
// subject's connections (429 past it), counted across its JWTs.
func TestJWTMaxConnections(t *testing.T) {
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	writeJWKS(t, jwks, map[string]*ecdsa.PrivateKey{"e1": ecKey(t)})
	h := startHostile(t, jwtConfig(jwks, ""))
	for i := range 2 {
		if _, resp, err := wsDial(t, websocket.DefaultDialer, h, "", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"max_connections": 2, "jti": fmt.Sprint(i)})); err != nil {
			t.Fatalf("connection %d: %v (%v)", i, err, resp)
		}
	}
	_, resp, err := wsDial(t, websocket.DefaultDialer, h, "", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"max_connections": 2, "jti": "3"}))
	if err == nil || resp == nil || resp.StatusCode != 429 {
		t.Fatalf("third connection of a max_connections 2 subject: %v, %v; want 429", err, resp)
	}
	if _, resp, err := wsDial(t, websocket.DefaultDialer, h, "", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"sub": "bob"})); err != nil {
		t.Fatalf("another subject: %v (%v)", err, resp)
	}
}

// TestJWTExpiringThenRefresh: a JWT that expires within
// auth.jwt.expiring_notice gets token_expiring at once; a refresh with a
// bad token is an error reply and the connection goes on; a refresh with
// a good one extends the connection past the first token's exp.
func TestJWTExpiringThenRefresh(t *testing.T) {
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	writeJWKS(t, jwks, map[string]*ecdsa.PrivateKey{"e1": ecKey(t)})
	h := startHostile(t, jwtConfig(jwks, "    expiring_notice: 1m\n"))
	exp := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	ws, resp, err := wsDial(t, websocket.DefaultDialer, h, "", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"exp": exp.Unix()}))
	if err != nil {
		t.Fatalf("%v (%v)", err, resp)
	}
	n := next(t, ws, "token_expiring", func(o map[string]any) bool { return o["kind"] == "token_expiring" })
	d, _ := n["details"].(map[string]any)
	if d["expires_at"] != exp.UTC().Format(time.RFC3339) || n["severity"] != "warning" {
		t.Fatalf("notice %v, want expires_at %s", n, exp.UTC().Format(time.RFC3339))
	}
	if in, _ := d["in_ms"].(float64); in <= 0 || in > 4000 {
		t.Fatalf("in_ms %v", d["in_ms"])
	}
	subscribeTrades(t, ws, cbTrades)

	for _, bad := range []struct{ name, tok, code string }{
		{"expired", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"exp": time.Now().Add(-time.Minute).Unix()}), "unauthenticated"},
		{"wrong audience", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"aud": "billing"}), "unauthenticated"},
		{"another subject", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"sub": "mallory"}), "unauthorized"},
		{"narrower scopes", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"venues": []string{"kraken"}}), "unauthorized"},
		{"a static token", "secret-a", "unauthorized"},
	} {
		r := replyTo(t, ws, "r", `{"op":"refresh","id":"r","token":"`+bad.tok+`"}`)
		if r["type"] != "error" || r["code"] != bad.code {
			t.Errorf("refresh with %s: %v, want error %s", bad.name, r, bad.code)
		}
		if strings.Contains(r["message"].(string), bad.tok) {
			t.Errorf("the reply quotes the token: %v", r)
		}
	}
	if r := replyTo(t, ws, "r", `{"op":"refresh","id":"r"}`); r["code"] != "bad_request" {
		t.Errorf("refresh without a token: %v", r)
	}
	delivers(t, h, ws, cbTrades, "before")

	newExp := time.Now().Add(time.Hour).Truncate(time.Second)
	r := replyTo(t, ws, "r2", `{"op":"refresh","id":"r2","token":"`+mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"exp": newExp.Unix()})+`"}`)
	if r["type"] != "ack" || r["expires_at"] != newExp.UTC().Format(time.RFC3339) {
		t.Fatalf("refresh: %v", r)
	}
	// Past the first token's exp the connection is still served.
	for time.Now().Before(exp.Add(500 * time.Millisecond)) {
		time.Sleep(50 * time.Millisecond)
	}
	delivers(t, h, ws, cbTrades, "after")
	if r := replyTo(t, ws, "p", `{"op":"ping","id":"p"}`); r["type"] != "pong" {
		t.Fatalf("ping after the first exp: %v", r)
	}
}

// TestJWTExpiryCloses: without a refresh, the connection is warned, then
// closed with 4003 at exp; its named subscriber keeps its subscriptions
// as on any detach, and a new JWT of the same subject reattaches it.
func TestJWTExpiryCloses(t *testing.T) {
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	writeJWKS(t, jwks, map[string]*ecdsa.PrivateKey{"e1": ecKey(t)})
	h := startHostile(t, jwtConfig(jwks, ""))
	exp := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	ws, resp, err := wsDial(t, websocket.DefaultDialer, h, "?name=desk", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"exp": exp.Unix()}))
	if err != nil {
		t.Fatalf("%v (%v)", err, resp)
	}
	// exp is nearer than expiring_notice (1m): warned at once.
	next(t, ws, "token_expiring", func(o map[string]any) bool { return o["kind"] == "token_expiring" })
	subscribeTrades(t, ws, cbTrades)
	delivers(t, h, ws, cbTrades, "1")
	code, notices := closeCode(t, ws, 20*time.Second)
	if code != 4003 {
		t.Fatalf("closed with %d, want 4003", code)
	}
	if time.Now().Before(exp) {
		t.Fatalf("closed before exp (%v)", exp)
	}
	for _, n := range notices {
		if n["kind"] == "token_expiring" {
			t.Errorf("token_expiring twice: %v", n)
		}
	}
	if !testutil.Poll(5*time.Second, func() bool { return metric(t, h, "fanoutd_closes_total", "reason", "token_expired") == 1 }) {
		t.Error("fanoutd_closes_total{reason=token_expired} is not 1")
	}

	// Detached, the named subscriber keeps its stream; another subject's
	// JWT may not take the name; alice's next JWT reattaches it.
	fresh := mint(t, "h1", []byte(jwtSecret), nil)
	_, body := get(t, h.URL("http")+"/v1/subscribers", fresh)
	var subs []daemon.SubscriberView
	if err := json.Unmarshal(body, &subs); err != nil || len(subs) != 1 || subs[0].ID != "desk" || subs[0].Attached ||
		len(subs[0].Streams) != 1 || subs[0].Streams[0] != cbTrades {
		t.Fatalf("after the close, alice's subscribers: %s", body)
	}
	if _, resp, err := wsDial(t, websocket.DefaultDialer, h, "?name=desk", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"sub": "mallory"})); err == nil || resp.StatusCode != 409 {
		t.Fatalf("another subject took the name: %v, %v", err, resp)
	}
	ws2, resp, err := wsDial(t, websocket.DefaultDialer, h, "?name=desk", fresh)
	if err != nil {
		t.Fatalf("reattach: %v (%v)", err, resp)
	}
	next(t, ws2, "resumed (reattached)", func(o map[string]any) bool { return o["kind"] == "resumed" })
	delivers(t, h, ws2, cbTrades, "2") // no subscribe: the subscriber kept it
}

// TestReloadRotatesJWKS: the JWKS file changed (e1 out, e2 in) and the
// configuration reloaded: the connection of an e1 JWT is closed with
// 4004, a new e1 JWT is refused, an e2 JWT is accepted, and the HMAC and
// static connections stay.
func TestReloadRotatesJWKS(t *testing.T) {
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	e1, e2 := ecKey(t), ecKey(t)
	writeJWKS(t, jwks, map[string]*ecdsa.PrivateKey{"e1": e1})
	yml := jwtConfig(jwks, "")
	h := startHostile(t, yml)
	old, _, err := wsDial(t, websocket.DefaultDialer, h, "", mint(t, "e1", e1, nil))
	if err != nil {
		t.Fatal(err)
	}
	subscribeTrades(t, old, cbTrades)
	hm, _, err := wsDial(t, websocket.DefaultDialer, h, "", mint(t, "h1", []byte(jwtSecret), jwt.MapClaims{"sub": "bob"}))
	if err != nil {
		t.Fatal(err)
	}
	subscribeTrades(t, hm, cbTrades)
	if _, _, err := wsDial(t, websocket.DefaultDialer, h, "", mint(t, "e2", e2, nil)); err == nil {
		t.Fatal("an e2 JWT accepted before the rotation")
	}

	writeJWKS(t, jwks, map[string]*ecdsa.PrivateKey{"e2": e2})
	if err := reload(t, h, yml); err != nil {
		t.Fatal(err)
	}
	if code, _ := closeCode(t, old, 10*time.Second); code != 4004 {
		t.Fatalf("the e1 connection closed with %d, want 4004", code)
	}
	if _, resp, err := wsDial(t, websocket.DefaultDialer, h, "", mint(t, "e1", e1, nil)); err == nil || resp.StatusCode != 401 {
		t.Fatalf("a new e1 JWT after the rotation: %v, %v", err, resp)
	}
	nw, resp, err := wsDial(t, websocket.DefaultDialer, h, "", mint(t, "e2", e2, nil))
	if err != nil {
		t.Fatalf("an e2 JWT after the rotation: %v (%v)", err, resp)
	}
	subscribeTrades(t, nw, cbTrades)
	h.src.Publish(trade(cbTrades, "x"))
	next(t, nw, "trade on the e2 connection", isTrade("x"))
	next(t, hm, "trade on the HMAC connection", isTrade("x"))
}

// TestReloadRemovesStaticToken: a reload that removes token a closes a's
// connection mid-stream with 4004; b's connection stays and is served;
// a's secret is refused from then on.
func TestReloadRemovesStaticToken(t *testing.T) {
	yml := twoVenues + "tokens:\n  - {name: a, token: secret-a}\n  - {name: b, token: secret-b}\n"
	h := startHostile(t, yml)
	wa, _, err := wsDial(t, websocket.DefaultDialer, h, "?name=deskA", "secret-a")
	if err != nil {
		t.Fatal(err)
	}
	wb, _, err := wsDial(t, websocket.DefaultDialer, h, "", "secret-b")
	if err != nil {
		t.Fatal(err)
	}
	subscribeTrades(t, wa, cbTrades)
	subscribeTrades(t, wb, cbTrades)
	h.src.Publish(trade(cbTrades, "1"))
	next(t, wa, "trade 1 on a", isTrade("1"))
	next(t, wb, "trade 1 on b", isTrade("1"))

	if err := reload(t, h, twoVenues+"tokens:\n  - {name: b, token: secret-b}\n"); err != nil {
		t.Fatal(err)
	}
	if code, _ := closeCode(t, wa, 10*time.Second); code != 4004 {
		t.Fatalf("a's connection closed with %d, want 4004", code)
	}
	h.src.Publish(trade(cbTrades, "2"))
	next(t, wb, "trade 2 on b", isTrade("2"))
	if _, resp, err := wsDial(t, websocket.DefaultDialer, h, "", "secret-a"); err == nil || resp.StatusCode != 401 {
		t.Fatalf("a's secret after the reload: %v, %v", err, resp)
	}
	if !testutil.Poll(5*time.Second, func() bool { return metric(t, h, "fanoutd_closes_total", "reason", "token_revoked") == 1 }) {
		t.Error("fanoutd_closes_total{reason=token_revoked} is not 1")
	}

	// A reload that narrows b's scopes below its subscriptions revokes it
	// too; one that turns authentication off is refused and changes
	// nothing.
	if err := reload(t, h, twoVenues); !errors.Is(err, daemon.ErrReloadAuth) {
		t.Fatalf("reload without tokens: %v", err)
	}
	h.src.Publish(trade(cbTrades, "3"))
	next(t, wb, "trade 3 on b", isTrade("3"))
	if err := reload(t, h, twoVenues+"tokens:\n  - {name: b, token: secret-b, venues: [kraken]}\n"); err != nil {
		t.Fatal(err)
	}
	if code, _ := closeCode(t, wb, 10*time.Second); code != 4004 {
		t.Fatalf("b's connection, its scopes narrowed, closed with %d, want 4004", code)
	}
}

// TestReloadSymbols: a symbol added to venues.<v>.symbols is subscribed
// at the venue by a reload, with no connection dropped; one removed that
// no subscriber holds is unsubscribed after unsubscribe_after, one a
// subscriber holds stays.
func TestReloadSymbols(t *testing.T) {
	yml := strings.Replace(twoVenues, "symbols: [BTC-USD]", "symbols: [BTC-USD]\n    unsubscribe_after: 1s", 1) +
		"tokens:\n  - {name: b, token: secret-b}\n"
	h := startHostile(t, yml)
	ws, _, err := wsDial(t, websocket.DefaultDialer, h, "", "secret-b")
	if err != nil {
		t.Fatal(err)
	}
	subscribeTrades(t, ws, cbTrades)
	if err := reload(t, h, strings.Replace(yml, "symbols: [BTC-USD]", "symbols: [BTC-USD, ETH-USD]", 1)); err != nil {
		t.Fatal(err)
	}
	if !testutil.Poll(5*time.Second, func() bool {
		for _, s := range h.src.Symbols() {
			if s == "ETH-USD" {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("ETH-USD not subscribed at the venue: %v", h.src.Symbols())
	}
	delivers(t, h, ws, cbTrades, "still")

	if err := reload(t, h, strings.Replace(yml, "symbols: [BTC-USD]", "symbols: [SOL-USD]", 1)); err != nil {
		t.Fatal(err)
	}
	if !testutil.Poll(20*time.Second, func() bool { return !slices.Contains(h.src.Symbols(), "ETH-USD") }) {
		t.Fatalf("ETH-USD, removed and not held, still subscribed at the venue: %v", h.src.Symbols())
	}
	if syms := h.src.Symbols(); !slices.Contains(syms, "BTC-USD") || !slices.Contains(syms, "SOL-USD") {
		t.Fatalf("symbols at the venue %v, want BTC-USD (held) and SOL-USD (added)", syms)
	}
	delivers(t, h, ws, cbTrades, "held")
}
