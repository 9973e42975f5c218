package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"
)

func pemOf(t *testing.T, pub any) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func indent(s string) string {
	return "          " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n          ")
}

func TestJWTConfig(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ecFile := filepath.Join(dir, "ec.pem")
	os.WriteFile(ecFile, []byte(pemOf(t, &ek.PublicKey)), 0o600)
	jwks := filepath.Join(dir, "jwks.json")
	os.WriteFile(jwks, []byte(`{"keys":[{"kty":"oct","kid":"j1","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}]}`), 0o600)
	yml := `
auth:
  jwt:
    issuer: https://idp.example.com
    audience: fanoutd
    leeway: 30s
    expiring_notice: 2m
    jwks_file: ` + jwks + `
    keys:
      - kid: h1
        alg: HS256
        secret: 0123456789abcdef0123456789abcdef
      - kid: r1
        alg: RS256
        public_key: |
` + indent(pemOf(t, &rk.PublicKey)) + `
      - kid: e1
        alg: ES256
        public_key_file: ` + ecFile + `
`
	c, err := Parse([]byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.AuthEnabled() || c.JWT == nil || len(c.JWT.Keys) != 4 || c.JWT.Leeway != 30*time.Second || c.ExpiringNotice != 2*time.Minute {
		t.Fatalf("resolved %+v, notice %v", c.JWT, c.ExpiringNotice)
	}
	for i, want := range []string{"h1", "r1", "e1", "j1"} {
		if c.JWT.Keys[i].ID != want {
			t.Errorf("key %d is %q, want %q", i, c.JWT.Keys[i].ID, want)
		}
	}
	// The scope check refuses a JWT's typo as a static token's.
	if err := c.JWT.CheckScopes(&api.Token{Streams: []string{"coinbase:levl2:*"}}); err == nil {
		t.Error("a JWT's bad stream pattern accepted")
	}
	if err := c.JWT.CheckScopes(&api.Token{Venues: []string{"kraken"}, Streams: []string{"kraken:trades:*"}, Tenants: []string{"desk"}}); err != nil {
		t.Error(err)
	}
}

// TestJWTConfigNamesEveryBadKey: one load names each bad key of
// auth.jwt, not only the first.
func TestJWTConfigNamesEveryBadKey(t *testing.T) {
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	os.WriteFile(jwks, []byte(`{"keys":[{"kty":"oct","kid":"h1","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"},{"kty":"RSA","kid":"x","n":"AQAB","e":"AQAB"}]}`), 0o600)
	yml := `
auth:
  jwt:
    leeway: 1h
    expiring_notice: soon
    jwks_file: ` + jwks + `
    keys:
      - kid: h1
        alg: HS256
        secret: short
      - kid: h1
        alg: HS256
        secret: 0123456789abcdef0123456789abcdef
      - kid: r1
        alg: RS256
        public_key: not pem
      - kid: r2
        alg: RS384
      - alg: HS256
        secret: 0123456789abcdef0123456789abcdef
      - kid: e1
        alg: ES256
        secret: 0123456789abcdef0123456789abcdef
`
	_, err := Parse([]byte(yml), nil)
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("%v is not an Errors", err)
	}
	text := err.Error()
	for _, want := range []string{
		"config: auth.jwt.issuer: missing",
		"config: auth.jwt.audience: missing",
		"config: auth.jwt.leeway: \"1h\"",
		"config: auth.jwt.expiring_notice: \"soon\"",
		"config: auth.jwt.keys[0]: an HS256 secret must be at least 32 bytes",
		"config: auth.jwt.keys[2].public_key: not a PEM block",
		"config: auth.jwt.keys[3]: alg \"RS384\"",
		"config: auth.jwt.keys[4]: kid must be",
		"config: auth.jwt.keys[5].secret: an ES256 key has a public key",
		"config: auth.jwt.jwks_file: " + jwks + ": keys[1]: an RS256 key must have at least 2048 bits",
		"config: auth.jwt.jwks_file (" + jwks + "): kid \"h1\" is also auth.jwt.keys[1]'s",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "\n") + 1; n != 11 {
		t.Errorf("%d lines, want 11:\n%s", n, text)
	}
	if _, err := Parse([]byte("auth:\n  jwt:\n    issuer: i\n    audience: a\n"), nil); err == nil || !strings.Contains(err.Error(), "auth.jwt: no keys") {
		t.Errorf("no keys: %v", err)
	}
	if _, err := Parse([]byte("tokens:\n  - name: jwt:alice\n    token: x\n"), nil); err == nil || !strings.Contains(err.Error(), "tokens[0].name") {
		t.Errorf("a static token named like a JWT subject: %v", err)
	}
	if _, err := Parse([]byte("tokens:\n  - name: a\n    token: x\n    latency: fast\n"), nil); err == nil || !strings.Contains(err.Error(), "tokens[0].latency") {
		t.Errorf("a token's latency neither low nor batched: %v", err)
	}
	if c, err := Parse([]byte("tokens:\n  - name: a\n    token: x\n    latency: low\n  - name: b\n    token: y\n"), nil); err != nil || !c.Tokens[0].LowLatency || c.Tokens[1].LowLatency {
		t.Errorf("tokens[].latency: %v", err)
	}
}
