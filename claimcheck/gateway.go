package claimcheck

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"
)

// RangeResult says how to answer a Range header.
type RangeResult uint8

// The range results.
const (
	// RangeWhole: no Range header, or one to ignore (another unit,
	// several ranges, bad syntax): answer the whole claim, 200.
	RangeWhole RangeResult = iota
	// RangePartial: one satisfiable range: answer 206 with it.
	RangePartial
	// RangeUnsatisfiable: one range outside the claim: answer 416 with
	// Content-Range: bytes */<size>.
	RangeUnsatisfiable
)

// ParseRange interprets a Range header for a representation of size bytes.
// It accepts exactly one of "bytes=a-b", "bytes=a-" and "bytes=-n"
// (RFC 9110 §14.1.2); a last position past the end is cut at the end, and
// a suffix longer than the claim is the whole claim (as 206). For
// RangePartial it returns the first byte and the length.
func ParseRange(h string, size int64) (first, length int64, res RangeResult) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, 0, RangeWhole
	}
	unit, spec, ok := strings.Cut(h, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") || strings.Contains(spec, ",") {
		return 0, 0, RangeWhole
	}
	a, b, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, 0, RangeWhole
	}
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if a == "" { // suffix: -n
		n, ok := parsePos(b)
		if !ok {
			return 0, 0, RangeWhole
		}
		if n == 0 || size == 0 {
			return 0, 0, RangeUnsatisfiable
		}
		n = min(n, size)
		return size - n, n, RangePartial
	}
	f, ok := parsePos(a)
	if !ok {
		return 0, 0, RangeWhole
	}
	last := int64(-1)
	if b != "" {
		l, ok := parsePos(b)
		if !ok || l < f {
			return 0, 0, RangeWhole
		}
		last = l
	}
	if f >= size {
		return 0, 0, RangeUnsatisfiable
	}
	if last < 0 || last >= size {
		last = size - 1
	}
	return f, last - f + 1, RangePartial
}

