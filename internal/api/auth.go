package api

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// Token is one bearer token as the daemon keeps it: a name for logs and
// metrics, the SHA-256 digest of the secret (the secret itself is never
// kept), and its scopes.
type Token struct {
	// Name identifies the token in logs, metrics and /v1/subscribers.
	Name string
	// Digest is SHA-256 of the secret.
	Digest [32]byte
	// Venues limits the token to these venues; empty means every venue.
	Venues []string
	// Streams limits the token to streams matching one of these patterns
	// ('*' matches any run of characters: "coinbase:level2:*"); empty
	// means every stream. Both limits apply when both are set.
	Streams []string
	// Tenants limits the claim-check routes (/v1/claims, /v1/snapshots) to
	// these tenants; empty means every tenant.
	Tenants []string
	// MaxConns, if positive, caps the connections open at once under this
	// token below limits.max_connections_per_token (a JWT's
	// max_connections claim).
	MaxConns int
	// Expires is when the token stops being accepted: a JWT's exp plus
	// the leeway allowed; zero means never (a static token).
	Expires time.Time

	jwt string // the JWT presented ("" for a static token), to verify it again when keys are reloaded
}

// IsJWT reports whether the token came from a JWT.
func (t *Token) IsJWT() bool { return t != nil && t.jwt != "" }

// AllowsTenant reports whether the token may read tenant's claims. A nil
// Token (no authentication configured) allows every tenant.
func (t *Token) AllowsTenant(tenant string) bool {
	if t == nil || len(t.Tenants) == 0 {
		return true
	}
	for _, x := range t.Tenants {
		if x == tenant {
			return true
		}
	}
	return false
}

// Allows reports whether the token's scopes cover st. A nil Token (no
// authentication configured) allows everything.
func (t *Token) Allows(st venue.Stream) bool {
	if t == nil {
		return true
	}
	if len(t.Venues) > 0 {
		ok := false
		for _, v := range t.Venues {
			ok = ok || v == st.Venue()
		}
		if !ok {
			return false
		}
	}
	if len(t.Streams) == 0 {
		return true
	}
	for _, p := range t.Streams {
		if matchGlob(p, string(st)) {
			return true
		}
	}
	return false
}

// Auth authenticates requests against a set of static tokens and,
// if configured, JWTs. A nil *Auth authenticates every request as
// anonymous with every scope. Replace swaps its tokens and keys at once
// (a configuration reload); requests already authenticated keep the
// *Token they were given.
type Auth struct {
	st atomic.Pointer[authState]
}

// authState is one generation of an Auth's tokens and keys; never
// modified once stored.
type authState struct {
	gen      uint64 // Replace's count: 0 for NewAuth's
	byDigest map[[32]byte]*Token
	jwt      *jwtVerifier // nil: no JWTs accepted
}

// NewAuth returns an Auth over static tokens; with none it returns nil
// (no authentication).
func NewAuth(tokens []Token) *Auth { return NewAuthWithJWT(tokens, nil) }

// NewAuthWithJWT returns an Auth over static tokens and, with j set,
// JWTs verified by j's keys; with neither it returns nil (no
// authentication). The keys must have passed CheckKey.
func NewAuthWithJWT(tokens []Token, j *JWTOptions) *Auth {
	if len(tokens) == 0 && j == nil {
		return nil
	}
	st := &authState{byDigest: make(map[[32]byte]*Token, len(tokens))}
	for i := range tokens {
		t := tokens[i]
		st.byDigest[t.Digest] = &t
	}
	if j != nil {
		st.jwt = newJWTVerifier(*j)
	}
	a := &Auth{}
	a.st.Store(st)
	return a
}

// Enabled reports whether tokens are required.
func (a *Auth) Enabled() bool { return a != nil }

// JWT reports whether JWTs are accepted.
func (a *Auth) JWT() bool { return a != nil && a.st.Load().jwt != nil }

// Replace gives a the tokens and keys of b, at once. Both must be
// enabled: turning authentication on or off is not a reload.
func (a *Auth) Replace(b *Auth) {
	st := *b.st.Load()
	st.gen = a.st.Load().gen + 1
	a.st.Store(&st)
}

