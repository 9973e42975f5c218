package main

import (
	"flag"
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
	if code := askNode(fs, "drain", http.MethodPost, "http://127.0.0.1:8080/drainz", *timeout, stdout, stderr); code != 0 {
		return code
	}
	time.Sleep(*wait) // the command's job: hold the pod until the balancer has seen it leave
	return 0
}
