package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Options configure a Client.
type Options struct {
	// URLs are the daemon's websocket endpoints (ws://host:port/v1/stream),
	// the edges of a cluster: the client connects to the first and, after
	// each failure, to the next. At least one.
	URLs []string
	// Token is the bearer token; "" sends none.
	Token string
	// Name attaches as this named subscriber (durable: the daemon keeps its
	// subscriptions while it is away, and tells it exactly what it
	// missed); "" is ephemeral.
	Name string
	// Handler receives every message, on the client's reader goroutine: a
	// Handler that blocks stops the reading (the daemon then drops this
	// subscriber's newest events, and says so). nil: books are kept and
	// nothing is handed out.
	Handler func(Message)
	// MinBackoff is the first reconnect delay. Defaults to 100ms.
	MinBackoff time.Duration
	// MaxBackoff bounds the reconnect delay, doubled per failed attempt
	// with jitter (a uniform pick in [d/2, d]). Defaults to 10s.
	MaxBackoff time.Duration
	// HTTPClient dials the websocket. Defaults to http.DefaultClient.
	HTTPClient *http.Client
	// Raw, if set, receives each server object as received, before it is
	// handled (on the reader goroutine; line is valid during the call).
	Raw func(line []byte)
}

// ClosedError is a connection the daemon closed with a close code that is
// not one of its errors (1001 on shutdown, for one).
type ClosedError struct {
	Code   int
	Reason string
}

func (e *ClosedError) Error() string { return fmt.Sprintf("client: closed %d %s", e.Code, e.Reason) }

// Client is a connection to fanoutd that stays connected: it reconnects
// with backoff, resubscribes (ephemeral) or reattaches stating what it read
// (named), keeps a Book per level2 stream and reports every loss. Create it
// with New, run it with Run.
type Client struct {
	o  Options
	tr *tracker // guarded by mu; what it produces is handed out after mu is released

	mu             sync.Mutex // protects the fields below and tr's stream set
	conn           *websocket.Conn
	want           []string                // streams subscribed (acked or to be)
	waiters        map[string][]chan error // by command id
	queued         []chan error            // Subscribe calls waiting for a connection
	pendingStreams map[chan error][]string
	nextID         int
	done           chan struct{}
	err            error
	ran            bool
	drop           chan struct{}
}

// New checks o and returns a client; nothing connects before Run.
func New(o Options) (*Client, error) {
	if len(o.URLs) == 0 {
		return nil, errors.New("client: no URL")
	}
	for _, u := range o.URLs {
		if _, err := url.Parse(u); err != nil {
			return nil, fmt.Errorf("client: URL %q: %w", u, err)
		}
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	c := &Client{o: o, waiters: map[string][]chan error{}, pendingStreams: map[chan error][]string{}, done: make(chan struct{}), drop: make(chan struct{}, 1)}
	c.tr = newTracker()
	return c, nil
}

// Book returns the book of a level2 stream subscribed with Subscribe, or
// nil.
func (c *Client) Book(stream string) *Book {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.tr.streams[stream]; st != nil {
		return st.book
	}
	return nil
}

// Done is closed when Run has returned; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns what ended Run (nil while it runs).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Subscribe subscribes to streams and waits for the daemon's answer: nil
// once acked, the refusal as an *Error (nothing was subscribed: a
// subscribe is all or nothing), ctx.Err(), or ErrClosed. Called before or
// while the client is disconnected, it waits for the next connection.
// Streams stay subscribed across reconnections.
func (c *Client) Subscribe(ctx context.Context, streams ...string) error {
	if len(streams) == 0 {
		return errors.New("client: no stream")
	}
	for _, s := range streams {
		if err := validStream(s); err != nil {
			return err
		}
	}
	ch := make(chan error, 1)
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return ErrClosed
	default:
	}
	for _, s := range streams {
		if !containsStr(c.want, s) {
			c.want = append(c.want, s)
		}
		c.tr.add(s)
	}
	c.pendingStreams[ch] = streams
	if c.conn != nil {
		id := c.idLocked("sub")
		c.waiters[id] = append(c.waiters[id], ch)
		conn := c.conn
		c.mu.Unlock()
		c.send(ctx, conn, map[string]any{"op": "subscribe", "id": id, "streams": streams})
	} else {
		c.queued = append(c.queued, ch)
		c.mu.Unlock()
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
}

// Unsubscribe stops streams; their books are forgotten.
func (c *Client) Unsubscribe(ctx context.Context, streams ...string) error {
	c.mu.Lock()
	for _, s := range streams {
		c.want = deleteStr(c.want, s)
		c.tr.remove(s)
	}
	conn := c.conn
	id := c.idLocked("unsub")
	c.mu.Unlock()
	if conn == nil {
		return nil
	}
	return c.send(ctx, conn, map[string]any{"op": "unsubscribe", "id": id, "streams": streams})
}

// Reconnect closes the current connection; the client reconnects as after
// a failure (to the next URL).
func (c *Client) Reconnect() {
	select {
	case c.drop <- struct{}{}:
	default:
	}
}

func (c *Client) idLocked(prefix string) string {
	c.nextID++
	return prefix + strconv.Itoa(c.nextID)
}

func (c *Client) send(ctx context.Context, conn *websocket.Conn, v any) error {
	b, _ := json.Marshal(v)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return conn.Write(wctx, websocket.MessageText, b)
}

// Run connects and stays connected until ctx is done (it returns
// ctx.Err()) or the daemon refuses for good (it returns the fatal *Error:
// a refused token, a name another token holds, a takeover). Run is called
// once.
func (c *Client) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.ran {
		c.mu.Unlock()
		return errors.New("client: Run called twice")
	}
	c.ran = true
	c.mu.Unlock()
	err := c.loop(ctx)
	c.mu.Lock()
	c.err = err
	for _, ws := range c.waiters {
		for _, ch := range ws {
			ch <- err
		}
	}
	for _, ch := range c.queued {
		ch <- err
	}
	c.waiters, c.queued = map[string][]chan error{}, nil
	close(c.done)
	c.mu.Unlock()
	return err
}