// parsePos parses 1*DIGIT, saturating at MaxInt64.
func parsePos(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63-1-int64(c-'0'))/10 {
			n = 1<<63 - 1
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// AuthorizeFunc decides whether r may read tenant's claims. When ok is
// false the gateway answers status: 401 unauthenticated or 403
// unauthorized (package api's codes).
type AuthorizeFunc func(r *http.Request, tenant string) (status int, ok bool)

// AuthorizeStreamFunc decides whether r may read a claim of stream, the
// claim's IndexEntry.Scope: "venue:channel:symbol", "<venue>:*:*" for a
// capture, "*:*:*" for a claim naming no stream. When ok is false the
// gateway answers status as for AuthorizeFunc. The daemon's check is
// api.Token.Allows(venue.Stream(stream)).
type AuthorizeStreamFunc func(r *http.Request, stream string) (status int, ok bool)

// Gateway serves GET and HEAD /v1/claims/{tenant}/{claim_id} through a
// Reader. Mount it with Handle("GET /v1/claims/{tenant}/{claim_id}", g)
// (GET patterns match HEAD too) or under the "/v1/claims/" prefix.
type Gateway struct {
	Reader *Reader
	// Deadline is read_deadline_ms: each request's reads must answer
	// within it of the request's start. Defaults to the reader's.
	Deadline time.Duration
	// Authorize, if set, is asked before anything is read.
	Authorize AuthorizeFunc
	// AuthorizeStream, if set, is asked with the claim's scope once its
	// pack index is read, before any header or byte of the claim is
	// written (packs mix streams and claim ids are enumerable, so the
	// tenant check alone lets a token read streams outside its scopes).
	// The snapshot routes ask it with the route's stream.
	AuthorizeStream AuthorizeStreamFunc
	// Logger receives store errors, which are never echoed to clients.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// WriteError writes api's error body with status, code and msg, and
// Retry-After when retryAfter > 0. The store's own error body is never
// echoed.
func WriteError(w http.ResponseWriter, status int, code api.Code, msg string, retryAfter int) {
	h := w.Header()
	h.Del("ETag")
	h.Del("Accept-Ranges")
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	api.WriteError(w, status, code, msg)
}

// authError answers a refusal of Authorize.
func authError(w http.ResponseWriter, status int) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="fanoutd"`)
		WriteError(w, status, api.CodeUnauthenticated, "a valid bearer token is required", 0)
		return
	}
	WriteError(w, status, api.CodeUnauthorized, "outside this token's scopes", 0)
}

// ErrorStatus maps a Reader error to the gateway's answer.
func ErrorStatus(err error) (status int, code api.Code, retryAfter int) {
	switch {
	case errors.Is(err, ErrOverloaded):
		return http.StatusServiceUnavailable, api.CodeOverloaded, 1
	case errors.Is(err, ErrDeadline), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, api.CodeDeadline, 1
	case errors.Is(err, ErrClosed), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, api.CodeStoreUnavailable, 1
	}
	switch Classify(err) {
	case ErrMissing:
		return http.StatusNotFound, api.CodeNotFound, 0
	case ErrForbidden:
		return http.StatusServiceUnavailable, api.CodeStoreForbidden, 60
	case ErrThrottled, ErrUnavailable:
		return http.StatusServiceUnavailable, api.CodeStoreUnavailable, 1
	}
	return http.StatusBadGateway, api.CodeStoreError, 0
}

func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code, ra := ErrorStatus(err)
	if code == api.CodeStoreError || code == api.CodeStoreForbidden {
		lg := g.Logger
		if lg == nil {
			lg = slog.Default()
		}
		lg.Warn("claimcheck: read failed", "path", r.URL.Path, "err", err)
	}
	WriteError(w, status, code, failMessages[code], ra)
}

// failMessages are the messages of ErrorStatus's codes.
var failMessages = map[api.Code]string{
	api.CodeOverloaded:       "too many reads in flight; retry",
	api.CodeDeadline:         "the read did not answer within its deadline",
	api.CodeStoreUnavailable: "the object store is unavailable or throttling; retry",
	api.CodeNotFound:         "no such claim",
	api.CodeStoreForbidden:   "the object store refused access",
	api.CodeStoreError:       "the object store failed",
}

// claimPath returns the tenant and id of a /v1/claims/{tenant}/{claim_id}
// request, from the route's wildcards or from the path.
func claimPath(r *http.Request) (tenant, id string) {
	tenant, id = r.PathValue("tenant"), r.PathValue("claim_id")
	if tenant != "" || id != "" {
		return tenant, id
	}
	p := r.URL.Path
	if i := strings.Index(p, "/v1/claims/"); i >= 0 {
		p = p[i+len("/v1/claims/"):]
	}
	tenant, id, _ = strings.Cut(p, "/")
	return tenant, id
}

// ServeHTTP answers one claim request. In order: method, tenant and id
// syntax (400), Authorize (401/403), the node-wide gate (503 overloaded),
// the index through the Reader, AuthorizeStream on the claim's scope
// (401/403), then the bytes, all within the deadline.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		WriteError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "use GET or HEAD", 0)
		return
	}
	tenant, rawID := claimPath(r)
	if !ValidTenant(tenant) {
		WriteError(w, http.StatusBadRequest, api.CodeInvalidTenant, "tenant must match [a-z0-9_-]", 0)
		return
	}
	id, err := ParseClaimID(rawID)
	if err != nil {
		WriteError(w, http.StatusBadRequest, api.CodeInvalidID, "not a claim id", 0)
		return
	}
	if g.Authorize != nil {
		if status, ok := g.Authorize(r, tenant); !ok {
			authError(w, status)
			return
		}
	}
	release, ok := g.Reader.Admit(r.Context())
	if !ok {
		WriteError(w, http.StatusServiceUnavailable, api.CodeOverloaded, "too many reads in flight; retry", 1)
		return
	}
	defer release()
	d := g.Deadline
	if d <= 0 {
		d = g.Reader.cfg.Deadline
	}
	ctx, cancel := context.WithDeadline(r.Context(), start.Add(d))
	defer cancel()

	loc, err := g.Reader.Locate(ctx, Ref{Tenant: tenant, ID: id})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	if !g.authorizeStream(w, r, loc.Entry.Scope()) {
		return
	}
	serveClaim(w, r, loc.Entry, immutable, func(first, length int64, whole bool) ([]byte, error) {
		if whole {
			return g.Reader.Bytes(ctx, loc)
		}
		return g.Reader.Range(ctx, loc, first, length)
	}, g.fail)
}

// authorizeStream asks AuthorizeStream, answering a refusal.
func (g *Gateway) authorizeStream(w http.ResponseWriter, r *http.Request, stream string) bool {
	if g.AuthorizeStream == nil {
		return true
	}
	status, ok := g.AuthorizeStream(r, stream)
	if !ok {
		authError(w, status)
	}
	return ok
}

const immutable = "private, max-age=31536000, immutable"

// serveClaim writes the headers and body of a claim whose index entry is
// e, reading the bytes with read only for GET.
func serveClaim(w http.ResponseWriter, r *http.Request, e IndexEntry, cacheControl string,
	read func(first, length int64, whole bool) ([]byte, error),
	fail func(http.ResponseWriter, *http.Request, error)) {
	h := w.Header()
	etag := e.ETag()
	h.Set("Content-Type", e.ContentType)
	h.Set("Cache-Control", cacheControl)
	h.Set("Accept-Ranges", "bytes")
	h.Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagListMatch(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	first, length, res := ParseRange(r.Header.Get("Range"), e.Length)
	if ir := r.Header.Get("If-Range"); ir != "" && strings.TrimSpace(ir) != etag {
		res = RangeWhole
	}
	status := http.StatusOK
	switch res {
	case RangeUnsatisfiable:
		h.Set("Content-Range", "bytes */"+strconv.FormatInt(e.Length, 10))
		WriteError(w, http.StatusRequestedRangeNotSatisfiable, api.CodeRangeNotSatisfiable, "range not satisfiable", 0)
		return
	case RangePartial:
		status = http.StatusPartialContent
		h.Set("Content-Range", "bytes "+strconv.FormatInt(first, 10)+"-"+strconv.FormatInt(first+length-1, 10)+"/"+strconv.FormatInt(e.Length, 10))
	default:
		first, length = 0, e.Length
	}
	var body []byte
	if r.Method != http.MethodHead {
		var err error
		if body, err = read(first, length, res != RangePartial); err != nil {
			h.Del("Content-Range")
			fail(w, r, err)
			return
		}
	}
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	w.WriteHeader(status)
	if body != nil {
		w.Write(body)
	}
}

func etagListMatch(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// StatsHandler serves Stats as JSON (GET /v1/claimcheck/stats).
func (r *Reader) StatsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(r.Stats())
	})
}
