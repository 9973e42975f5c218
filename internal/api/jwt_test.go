package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/fanoutd/fanoutd/venue"
)

// testKeys are one key of each algorithm, generated once.
type testKeys struct {
	hmac  []byte
	rsa   *rsa.PrivateKey
	ec    *ecdsa.PrivateKey
	rsa2  *rsa.PrivateKey // a second RSA key, for the wrong-key cases
	ec256 *ecdsa.PrivateKey
}

var (
	keysOnce sync.Once
	keys     testKeys
)

func genKeys(t testing.TB) testKeys {
	keysOnce.Do(func() {
		keys.hmac = []byte("0123456789abcdef0123456789abcdef")
		var err error
		if keys.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if keys.rsa2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if keys.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if keys.ec256, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
	})
	return keys
}

const (
	testIss = "https://idp.example.com"
	testAud = "fanoutd"
)

func testAuth(t testing.TB, k testKeys) *Auth {
	return NewAuthWithJWT([]Token{{Name: "static", Digest: sha256.Sum256([]byte("s3cret"))}}, &JWTOptions{
		Issuer: testIss, Audience: testAud,
		Keys: []JWTKey{{ID: "h1", Alg: AlgHS256, Key: k.hmac}, {ID: "r1", Alg: AlgRS256, Key: &k.rsa.PublicKey},
			{ID: "e1", Alg: AlgES256, Key: &k.ec.PublicKey}},
	})
}

// sign signs claims (defaults filled in: iss, aud, sub, exp) with key as
// kid under method.
func sign(t testing.TB, method jwt.SigningMethod, kid string, key any, c jwt.MapClaims) string {
	t.Helper()
	full := jwt.MapClaims{"iss": testIss, "aud": testAud, "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range c {
		if v == nil {
			delete(full, k)
		} else {
			full[k] = v
		}
	}
	tok := jwt.NewWithClaims(method, full)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWTAccepted(t *testing.T) {
	k := genKeys(t)
	a := testAuth(t, k)
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	for _, tc := range []struct {
		name   string
		method jwt.SigningMethod
		kid    string
		key    any
	}{
		{"HS256", jwt.SigningMethodHS256, "h1", k.hmac},
		{"RS256", jwt.SigningMethodRS256, "r1", k.rsa},
		{"ES256", jwt.SigningMethodES256, "e1", k.ec},
	} {
		s := sign(t, tc.method, tc.kid, tc.key, jwt.MapClaims{"exp": exp.Unix(), "aud": []string{"other", testAud},
			"venues": []string{"kraken"}, "streams": []string{"kraken:trades:*"}, "tenants": []string{"desk"}, "max_connections": 3, "latency": "low"})
		tok, err := a.Verify(s)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tok.Name != "jwt:alice" || !tok.Expires.Equal(exp) || tok.MaxConns != 3 || !tok.IsJWT() || !tok.LowLatency {
			t.Fatalf("%s: token %+v", tc.name, tok)
		}
		if !tok.Allows("kraken:trades:BTC/USD") || tok.Allows("kraken:level2:BTC/USD") || tok.Allows("coinbase:trades:BTC-USD") {
			t.Errorf("%s: scopes not mapped: %+v", tc.name, tok)
		}
		if !tok.AllowsTenant("desk") || tok.AllowsTenant("other") {
			t.Errorf("%s: tenants not mapped: %v", tc.name, tok.Tenants)
		}
	}
	if tok, err := a.Verify("s3cret"); err != nil || tok.Name != "static" || tok.IsJWT() {
		t.Fatalf("static token beside JWTs: %+v, %v", tok, err)
	}
}

func TestJWTRefused(t *testing.T) {
	k := genKeys(t)
	a := testAuth(t, k)
	rsaPubDER := k.rsa.PublicKey.N.Bytes()
	for _, tc := range []struct {
		name string
		jwt  string
		want error
	}{
		{"expired", sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"exp": time.Now().Add(-time.Minute).Unix()}), jwt.ErrTokenExpired},
		{"not yet valid", sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"nbf": time.Now().Add(time.Minute).Unix()}), jwt.ErrTokenNotValidYet},
		{"no exp", sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"exp": nil}), jwt.ErrTokenRequiredClaimMissing},
		{"wrong audience", sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"aud": "another-service"}), jwt.ErrTokenInvalidAudience},
		{"no audience", sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"aud": nil}), jwt.ErrTokenRequiredClaimMissing},
		{"wrong issuer", sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"iss": "https://evil.example.com"}), jwt.ErrTokenInvalidIssuer},
		{"wrong HMAC key", sign(t, jwt.SigningMethodHS256, "h1", []byte("another secret of thirty-two b.."), nil), jwt.ErrTokenSignatureInvalid},
		{"wrong RSA key", sign(t, jwt.SigningMethodRS256, "r1", k.rsa2, nil), jwt.ErrTokenSignatureInvalid},
		{"wrong EC key", sign(t, jwt.SigningMethodES256, "e1", k.ec256, nil), jwt.ErrTokenSignatureInvalid},
		{"unknown kid", sign(t, jwt.SigningMethodHS256, "nope", k.hmac, nil), ErrUnknownKey},
		{"no kid among several keys", sign(t, jwt.SigningMethodHS256, "", k.hmac, nil), ErrUnknownKey},
		// The RSA key's modulus as an HMAC secret: the classic confusion.
		{"HS256 under an RSA kid", sign(t, jwt.SigningMethodHS256, "r1", rsaPubDER, nil), jwt.ErrTokenUnverifiable},
		{"RS256 under an HMAC kid", sign(t, jwt.SigningMethodRS256, "h1", k.rsa, nil), jwt.ErrTokenUnverifiable},
		{"alg none", sign(t, jwt.SigningMethodNone, "h1", jwt.UnsafeAllowNoneSignatureType, nil), jwt.ErrTokenSignatureInvalid},
		{"no sub", sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"sub": nil}), ErrBadClaims},
		{"max_connections 0", sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"max_connections": 0}), ErrBadClaims},
		{"latency fast", sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"latency": "fast"}), ErrBadClaims},
		{"max_connections 1.5", sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"max_connections": 1.5}), jwt.ErrTokenMalformed},
		{"not a JWT", "eyJhbGciOi.x.y", jwt.ErrTokenMalformed},
	} {
		tok, err := a.Verify(tc.jwt)
		if err == nil {
			t.Errorf("%s: accepted as %+v", tc.name, tok)
			continue
		}
		if !errors.Is(err, tc.want) && !(tc.name == "alg none" && errors.Is(err, jwt.ErrTokenUnverifiable)) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := a.Verify("unknown"); !errors.Is(err, ErrUnknownToken) {
		t.Errorf("an unknown static secret: %v", err)
	}
}

