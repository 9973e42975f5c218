package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanoutd/fanoutd/internal/cli"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
	"golang.org/x/term"
)

// recordSummary is one progress line.
func recordSummary(st replay.RecorderStats, fps float64) string {
	return fmt.Sprintf("%d segments, %d frames, %s, %.0f frames/s, %d dropped", st.Segments, st.Frames, humanBytes(st.Bytes), fps, st.Dropped)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// recordStreams turns --streams into the adapter's symbols and channels:
// venue:channel:symbol, or a bare symbol meaning every channel. An
// adapter subscribes every symbol on every channel it is given, so the
// channels are the union of those named.
func recordStreams(venueName string, streams []string) (symbols []string, channels []venue.Channel, err error) {
	for _, s := range streams {
		for _, s := range strings.Split(s, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			var sym string
			var chs []venue.Channel
			if strings.Contains(s, ":") {
				st, err := venue.ParseStream(s)
				if err != nil {
					return nil, nil, fmt.Errorf("--streams: %q: %v", s, err)
				}
				if st.Venue() != venueName {
					return nil, nil, fmt.Errorf("--streams: %q is not a stream of %s", s, venueName)
				}
				sym, chs = st.Symbol(), []venue.Channel{st.Channel()}
			} else {
				if _, err := venue.ParseStream(venueName + ":trades:" + s); err != nil {
					return nil, nil, fmt.Errorf("--streams: %q is not a symbol", s)
				}
				sym, chs = s, []venue.Channel{venue.Level2, venue.Trades, venue.Ticker}
			}
			if !slices.Contains(symbols, sym) {
				symbols = append(symbols, sym)
			}
			for _, c := range chs {
				if !slices.Contains(channels, c) {
					channels = append(channels, c)
				}
			}
		}
	}
	if len(symbols) == 0 {
		return nil, nil, errors.New("--streams: no stream given")
	}
	slices.Sort(channels)
	return symbols, channels, nil
}

// countingSink counts what the adapter emits; record serves nobody.
type countingSink struct {
	events  atomic.Int64
	notices atomic.Int64
	log     *slog.Logger
}

func (s *countingSink) Event(*venue.Event) { s.events.Add(1) }

func (s *countingSink) Notice(n notice.Notice) {
	s.notices.Add(1)
	if n.Severity >= notice.Warning {
		s.log.Warn("venue notice", "kind", n.Kind.String(), "stream", n.Stream, "message", n.Message)
	}
}

// recordProgressEvery is how often record prints a plain progress line
// when stderr is not a terminal (on a terminal one line is rewritten every
// second).
var recordProgressEvery = 10 * time.Second

// recordCmd is fanoutd record: one venue's adapter with a Recorder and no
// subscribers, until ctx is done or --duration passed. The recorder is
// always closed cleanly (flushed, closed, fsynced).
func recordCmd(ctx context.Context, args []string, stdout, stderr io.Writer, built []venues.Venue) int {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fanoutd record --venue V --streams S[,S…] [--streams S…] --out DIR [--duration D] [--config FILE]")
		fs.PrintDefaults()
	}
	venueName := fs.String("venue", "", "the venue to record (required)")
	var streams cli.ListFlag
	cli.Several(fs, &streams, "streams", "streams to record: venue:channel:symbol, or bare symbols (every channel); --streams A,B, --streams A --streams B and --streams A B all give both", nil)
	out := fs.String("out", "", "directory for the capture segments (default: the config's record.dir)")
	dur := fs.Duration("duration", 0, "stop after this long (default: until SIGINT/SIGTERM)")
	cfgPath := fs.String("config", "", "configuration file: the venue's endpoints and depth, record.max_bytes/max_age/queue")
	extra, err := cli.ParseArgs(fs, args)
	if err != nil {
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "fanoutd: record: "+format+"\n", a...)
		return 2
	}
	switch {
	case len(extra) > 0:
		return usage("unexpected argument %q", extra[0])
	case *venueName == "":
		return usage("--venue is required (%s)", strings.Join(venues.Names(), ", "))
	case !slices.ContainsFunc(built, func(v venues.Venue) bool { return v.Name == *venueName }):
		return usage("--venue: unknown venue %q (want %s)", *venueName, strings.Join(venues.Names(), ", "))
	case *dur < 0:
		return usage("--duration: %v is negative", *dur)
	}
	symbols, channels, err := recordStreams(*venueName, streams)
	if err != nil {
		return usage("%v", err)
	}
	cfg, err := config.Load(*cfgPath, os.Getenv)
	if err != nil {
		printErr(stderr, err, "")
		return 2
	}
	if err := cfg.ForCaptures(map[string][]string{*venueName: symbols}); err != nil {
		printErr(stderr, err, "")
		return 2
	}
	vc := cfg.Venues[0]
	reg := built[slices.IndexFunc(built, func(v venues.Venue) bool { return v.Name == *venueName })]
	rc := cfg.Record
	if *out != "" {
		rc.Dir = *out
	}
	log := logger(cfg, stderr)
	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	var pmu sync.Mutex // serialises progress output
	line := func(s string) {
		pmu.Lock()
		defer pmu.Unlock()
		if tty {
			fmt.Fprintf(stderr, "\r\033[K%s", s)
		} else {
			fmt.Fprintln(stderr, s)
		}
	}
	endpoint := vc.WSURL
	if endpoint == "" {
		endpoint = reg.WSURL
	}
	rec, err := replay.NewRecorder(replay.RecorderOptions{
		Dir: rc.Dir, MaxBytes: rc.MaxBytes, MaxAge: rc.MaxAge, Queue: rc.Queue, Version: daemon.Version,
		Meta: func(string) replay.Meta { return replay.Meta{Endpoint: endpoint, Subscriptions: symbols} },
		OnSegment: func(s replay.Segment) {
			line(fmt.Sprintf("segment %s: %d frames, %s", s.Path, s.Frames, humanBytes(s.Bytes)))
			if tty {
				fmt.Fprintln(stderr)
			}
		},
		OnError: func(v string, err error) { log.Warn("recording failed", "venue", v, "err", err) },
	})
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: record: %v\n", err)
		return 1
	}
	sink := &countingSink{log: log}
	a, err := reg.New(venue.Config{WSURL: vc.WSURL, RESTURL: vc.RESTURL, Symbols: symbols, Channels: channels,
		Depth: vc.Depth, Sink: sink, Recorder: rec, Logger: log})
	if err == nil {
		err = a.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		rec.Close(context.Background())
		fmt.Fprintf(stderr, "fanoutd: record: %s: %v\n", vc.Name, err)
		return 1
	}
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	fmt.Fprintf(stderr, "fanoutd: recording %s %v on %v to %s\n", vc.Name, symbols, channels, rc.Dir)
	every := time.Second
	if !tty {
		every = recordProgressEvery
	}
	tick := time.NewTicker(every)
	prev, prevAt := int64(0), time.Now()
	progress := func() {
		st := rec.Stats()
		now := time.Now()
		fps := float64(st.Frames-prev) / now.Sub(prevAt).Seconds()
		prev, prevAt = st.Frames, now
		line(recordSummary(st, fps))
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			progress()
		}
	}
	tick.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := 0
	if err := a.Stop(sctx); err != nil {
		log.Warn("record: venue stop", "err", err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if err := rec.Close(cctx); err != nil {
		fmt.Fprintf(stderr, "\nfanoutd: record: closing the recording: %v\n", err)
		code = 1
	}
	progress()
	if tty {
		fmt.Fprintln(stderr)
	}
	return code
}