func (c *Client) loop(ctx context.Context) error {
	attempt, i := 0, 0
	for {
		u := c.o.URLs[i%len(c.o.URLs)]
		err := c.session(ctx, u, attempt, func() { attempt = 0 })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fe *Error
		if errors.As(err, &fe) && fe.Fatal() {
			c.emitDisconnected(u, err)
			return err
		}
		c.emitDisconnected(u, err)
		i++
		d := min(c.o.MaxBackoff, c.o.MinBackoff<<min(attempt, 20))
		d = d/2 + rand.N(d/2+1)
		attempt++
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (c *Client) emitDisconnected(u string, err error) {
	c.mu.Lock()
	c.tr.disconnected()
	c.tr.emit(&Disconnected{URL: u, Err: err})
	out, _ := c.tr.take()
	c.mu.Unlock()
	c.deliver(out)
}

// deliver hands msgs to the Handler, outside mu.
func (c *Client) deliver(msgs []Message) {
	if c.o.Handler == nil {
		return
	}
	for _, m := range msgs {
		c.o.Handler(m)
	}
}

// flush hands out what the tracker produced and sends the snapshot ops it
// asked for. c.mu must be held; it is released.
func (c *Client) flush(extra Message) {
	if extra != nil {
		c.tr.emit(extra)
	}
	out, asks := c.tr.take()
	conn := c.conn
	c.mu.Unlock()
	for _, s := range asks {
		if conn != nil {
			c.send(context.Background(), conn, map[string]any{"op": "snapshot", "id": "snap:" + s, "stream": s})
		}
	}
	c.deliver(out)
}

// dialURL returns u with the name and, for a named reattach, last= for
// every stream read.
func (c *Client) dialURL(u string) (string, error) {
	t, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	if c.o.Name == "" {
		return u, nil
	}
	q := t.Query()
	q.Set("name", c.o.Name)
	c.mu.Lock()
	last := c.tr.lastRead()
	c.mu.Unlock()
	names := make([]string, 0, len(last))
	for s := range last {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		q.Add("last", s+":"+strconv.FormatUint(last[s], 10))
	}
	t.RawQuery = q.Encode()
	return t.String(), nil
}

// session serves one connection: dial, resubscribe, read until it ends.
func (c *Client) session(ctx context.Context, u string, attempt int, stable func()) error {
	target, err := c.dialURL(u)
	if err != nil {
		return err
	}
	h := http.Header{}
	if c.o.Token != "" {
		h.Set("Authorization", "Bearer "+c.o.Token)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, resp, err := websocket.Dial(dctx, target, &websocket.DialOptions{HTTPHeader: h, HTTPClient: c.o.HTTPClient})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return refusal(resp)
		}
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1)
	select {
	case <-c.drop: // a Reconnect asked before this connection
	default:
	}

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-c.drop:
			conn.CloseNow()
		case <-sctx.Done():
		}
	}()

	c.mu.Lock()
	c.conn = conn
	want := append([]string(nil), c.want...)
	var id string
	if len(want) > 0 {
		id = c.idLocked("resub")
		c.waiters[id] = append(c.waiters[id], c.queued...)
		c.queued = nil
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.conn = nil
		// Calls waiting on this connection's replies wait for the next.
		for _, ws := range c.waiters {
			c.queued = append(c.queued, ws...)
		}
		c.waiters = map[string][]chan error{}
		c.mu.Unlock()
	}()
	c.deliver([]Message{&Connected{URL: u, Attempt: attempt}})
	if id != "" {
		if err := c.send(sctx, conn, map[string]any{"op": "subscribe", "id": id, "streams": want}); err != nil {
			return err
		}
	} else {
		stable()
	}
	var takenOver *Error
	for {
		_, msg, err := conn.Read(sctx)
		if err != nil {
			if s := websocket.CloseStatus(err); s != -1 {
				var ce websocket.CloseError
				errors.As(err, &ce)
				switch {
				case s == CloseTakenOver:
					if takenOver == nil {
						takenOver = &Error{Code: CodeTakenOver, Message: ce.Reason}
					}
					takenOver.CloseCode = int(s)
					return takenOver
				case s == CloseUnreadReplies:
					return &Error{Code: CodeUnreadReplies, Message: ce.Reason, CloseCode: int(s)}
				case s == websocket.StatusPolicyViolation && ce.Reason == string(CodeNameTaken):
					return &Error{Code: CodeNameTaken, Message: ce.Reason, CloseCode: int(s)}
				}
				return &ClosedError{Code: int(s), Reason: ce.Reason}
			}
			if takenOver != nil {
				return takenOver
			}
			return err
		}
		for len(msg) > 0 {
			var line []byte
			line, msg, _ = bytes.Cut(msg, []byte{'\n'})
			if c.o.Raw != nil {
				c.o.Raw(line)
			}
			if e := c.handle(line, id, stable); e != nil {
				takenOver = e
			}
		}
	}
}