// TestJWTLeeway: within the leeway an expired JWT is accepted, and its
// token expires at exp plus the leeway (so a connection opened with it
// is not closed at once).
func TestJWTLeeway(t *testing.T) {
	k := genKeys(t)
	a := NewAuthWithJWT(nil, &JWTOptions{Issuer: testIss, Audience: testAud, Leeway: 30 * time.Second,
		Keys: []JWTKey{{ID: "h1", Alg: AlgHS256, Key: k.hmac}}})
	exp := time.Now().Add(-10 * time.Second).Truncate(time.Second)
	tok, err := a.Verify(sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"exp": exp.Unix()}))
	if err != nil {
		t.Fatal(err)
	}
	if !tok.Expires.Equal(exp.Add(30 * time.Second)) {
		t.Fatalf("expires %v, want exp+30s %v", tok.Expires, exp.Add(30*time.Second))
	}
	if _, err := a.Verify(sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"exp": time.Now().Add(-time.Minute).Unix()})); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Fatalf("past the leeway: %v", err)
	}
}

func TestJWTScopesChecked(t *testing.T) {
	k := genKeys(t)
	a := NewAuthWithJWT(nil, &JWTOptions{Issuer: testIss, Audience: testAud, Keys: []JWTKey{{ID: "h1", Alg: AlgHS256, Key: k.hmac}},
		CheckScopes: func(t *Token) error {
			if len(t.Venues) > 0 && t.Venues[0] != "kraken" {
				return fmt.Errorf("venues: %q is not a venue", t.Venues[0])
			}
			return nil
		}})
	if _, err := a.Verify(sign(t, jwt.SigningMethodHS256, "h1", k.hmac, jwt.MapClaims{"venues": []string{"krakn"}})); !errors.Is(err, ErrBadClaims) {
		t.Fatalf("a typo in venues: %v", err)
	}
	// One key: a JWT without a kid is verified by it.
	if _, err := a.Verify(sign(t, jwt.SigningMethodHS256, "", k.hmac, nil)); err != nil {
		t.Fatalf("no kid, one key: %v", err)
	}
}

