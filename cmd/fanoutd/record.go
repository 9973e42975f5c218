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

	"golang.org/x/term"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/binance"
	"github.com/fanoutd/fanoutd/venues/bybit"
	"github.com/fanoutd/fanoutd/venues/coinbase"
	"github.com/fanoutd/fanoutd/venues/kraken"
	"github.com/fanoutd/fanoutd/venues/okx"
)

// recordConfig is the record: section as written. Sizes are kept raw so a
// bad value is reported with its key and the value.
type recordConfig struct {
	Enabled  *bool  `yaml:"enabled"`
	Dir      string `yaml:"dir"`
	MaxBytes any    `yaml:"max_bytes"`
	MaxAge   string `yaml:"max_age"`
	Queue    any    `yaml:"queue"`
	CheckIn  *bool  `yaml:"check_in"`
}

// RecordConfig is the resolved record: section.
type RecordConfig struct {
	// Enabled makes serve record every venue's raw frames. Defaults to
	// false.
	Enabled bool
	// Dir is where segments go, one sub-directory per venue. Defaults to
	// ./data/captures.
	Dir string
	// MaxBytes rotates a segment after this many uncompressed bytes.
	// Defaults to 256 MiB.
	MaxBytes int64
	// MaxAge rotates a segment this long after it was opened. Defaults to
	// 1h.
	MaxAge time.Duration
	// Queue is how many frames may wait for the disk before frames are
	// dropped (and reported). Defaults to 65536.
	Queue int
	// CheckIn checks every closed segment in to the claim check (a claim
	// of its own, replayable with `fanoutd replay claim:<tenant>/<id>`).
	// Defaults to false.
	CheckIn bool
}

// Record defaults.
const (
	defaultRecordDir      = "./data/captures"
	defaultRecordMaxBytes = 256 << 20
	defaultRecordMaxAge   = time.Hour
	defaultRecordQueue    = 65536
)

func resolveRecord(rc *recordConfig) (RecordConfig, error) {
	c := RecordConfig{Dir: defaultRecordDir, MaxBytes: defaultRecordMaxBytes, MaxAge: defaultRecordMaxAge, Queue: defaultRecordQueue}
	if rc.Enabled != nil {
		c.Enabled = *rc.Enabled
	}
	if rc.Dir != "" {
		c.Dir = rc.Dir
	}
	if rc.CheckIn != nil {
		c.CheckIn = *rc.CheckIn
	}
	var err error
	if c.MaxAge, err = duration("record.max_age", rc.MaxAge, defaultRecordMaxAge); err != nil {
		return c, err
	}
	n, err := positiveInt("record.max_bytes", rc.MaxBytes, defaultRecordMaxBytes)
	if err != nil {
		return c, err
	}
	c.MaxBytes = n
	if n, err = positiveInt("record.queue", rc.Queue, defaultRecordQueue); err != nil {
		return c, err
	}
	if n > 1<<24 {
		return c, cfgErr("record.queue", "%d is more than 16777216 frames", n)
	}
	c.Queue = int(n)
	return c, nil
}

// positiveInt validates a raw YAML integer: absent or null gives def, a
// positive integer is the value, anything else names the key and value.
func positiveInt(key string, v any, def int64) (int64, error) {
	switch x := v.(type) {
	case nil:
		return def, nil
	case int:
		if x > 0 {
			return int64(x), nil
		}
	case uint64:
		if x <= 1<<62 {
			return int64(x), nil
		}
	}
	return 0, cfgErr(key, "%#v is not a positive integer", v)
}

// venueEndpoints are the venues' default websocket endpoints, for capture
// metadata when the configuration does not set ws_url.
var venueEndpoints = map[string]string{
	"coinbase": coinbase.DefaultWSURL,
	"kraken":   kraken.DefaultWSURL,
	"binance":  binance.DefaultWSURL,
	"okx":      okx.DefaultWSURL,
	"bybit":    bybit.DefaultWSURL,
}