// handle handles one server object; it returns a taken_over error.
func (c *Client) handle(line []byte, resubID string, stable func()) *Error {
	var w wire
	if err := json.Unmarshal(line, &w); err != nil {
		return nil
	}
	switch w.Type {
	case "ack", "pong":
		if w.ID == resubID {
			stable()
		}
		c.reply(w.ID, nil)
	case "error":
		e := &Error{Code: Code(w.Code), Message: w.Message, ID: w.ID}
		if e.Code == CodeTakenOver {
			return e
		}
		if stream, ok := cutPrefix(w.ID, "snap:"); ok {
			c.mu.Lock()
			c.tr.snapshotRefused(stream)
			c.mu.Unlock()
			return nil
		}
		c.reply(w.ID, e)
	case "notice":
		n := w.notice()
		c.mu.Lock()
		c.tr.notice(n)
		c.flush(nil)
	default:
		var ev *BookEvent
		if w.Type == "book" {
			ev = w.book()
		}
		c.mu.Lock()
		var m Message
		if c.tr.data(&w, ev) && c.o.Handler != nil {
			if ev != nil {
				m = ev
			} else if e := w.event(); e != nil {
				m = e
			}
		}
		c.flush(m)
	}
	return nil
}

// reply resolves the Subscribe calls waiting on command id; a refusal
// unsubscribes their streams (a subscribe is all or nothing).
func (c *Client) reply(id string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.waiters[id] {
		if err != nil {
			for _, s := range c.pendingStreams[ch] {
				c.want = deleteStr(c.want, s)
				c.tr.remove(s)
			}
		}
		delete(c.pendingStreams, ch)
		ch <- err
	}
	delete(c.waiters, id)
}

// refusal reads a refused upgrade's error body.
func refusal(resp *http.Response) *Error {
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if json.Unmarshal(b, &body) != nil || body.Code == "" {
		body.Code, body.Message = "http_"+strconv.Itoa(resp.StatusCode), string(bytes.TrimSpace(b))
	}
	return &Error{Code: Code(body.Code), Message: body.Message, HTTPStatus: resp.StatusCode}
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func deleteStr(ss []string, s string) []string {
	out := ss[:0]
	for _, x := range ss {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}
