package client

import (
	"errors"
	"fmt"
)

// Code is a code of the daemon's error vocabulary (docs: Websocket API,
// Errors). Code against the code, not the message.
type Code string

// The codes a client meets.
const (
	CodeBadRequest         Code = "bad_request"
	CodeUnknownOp          Code = "unknown_op"
	CodeUnknownStream      Code = "unknown_stream"
	CodeTooManyStreams     Code = "too_many_streams"
	CodeUnauthorized       Code = "unauthorized"
	CodeRateLimited        Code = "rate_limited"
	CodeMessageTooLarge    Code = "message_too_large"
	CodeNotSubscribed      Code = "not_subscribed"
	CodeNotLevel2          Code = "not_level2"
	CodeNoBook             Code = "no_book"
	CodeTakenOver          Code = "taken_over"
	CodeUnauthenticated    Code = "unauthenticated"
	CodeTooManyConnections Code = "too_many_connections"
	CodeOriginNotAllowed   Code = "origin_not_allowed"
	CodeBadName            Code = "bad_name"
	CodeNameTaken          Code = "name_taken"
	CodeShuttingDown       Code = "shutting_down"
	CodeUnknownSymbol      Code = "unknown_symbol"
	CodeTooManySymbols     Code = "too_many_symbols"
	CodeNotRecoverable     Code = "not_recoverable"
	CodeInternal           Code = "internal"
	// CodeUnreadReplies is the close code 4002's reason: this client left
	// its replies unread (it is not in the reply vocabulary).
	CodeUnreadReplies Code = "unread_replies"
)

// Websocket close codes of the daemon's own.
const (
	CloseTakenOver     = 4001
	CloseUnreadReplies = 4002
)

// Error is a refusal by the daemon: an error reply to a command (ID set),
// a refused upgrade (HTTPStatus set), or a close code of its own
// (CloseCode set).
type Error struct {
	Code       Code
	Message    string
	ID         string // the command's id, for a reply
	HTTPStatus int    // for a refused upgrade
	CloseCode  int    // for a closed connection
}

func (e *Error) Error() string {
	switch {
	case e.HTTPStatus != 0:
		return fmt.Sprintf("fanoutd: HTTP %d %s: %s", e.HTTPStatus, e.Code, e.Message)
	case e.CloseCode != 0:
		return fmt.Sprintf("fanoutd: closed %d %s: %s", e.CloseCode, e.Code, e.Message)
	}
	return fmt.Sprintf("fanoutd: %s: %s", e.Code, e.Message)
}

// Fatal reports whether reconnecting cannot help: the token is refused or
// out of scope, the name is malformed or another token's, or another
// connection took the name over (reconnecting would take it back, and the
// two would fight). A fatal error ends Client.Run.
func (e *Error) Fatal() bool {
	switch e.Code {
	case CodeUnauthenticated, CodeUnauthorized, CodeOriginNotAllowed, CodeBadName, CodeNameTaken, CodeTakenOver:
		return true
	case CodeBadRequest:
		return e.HTTPStatus != 0 // a refused upgrade; a reply's bad_request is the command's
	}
	return false
}

// IsCode reports whether err is an *Error with code c.
func IsCode(err error, c Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}

// ErrClosed is returned by calls on a client whose Run has returned.
var ErrClosed = errors.New("client: closed")
