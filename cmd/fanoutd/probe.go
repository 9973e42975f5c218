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
	return askNode(fs, "probe", http.MethodGet, "http://127.0.0.1:8080/readyz", *timeout, stdout, stderr)
}

// askNode sends one request (method, to the URL argument of fs or def)
// for the command name, and prints the answer: 0 if it is 200, 1 if the
// node answered otherwise or not at all, 2 on bad usage.
func askNode(fs *flag.FlagSet, name, method, def string, timeout time.Duration, stdout, stderr io.Writer) int {
	url := def
	switch fs.NArg() {
	case 0:
	case 1:
		url = fs.Arg(0)
	default:
		fmt.Fprintf(stderr, "usage: fanoutd %s [flags] [URL]\n", name)
		fs.PrintDefaults()
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %s: %v\n", name, err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %s: %v\n", name, err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "fanoutd: %s: %s: %s: %s\n", name, url, resp.Status, body)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s", url, body)
	return 0
}