func TestRecheckAfterReplace(t *testing.T) {
	k := genKeys(t)
	a := testAuth(t, k)
	rj := sign(t, jwt.SigningMethodRS256, "r1", k.rsa, nil)
	hj := sign(t, jwt.SigningMethodHS256, "h1", k.hmac, nil)
	rt, _ := a.Verify(rj)
	ht, _ := a.Verify(hj)
	st, _ := a.Verify("s3cret")
	// The reload drops r1 and the static token, keeps h1 and adds a
	// scoped token with another secret.
	a.Replace(NewAuthWithJWT([]Token{{Name: "other", Digest: sha256.Sum256([]byte("x"))}}, &JWTOptions{
		Issuer: testIss, Audience: testAud, Keys: []JWTKey{{ID: "h1", Alg: AlgHS256, Key: k.hmac}}}))
	// No key is RS256 any more: the alg itself is refused.
	if _, err := a.Recheck(rt); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		t.Errorf("JWT of a removed key: %v", err)
	}
	if nt, err := a.Recheck(ht); err != nil || nt.Name != "jwt:alice" {
		t.Errorf("JWT of a kept key: %+v, %v", nt, err)
	}
	if _, err := a.Recheck(st); !errors.Is(err, ErrRevoked) {
		t.Errorf("removed static token: %v", err)
	}
	if _, err := a.Verify("s3cret"); err == nil {
		t.Error("removed static token still accepted")
	}
	// The same secret under another name is another token.
	a.Replace(NewAuth([]Token{{Name: "renamed", Digest: sha256.Sum256([]byte("s3cret"))}}))
	if _, err := a.Recheck(st); !errors.Is(err, ErrRevoked) {
		t.Errorf("renamed static token: %v", err)
	}
	if _, err := a.Recheck(ht); !errors.Is(err, ErrRevoked) {
		t.Errorf("JWT after JWTs were removed: %v", err)
	}
	// Scopes changed under the same name and secret: the new ones.
	a.Replace(NewAuth([]Token{{Name: "static", Digest: sha256.Sum256([]byte("s3cret")), Venues: []string{"kraken"}}}))
	if nt, err := a.Recheck(st); err != nil || nt.Allows(venue.Stream("coinbase:trades:BTC-USD")) {
		t.Errorf("rescoped static token: %+v, %v", nt, err)
	}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwksOf is the key set of the public halves of keys (kid → key).
