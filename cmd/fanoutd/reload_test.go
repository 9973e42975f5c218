package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
)

// reloadYAML is a configuration of one kraken mock venue with tokens.
func reloadYAML(t *testing.T, m *krakentest.Mock, claims, tokens string) string {
	return fmt.Sprintf("listen: 127.0.0.1:0\nclaim_check:\n  stores:\n    - kind: dir\n      path: %s\n"+
		"venues:\n  kraken:\n    ws_url: %s\n    symbols: [%q]\n    channels: [level2]\n%s", claims, m.Server().URL, m.Symbol(), tokens)
}

// dialSubscribed opens a websocket to c with secret and subscribes it to
// st; it fails the test unless the subscribe is acked.
func dialSubscribed(t *testing.T, c *child, secret, st string) *websocket.Conn {
	t.Helper()
	hdr := http.Header{"Authorization": {"Bearer " + secret}}
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+c.addr+"/v1/stream", hdr)
	if err != nil {
		t.Fatalf("dial with %s: %v (%v)", secret, err, resp)
	}
	t.Cleanup(func() { ws.Close() })
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","id":"s","streams":["`+st+`"]}`)); err != nil {
		t.Fatal(err)
	}
	if !readsStream(ws, st) {
		t.Fatalf("no %s events with %s", st, secret)
	}
	return ws
}

// readsStream reads ws until an event of st arrives (true) or the
// connection ends or stays silent for 10 s (false).
func readsStream(ws *websocket.Conn, st string) bool {
	for {
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, m, err := ws.ReadMessage()
		if err != nil {
			return false
		}
		if strings.Contains(string(m), `"stream":"`+st+`"`) && !strings.Contains(string(m), `"type":"ack"`) {
			return true
		}
	}
}

// closedWith reads ws until it is closed and returns the close code (0
// if it was not closed with a close frame within 20 s).
func closedWith(ws *websocket.Conn) int {
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			return 0
		}
	}
}

// writeKeySet writes the JWKS of the public half of key as kid.
func writeKeySet(t *testing.T, path, kid string, key *ecdsa.PrivateKey) {
	t.Helper()
	raw, err := key.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(raw[1:33]), "y": b64(raw[33:])}}})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// es256 is a JWT of issuer i, audience fanoutd, for an hour, by key as kid.
func es256(t *testing.T, kid string, key *ecdsa.PrivateKey) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": "i", "aud": "fanoutd", "sub": "desk", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func upgradeStatus(t *testing.T, c *child, secret string) int {
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+c.addr+"/v1/stream", http.Header{"Authorization": {"Bearer " + secret}})
	if err == nil {
		ws.Close()
		return 101
	}
	if resp == nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

// TestSIGHUPReload: `fanoutd serve` in its own process, the connections
// of two static tokens and of a JWT streaming. The file loses token a and
// the JWKS file's key e1 is replaced by e2, then SIGHUP: a's and the e1
// JWT's connections are closed with 4004, b's keeps streaming, an e2 JWT
// is accepted. The file is then made bad (two bad keys), then SIGHUP: both
// are named on stderr as "fanoutd: config: …", nothing changes (b
// streams, b connects, a stays refused), and the process goes on.
func TestSIGHUPReload(t *testing.T) {
	m := &krakentest.Mock{}
	m.Start(t)
	stepping(t, m)
	claims := t.TempDir()
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	e1, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	writeKeySet(t, jwks, "e1", e1)
	withJWT := "auth:\n  jwt:\n    issuer: i\n    audience: fanoutd\n    jwks_file: " + jwks + "\n"
	path := writeConfig(t, reloadYAML(t, m, claims, "tokens:\n  - {name: a, token: secret-a}\n  - {name: b, token: secret-b}\n"+withJWT))
	c := startChild(t, path)
	st := "kraken:level2:" + m.Symbol()
	wa := dialSubscribed(t, c, "secret-a", st)
	wb := dialSubscribed(t, c, "secret-b", st)
	wj := dialSubscribed(t, c, es256(t, "e1", e1), st)

	write := func(yml string) {
		if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	writeKeySet(t, jwks, "e2", e2)
	write(reloadYAML(t, m, claims, "tokens:\n  - {name: b, token: secret-b}\n"+withJWT))
	if code := closedWith(wa); code != 4004 {
		t.Fatalf("a's connection closed with %d, want 4004:\n%s", code, c.log())
	}
	if code := closedWith(wj); code != 4004 {
		t.Fatalf("the e1 JWT's connection closed with %d, want 4004", code)
	}
	if s := upgradeStatus(t, c, es256(t, "e1", e1)); s != 401 {
		t.Fatalf("an e1 JWT after the rotation: %d, want 401", s)
	}
	dialSubscribed(t, c, es256(t, "e2", e2), st)
	if !readsStream(wb, st) {
		t.Fatal("b's connection stopped streaming at the reload")
	}
	if s := upgradeStatus(t, c, "secret-a"); s != 401 {
		t.Fatalf("a after the reload: %d, want 401", s)
	}

	write(reloadYAML(t, m, claims, "tokens:\n  - {name: b, token: secret-b}\n  - {name: c, token: secret-c}\n"+
		"auth:\n  jwt:\n    issuer: i\n    audience: a\n    keys:\n      - {kid: k1, alg: HS256, secret: short}\n      - {kid: k2, alg: ES256}\n"))
	checkFor(t, 20*time.Second, "the refused reload on stderr", func() bool {
		return strings.Contains(c.log(), "fanoutd: config: auth.jwt.keys[1]: an ES256 key needs public_key")
	})
	if !strings.Contains(c.log(), "fanoutd: config: auth.jwt.keys[0]: an HS256 secret must be at least 32 bytes (reload refused: nothing changed)") {
		t.Errorf("the first bad key is not named:\n%s", c.log())
	}
	if !readsStream(wb, st) {
		t.Fatal("b's connection stopped streaming at the refused reload")
	}
	if s := upgradeStatus(t, c, "secret-c"); s != 401 {
		t.Errorf("c, in the refused file only, was accepted (%d)", s)
	}
	if s := upgradeStatus(t, c, "secret-b"); s != 101 {
		t.Errorf("b after the refused reload: %d, want 101", s)
	}
	select {
	case <-c.exited:
		t.Fatalf("the process exited (%d) at a bad reload:\n%s", c.code, c.log())
	default:
	}
	resp, err := http.Get("http://" + c.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`fanoutd_config_reloads_total{result="applied"} 1`, `fanoutd_config_reloads_total{result="refused"} 1`,
		`fanoutd_closes_total{reason="token_revoked"} 2`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code := c.term(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}
