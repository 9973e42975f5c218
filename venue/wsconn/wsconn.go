// Package wsconn is the websocket transport of venue.Link, on
// coder/websocket.
package wsconn

import (
	"context"
	"errors"
	"fmt"

	"github.com/coder/websocket"

	"github.com/fanoutd/fanoutd/venue"
)

// Dialer returns a venue.DialFunc whose connections read frames of at most
// readLimit bytes.
func Dialer(readLimit int64) venue.DialFunc {
	return func(ctx context.Context, url string, alive func()) (venue.Conn, error) {
		ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
			HTTPClient:     client,
			OnPingReceived: func(context.Context, []byte) bool { alive(); return true },
			OnPongReceived: func(context.Context, []byte) { alive() },
		})
		if err != nil {
			if resp != nil {
				return nil, &venue.DialError{StatusCode: resp.StatusCode, Err: err}
			}
			return nil, err
		}
		ws.SetReadLimit(readLimit)
		return &conn{ws: ws}, nil
	}
}

type conn struct {
	ws *websocket.Conn

	// Read's context closes the connection when it ends, watched once for
	// as long as Read is given the same one (a link gives one per
	// connection): coder/websocket, given a context that can end, sets
	// and clears a context.AfterFunc on it for every frame header and
	// payload it reads (docs/design.md, venue: the link). Only
	// Read's goroutine uses these fields; Close may run concurrently.
	watched context.Context
	unwatch func() bool
}

func (c *conn) Read(ctx context.Context, buf []byte) ([]byte, error) {
	if ctx != c.watched {
		if c.unwatch != nil {
			c.unwatch()
		}
		c.watched, c.unwatch = ctx, context.AfterFunc(ctx, func() { c.ws.CloseNow() })
	}
	_, r, err := c.ws.Reader(context.Background())
	if err == nil {
		buf, err = venue.ReadFrame(r, buf)
	}
	if err != nil {
		if ctx.Err() != nil {
			return buf, ctx.Err() // as coder/websocket answers a read its context ended
		}
		return buf, closeError(err)
	}
	return buf, nil
}

// closeError names a close frame from the venue by its status and reason.
func closeError(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		if ce.Reason != "" {
			return fmt.Errorf("closed by venue: %d %s", ce.Code, ce.Reason)
		}
		return fmt.Errorf("closed by venue: %d", ce.Code)
	}
	return err
}

func (c *conn) Write(ctx context.Context, msg []byte) error {
	return c.ws.Write(ctx, websocket.MessageText, msg)
}

func (c *conn) Ping(ctx context.Context) error { return c.ws.Ping(ctx) }

func (c *conn) Close() error { return c.ws.CloseNow() }
