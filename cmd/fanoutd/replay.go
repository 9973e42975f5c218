package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fanoutd/fanoutd/internal/cli"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// replayOpts are the parsed flags of fanoutd replay.
type replayOpts struct {
	venue      string
	speed      float64 // 0: max
	loop       bool
	wait       int
	align      bool
	cfgPath    string
	listen     string
	insecure   bool
	export     string
	cpuprofile string
	streams    []string // --streams: names or patterns, derived ones included
	grace      time.Duration
	captures   []string
	venues     map[string][]string // venue → symbols from the captures' metadata
	byCapture  []string            // each capture's venue
	srcs       []replay.Source     // each capture, opened from a file or a claim
}

// parseSpeed accepts 1, N (a finite number from replay.MinSpeed) or max.
func parseSpeed(s string) (float64, error) {
	if s == "max" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("--speed: %q is not 1, a positive number N, or max", s)
	}
	if f < replay.MinSpeed {
		return 0, fmt.Errorf("--speed: %q is below the slowest pace, %g (a thousand times slower than recorded)", s, replay.MinSpeed)
	}
	return f, nil
}

// replayCmd is fanoutd replay: serve captures over the websocket API as if
// the venues were live, or --export them as normalized JSON lines. ready,
// if not nil, receives the listening address (tests).
func replayCmd(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fanoutd replay [--venue V] [--speed 1|N|max] [--loop] [--wait N] [--align=false] [--config FILE] [--listen ADDR] [--insecure] [--grace D] CAPTURE…")
		fmt.Fprintln(stderr, "       fanoutd replay --role ingest [--nats URL] [--embedded-nats] [--speed …] [--loop] [--config FILE] [--listen ADDR] CAPTURE…")
		fmt.Fprintln(stderr, "       fanoutd replay --export FILE|- [--streams S[,S…]]… [--venue V] [--config FILE] [--cpuprofile FILE] CAPTURE…")
		fmt.Fprintln(stderr, "Flags may come before or after the captures; --streams may be repeated and takes several values (--streams A B CAPTURE…).")
		fs.PrintDefaults()
	}
	var o replayOpts
	fs.StringVar(&o.venue, "venue", "", "the captures' venue, overriding their metadata")
	speed := fs.String("speed", "1", "pace: 1 keeps the recorded pacing, N plays N times faster (N from 0.001), max as fast as possible")
	fs.BoolVar(&o.loop, "loop", false, "play the captures again when they end, until interrupted")
	fs.IntVar(&o.wait, "wait", 1, "start the clock only once N subscriptions were made, so that the first subscribers see the captures from their start; 0 starts it at once (the default with --role ingest)")
	fs.BoolVar(&o.align, "align", true, "play captures recorded at different times together: each venue's first frame at the same moment (a venue's own captures keep their relative times); --align=false plays them by their absolute receive times. Not with --export, which merges by receive time")
	fs.StringVar(&o.cfgPath, "config", "", "configuration file (default fanoutd.yaml if present, else built-in defaults)")
	fs.StringVar(&o.listen, "listen", "", "address to listen on; overrides the config's listen and FANOUTD_LISTEN")
	fs.BoolVar(&o.insecure, "insecure", false, "allow a non-loopback listen address without tokens")
	fs.StringVar(&o.export, "export", "", "write the normalized events and notices to FILE (- for stdout) as fast as possible, without serving")
	var streams cli.ListFlag
	cli.Several(fs, &streams, "streams", "with --export: only these streams, names or patterns ('*' matches any run), derived ones included (binance:book_snapshot_25_1s:*); --streams A,B, --streams A --streams B and --streams A B all give both (a capture after them ends the list)", notCapture)
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the replay to FILE")
	fs.DurationVar(&o.grace, "grace", daemon.DefaultGrace, "after the replay ends, keep serving at most this long for the queues to drain")
	cf := clusterFlags(fs)
	captures, err := cli.ParseArgs(fs, args)
	if err != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.speed, err = parseSpeed(*speed); err != nil {
		fmt.Fprintf(stderr, "fanoutd: replay: %v\n", err)
		return 2
	}
	if o.wait < 0 {
		fmt.Fprintf(stderr, "fanoutd: replay: --wait: %d is negative\n", o.wait)
		return 2
	}
	if o.grace < 0 {
		fmt.Fprintf(stderr, "fanoutd: replay: --grace: %v is negative\n", o.grace)
		return 2
	}
	if len(streams) > 0 {
		if o.export == "" {
			fmt.Fprintln(stderr, "fanoutd: replay: --streams applies to --export (a served replay takes subscriptions)")
			return 2
		}
		for _, p := range streams {
			if err := checkStreamPattern(p); err != nil {
				fmt.Fprintf(stderr, "fanoutd: replay: --streams: %q %v\n", p, err)
				return 2
			}
			o.streams = append(o.streams, p)
		}
	}
	o.captures = captures
	if len(o.captures) == 0 {
		fs.Usage()
		return 2
	}
	if o.export != "" && (o.loop || set["wait"] && o.wait > 0 || set["align"] && o.align) {
		fmt.Fprintln(stderr, "fanoutd: replay: --export plays once, as fast as possible, by receive time: --loop, --wait and --align do not apply")
		return 2
	}
	if _, ok := venues.Lookup(o.venue); o.venue != "" && !ok {
		fmt.Fprintf(stderr, "fanoutd: replay: --venue: unknown venue %q (want %s)\n", o.venue, strings.Join(venues.Names(), ", "))
		return 2
	}
	cfg, err := loadCommandConfig(o.cfgPath)
	if err != nil {
		printErr(stderr, err, "")
		return 2
	}
	if err := cf.apply(fs, cfg); err != nil {
		fmt.Fprintf(stderr, "fanoutd: replay: %v\n", err)
		return 2
	}
	if !set["wait"] && (o.export != "" || cfg.Cluster.Role == config.RoleIngest) {
		o.wait = 0 // nothing to wait for: an export, or an ingest (its subscribers are on the edges)
	}
	switch {
	case cfg.Cluster.Role == config.RoleEdge:
		fmt.Fprintln(stderr, "fanoutd: replay: --role edge: a replay feeds a cluster as its ingest (--role ingest); edges are started with serve")
		return 2
	case cfg.Cluster.Role == config.RoleIngest && o.wait > 0:
		fmt.Fprintln(stderr, "fanoutd: replay: --wait counts subscriptions, which an ingest does not take: start the edges and their subscribers first")
		return 2
	case cfg.Cluster.Role == config.RoleIngest && o.export != "":
		fmt.Fprintln(stderr, "fanoutd: replay: --export writes a file; --role ingest serves a cluster: choose one")
		return 2
	}
	// Every capture must open and name a known venue before anything starts.
	// An argument that is a claim reference (claim:<tenant>/<id>, or a
	// /v1/claims/… path or URL) is a capture checked in to the claim check.
	o.venues = map[string][]string{}
	for _, path := range o.captures {
		src := replay.FileSource(path, "")
		if ref, ok := claimRef(path); ok {
			if src, err = daemon.ClaimSource(ctx, cfg.ClaimCheck, ref); err != nil {
				printErr(stderr, err, "")
				return 2
			}
		}
		f, err := src.Open()
		if err != nil {
			fmt.Fprintf(stderr, "fanoutd: replay: %v\n", err)
			return 2
		}
		meta := f.Meta
		f.Close()
		v := o.venue
		if v == "" {
			v = meta.Venue
		}
		switch {
		case v == "":
			fmt.Fprintf(stderr, "fanoutd: replay: %s: the capture does not say which venue it is from; pass --venue\n", path)
			return 2
		case !known(v):
			fmt.Fprintf(stderr, "fanoutd: replay: %s: unknown venue %q (want %s, or pass --venue)\n", path, v, strings.Join(venues.Names(), ", "))
			return 2
		}
		o.byCapture = append(o.byCapture, v)
		src.Venue = v
		o.srcs = append(o.srcs, src)
		for _, s := range meta.Subscriptions {
			if !slices.Contains(o.venues[v], s) {
				o.venues[v] = append(o.venues[v], s)
			}
		}
		if o.venues[v] == nil {
			o.venues[v] = []string{}
		}
	}
	cfg.Record.Enabled = false // a replay is not recorded again
	if err = cfg.ForCaptures(o.venues); err != nil {
		printErr(stderr, err, "")
		return 2
	}
	if o.cpuprofile != "" {
		pf, err := os.Create(o.cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "fanoutd: replay: %v\n", err)
			return 1
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintf(stderr, "fanoutd: replay: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	log := logger(cfg, stderr)
	if o.export != "" {
		return export(ctx, &o, cfg, stdout, stderr, log)
	}
	if o.listen != "" {
		cfg.Listen = o.listen
	}
	ln, code := openListener(cfg, o.insecure, stderr)
	if ln == nil {
		return code
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	grace := o.grace
	if grace == 0 {
		grace = -1 // ReplayOptions' zero is the default
	}
	err = daemon.Replay(ctx, cfg, daemon.ReplayOptions{Sources: o.srcs, Speed: o.speed, Loop: o.loop, Wait: o.wait,
		Align: o.align, Grace: grace, Logger: log}, ln)
	if err != nil {
		printErr(stderr, err, "")
		return 1
	}
	return 0
}

// checkStreamPattern validates a --streams value: venue:channel:symbol,
// where '*' matches any run; a channel without '*' must be a channel, raw
// or derived.
func checkStreamPattern(p string) error {
	parts := strings.SplitN(p, ":", 3)
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return fmt.Errorf("is not venue:channel:symbol")
	}
	if !strings.Contains(parts[1], "*") {
		if _, err := venue.ParseChannel(parts[1]); err != nil {
			return err
		}
	}
	return nil
}

func known(name string) bool { _, ok := venues.Lookup(name); return ok }

// export is replay --export: the captures' events and notices to a file or
// stdout, with a one-line summary.
func export(ctx context.Context, o *replayOpts, cfg *config.Config, stdout, stderr io.Writer, log *slog.Logger) int {
	w := stdout
	var f *os.File
	if o.export != "-" {
		var err error
		if f, err = os.Create(o.export); err != nil {
			fmt.Fprintf(stderr, "fanoutd: replay: %v\n", err)
			return 1
		}
		defer f.Close()
		w = f
	}
	start := time.Now()
	st, none, err := daemon.ExportStreams(ctx, cfg, o.srcs, w, log, o.streams...)
	if err == nil && f != nil {
		err = f.Close()
	}
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: replay: %v\n", err)
		return 1
	}
	for _, p := range none {
		fmt.Fprintf(stderr, "fanoutd: replay: --streams: %q matches no stream in the captures (they hold %s)\n", p, strings.Join(captureStreams(o), ", "))
	}
	el := time.Since(start)
	fmt.Fprintf(stderr, "fanoutd: replayed %d frames (%d disconnects) in %v: %.0f frames/s\n",
		st.Frames, st.Disconnects, el.Round(time.Millisecond), float64(st.Frames)/el.Seconds())
	return 0
}

// notCapture reports whether an argument after --streams' value is one
// more stream rather than the first capture: not a claim, not a .jsonl or
// .jsonl.gz, not a file there is.
func notCapture(arg string) bool {
	if _, ok := claimRef(arg); ok || strings.HasSuffix(arg, ".jsonl") || strings.HasSuffix(arg, ".jsonl.gz") {
		return false
	}
	_, err := os.Stat(arg)
	return err != nil
}

// claimRef reports whether a replay argument names a claim rather than a
// file, and returns the reference claimcheck.ParseRef takes.
func claimRef(arg string) (string, bool) {
	switch {
	case strings.HasPrefix(arg, "claim:"):
		return strings.TrimPrefix(arg, "claim:"), true
	case strings.HasPrefix(arg, "/v1/claims/"), strings.HasPrefix(arg, "http://"), strings.HasPrefix(arg, "https://"):
		return arg, true
	}
	return "", false
}

// captureStreams names what the captures' metadata says they subscribed,
// as venue:*:symbol patterns.
func captureStreams(o *replayOpts) []string {
	var out []string
	for v, syms := range o.venues {
		for _, s := range syms {
			out = append(out, v+":*:"+s)
		}
	}
	slices.Sort(out)
	return out
}
