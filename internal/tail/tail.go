// Package tail is the client of `fanoutd tail`: it subscribes to streams
// over the websocket API and prints what arrives, one line per event,
// notice or reply.
package tail

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"
)

// Options say what to tail and how.
type Options struct {
	URL     string   // the daemon's websocket URL
	Token   string   // bearer token; "" sends none
	Name    string   // attach as this named subscriber; "" is ephemeral
	Raw     bool     // print the JSON objects as received
	Streams []string // required
}

// Run tails until ctx is done (nil) or the daemon closes the connection
// (its close code is printed; nil). It returns an error when the daemon
// cannot be reached or refuses (with its answer) or the connection fails.
func Run(ctx context.Context, o Options, stdout io.Writer) error {
	target, err := url.Parse(o.URL)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	if o.Name != "" {
		q := target.Query()
		q.Set("name", o.Name)
		target.RawQuery = q.Encode()
	}
	h := http.Header{}
	if o.Token != "" {
		h.Set("Authorization", "Bearer "+o.Token)
	}
	c, resp, err := websocket.Dial(ctx, target.String(), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
		}
		return err
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	sub, _ := json.Marshal(map[string]any{"op": "subscribe", "id": "tail", "streams": o.Streams})
	if err := c.Write(ctx, websocket.MessageText, sub); err != nil {
		return err
	}
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				c.Close(websocket.StatusNormalClosure, "")
				return nil
			}
			if s := websocket.CloseStatus(err); s != -1 {
				fmt.Fprintf(stdout, "closed: %d %s\n", s, closeReasonText(err))
				return nil
			}
			return err
		}
		for _, line := range bytes.Split(msg, []byte{'\n'}) {
			if o.Raw {
				fmt.Fprintf(stdout, "%s\n", line)
				continue
			}
			fmt.Fprintln(stdout, readable(line))
		}
	}
}

func closeReasonText(err error) string {
	var ce websocket.CloseError
	if e, ok := err.(websocket.CloseError); ok {
		ce = e
	}
	return ce.Reason
}

// readable renders one wire object for a terminal.
func readable(line []byte) string {
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return string(line)
	}
	s := func(k string) string { v, _ := m[k].(string); return v }
	num := func(k string) string {
		if v, ok := m[k].(float64); ok {
			return fmt.Sprintf("%.0f", v)
		}
		return ""
	}
	switch s("type") {
	case "book":
		bids, _ := m["bids"].([]any)
		asks, _ := m["asks"].([]any)
		kind := "update"
		if m["snapshot"] == true {
			kind = "SNAPSHOT"
		}
		return fmt.Sprintf("%s #%s book %s bids=%d asks=%d best %s / %s", s("stream"), num("seq"), kind, len(bids), len(asks), top(bids), top(asks))
	case "trade":
		return fmt.Sprintf("%s #%s trade %s %s @ %s", s("stream"), num("seq"), orDash(s("side")), s("size"), s("price"))
	case "ticker":
		return fmt.Sprintf("%s #%s ticker %s x %s | %s x %s last %s", s("stream"), num("seq"), s("bid_size"), s("bid"), s("ask"), s("ask_size"), orDash(s("last")))
	case "notice":
		d, _ := json.Marshal(m["details"])
		return fmt.Sprintf("NOTICE %s (%s) %s %s: %s %s", strings.ToUpper(s("kind")), s("severity"), s("venue"), s("stream"), s("message"), d)
	case "error":
		return fmt.Sprintf("ERROR %s (id %s): %s", s("code"), s("id"), s("message"))
	case "ack":
		st, _ := json.Marshal(m["streams"])
		return fmt.Sprintf("ack %s %s", s("id"), st)
	}
	return string(line)
}

func top(levels []any) string {
	if len(levels) == 0 {
		return "-"
	}
	l, _ := levels[0].([]any)
	if len(l) != 2 {
		return "?"
	}
	return fmt.Sprintf("%v x %v", l[1], l[0])
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
