package wsapi

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"

	"github.com/fanoutd/fanoutd/internal/jsonw"
	"github.com/fanoutd/fanoutd/venue"
)

// Op is a client command.
type Op string

// Client operations.
const (
	OpSubscribe   Op = "subscribe"
	OpUnsubscribe Op = "unsubscribe"
	OpSnapshot    Op = "snapshot"
	OpPing        Op = "ping"
	OpRefresh     Op = "refresh"
	OpRecover     Op = "recover"
)

// Command is one parsed client command.
type Command struct {
	Op      Op
	ID      string
	Streams []venue.Stream // subscribe, unsubscribe; snapshot and recover have exactly one
	From    uint64         // recover: the first seq wanted, from 1
	Token   string         // refresh: the new bearer token (never logged or echoed)
}

// CommandError is a refused command: its code, a message for humans, and
// the id of the command if one could be read.
type CommandError struct {
	ID      string
	Code    api.Code
	Message string
}

func (e *CommandError) Error() string { return string(e.Code) + ": " + e.Message }

// maxIDLen bounds a command id; it is echoed in every reply.
const maxIDLen = 64

// maxStreamsPerCommand bounds one command's stream list before any limit
// is consulted, so a parse never allocates more than this many streams.
const maxStreamsPerCommand = 1024

type wireCommand struct {
	Op      *string      `json:"op"`
	ID      *string      `json:"id"`
	Streams *[]string    `json:"streams"`
	Stream  *string      `json:"stream"`
	From    *json.Number `json:"from"`
	Token   *string      `json:"token"`
}

// ParseCommand parses one client message. Every failure is a
// *CommandError with a stable code; the id is kept when it was readable.
func ParseCommand(b []byte) (Command, *CommandError) {
	var w wireCommand
	if !decodeWire(b, &w) {
		w = wireCommand{}
		if err := json.Unmarshal(b, &w); err != nil {
			// A well-formed object with a bad field still gives its id back.
			var idOnly struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(b, &idOnly)
			return Command{}, &CommandError{ID: clip(idOnly.ID), Code: api.CodeBadRequest, Message: "want one JSON object: {\"op\":…,\"id\":…}"}
		}
	}
	var c Command
	if w.ID != nil {
		if len(*w.ID) > maxIDLen {
			return Command{}, &CommandError{Code: api.CodeBadRequest, Message: "id longer than 64 bytes"}
		}
		c.ID = *w.ID
	}
	bad := func(code api.Code, msg string) (Command, *CommandError) {
		return Command{}, &CommandError{ID: c.ID, Code: code, Message: msg}
	}
	if w.Op == nil {
		return bad(api.CodeBadRequest, "missing op")
	}
	c.Op = Op(*w.Op)
	switch c.Op {
	case OpPing:
		return c, nil
	case OpSubscribe, OpUnsubscribe:
		if w.Streams == nil || len(*w.Streams) == 0 {
			return bad(api.CodeBadRequest, "streams must be a non-empty list")
		}
		if len(*w.Streams) > maxStreamsPerCommand {
			return bad(api.CodeTooManyStreams, "more than 1024 streams in one command")
		}
		c.Streams = make([]venue.Stream, 0, len(*w.Streams))
		for _, s := range *w.Streams {
			st, err := venue.ParseStream(s)
			if err != nil {
				return bad(api.CodeBadRequest, err.Error())
			}
			c.Streams = append(c.Streams, st)
		}
		return c, nil
	case OpSnapshot:
		if w.Stream == nil {
			return bad(api.CodeBadRequest, "snapshot wants one stream")
		}
		st, err := venue.ParseStream(*w.Stream)
		if err != nil {
			return bad(api.CodeBadRequest, err.Error())
		}
		c.Streams = []venue.Stream{st}
		return c, nil
	case OpRecover:
		if w.Stream == nil {
			return bad(api.CodeBadRequest, "recover wants one stream")
		}
		st, err := venue.ParseStream(*w.Stream)
		if err != nil {
			return bad(api.CodeBadRequest, err.Error())
		}
		var from uint64
		if w.From != nil {
			from, err = strconv.ParseUint(string(*w.From), 10, 64)
		}
		if w.From == nil || err != nil || from == 0 {
			return bad(api.CodeBadRequest, "recover wants from: the first seq wanted, an integer from 1")
		}
		c.Streams, c.From = []venue.Stream{st}, from
		return c, nil
	case OpRefresh:
		if w.Token == nil || *w.Token == "" {
			return bad(api.CodeBadRequest, "refresh wants a token")
		}
		c.Token = *w.Token
		return c, nil
	}
	return bad(api.CodeUnknownOp, "unknown op "+quote(*w.Op)+" (want subscribe, unsubscribe, snapshot, recover, ping or refresh)")
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

// appendRefreshed appends the ack of a refresh,
// {"type":"ack","id":…,"streams":[],"expires_at":…}: an ack of no streams,
// with the new token's exp (RFC 3339; absent for a static token).
func appendRefreshed(dst []byte, id string, exp time.Time) []byte {
	dst = append(dst, `{"type":"ack","id":`...)
	dst = jsonw.AppendString(dst, id)
	dst = append(dst, `,"streams":[]`...)
	if !exp.IsZero() {
		dst = append(dst, `,"expires_at":"`...)
		dst = exp.UTC().AppendFormat(dst, time.RFC3339)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// appendPong appends {"type":"pong","id":…}.
func appendPong(dst []byte, id string) []byte {
	dst = append(dst, `{"type":"pong","id":`...)
	dst = jsonw.AppendString(dst, id)
	return append(dst, '}')
}

// appendError appends {"type":"error","id":…,"code":…,"message":…}.
func appendError(dst []byte, id string, code api.Code, msg string) []byte {
	dst = append(dst, `{"type":"error","id":`...)
	dst = jsonw.AppendString(dst, id)
	dst = append(dst, `,"code":`...)
	dst = jsonw.AppendString(dst, string(code))
	dst = append(dst, `,"message":`...)
	dst = jsonw.AppendString(dst, msg)
	return append(dst, '}')
}

// appendRecover appends {"type":"recover","id":…,"stream":…,"from":…,"to":…}:
// the events of stream from seq from to seq to follow it (none if to is
// from-1).
func appendRecover(dst []byte, id string, st venue.Stream, from, to uint64) []byte {
	dst = append(dst, `{"type":"recover","id":`...)
	dst = jsonw.AppendString(dst, id)
	dst = append(dst, `,"stream":`...)
	dst = jsonw.AppendString(dst, string(st))
	dst = append(dst, `,"from":`...)
	dst = strconv.AppendUint(dst, from, 10)
	dst = append(dst, `,"to":`...)
	dst = strconv.AppendUint(dst, to, 10)
	return append(dst, '}')
}