func jwksOf(t testing.TB, keys map[string]any) []byte {
	var list []map[string]string
	for kid, k := range keys {
		switch k := k.(type) {
		case *rsa.PublicKey:
			list = append(list, map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
				"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())})
		case *ecdsa.PublicKey:
			raw, err := k.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			list = append(list, map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(raw[1:33]), "y": b64(raw[33:])})
		case []byte:
			list = append(list, map[string]string{"kty": "oct", "kid": kid, "k": b64(k)})
		}
	}
	b, err := json.Marshal(map[string]any{"keys": list})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseJWKS(t *testing.T) {
	k := genKeys(t)
	data := jwksOf(t, map[string]any{"r": &k.rsa.PublicKey, "e": &k.ec.PublicKey, "h": k.hmac})
	got, errs := ParseJWKS(data)
	if len(errs) > 0 || len(got) != 3 {
		t.Fatalf("keys %v, errors %v", got, errs)
	}
	a := NewAuthWithJWT(nil, &JWTOptions{Issuer: testIss, Audience: testAud, Keys: got})
	for _, s := range []string{sign(t, jwt.SigningMethodRS256, "r", k.rsa, nil), sign(t, jwt.SigningMethodES256, "e", k.ec, nil),
		sign(t, jwt.SigningMethodHS256, "h", k.hmac, nil)} {
		if _, err := a.Verify(s); err != nil {
			t.Errorf("a JWT of a JWKS key: %v", err)
		}
	}

	// Every bad key is named; good ones and encryption keys are kept and
	// skipped.
	raw := `{"keys":[
		{"kty":"RSA","kid":"small","n":"` + b64(big.NewInt(1<<62+1).Bytes()) + `","e":"AQAB"},
		{"kty":"EC","kid":"offcurve","crv":"P-256","x":"` + b64(make([]byte, 32)) + `","y":"` + b64(make([]byte, 32)) + `"},
		{"kty":"EC","kid":"p384","crv":"P-384","x":"AA","y":"AA"},
		{"kty":"oct","kid":"short","k":"c2hvcnQ"},
		{"kty":"RSA","kid":"enc","use":"enc","n":"AA","e":"AQAB"},
		{"kty":"OKP","kid":"ed"},
		{"kty":"RSA","kid":"ps","alg":"PS256","n":"` + b64(k.rsa.PublicKey.N.Bytes()) + `","e":"AQAB"},
		{"kty":"RSA","n":"` + b64(k.rsa.PublicKey.N.Bytes()) + `","e":"AQAB"},
		"not an object",
		{"kty":"oct","kid":"good","k":"` + b64(k.hmac) + `"}
	]}`
	got, errs = ParseJWKS([]byte(raw))
	if len(got) != 1 || got[0].ID != "good" {
		t.Errorf("good keys %v", got)
	}
	var lines []string
	for _, e := range errs {
		lines = append(lines, e.Error())
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"keys[0]: an RS256 key must have at least 2048 bits", "keys[1]: x, y is not a point on P-256",
		"keys[2]: crv \"P-384\"", "keys[3]: an HS256 secret must be at least 32 bytes", "keys[5]: kty \"OKP\"",
		"keys[6]: alg \"PS256\"", "keys[7]: kid must be", "keys[8]: not a JSON Web Key"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "keys[4]") || len(errs) != 8 {
		t.Errorf("%d errors (want 8, none for the encryption key):\n%s", len(errs), all)
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"keys":{}}`, `{"keys":null}`} {
		if _, errs := ParseJWKS([]byte(bad)); len(errs) != 1 {
			t.Errorf("%q: %v", bad, errs)
		}
	}
}

// FuzzParseJWKS: no input panics, and every key returned is one the
// verifier can use (CheckKey passes).
func FuzzParseJWKS(f *testing.F) {
	k := genKeys(f)
	f.Add(jwksOf(f, map[string]any{"r": &k.rsa.PublicKey, "e": &k.ec.PublicKey, "h": k.hmac}))
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"a","n":"AA","e":"AQAB"},{"kty":"EC","crv":"P-256","x":"","y":""}]}`))
	f.Add([]byte(`{"keys":[{"kty":"oct","kid":"a","k":"===="}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"a","n":"` + strings.Repeat("_", 2048) + `","e":"AAAAAAAAAAAAAAA"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, _ := ParseJWKS(data)
		for _, k := range keys {
			if err := CheckKey(k); err != nil {
				t.Fatalf("key %q returned but %v", k.ID, err)
			}
		}
	})
}

// FuzzVerify: no bearer secret panics the verifier, and whatever it
// accepts is a JWT of the configured issuer and audience, with a subject
// and an exp in the future.
func FuzzVerify(f *testing.F) {
	k := genKeys(f)
	a := testAuth(f, k)
	good := sign(f, jwt.SigningMethodHS256, "h1", k.hmac, nil)
	f.Add(good)
	f.Add(sign(f, jwt.SigningMethodES256, "e1", k.ec, jwt.MapClaims{"streams": []string{"*"}}))
	f.Add(good[:len(good)-3])
	f.Add("eyJ.eyJ.")
	f.Add("eyJhbGciOiJIUzI1NiIsImtpZCI6ImgxIn0.e30.")
	f.Add(strings.Repeat("eyJ.", 3))
	f.Fuzz(func(t *testing.T, secret string) {
		tok, err := a.Verify(secret)
		if err != nil || tok.Name == "static" {
			return
		}
		if !strings.HasPrefix(tok.Name, JWTOwnerPrefix) || len(tok.Name) == len(JWTOwnerPrefix) || !tok.Expires.After(time.Now().Add(-time.Second)) {
			t.Fatalf("accepted %q as %+v", secret, tok)
		}
	})
}
