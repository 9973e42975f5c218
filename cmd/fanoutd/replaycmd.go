package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
)

// DecoderConstructor builds one venue's decoder: the frame-level half of
// its adapter, which replay drives from a capture.
type DecoderConstructor func(venue.Config) venue.Decoder

// decoderOf turns a venue package's NewDecoder into a DecoderConstructor.
func decoderOf[D venue.Decoder](newDecoder func(venue.Config) D) DecoderConstructor {
	return func(c venue.Config) venue.Decoder { return newDecoder(c) }
}

// defaultGrace is how long a replay that ended keeps serving so the
// subscribers' writers flush what is queued (it stops as soon as every
// queue is empty); shutdown then flushes for shutdown_timeout as usual.
const defaultGrace = 2 * time.Second

// replayOpts are the parsed flags of fanoutd replay.
type replayOpts struct {
	venue      string
	speed      float64 // 0: max
	loop       bool
	wait       int
	cfgPath    string
	listen     string
	insecure   bool
	export     string
	cpuprofile string
	grace      time.Duration
	captures   []string
	venues     map[string][]string // venue → symbols from the captures' metadata
	byCapture  []string            // each capture's venue
	srcs       []replay.Source     // each capture, opened from a file or a claim
}

// parseSpeed accepts 1, N (a positive number) or max.
func parseSpeed(s string) (float64, error) {
	if s == "max" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("--speed: %q is not 1, a positive number N, or max", s)
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
		fmt.Fprintln(stderr, "usage: fanoutd replay [--venue V] [--speed 1|N|max] [--loop] [--wait N] [--config FILE] [--listen ADDR] [--insecure] [--grace D] CAPTURE…")
		fmt.Fprintln(stderr, "       fanoutd replay --export FILE|- [--venue V] [--config FILE] [--cpuprofile FILE] CAPTURE…")
		fs.PrintDefaults()
	}
	var o replayOpts
	fs.StringVar(&o.venue, "venue", "", "the captures' venue, overriding their metadata")
	speed := fs.String("speed", "1", "pace: 1 keeps the recorded pacing, N plays N times faster, max as fast as possible")
	fs.BoolVar(&o.loop, "loop", false, "play the captures again when they end, until interrupted")
	fs.IntVar(&o.wait, "wait", 0, "start the clock only once N subscriptions were made")
	fs.StringVar(&o.cfgPath, "config", "", "configuration file (default fanoutd.yaml if present, else built-in defaults)")
	fs.StringVar(&o.listen, "listen", "", "address to listen on; overrides the config's listen and FANOUTD_LISTEN")
	fs.BoolVar(&o.insecure, "insecure", false, "allow a non-loopback listen address without tokens")
	fs.StringVar(&o.export, "export", "", "write the normalized events and notices to FILE (- for stdout) as fast as possible, without serving")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the replay to FILE")
	fs.DurationVar(&o.grace, "grace", defaultGrace, "after the replay ends, keep serving at most this long for the queues to drain")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
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
	o.captures = fs.Args()
	if len(o.captures) == 0 {
		fs.Usage()
		return 2
	}
	if o.export != "" && (o.loop || o.wait > 0) {
		fmt.Fprintln(stderr, "fanoutd: replay: --export plays once, as fast as possible: --loop and --wait do not apply")
		return 2
	}
	if o.venue != "" && venueDecoders[o.venue] == nil {
		fmt.Fprintf(stderr, "fanoutd: replay: --venue: unknown venue %q (want %s)\n", o.venue, strings.Join(venueNames, ", "))
		return 2
	}
	cfg, err := loadCommandConfig(o.cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	// Every capture must open and name a known venue before anything starts.
	// An argument that is a claim reference (claim:<tenant>/<id>, or a
	// /v1/claims/… path or URL) is a capture checked in to the claim check.
	o.venues = map[string][]string{}
	for _, path := range o.captures {
		src := replay.FileSource(path, "")
		if ref, ok := claimRef(path); ok {
			if src, err = claimSource(ctx, cfg.ClaimCheck, ref); err != nil {
				fmt.Fprintf(stderr, "fanoutd: %v\n", err)
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
		case venueDecoders[v] == nil:
			fmt.Fprintf(stderr, "fanoutd: replay: %s: unknown venue %q (want %s, or pass --venue)\n", path, v, strings.Join(venueNames, ", "))
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
	if cfg.Venues, err = replayVenues(cfg.Venues, o.venues); err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
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
	var level slog.Level
	level.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if o.export != "" {
		return replayExport(ctx, &o, cfg, stdout, stderr, log)
	}
	return replayServe(ctx, &o, cfg, stderr, log, ready)
}

// replayVenues is the venue list of a replay: each venue found in the
// captures, with its configured settings (queue bounds, channels, depth)
// if the configuration has it, else the defaults. The captures' symbols
// are its symbols.
func replayVenues(configured []VenueConfig, found map[string][]string) ([]VenueConfig, error) {
	var out []VenueConfig
	for _, name := range venueNames {
		syms, ok := found[name]
		if !ok {
			continue
		}
		i := slices.IndexFunc(configured, func(v VenueConfig) bool { return v.Name == name })
		var vc VenueConfig
		if i >= 0 {
			vc = configured[i]
		} else {
			def, err := resolveVenues(map[string]venueConfig{name: {}})
			if err != nil {
				return nil, err
			}
			vc = def[0]
		}
		vc.Symbols = syms
		out = append(out, vc)
	}
	return out, nil
}

// decoderFor returns replay's NewDecoder: each venue's own decoder, built
// from the venue's configuration as the live adapter would be.
func decoderFor(cfg *Config, log *slog.Logger) func(string, venue.Sink) (venue.Decoder, error) {
	return func(name string, sink venue.Sink) (venue.Decoder, error) {
		nd := venueDecoders[name]
		i := slices.IndexFunc(cfg.Venues, func(v VenueConfig) bool { return v.Name == name })
		if nd == nil || i < 0 {
			return nil, fmt.Errorf("unknown venue %q (want %s)", name, strings.Join(venueNames, ", "))
		}
		vc := cfg.Venues[i]
		return nd(venue.Config{Symbols: vc.Symbols, Channels: vc.Channels, Depth: vc.Depth, Sink: sink, Logger: log}), nil
	}
}

func sources(o *replayOpts) []replay.Source { return o.srcs }

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

// replayExport writes the captures' normalized events and notices, one
// JSON object per line, as fast as the process can go.
func replayExport(ctx context.Context, o *replayOpts, cfg *Config, stdout, stderr io.Writer, log *slog.Logger) int {
	w := stdout
	if o.export != "-" {
		f, err := os.Create(o.export)
		if err != nil {
			fmt.Fprintf(stderr, "fanoutd: replay: %v\n", err)
			return 1
		}
		defer f.Close()
		w = f
	}
	sink := replay.NewExportSink(w)
	start := time.Now()
	st, err := replay.Play(ctx, replay.PlayerOptions{
		NewDecoder: decoderFor(cfg, log),
		Sink:       func(string) (venue.Sink, error) { return sink, nil },
	}, sources(o))
	ferr := sink.Flush()
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 1
	}
	if c, ok := w.(io.Closer); ok && o.export != "-" {
		ferr = errors.Join(ferr, c.Close())
	}
	if ferr != nil {
		fmt.Fprintf(stderr, "fanoutd: replay: --export: %v\n", ferr)
		return 1
	}
	el := time.Since(start)
	fmt.Fprintf(stderr, "fanoutd: replayed %d frames (%d disconnects) in %v: %.0f frames/s\n",
		st.Frames, st.Disconnects, el.Round(time.Millisecond), float64(st.Frames)/el.Seconds())
	return 0
}

// replayServe serves the captures over the websocket API: a daemon whose
// venues are replayAdapters, fed by replay.Play through each venue's
// decoder.
func replayServe(ctx context.Context, o *replayOpts, cfg *Config, stderr io.Writer, log *slog.Logger, ready chan<- string) int {
	if o.listen != "" {
		cfg.Listen = o.listen
	}
	if !loopback(cfg.Listen) && len(cfg.Tokens) == 0 && !o.insecure {
		fmt.Fprintf(stderr, "fanoutd: listen: %q is not a loopback address and no tokens are configured (configure tokens, or pass --insecure)\n", cfg.Listen)
		return 2
	}
	adapters := map[string]*replayAdapter{}
	ctors := map[string]Constructor{}
	for _, vc := range cfg.Venues {
		ctors[vc.Name] = func(c venue.Config) (venue.Adapter, error) {
			a := &replayAdapter{name: vc.Name, feed: c.Sink, cov: venue.NewCoverageTracker(vc.Name)}
			adapters[vc.Name] = a
			return a, nil
		}
	}
	d, err := NewDaemon(cfg, ctors, log)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	var gate chan struct{}
	if o.wait > 0 {
		gate = make(chan struct{})
		var n atomic.Int64
		d.subscribed = func(venue.Stream) {
			if n.Add(1) == int64(o.wait) {
				log.Info("replay: subscriptions reached --wait; starting the clock", "wait", o.wait)
				close(gate)
			}
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: listen %s: %v\n", cfg.Listen, err)
		return 1
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(runCtx, ln) }()

	playCtx, stopPlay := context.WithCancel(ctx)
	defer stopPlay()
	played := make(chan error, 1)
	go func() {
		st, err := replay.Play(playCtx, replay.PlayerOptions{
			Speed: o.speed, Loop: o.loop, Start: gate,
			NewDecoder: decoderFor(cfg, log),
			Sink:       func(name string) (venue.Sink, error) { return adapters[name], nil },
		}, sources(o))
		if err == nil {
			log.Info("replay ended", "frames", st.Frames, "disconnects", st.Disconnects)
		}
		played <- err
	}()

	code := 0
	select {
	case err := <-played:
		switch {
		case err == nil:
			drain(ctx, d, o.grace)
		case ctx.Err() != nil: // interrupted
		default:
			fmt.Fprintf(stderr, "fanoutd: %v\n", err)
			code = 1
		}
		stopRun()
		if err := <-runErr; err != nil && !errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(stderr, "fanoutd: %v\n", err)
			code = 1
		}
	case err := <-runErr: // interrupted, or the server failed
		stopPlay()
		<-played
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(stderr, "fanoutd: %v\n", err)
			code = 1
		}
	}
	return code
}

// drain waits until every attached subscriber's queue is empty, at most
// grace, so the end of the replay reaches the subscribers that read.
func drain(ctx context.Context, d *Daemon, grace time.Duration) {
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		empty := true
		for _, s := range d.hub.Registry().All() {
			if c := s.Resolve(); c != nil && c.Len() > 0 {
				empty = false
				break
			}
		}
		if empty {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// replayAdapter stands in for a venue's adapter in a replay: there is no
// link to run; replay.Play drives the venue's decoder, whose sink is this
// adapter, which keeps coverage and passes everything on to the feed.
type replayAdapter struct {
	name string
	feed venue.Sink
	cov  *venue.CoverageTracker
}

var (
	_ venue.Adapter = (*replayAdapter)(nil)
	_ venue.Sink    = (*replayAdapter)(nil)
)

func (a *replayAdapter) Venue() string { return a.name }

// Start marks the link up: a replay's link is up while it serves.
func (a *replayAdapter) Start(context.Context) error {
	a.cov.SetLink(venue.LinkUp, time.Now())
	return nil
}

func (a *replayAdapter) Stop(context.Context) error {
	a.cov.SetLink(venue.LinkDown, time.Now())
	return nil
}

// Subscribe does nothing: a capture holds what it holds.
func (a *replayAdapter) Subscribe(...string) error   { return nil }
func (a *replayAdapter) Unsubscribe(...string) error { return nil }
func (a *replayAdapter) Coverage() venue.Coverage    { return a.cov.Snapshot() }

func (a *replayAdapter) Event(ev *venue.Event) {
	a.cov.Observe(ev.Stream, ev.RecvTime)
	a.feed.Event(ev)
}

func (a *replayAdapter) Notice(n notice.Notice) { a.feed.Notice(n) }
