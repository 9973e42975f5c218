package api

import (
	"crypto/sha256"
	"net/http"
	"slices"
	"strings"

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
}

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

// Auth authenticates requests against a set of tokens. A nil *Auth
// authenticates every request as anonymous with every scope.
type Auth struct {
	byDigest map[[32]byte]*Token
}

// NewAuth returns an Auth over tokens; with none it returns nil (no
// authentication).
func NewAuth(tokens []Token) *Auth {
	if len(tokens) == 0 {
		return nil
	}
	a := &Auth{byDigest: make(map[[32]byte]*Token, len(tokens))}
	for i := range tokens {
		t := tokens[i]
		a.byDigest[t.Digest] = &t
	}
	return a
}

// Enabled reports whether tokens are required.
func (a *Auth) Enabled() bool { return a != nil }

// Authenticate returns the token the request presents in the
// Authorization header ("Bearer <secret>"), or false if tokens are
// required and the request has none or an unknown one. With no tokens
// configured it returns (nil, true). The secret is hashed and compared by
// digest; it is never logged or kept. A token query parameter is not read
// here: see AuthenticateUpgrade.
func (a *Auth) Authenticate(r *http.Request) (*Token, bool) {
	return a.authenticate(r, false)
}

// AuthenticateUpgrade is Authenticate for a websocket upgrade, which also
// reads the token query parameter when there is no Authorization header:
// browsers cannot set headers on a websocket. Only the upgrade takes it,
// so that a secret in a URL is never what opens the other routes (whose
// URLs end up in histories, logs and Referer headers).
func (a *Auth) AuthenticateUpgrade(r *http.Request) (*Token, bool) {
	return a.authenticate(r, true)
}

func (a *Auth) authenticate(r *http.Request, query bool) (*Token, bool) {
	if a == nil {
		return nil, true
	}
	secret := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return nil, false
		}
		secret = strings.TrimSpace(rest)
	} else if query {
		secret = r.URL.Query().Get("token")
	}
	if secret == "" {
		return nil, false
	}
	t, ok := a.byDigest[sha256.Sum256([]byte(secret))]
	return t, ok
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
