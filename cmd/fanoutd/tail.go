package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/fanoutd/fanoutd/internal/tail"
)

// tailCmd is `fanoutd tail`: subscribe to streams and print what arrives.
func tailCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o tail.Options
	urls := fs.String("url", "ws://127.0.0.1:8080/v1/stream", "websocket URL of the daemon; several, comma-separated, are tried in turn")
	fs.StringVar(&o.Token, "token", "", "bearer token (default $FANOUTD_TOKEN)")
	fs.StringVar(&o.Name, "name", "", "attach as this named subscriber")
	fs.BoolVar(&o.Raw, "raw", false, "print the JSON objects as received")
	fs.BoolVar(&o.Reconnect, "reconnect", false, "reconnect (and reattach a --name) when the connection ends, instead of exiting")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.Streams = fs.Args(); len(o.Streams) == 0 {
		fmt.Fprintln(stderr, "usage: fanoutd tail [--url URL[,URL…]] [--token T] [--name N] [--raw] [--reconnect] STREAM…")
		return 2
	}
	if o.Token == "" {
		o.Token = os.Getenv("FANOUTD_TOKEN")
	}
	for _, u := range strings.Split(*urls, ",") {
		if _, err := url.Parse(u); err != nil {
			fmt.Fprintf(stderr, "fanoutd tail: --url: %v\n", err)
			return 2
		}
		o.URLs = append(o.URLs, u)
	}
	for _, s := range o.Streams {
		if strings.HasPrefix(s, "-") {
			fmt.Fprintf(stderr, "fanoutd tail: %q: flags go before the streams\n", s)
			return 2
		}
	}
	if err := tail.Run(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "fanoutd tail: %v\n", err)
		return 1
	}
	return 0
}
