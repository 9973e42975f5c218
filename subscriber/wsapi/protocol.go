package wsapi

import (
	"encoding/json"
	"strings"

	"github.com/fanoutd/fanoutd/internal/jsonw"
	"github.com/fanoutd/fanoutd/venue"
)

// Code is the stable code of an error reply or a refused connection.
type Code string

// Error codes. The strings are part of the wire contract.
const (
	CodeBadRequest         Code = "bad_request"          // not a JSON object of the protocol, or a malformed stream name
	CodeUnknownOp          Code = "unknown_op"           // op is not subscribe, unsubscribe, snapshot or ping
	CodeUnknownStream      Code = "unknown_stream"       // the stream's venue or channel is not served by this daemon
	CodeTooManyStreams     Code = "too_many_streams"     // the subscription would pass limits.max_streams_per_connection
	CodeUnauthorized       Code = "unauthorized"         // the token's scopes do not cover the stream
	CodeRateLimited        Code = "rate_limited"         // the command passed limits.commands_per_second
	CodeMessageTooLarge    Code = "message_too_large"    // the command passed limits.max_message_bytes
	CodeNotSubscribed      Code = "not_subscribed"       // snapshot of a stream the connection is not subscribed to
	CodeNotLevel2          Code = "not_level2"           // snapshot of a stream that is not level2
	CodeNoBook             Code = "no_book"              // snapshot of a level2 stream whose book has not arrived yet
	CodeTakenOver          Code = "taken_over"           // another connection attached under this name (the connection then closes)
	CodeUnauthenticated    Code = "unauthenticated"      // HTTP 401: no token, or an unknown one
	CodeTooManyConnections Code = "too_many_connections" // HTTP 429: limits.max_connections_per_token reached
	CodeOriginNotAllowed   Code = "origin_not_allowed"   // HTTP 403: Origin not in the allow-list
	CodeBadName            Code = "bad_name"             // HTTP 400: ?name= outside [A-Za-z0-9_.-]{1,64}
	CodeShuttingDown       Code = "shutting_down"        // HTTP 503: the daemon is shutting down
)

// Codes lists every code, for documentation and metrics.
var Codes = []Code{CodeBadRequest, CodeUnknownOp, CodeUnknownStream, CodeTooManyStreams, CodeUnauthorized,
	CodeRateLimited, CodeMessageTooLarge, CodeNotSubscribed, CodeNotLevel2, CodeNoBook, CodeTakenOver,
	CodeUnauthenticated, CodeTooManyConnections, CodeOriginNotAllowed, CodeBadName, CodeShuttingDown}

// Op is a client command.
type Op string

// Client operations.
const (
	OpSubscribe   Op = "subscribe"
	OpUnsubscribe Op = "unsubscribe"
	OpSnapshot    Op = "snapshot"
	OpPing        Op = "ping"
)

// Command is one parsed client command.
type Command struct {
	Op      Op
	ID      string
	Streams []venue.Stream // subscribe, unsubscribe; snapshot has exactly one
}

// CommandError is a refused command: its code, a message for humans, and
// the id of the command if one could be read.
type CommandError struct {
	ID      string
	Code    Code
	Message string
}

func (e *CommandError) Error() string { return string(e.Code) + ": " + e.Message }

// maxIDLen bounds a command id; it is echoed in every reply.
const maxIDLen = 64

// maxStreamsPerCommand bounds one command's stream list before any limit
// is consulted, so a parse never allocates more than this many streams.
const maxStreamsPerCommand = 1024

type wireCommand struct {
	Op      *string   `json:"op"`
	ID      *string   `json:"id"`
	Streams *[]string `json:"streams"`
	Stream  *string   `json:"stream"`
}

// ParseCommand parses one client message. Every failure is a
// *CommandError with a stable code; the id is kept when it was readable.
func ParseCommand(b []byte) (Command, *CommandError) {
	var w wireCommand
	if err := json.Unmarshal(b, &w); err != nil {
		// A well-formed object with a bad field still gives its id back.
		var idOnly struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(b, &idOnly)
		return Command{}, &CommandError{ID: clip(idOnly.ID), Code: CodeBadRequest, Message: "want one JSON object: {\"op\":…,\"id\":…}"}
	}
	var c Command
	if w.ID != nil {
		if len(*w.ID) > maxIDLen {
			return Command{}, &CommandError{Code: CodeBadRequest, Message: "id longer than 64 bytes"}
		}
		c.ID = *w.ID
	}
	bad := func(code Code, msg string) (Command, *CommandError) {
		return Command{}, &CommandError{ID: c.ID, Code: code, Message: msg}
	}
	if w.Op == nil {
		return bad(CodeBadRequest, "missing op")
	}
	c.Op = Op(*w.Op)
	switch c.Op {
	case OpPing:
		return c, nil
	case OpSubscribe, OpUnsubscribe:
		if w.Streams == nil || len(*w.Streams) == 0 {
			return bad(CodeBadRequest, "streams must be a non-empty list")
		}
		if len(*w.Streams) > maxStreamsPerCommand {
			return bad(CodeTooManyStreams, "more than 1024 streams in one command")
		}
		c.Streams = make([]venue.Stream, 0, len(*w.Streams))
		for _, s := range *w.Streams {
			st, err := venue.ParseStream(s)
			if err != nil {
				return bad(CodeBadRequest, err.Error())
			}
			c.Streams = append(c.Streams, st)
		}
		return c, nil
	case OpSnapshot:
		if w.Stream == nil {
			return bad(CodeBadRequest, "snapshot wants one stream")
		}
		st, err := venue.ParseStream(*w.Stream)
		if err != nil {
			return bad(CodeBadRequest, err.Error())
		}
		c.Streams = []venue.Stream{st}
		return c, nil
	}
	return bad(CodeUnknownOp, "unknown op "+quote(*w.Op)+" (want subscribe, unsubscribe, snapshot or ping)")
}

func clip(id string) string {
	if len(id) > maxIDLen {
		return ""
	}
	return id
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return string(jsonw.AppendString(nil, s))
}

// appendAck appends {"type":"ack","id":…,"streams":[…]}.
func appendAck(dst []byte, id string, streams []venue.Stream) []byte {
	dst = append(dst, `{"type":"ack","id":`...)
	dst = jsonw.AppendString(dst, id)
	dst = append(dst, `,"streams":[`...)
	for i, st := range streams {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonw.AppendString(dst, string(st))
	}
	return append(dst, "]}"...)
}

// appendPong appends {"type":"pong","id":…}.
func appendPong(dst []byte, id string) []byte {
	dst = append(dst, `{"type":"pong","id":`...)
	dst = jsonw.AppendString(dst, id)
	return append(dst, '}')
}

// appendError appends {"type":"error","id":…,"code":…,"message":…}.
func appendError(dst []byte, id string, code Code, msg string) []byte {
	dst = append(dst, `{"type":"error","id":`...)
	dst = jsonw.AppendString(dst, id)
	dst = append(dst, `,"code":`...)
	dst = jsonw.AppendString(dst, string(code))
	dst = append(dst, `,"message":`...)
	dst = jsonw.AppendString(dst, msg)
	return append(dst, '}')
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