// recordTap is every adapter's venue.Recorder while recording is enabled.
// It forwards to the daemon's Recorder, which Run starts, so a NewDaemon
// that fails leaves no writer goroutine behind. (Building the Recorder in
// NewDaemon and closing it on every error path was the alternative; it
// touches more of daemon.go.)
type recordTap struct{ d *Daemon }

func (t recordTap) Frame(venueName string, at time.Time, frame []byte) {
	if r := t.d.rec; r != nil {
		r.Frame(venueName, at, frame)
	}
}

func (t recordTap) Disconnect(venueName string, at time.Time) {
	if r := t.d.rec; r != nil {
		r.Disconnect(venueName, at)
	}
}

// startRecording starts the Recorder if record.enabled; Run calls it
// before the venues start (d.rec is then read only by the venues'
// goroutines, which start after it is set).
func (d *Daemon) startRecording() error {
	rc := d.cfg.Record
	if !rc.Enabled {
		return nil
	}
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fanoutd_recording_errors_total",
		Help: "Recording failures (write errors, reports of dropped frames; at most one report per second per venue)."}, []string{"venue"})
	r, err := replay.NewRecorder(replay.RecorderOptions{
		Dir: rc.Dir, MaxBytes: rc.MaxBytes, MaxAge: rc.MaxAge, Queue: rc.Queue, Version: version,
		Meta: d.captureMeta,
		OnSegment: func(s replay.Segment) {
			d.log.Info("capture segment closed", "venue", s.Venue, "path", s.Path, "frames", s.Frames, "bytes", s.Bytes)
			if rc.CheckIn {
				// Synchronous on the recorder's writer: the recorder's queue
				// absorbs the frames that arrive meanwhile, and shutdown
				// checks the last segments in before the claim check closes.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				c, err := d.CheckInSegment(ctx, s)
				cancel()
				if err != nil {
					errs.WithLabelValues(s.Venue).Inc()
					d.log.Warn("capture segment check-in failed", "venue", s.Venue, "path", s.Path, "err", err)
				} else {
					d.log.Info("capture segment checked in", "venue", s.Venue, "path", s.Path, "claim", c.URL)
					if f := d.OnCheckIn; f != nil {
						f(s, c)
					}
				}
			}
			if f := d.OnSegment; f != nil {
				f(s)
			}
		},
		OnError: func(venueName string, err error) {
			// Called with the recorder's lock held: nothing here may call
			// the Recorder.
			errs.WithLabelValues(venueName).Inc()
			d.log.Warn("recording failed", "venue", venueName, "err", err)
			if vr := d.byName[venueName]; vr != nil {
				if n, nerr := notice.New(notice.RecordingFailed, 0, venueName, "", time.Now(), err.Error(), nil); nerr == nil {
					vr.feed.Notice(n)
				}
			}
		},
	})
	if err != nil {
		return err
	}
	d.reg.MustRegister(errs)
	for _, m := range []struct {
		name, help string
		get        func(replay.RecorderStats) int64
	}{
		{"fanoutd_recorded_frames_total", "Frames written to captures.", func(s replay.RecorderStats) int64 { return s.Frames }},
		{"fanoutd_recorded_bytes_total", "Uncompressed bytes written to captures.", func(s replay.RecorderStats) int64 { return s.Bytes }},
		{"fanoutd_recorded_segments_total", "Capture segments closed, fsynced and announced.", func(s replay.RecorderStats) int64 { return s.Segments }},
		{"fanoutd_recording_dropped_total", "Frames not recorded (queue full, or a segment could not be written).", func(s replay.RecorderStats) int64 { return s.Dropped }},
	} {
		d.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help},
			func() float64 { return float64(m.get(r.Stats())) }))
	}
	d.rec = r
	d.log.Info("recording", "dir", rc.Dir, "max_bytes", rc.MaxBytes, "max_age", rc.MaxAge)
	return nil
}

