package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/fanoutd/fanoutd/internal/daemon"
)

// historyCmd is `fanoutd history import [--venue V] [--config FILE]
// CAPTURE…`: each capture is checked in to the configured claim check as
// a claim of its own and added to the history index, so the routes of
// any node on the same stores serve it. Exit 2 for bad usage or
// configuration; 1 when a capture could not be checked in (the others
// still are).
func historyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func() int {
		fmt.Fprintln(stderr, "usage: fanoutd history import [--venue V] [--config FILE] CAPTURE…")
		return 2
	}
	if len(args) == 0 || args[0] != "import" {
		return usage()
	}
	fs := flag.NewFlagSet("history import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration file (default fanoutd.yaml if present, else built-in defaults)")
	venueName := fs.String("venue", "", "the captures' venue, overriding their metadata (needed for Tardis.dev files)")
	var paths []string
	for rest := args[1:]; ; rest = fs.Args()[1:] { // flags may follow captures
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
	}
	if len(paths) == 0 {
		return usage()
	}
	cfg, err := loadCommandConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	node, err := daemon.OpenClaimNode(ctx, cfg.ClaimCheck)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	code := 0
	for _, p := range paths {
		e, err := daemon.IndexCapture(ctx, node, p, *venueName)
		if err != nil {
			fmt.Fprintf(stderr, "fanoutd: history import: %v\n", err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: %s connection %d, %d symbols, %s to %s, %d frames: %s\n", p, e.Venue, e.Connection,
			len(e.Symbols), e.First.Format(time.RFC3339Nano), e.Last.Format(time.RFC3339Nano), e.Frames, e.Claim)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := node.Close(cctx); err != nil {
		fmt.Fprintf(stderr, "fanoutd: history import: %v\n", err)
		code = 1
	}
	return code
}
