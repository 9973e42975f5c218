package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// drainCmd is `fanoutd drain [--wait D] [--timeout D] [URL]`: POST URL
// (default the local /drainz), so the node answers /readyz 503 and
// refuses new websockets, then wait D before exiting, the time a load
// balancer takes to see the node leave (a Kubernetes preStop hook: the
// image has no shell and no sleep). Exit 0 once drained, 1 if the node
// did not answer 200, 2 on bad usage.
func drainCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	wait := fs.Duration("wait", 5*time.Second, "how long to wait after the node drains, before exiting")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the node's answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	url := "http://127.0.0.1:8080/drainz"
	switch fs.NArg() {
	case 0:
	case 1:
		url = fs.Arg(0)
	default:
		fmt.Fprintln(stderr, "usage: fanoutd drain [--wait D] [--timeout D] [URL]")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: drain: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: drain: %v\n", err)
		return 1
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "fanoutd: drain: %s: %s: %s\n", url, resp.Status, body)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s", url, body)
	time.Sleep(*wait)
	return 0
}