// captureMeta is a new segment's metadata: the venue's endpoint and the
// symbols it is subscribed to now.
func (d *Daemon) captureMeta(venueName string) replay.Meta {
	vr := d.byName[venueName]
	if vr == nil {
		return replay.Meta{}
	}
	m := replay.Meta{Endpoint: vr.cfg.WSURL}
	if m.Endpoint == "" {
		m.Endpoint = venueEndpoints[venueName]
	}
	vr.mu.Lock()
	for s := range vr.symbols {
		m.Subscriptions = append(m.Subscriptions, s)
	}
	vr.mu.Unlock()
	slices.Sort(m.Subscriptions)
	return m
}

// stopRecording flushes, closes and fsyncs every open segment; Shutdown
// calls it after the venues stopped, so nothing they read is lost.
func (d *Daemon) stopRecording() {
	if d.rec == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.rec.Close(ctx); err != nil {
		d.log.Warn("shutdown: recorder did not finish writing", "err", err)
		return
	}
	st := d.rec.Stats()
	d.log.Info("recording closed", "segments", st.Segments, "frames", st.Frames, "bytes", st.Bytes, "dropped", st.Dropped)
}

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

// recorder is the venue.Recorder the adapters get: nil (an interface
// holding nothing) unless recording is enabled.
func (d *Daemon) recorder() venue.Recorder {
	if !d.cfg.Record.Enabled {
		return nil
	}
	return recordTap{d}
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

// splitStreams lets --streams take several values (--streams A B C): the
// arguments after it up to the next flag are its values.
func splitStreams(args []string) (rest, streams []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--streams" || a == "-streams" {
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				streams = append(streams, args[i])
			}
			continue
		}
		if v, ok := strings.CutPrefix(a, "--streams="); ok {
			streams = append(streams, v)
			continue
		}
		if v, ok := strings.CutPrefix(a, "-streams="); ok {
			streams = append(streams, v)
			continue
		}
		rest = append(rest, a)
	}
	return rest, streams
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
func recordCmd(ctx context.Context, args []string, stdout, stderr io.Writer, ctors map[string]Constructor) int {
	args, streams := splitStreams(args)
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fanoutd record --venue V --streams S… --out DIR [--duration D] [--config FILE]")
		fs.PrintDefaults()
	}
	venueName := fs.String("venue", "", "the venue to record (required)")
	fs.String("streams", "", "streams to record: venue:channel:symbol, or bare symbols (every channel); several values, or comma-separated")
	out := fs.String("out", "", "directory for the capture segments (default: the config's record.dir)")
	dur := fs.Duration("duration", 0, "stop after this long (default: until SIGINT/SIGTERM)")
	cfgPath := fs.String("config", "", "configuration file: the venue's endpoints and depth, record.max_bytes/max_age/queue")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "fanoutd: record: "+format+"\n", a...)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return usage("unexpected argument %q", fs.Arg(0))
	case *venueName == "":
		return usage("--venue is required (%s)", strings.Join(venueNames, ", "))
	case ctors[*venueName] == nil:
		return usage("--venue: unknown venue %q (want %s)", *venueName, strings.Join(venueNames, ", "))
	case *dur < 0:
		return usage("--duration: %v is negative", *dur)
	}
	symbols, channels, err := recordStreams(*venueName, streams)
	if err != nil {
		return usage("%v", err)
	}
	cfg, err := LoadConfig(*cfgPath, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	vcs, err := replayVenues(cfg.Venues, map[string][]string{*venueName: symbols})
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	vc := vcs[0]
	rc := cfg.Record
	if *out != "" {
		rc.Dir = *out
	}
	var level slog.Level
	level.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
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
		endpoint = venueEndpoints[vc.Name]
	}
	rec, err := replay.NewRecorder(replay.RecorderOptions{
		Dir: rc.Dir, MaxBytes: rc.MaxBytes, MaxAge: rc.MaxAge, Queue: rc.Queue, Version: version,
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
	a, err := ctors[vc.Name](venue.Config{WSURL: vc.WSURL, RESTURL: vc.RESTURL, Symbols: symbols, Channels: channels,
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