// Generation counts the Replace calls so far: a caller that read it
// before Authenticate knows, reading it again, whether the token it was
// given may have been revoked since (and then calls Recheck). A nil Auth
// is always at generation 0.
func (a *Auth) Generation() uint64 {
	if a == nil {
		return 0
	}
	return a.st.Load().gen
}

// Errors of Verify and Recheck.
var (
	ErrNoToken      = errors.New("a bearer token is required")
	ErrUnknownToken = errors.New("not a token of this daemon")
	ErrRevoked      = errors.New("the token was removed from the configuration")
)

// Authenticate returns the token the request presents — in the
// Authorization header ("Bearer <secret>") or, for browsers, which cannot
// set headers on a websocket, in the token query parameter — or false if
// tokens are required and the request has none or one that Verify
// refuses. With no tokens configured it returns (nil, true). A static
// secret is hashed and compared by digest; no secret is logged or kept
// past the request, except a JWT's in the Token it gives.
func (a *Auth) Authenticate(r *http.Request) (*Token, bool) {
	t, err := a.Check(r)
	return t, err == nil
}

// Check is Authenticate with the reason of a refusal (Verify's error).
func (a *Auth) Check(r *http.Request) (*Token, error) {
	if a == nil {
		return nil, nil
	}
	secret := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return nil, ErrNoToken
		}
		secret = strings.TrimSpace(rest)
	} else {
		secret = r.URL.Query().Get("token")
	}
	return a.Verify(secret)
}

// RefusalMessage is the message of the 401 answering Check's err: a
// refused JWT's says which check failed (the client holds the JWT, and
// needs to know whether to refresh it or fix its issuer's settings); an
// unknown static secret's says nothing more.
func RefusalMessage(err error) string {
	const msg = "a valid bearer token is required"
	if err == nil || errors.Is(err, ErrNoToken) || errors.Is(err, ErrUnknownToken) {
		return msg
	}
	return msg + " (the JWT: " + err.Error() + ")"
}

// Verify returns the token secret is: a static token by its digest, or
// a JWT that one of the keys verifies, within its exp and nbf, of the
// configured issuer and audience. The error says why it is refused, for
// the client that sent it (it never quotes the secret).
func (a *Auth) Verify(secret string) (*Token, error) {
	if a == nil {
		return nil, nil
	}
	if secret == "" {
		return nil, ErrNoToken
	}
	st := a.st.Load()
	if t, ok := st.byDigest[sha256.Sum256([]byte(secret))]; ok {
		return t, nil
	}
	if st.jwt == nil || !looksLikeJWT(secret) {
		return nil, ErrUnknownToken
	}
	return st.jwt.verify(secret)
}

// Recheck verifies t again against a's tokens and keys as they are now
// (after Replace): a static token must still be configured with the same
// secret and name; a JWT must still verify. It returns the token as now
// configured (its scopes may have changed), or ErrRevoked, or why the JWT
// no longer verifies.
func (a *Auth) Recheck(t *Token) (*Token, error) {
	if a == nil || t == nil {
		return t, nil
	}
	if t.jwt != "" {
		return a.st.Load().jwt.verifyOrNil(t.jwt)
	}
	nt, ok := a.st.Load().byDigest[t.Digest]
	if !ok || nt.Name != t.Name {
		return nil, ErrRevoked
	}
	return nt, nil
}

// verifyOrNil is verify, refusing every JWT when v is nil (JWTs are no
// longer configured).
func (v *jwtVerifier) verifyOrNil(raw string) (*Token, error) {
	if v == nil {
		return nil, ErrRevoked
	}
	return v.verify(raw)
}

// matchGlob reports whether s matches pattern, where '*' matches any run
// of characters (':' and '/' included: symbols contain '/').
func matchGlob(pattern, s string) bool {
	for {
		star := strings.IndexByte(pattern, '*')
		if star < 0 {
			return pattern == s
		}
		if !strings.HasPrefix(s, pattern[:star]) {
			return false
		}
		s, pattern = s[star:], pattern[star+1:]
		if pattern == "" {
			return true
		}
		for i := 0; i <= len(s); i++ {
			if matchGlob(pattern, s[i:]) {
				return true
			}
		}
		return false
	}
}

// MatchGlob reports whether s matches pattern, where '*' matches any run
// of characters (':' and '/' included), as token stream scopes match.
func MatchGlob(pattern, s string) bool { return matchGlob(pattern, s) }
