package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// LeadWait bounds how long a replay on an ingest (cluster.role ingest)
// waits to lead its venues before it starts the clock.
const LeadWait = 10 * time.Second

// DefaultGrace is how long a replay that ended keeps serving so the
// subscribers' writers flush what is queued (it stops as soon as every
// queue is empty); shutdown then flushes for shutdown_timeout as usual.
const DefaultGrace = 2 * time.Second

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// Sources are the captures, each with its Venue set. Required.
	Sources []replay.Source
	// Speed: 1 keeps the recorded pacing, N plays N times faster, 0 as fast
	// as possible.
	Speed float64
	// Loop plays the captures again when they end, until ctx is done.
	Loop bool
	// Wait starts the clock only once this many subscriptions were made.
	Wait int
	// Align plays captures recorded at different times together: each
	// venue's first record at the earliest first record of all
	// (replay.PlayerOptions.Align).
	Align bool
	// Grace: after the replay ends, keep serving at most this long for the
	// queues to drain. Defaults to DefaultGrace; negative means none.
	Grace time.Duration
	// Hold keeps serving after the replay ended, with the books as the
	// captures left them, until ctx is done (tests and the operator's page
	// read the final state); Grace is then not waited.
	Hold bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// decoderFor returns replay's NewDecoder: each venue's own decoder, built
// from the venue's configuration as the live adapter would be.
func decoderFor(cfg *config.Config, log *slog.Logger) func(string, venue.Sink) (venue.Decoder, error) {
	return func(name string, sink venue.Sink) (venue.Decoder, error) {
		reg, ok := venues.Lookup(name)
		i := slices.IndexFunc(cfg.Venues, func(v config.Venue) bool { return v.Name == name })
		if !ok || i < 0 {
			return nil, fmt.Errorf("unknown venue %q (want %s)", name, strings.Join(venues.Names(), ", "))
		}
		vc := cfg.Venues[i]
		return reg.NewDecoder(venue.Config{Symbols: vc.Symbols, Channels: vc.Channels, Depth: vc.Depth, Sink: sink, Logger: log}), nil
	}
}

// Export writes the captures' normalized events and notices to w, one JSON
// object per line, as fast as the process can go. cfg's venues must be the
// captures' (config.Config.ForCaptures). streams, if any, are stream
// names or patterns ('*' matches any run): only the raw streams they match
// are written, and the derived streams they name (a pattern whose channel
// is a derived channel, written out) are computed from their sources'
// events and written.
func Export(ctx context.Context, cfg *config.Config, srcs []replay.Source, w io.Writer, log *slog.Logger, streams ...string) (replay.Stats, error) {
	st, _, err := ExportStreams(ctx, cfg, srcs, w, log, streams...)
	return st, err
}

// ExportStreams is Export that also returns the patterns of streams that
// matched no stream of the captures (raw or derived), in their order.
func ExportStreams(ctx context.Context, cfg *config.Config, srcs []replay.Source, w io.Writer, log *slog.Logger, streams ...string) (replay.Stats, []string, error) {
	return exportRange(ctx, cfg, srcs, w, log, time.Time{}, time.Time{}, streams)
}

// exportRange is ExportStreams writing only what happened within [from,
// to) (replay.ExportSink.Window): the history routes' answer.
func exportRange(ctx context.Context, cfg *config.Config, srcs []replay.Source, w io.Writer, log *slog.Logger, from, to time.Time, streams []string) (replay.Stats, []string, error) {
	if log == nil {
		log = slog.Default()
	}
	sink := replay.NewExportSink(w)
	sink.Window(from, to)
	return exportTo(ctx, cfg, srcs, sink, log, streams, true, nil)
}

// exportTo plays srcs into sink (as exportRange) and flushes it. parallel
// decodes each source on its own goroutine (the same output): less wall
// time for an export, more CPU per event for one source. wrap, if set,
// wraps what the decoders emit to (history's pacing).
func exportTo(ctx context.Context, cfg *config.Config, srcs []replay.Source, sink *replay.ExportSink, log *slog.Logger, streams []string, parallel bool, wrap func(venue.Sink) venue.Sink) (replay.Stats, []string, error) {
	if log == nil {
		log = slog.Default()
	}
	var into venue.Sink = sink
	var tap *exportTap
	if len(streams) > 0 {
		tap = newExportTap(sink, streams)
		into = tap
	}
	if wrap != nil {
		into = wrap(into)
	}
	st, err := replay.Play(ctx, replay.PlayerOptions{
		NewDecoder: decoderFor(cfg, log),
		Sink:       func(string) (venue.Sink, error) { return into, nil },
		Parallel:   parallel,
	}, srcs)
	if ferr := sink.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("export: %w", ferr)
	}
	var none []string
	if tap != nil {
		none = tap.unmatched()
	}
	return st, none, err
}

