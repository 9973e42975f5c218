package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The algorithms a JWT may be signed with. A key has exactly one, and a
// JWT is verified only by a key of its header's alg, so an RSA public key
// can never be used as an HMAC secret.
const (
	AlgHS256 = "HS256"
	AlgRS256 = "RS256"
	AlgES256 = "ES256"
)

// JWTKey is one key JWTs are verified with, found by the kid of a JWT's
// header.
type JWTKey struct {
	// ID is the key's kid.
	ID string
	// Alg is AlgHS256 (Key is a []byte of at least 32 bytes), AlgRS256 (a
	// *rsa.PublicKey of at least 2048 bits) or AlgES256 (an
	// *ecdsa.PublicKey on P-256).
	Alg string
	Key any
}

// JWTOptions configure the JWTs an Auth accepts beside its static tokens.
type JWTOptions struct {
	// Issuer is the iss every JWT must carry. Required.
	Issuer string
	// Audience must be one of a JWT's aud. Required.
	Audience string
	// Keys are the verification keys; a JWT's kid picks one (a JWT
	// without a kid is verified only when there is exactly one key).
	Keys []JWTKey
	// Leeway is the clock skew allowed on exp and nbf. Defaults to 0.
	Leeway time.Duration
	// CheckScopes, if set, refuses a JWT whose scope claims do not
	// validate (a venue that is not one, a malformed stream pattern).
	CheckScopes func(*Token) error
}

// JWTOwnerPrefix starts the Name of every Token a JWT gives: a JWT's
// subject owns named subscribers as "jwt:<sub>", which no static token's
// name may start with.
const JWTOwnerPrefix = "jwt:"

// The values of a connection's latency (?latency=, tokens[].latency, a
// JWT's latency claim): batched writes (the default) or writes without
// batching delay.
const (
	LatencyBatched = "batched"
	LatencyLow     = "low"
)

// maxJWTBytes bounds a JWT before it is decoded.
const maxJWTBytes = 8 << 10

// maxSubjectBytes bounds a JWT's sub, which names its owner in logs and
// /v1/subscribers.
const maxSubjectBytes = 128

// claims is a JWT's payload: the registered claims and the scopes.
type claims struct {
	jwt.RegisteredClaims
	Venues         []string `json:"venues"`
	Streams        []string `json:"streams"`
	Tenants        []string `json:"tenants"`
	MaxConnections *int64   `json:"max_connections"`
	Latency        string   `json:"latency"`
}

// jwtVerifier verifies JWTs against a fixed set of keys.
type jwtVerifier struct {
	o      JWTOptions
	byKID  map[string]JWTKey
	parser *jwt.Parser
}

func newJWTVerifier(o JWTOptions) *jwtVerifier {
	v := &jwtVerifier{o: o, byKID: make(map[string]JWTKey, len(o.Keys))}
	algs := map[string]bool{}
	var methods []string
	for _, k := range o.Keys {
		v.byKID[k.ID] = k
		if !algs[k.Alg] {
			algs[k.Alg] = true
			methods = append(methods, k.Alg)
		}
	}
	v.parser = jwt.NewParser(jwt.WithValidMethods(methods), jwt.WithIssuer(o.Issuer), jwt.WithAudience(o.Audience),
		jwt.WithExpirationRequired(), jwt.WithLeeway(o.Leeway))
	return v
}

// looksLikeJWT reports whether a bearer secret has a JWT's shape (three
// dot-separated parts): an unknown static secret of another shape is
// refused without being parsed.
func looksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 }

// Errors a JWT is refused with, wrapped with detail.
var (
	ErrUnknownKey = errors.New("api: no key has the JWT's kid")
	ErrBadClaims  = errors.New("api: the JWT's claims are not accepted")
)

// verify returns the Token the JWT raw gives, or why it is refused.
func (v *jwtVerifier) verify(raw string) (*Token, error) {
	if len(raw) > maxJWTBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", jwt.ErrTokenMalformed, maxJWTBytes)
	}
	var c claims
	_, err := v.parser.ParseWithClaims(raw, &c, v.key)
	if err != nil {
		return nil, err
	}
	if c.Subject == "" || len(c.Subject) > maxSubjectBytes {
		return nil, fmt.Errorf("%w: sub must be 1 to %d bytes", ErrBadClaims, maxSubjectBytes)
	}
	t := &Token{Name: JWTOwnerPrefix + c.Subject, Venues: c.Venues, Streams: c.Streams, Tenants: c.Tenants,
		Expires: c.ExpiresAt.Time.Add(v.o.Leeway), jwt: raw}
	if c.MaxConnections != nil {
		if *c.MaxConnections < 1 {
			return nil, fmt.Errorf("%w: max_connections must be a positive integer", ErrBadClaims)
		}
		t.MaxConns = int(min(*c.MaxConnections, 1<<24))
	}
	switch c.Latency {
	case "", LatencyBatched:
	case LatencyLow:
		t.LowLatency = true
	default:
		return nil, fmt.Errorf("%w: latency must be %q or %q", ErrBadClaims, LatencyLow, LatencyBatched)
	}
	if v.o.CheckScopes != nil {
		if err := v.o.CheckScopes(t); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadClaims, err)
		}
	}
	return t, nil
}

