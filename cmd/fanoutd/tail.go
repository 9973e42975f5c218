package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/coder/websocket"
)

// tail subscribes to streams and prints what arrives, one line per event,
// notice or reply, until interrupted or the daemon closes the connection.
func tail(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	u := fs.String("url", "ws://127.0.0.1:8080/v1/stream", "websocket URL of the daemon")
	token := fs.String("token", "", "bearer token (default $FANOUTD_TOKEN)")
	name := fs.String("name", "", "attach as this named subscriber")
	raw := fs.Bool("raw", false, "print the JSON objects as received")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: fanoutd tail [--url URL] [--token T] [--name N] STREAM…")
		return 2
	}
	if *token == "" {
		*token = os.Getenv("FANOUTD_TOKEN")
	}
	target, err := url.Parse(*u)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd tail: --url: %v\n", err)
		return 2
	}
	if *name != "" {
		q := target.Query()
		q.Set("name", *name)
		target.RawQuery = q.Encode()
	}
	h := http.Header{}
	if *token != "" {
		h.Set("Authorization", "Bearer "+*token)
	}
	c, resp, err := websocket.Dial(ctx, target.String(), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			fmt.Fprintf(stderr, "fanoutd tail: %s: %s\n", resp.Status, bytes.TrimSpace(body))
		} else {
			fmt.Fprintf(stderr, "fanoutd tail: %v\n", err)
		}
		return 1
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	sub, _ := json.Marshal(map[string]any{"op": "subscribe", "id": "tail", "streams": fs.Args()})
	if err := c.Write(ctx, websocket.MessageText, sub); err != nil {
		fmt.Fprintf(stderr, "fanoutd tail: %v\n", err)
		return 1
	}
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				c.Close(websocket.StatusNormalClosure, "")
				return 0
			}
			if s := websocket.CloseStatus(err); s != -1 {
				fmt.Fprintf(stdout, "closed: %d %s\n", s, closeReasonText(err))
				return 0
			}
			fmt.Fprintf(stderr, "fanoutd tail: %v\n", err)
			return 1
		}
		for _, line := range bytes.Split(msg, []byte{'\n'}) {
			if *raw {
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