// Replay serves the captures over the websocket API on ln: a daemon whose
// venues are replay adapters, fed by replay.Play through each venue's
// decoder. It returns when the replay ended and the queues drained (or
// Grace passed), or when ctx is done, after the daemon shut down; the
// error is the replay's or the server's. cfg's venues must be the
// captures' (config.Config.ForCaptures).
func Replay(ctx context.Context, cfg *config.Config, o ReplayOptions, ln net.Listener) error {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	adapters := map[string]*replayAdapter{}
	var regs []venues.Venue
	for _, vc := range cfg.Venues {
		regs = append(regs, venues.Venue{Name: vc.Name, New: func(c venue.Config) (venue.Adapter, error) {
			a := &replayAdapter{name: vc.Name, feed: c.Sink, cov: venue.NewCoverageTracker(vc.Name), clock: new(atomic.Int64)}
			adapters[vc.Name] = a
			return a, nil
		}})
	}
	var gate chan struct{}
	var onSubscribe func(venue.Stream)
	if o.Wait > 0 {
		gate = make(chan struct{})
		var n atomic.Int64
		onSubscribe = func(venue.Stream) {
			if n.Add(1) == int64(o.Wait) {
				log.Info("replay: subscriptions reached --wait; starting the clock", "wait", o.Wait)
				close(gate)
			}
		}
	}
	d, err := New(Options{Config: cfg, Logger: log, Venues: regs, OnSubscribe: onSubscribe, Speed: o.Speed})
	if err != nil {
		ln.Close()
		return err
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(runCtx, ln) }()
	if d.bus != nil && d.bus.ingest != nil {
		// A capture feeds a cluster as live venues do: the clock starts
		// once each venue has a leader — this ingest (its events would
		// otherwise not be published), or another one (this ingest is its
		// standby, and plays to keep its books) — or after LeadWait.
		gate = make(chan struct{})
		go func() {
			defer close(gate)
			deadline := time.Now().Add(LeadWait)
			for time.Now().Before(deadline) && runCtx.Err() == nil {
				all := true // every venue led, by this node or (a standby) by another
				for _, vr := range d.venues {
					if node, leading := d.bus.ingest.Leader(vr.cfg.Name); !leading && node == "" {
						all = false
					}
				}
				if all {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			log.Warn("replay: no leader known for every venue after LeadWait; playing anyway")
		}()
	}

	playCtx, stopPlay := context.WithCancel(ctx)
	defer stopPlay()
	played := make(chan error, 1)
	go func() {
		st, err := replay.Play(playCtx, replay.PlayerOptions{
			Speed: o.Speed, Loop: o.Loop, Start: gate, Align: o.Align, LiveLinks: true,
			NewDecoder: decoderFor(cfg, log),
			Sink:       func(name string) (venue.Sink, error) { return adapters[name], nil },
		}, o.Sources)
		if err == nil {
			log.Info("replay ended", "frames", st.Frames, "disconnects", st.Disconnects)
		}
		played <- err
	}()

	select {
	case err := <-played:
		var playErr error
		switch {
		case err == nil && o.Hold:
			select {
			case <-ctx.Done():
			case err := <-runErr: // the server failed
				return err
			}
		case err == nil:
			drain(ctx, d, o.Grace)
		case ctx.Err() != nil: // interrupted
		default:
			playErr = err
		}
		stopRun()
		if err := <-runErr; err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return errors.Join(playErr, err)
		}
		return playErr
	case err := <-runErr: // interrupted, or the server failed
		stopPlay()
		<-played
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return nil
	}
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
// Coverage is on the replay's clock (the capture's receive times): the
// link follows the replayed link_down and link_up notices.
type replayAdapter struct {
	name  string
	feed  venue.Sink
	cov   *venue.CoverageTracker
	clock *atomic.Int64 // the venue's replay clock: the newest receive time it played (Unix ns); a venue's own, as aligned captures recorded apart run on clocks apart
}

var (
	_ venue.Adapter = (*replayAdapter)(nil)
	_ venue.Sink    = (*replayAdapter)(nil)
)

func (a *replayAdapter) Venue() string { return a.name }

// Start marks the link up: a replay's link is up while it serves. Its
// since is zero (before the replay's clock starts) until a replayed
// link_down or link_up moves it.
func (a *replayAdapter) Start(context.Context) error {
	a.cov.SetLink(venue.LinkUp, time.Time{})
	return nil
}

func (a *replayAdapter) Stop(context.Context) error {
	a.cov.SetLink(venue.LinkDown, time.Now())
	return nil
}

// Subscribe does nothing: a capture holds what it holds.
func (a *replayAdapter) Subscribe(...string) error   { return nil }
func (a *replayAdapter) Unsubscribe(...string) error { return nil }

// Coverage is the venue's coverage with the replay's clock.
func (a *replayAdapter) Coverage() venue.Coverage {
	c := a.cov.Snapshot()
	if ns := a.clock.Load(); ns != 0 {
		c.Clock = time.Unix(0, ns).UTC()
	}
	return c
}

func (a *replayAdapter) Event(ev *venue.Event) {
	a.tick(ev.RecvTime)
	a.cov.Observe(ev.Stream, ev.RecvTime)
	a.feed.Event(ev)
}

// Notice passes n on; a replayed link_down or link_up of the whole venue
// (not one connection of several) moves the link's coverage.
func (a *replayAdapter) Notice(n notice.Notice) {
	a.tick(n.At)
	if _, partial := n.Details["streams"]; !partial {
		switch n.Kind {
		case notice.LinkDown:
			a.cov.SetLink(venue.LinkDown, n.At)
		case notice.LinkUp:
			a.cov.SetLink(venue.LinkUp, n.At)
		}
	}
	a.feed.Notice(n)
}

// tick advances the replay's clock to t. Play calls the sinks from one
// goroutine, in receive-time order.
func (a *replayAdapter) tick(t time.Time) {
	if ns := t.UnixNano(); ns > a.clock.Load() {
		a.clock.Store(ns)
	}
}
