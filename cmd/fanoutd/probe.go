package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// probeCmd is `fanoutd probe [--timeout D] [URL]`: exit 0 if GET URL
// answers 200, else 1. The container image has no shell and no curl, so
// its health checks run this. URL defaults to the local /readyz.
func probeCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	url := "http://127.0.0.1:8080/readyz"
	switch fs.NArg() {
	case 0:
	case 1:
		url = fs.Arg(0)
	default:
		fmt.Fprintln(stderr, "usage: fanoutd probe [--timeout D] [URL]")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: probe: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: probe: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "fanoutd: probe: %s: %s: %s\n", url, resp.Status, body)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s", url, body)
	return 0
}
