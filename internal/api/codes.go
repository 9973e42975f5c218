package api

import (
	"net/http"
	"unicode/utf8"

	"github.com/fanoutd/fanoutd/internal/jsonw"
)

// Code is the stable code of an error reply or a refused connection.
type Code string

// Error codes. The strings are part of the wire contract.
const (
	CodeBadRequest         Code = "bad_request"          // not a JSON object of the protocol, or a malformed stream name
	CodeUnknownOp          Code = "unknown_op"           // op is not subscribe, unsubscribe, snapshot, recover, ping or refresh
	CodeUnknownStream      Code = "unknown_stream"       // the stream's venue or channel is not served by this daemon
	CodeTooManyStreams     Code = "too_many_streams"     // the subscription would pass limits.max_streams_per_connection
	CodeUnauthorized       Code = "unauthorized"         // the token's scopes do not cover the stream; a refresh to another owner's token, or one of narrower scopes
	CodeRateLimited        Code = "rate_limited"         // the command passed limits.commands_per_second
	CodeMessageTooLarge    Code = "message_too_large"    // the command passed limits.max_message_bytes
	CodeNotSubscribed      Code = "not_subscribed"       // snapshot of a stream the connection is not subscribed to
	CodeNotLevel2          Code = "not_level2"           // snapshot of a stream that is not level2
	CodeNoBook             Code = "no_book"              // snapshot of a level2 stream whose book has not arrived yet
	CodeNotRecoverable     Code = "not_recoverable"      // recover from a seq the recovery window does not hold (the message names the oldest seq held), or of more events than the queue has room for
	CodeTakenOver          Code = "taken_over"           // another connection attached under this name (the connection then closes)
	CodeUnauthenticated    Code = "unauthenticated"      // HTTP 401: no token, or one refused (unknown, or a JWT that does not verify); a refused refresh
	CodeTooManyConnections Code = "too_many_connections" // HTTP 429: limits.max_connections_per_token reached
	CodeOriginNotAllowed   Code = "origin_not_allowed"   // HTTP 403: Origin not in the allow-list
	CodeBadName            Code = "bad_name"             // HTTP 400: ?name= outside [A-Za-z0-9_.-]{1,64}
	CodeNameTaken          Code = "name_taken"           // HTTP 409: ?name= names a subscriber another token created
	CodeShuttingDown       Code = "shutting_down"        // HTTP 503: the daemon is shutting down
	CodeUnknownSymbol      Code = "unknown_symbol"       // the venue's instrument list does not have the symbol
	CodeTooManySymbols     Code = "too_many_symbols"     // the venue already subscribes venues.<v>.max_symbols symbols
	CodeHostNotAllowed     Code = "host_not_allowed"     // HTTP 403: without tokens, Host (or a websocket's Origin) is neither a loopback name nor the listen address
	CodeTooManyNamed       Code = "too_many_named"       // HTTP 429: a new ?name= would pass limits.max_named_per_token or limits.max_named
	CodeTooManyDerived     Code = "too_many_derived"     // the subscription would pass limits.max_derived_per_token, max_derived_per_source or max_derived_weight

	// Codes of the HTTP routes only.
	CodeMethodNotAllowed    Code = "method_not_allowed"    // 405
	CodeInvalidTenant       Code = "invalid_tenant"        // 400: a claim route's tenant is malformed
	CodeInvalidID           Code = "invalid_id"            // 400: not a claim id
	CodeInvalidStream       Code = "invalid_stream"        // 400: not a level2 stream of a venue
	CodeInvalidQuery        Code = "invalid_query"         // 400: a query parameter does not parse
	CodeNotFound            Code = "not_found"             // 404: no such claim or snapshot
	CodeRangeNotSatisfiable Code = "range_not_satisfiable" // 416
	CodeOverloaded          Code = "overloaded"            // 503 + Retry-After: 1: the claim-check gate or queue is full
	CodeDeadline            Code = "deadline"              // 503 + Retry-After: 1: the read missed read_deadline_ms
	CodeStoreUnavailable    Code = "store_unavailable"     // 503 + Retry-After: 1: the store throttled, hung or reset
	CodeStoreForbidden      Code = "store_forbidden"       // 503 + Retry-After: 60: the store refused our credentials
	CodeStoreError          Code = "store_error"           // 502: the store answered something else (500, a corrupt pack)
	CodeInternal            Code = "internal"              // 500
	CodeRangeTooLong        Code = "range_too_long"        // 400: a history query's from–to passes history.max_range
)

// Codes lists the codes of the websocket protocol and its upgrade, for
// documentation and the fanoutd_refusals_total metric.
var Codes = []Code{CodeBadRequest, CodeUnknownOp, CodeUnknownStream, CodeTooManyStreams, CodeUnauthorized,
	CodeRateLimited, CodeMessageTooLarge, CodeNotSubscribed, CodeNotLevel2, CodeNoBook, CodeTakenOver,
	CodeUnauthenticated, CodeTooManyConnections, CodeOriginNotAllowed, CodeBadName, CodeNameTaken, CodeShuttingDown,
	CodeUnknownSymbol, CodeTooManySymbols, CodeNotRecoverable, CodeHostNotAllowed, CodeTooManyNamed, CodeTooManyDerived}

// RouteCodes lists the codes only the HTTP routes answer.
var RouteCodes = []Code{CodeMethodNotAllowed, CodeInvalidTenant, CodeInvalidID, CodeInvalidStream, CodeInvalidQuery, CodeNotFound,
	CodeRangeNotSatisfiable, CodeOverloaded, CodeDeadline, CodeStoreUnavailable, CodeStoreForbidden, CodeStoreError,
	CodeInternal, CodeRangeTooLong}

// Refusal is an error that carries its code: a check (wsapi.Options.Check)
// returns one to refuse with a code other than unknown_stream.
type Refusal struct {
	Code    Code
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// WriteError answers an HTTP request with status and the one error body of
// every route, {"type":"error","code":…,"message":…}: the same object as a
// websocket error reply, without its id. The body is JSON
// (X-Content-Type-Options: nosniff) and never longer than MaxMessageBytes
// of message.
func WriteError(w http.ResponseWriter, status int, code Code, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(AppendError(nil, code, msg))
}

// MaxMessageBytes bounds the message of an error body: a longer one (it
// echoes a long URL, stream or command) keeps its head and its tail, the
// middle cut to "…", so a client never gets back the bulk of what it sent.
const MaxMessageBytes = 256

// AppendError appends the error body of WriteError and a newline to dst.
func AppendError(dst []byte, code Code, msg string) []byte {
	dst = append(dst, `{"type":"error","code":`...)
	dst = jsonw.AppendString(dst, string(code))
	dst = append(dst, `,"message":`...)
	dst = jsonw.AppendString(dst, Shorten(msg, MaxMessageBytes))
	return append(dst, "}\n"...)
}

// Shorten returns s if it has at most n bytes, else its first and last
// bytes (two thirds and one third of n, on rune boundaries) joined by "…".
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := n*2/3, n/3
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:head] + "…" + s[t:]
}