// key is the parser's keyfunc: the key of the header's kid, if its alg is
// the header's.
func (v *jwtVerifier) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	var k JWTKey
	var ok bool
	if kid == "" && len(v.o.Keys) == 1 {
		k, ok = v.o.Keys[0], true
	} else {
		k, ok = v.byKID[kid]
	}
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownKey, clipKID(kid))
	}
	if t.Method.Alg() != k.Alg {
		return nil, fmt.Errorf("key %q is for %s, the JWT is %s", k.ID, k.Alg, t.Method.Alg())
	}
	return k.Key, nil
}

func clipKID(kid string) string {
	if len(kid) > 64 {
		return kid[:64] + "…"
	}
	return kid
}

// CheckKey validates k: a kid, a supported alg, and a key of its alg and
// of the minimum strength.
func CheckKey(k JWTKey) error {
	if k.ID == "" || len(k.ID) > 256 {
		return errors.New("kid must be 1 to 256 bytes")
	}
	switch k.Alg {
	case AlgHS256:
		b, ok := k.Key.([]byte)
		if !ok || len(b) < 32 {
			return errors.New("an HS256 secret must be at least 32 bytes")
		}
	case AlgRS256:
		pk, ok := k.Key.(*rsa.PublicKey)
		if !ok {
			return errors.New("an RS256 key must be an RSA public key")
		}
		if pk.N.BitLen() < 2048 {
			return fmt.Errorf("an RS256 key must have at least 2048 bits (this one has %d)", pk.N.BitLen())
		}
	case AlgES256:
		pk, ok := k.Key.(*ecdsa.PublicKey)
		if !ok || pk.Curve != elliptic.P256() {
			return errors.New("an ES256 key must be an ECDSA public key on P-256")
		}
	default:
		return fmt.Errorf("alg %q is not HS256, RS256 or ES256", k.Alg)
	}
	return nil
}

// jwk is one key of a JSON Web Key Set (RFC 7517) as written.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
	K   string `json:"k"`
}

// maxJWKS bounds a key set's keys.
const maxJWKS = 1024

// ParseJWKS parses a JSON Web Key Set ({"keys":[…]}): RSA keys (RS256),
// EC keys on P-256 (ES256) and oct secrets (HS256). A key whose use is
// not "sig" (an encryption key) is skipped. It returns the keys that are
// good and one error per bad key, naming it as keys[i]; a document that
// is not a key set is one error.
func ParseJWKS(data []byte) ([]JWTKey, []error) {
	var doc struct {
		Keys *[]json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, []error{fmt.Errorf("not a JSON Web Key Set: %v", err)}
	}
	if doc.Keys == nil {
		return nil, []error{errors.New(`not a JSON Web Key Set: no "keys" list`)}
	}
	if len(*doc.Keys) > maxJWKS {
		return nil, []error{fmt.Errorf("more than %d keys", maxJWKS)}
	}
	var keys []JWTKey
	var errs []error
	for i, raw := range *doc.Keys {
		k, skip, err := parseJWK(raw)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("keys[%d]: %v", i, err))
		case !skip:
			keys = append(keys, k)
		}
	}
	return keys, errs
}

func parseJWK(raw json.RawMessage) (k JWTKey, skip bool, err error) {
	var w jwk
	if err := json.Unmarshal(raw, &w); err != nil {
		return k, false, fmt.Errorf("not a JSON Web Key: %v", err)
	}
	if w.Use != "" && w.Use != "sig" {
		return k, true, nil
	}
	k.ID = w.Kid
	switch w.Kty {
	case "RSA":
		k.Alg = AlgRS256
		n, err := b64Int("n", w.N)
		if err != nil {
			return k, false, err
		}
		e, err := b64Int("e", w.E)
		if err != nil {
			return k, false, err
		}
		if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
			return k, false, errors.New("e is not an odd exponent from 3 to 2^31-1")
		}
		k.Key = &rsa.PublicKey{N: n, E: int(e.Int64())}
	case "EC":
		k.Alg = AlgES256
		if w.Crv != "P-256" {
			return k, false, fmt.Errorf("crv %q is not P-256", clipKID(w.Crv))
		}
		x, err := b64Fixed("x", w.X, 32)
		if err != nil {
			return k, false, err
		}
		y, err := b64Fixed("y", w.Y, 32)
		if err != nil {
			return k, false, err
		}
		pk, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return k, false, errors.New("x, y is not a point on P-256")
		}
		k.Key = pk
	case "oct":
		k.Alg = AlgHS256
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(w.K, "="))
		if err != nil {
			return k, false, errors.New("k is not base64url")
		}
		k.Key = b
	default:
		return k, false, fmt.Errorf("kty %q is not RSA, EC or oct", clipKID(w.Kty))
	}
	if w.Alg != "" && w.Alg != k.Alg {
		return k, false, fmt.Errorf("alg %q: a %s key is for %s only", clipKID(w.Alg), w.Kty, k.Alg)
	}
	return k, false, CheckKey(k)
}

// b64Int decodes a JWK's base64url big-endian unsigned integer.
func b64Int(name, s string) (*big.Int, error) {
	if s == "" || len(s) > 2048 {
		return nil, fmt.Errorf("%s is missing or longer than 2048 characters", name)
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("%s is not base64url", name)
	}
	return new(big.Int).SetBytes(b), nil
}

// b64Fixed decodes a JWK's base64url coordinate of n bytes.
func b64Fixed(name, s string, n int) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil || len(b) != n {
		return nil, fmt.Errorf("%s is not %d bytes of base64url", name, n)
	}
	return b, nil
}
