// Package daemontest starts a daemon for a test in a few lines: on a YAML
// configuration, with the venues the test chooses, on 127.0.0.1:0, stopped
// when the test ends.
package daemontest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"

	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
)

// Running is a daemon serving on Addr.
type Running struct {
	*daemon.Daemon
	Addr string // host:port
}

// URL returns the daemon's base URL for scheme ("http" or "ws").
func (r *Running) URL(scheme string) string { return scheme + "://" + r.Addr }

// Start parses yml (the claim store defaults to a temporary directory),
// builds a daemon with o (Config and, unless set, Logger are filled in)
// and runs it until the test ends. Logs go to the test log with -v.
func Start(t testing.TB, yml string, o daemon.Options) *Running {
	t.Helper()
	cfg, err := config.Parse([]byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := cfg.ClaimCheck.Stores; len(st) == 1 && st[0].Kind == "dir" && st[0].Path == config.DefaultClaimDir {
		st[0].Path = t.TempDir()
	}
	o.Config = cfg
	if o.Logger == nil {
		var w io.Writer = io.Discard
		if testing.Verbose() {
			w = os.Stderr
		}
		o.Logger = slog.New(slog.NewTextHandler(w, nil))
	}
	d, err := daemon.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	return &Running{Daemon: d, Addr: ln.Addr().String()}
}
