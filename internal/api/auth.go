package api

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"slices"
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
	// (venue:channel:symbol, each part matched on its own, '*' matching
	// any run of characters within it: "coinbase:level2:*"; see
	// MatchStream); empty means every stream. Both limits apply when both
	// are set.
	Streams []string
	// Tenants limits the claim-check routes (/v1/claims, /v1/snapshots) to
	// these tenants; empty means every tenant.
	Tenants []string
	// MaxConns, if positive, caps the connections open at once under this
	// token below limits.max_connections_per_token (a JWT's
	// max_connections claim).
	MaxConns int
	// LowLatency has every connection of this token written without
	// batching delay, as ?latency=low asks (tokens[].latency: low, or a
	// JWT's "latency": "low" claim).
	LowLatency bool
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
		if MatchStream(p, st) {
			return true
		}
	}
	return false
}

// AllowsVenue reports whether the token's scopes may cover some stream of
// venueName: it is one of Venues (if set), and the venue part of one of
// Streams (if set) matches it. A nil Token allows every venue.
func (t *Token) AllowsVenue(venueName string) bool {
	if t == nil {
		return true
	}
	if len(t.Venues) > 0 && !slices.Contains(t.Venues, venueName) {
		return false
	}
	if len(t.Streams) == 0 {
		return true
	}
	for _, p := range t.Streams {
		v, _, _ := strings.Cut(p, ":")
		if matchGlob(v, venueName) {
			return true
		}
	}
	return false
}

// Scoped reports whether the token is limited in any way (venues, streams
// or tenants). A nil Token is not.
func (t *Token) Scoped() bool {
	return t != nil && (len(t.Venues) > 0 || len(t.Streams) > 0 || len(t.Tenants) > 0)
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

// Authenticate returns the token the request presents in the
// Authorization header ("Bearer <secret>"), or false if tokens are
// required and the request has none or one that Verify refuses. With no
// tokens configured it returns (nil, true). A static secret is hashed and
// compared by digest; no secret is logged or kept past the request,
// except a JWT's in the Token it gives. A token query parameter is not
// read here: see AuthenticateUpgrade.
func (a *Auth) Authenticate(r *http.Request) (*Token, bool) {
	t, err := a.check(r, false)
	return t, err == nil
}

// AuthenticateUpgrade is Authenticate for a websocket upgrade, which also
// reads the token query parameter when there is no Authorization header:
// browsers cannot set headers on a websocket. Only the upgrade takes it,
// so that a secret in a URL is never what opens the other routes (whose
// URLs end up in histories, logs and Referer headers).
func (a *Auth) AuthenticateUpgrade(r *http.Request) (*Token, bool) {
	t, err := a.check(r, true)
	return t, err == nil
}

// Check is Authenticate with the reason of a refusal (Verify's error).
func (a *Auth) Check(r *http.Request) (*Token, error) { return a.check(r, false) }

// CheckUpgrade is AuthenticateUpgrade with the reason of a refusal.
func (a *Auth) CheckUpgrade(r *http.Request) (*Token, error) { return a.check(r, true) }

func (a *Auth) check(r *http.Request, query bool) (*Token, error) {
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
	} else if query {
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
// of characters (':' and '/' included).
func MatchGlob(pattern, s string) bool { return matchGlob(pattern, s) }

// MatchStream reports whether st matches a token's stream pattern. The
// pattern's venue, channel and symbol parts are each matched against the
// stream's own, so '*' never reaches across a ':' between them
// ("*:trades:*" does not match "coinbase:level2:X:trades:Y"); within the
// symbol it matches any run, '/' and ':' included. A pattern of fewer than
// three parts whose last part ends in '*' lets that part's '*' stand for
// the parts it leaves out ("coinbase:*" is every Coinbase stream, "*" every
// stream).
func MatchStream(pattern string, st venue.Stream) bool {
	parts := strings.SplitN(pattern, ":", 3)
	segs := [3]string{st.Venue(), string(st.Channel()), st.Symbol()}
	for i, p := range parts {
		if !matchGlob(p, segs[i]) {
			return false
		}
	}
	return len(parts) == 3 || strings.HasSuffix(parts[len(parts)-1], "*")
}
