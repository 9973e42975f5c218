package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanoutd/fanoutd/internal/cli"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/replay"
)

// Soak is `fanoutd-bench soak`: the daemon serving a looped replay of captures
// to many subscribers for a given time, with venue links dropped at an
// interval and some subscribers stalling, flapping and reattaching under
// names, while the daemon's process is sampled every second. At the end it
// asserts that memory, goroutines and open files were flat after warm-up,
// that healthy subscribers lost nothing, and that every loss of the others
// was announced with its exact gaps. It prints the figures, then one line
// per failed assertion, and returns 1 if any failed.
//
// The captures in testdata/replay are bursts of about 10,000 frames in
// 0.3–1.8 s (up to 26,000 frames/s); played as recorded at ×10 they would
// measure nothing but the machine's saturation. So each capture's frames
// are respaced --frame-gap apart in recorded time (the order and contents
// kept) and played at --speed: 500ms at ×10 is 20 frames/s per venue.
// Each capture plays concurrently from the same start and loops.
func Soak(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dur := fs.Duration("duration", 2*time.Minute, "how long to run (after the subscribers connected)")
	subs := fs.Int("subs", 2000, "subscribers")
	speed := fs.Float64("speed", 10, "replay speed (×N of the respaced captures)")
	gap := fs.Duration("frame-gap", 500*time.Millisecond, "recorded time between consecutive frames of a capture, after respacing")
	dropEvery := fs.Duration("drop-every", time.Minute, "drop every venue link this often (a disconnect, then the capture restarts with its snapshot); 0 = never")
	stallFrac := fs.Float64("stall", 0.05, "fraction of subscribers that stop reading for --stall-for, repeatedly")
	flapFrac := fs.Float64("flap", 0.05, "fraction of ephemeral subscribers that disconnect and reconnect")
	namedFrac := fs.Float64("named", 0.05, "fraction of named subscribers that close and reattach under their name")
	stallFor := fs.Duration("stall-for", 12*time.Second, "how long a stalled subscriber stops reading (below the daemon's write_timeout of 30s)")
	queueLen := fs.Int("max-queue-len", 300, "the daemon's max_queue_len for every venue")
	memTol := fs.Float64("mem-tolerance", 0.25, "RSS: the last third's max may exceed the second third's by this fraction")
	liveTol := fs.Float64("live-tolerance", 0.15, "live heap (marked by the last GC): the same")
	grTol := fs.Float64("goroutine-tolerance", 0.10, "goroutines and open files: the same, as a fraction (plus 25)")
	samplesOut := fs.String("samples", "", "write the per-second samples (CSV) to this file")
	memprofile := fs.String("memprofile", "", "write the daemon's heap profile to FILE.warm after warm-up (a third of --duration) and to FILE at the end: go tool pprof -diff_base FILE.warm FILE shows what grew")
	captures, err := cli.ParseArgs(fs, args)
	if err != nil {
		return 2
	}
	if len(captures) == 0 {
		captures, _ = filepath.Glob("testdata/replay/*.jsonl.gz")
	}
	if len(captures) == 0 {
		fmt.Fprintln(stderr, "fanoutd soak: no captures (give CAPTURE… or run where testdata/replay/*.jsonl.gz is)")
		return 2
	}
	if *speed <= 0 || *gap <= 0 || *subs < 1 {
		fmt.Fprintln(stderr, "fanoutd soak: --speed, --frame-gap and --subs must be positive")
		return 2
	}

	// The daemon: a replay of the captures, in this process.
	found := map[string][]string{}
	var srcs []replay.Source
	var streams []string
	dropper := &linkDropper{}
	for _, path := range captures {
		f, err := replay.Open(path)
		if err != nil {
			fmt.Fprintln(stderr, "fanoutd soak:", err)
			return 2
		}
		m := f.Meta
		f.Close()
		if m.Venue == "" {
			fmt.Fprintf(stderr, "fanoutd soak: %s: the capture names no venue\n", path)
			return 2
		}
		found[m.Venue] = append(found[m.Venue], m.Subscriptions...)
		for _, s := range m.Subscriptions {
			streams = append(streams, m.Venue+":level2:"+s)
		}
		srcs = append(srcs, respaced(path, m.Venue, *gap, dropper))
	}
	tmp, err := os.MkdirTemp("", "fanoutd-soak")
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd soak:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	yml := fmt.Sprintf("listen: 127.0.0.1:0\nlimits:\n  max_connections_per_token: 100000\n"+
		"websocket:\n  write_timeout: 30s\nclaim_check:\n  stores:\n    - kind: dir\n      path: %s\nvenues:\n", filepath.Join(tmp, "claims"))
	for v := range found {
		yml += fmt.Sprintf("  %s:\n    max_queue_len: %d\n", v, *queueLen)
	}
	cfg, err := config.Parse([]byte(yml), nil)
	if err == nil {
		err = cfg.ForCaptures(found)
	}
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd soak: config:", err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd soak:", err)
		return 1
	}
	url := "ws://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	replayDone := make(chan error, 1)
	gate := make(chan struct{})
	go func() {
		replayDone <- daemon.Replay(ctx, cfg, daemon.ReplayOptions{Sources: srcs, Speed: *speed, Loop: true, Grace: -1,
			Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}, ln)
		close(gate)
	}()

	// The subscribers, in a child process.
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd soak:", err)
		return 1
	}
	child := exec.Command(exe, "soak-clients", "--url", url+"/v1/stream", "--subs", strconv.Itoa(*subs),
		"--streams", strings.Join(streams, ","), "--duration", dur.String(), "--stall", fmt.Sprint(*stallFrac),
		"--flap", fmt.Sprint(*flapFrac), "--named", fmt.Sprint(*namedFrac), "--stall-for", stallFor.String())
	child.Stderr = stderr
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		fmt.Fprintln(stderr, "fanoutd soak:", err)
		return 1
	}
	rd := bufio.NewReader(out)
	if line, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		fmt.Fprintf(stderr, "fanoutd soak: clients did not start: %q %v\n", line, err)
		child.Process.Kill()
		child.Wait()
		return 1
	}

	// Sample this process (the daemon's) every second until the clients end;
	// drop the venue links every --drop-every.
	var samples []sample
	var mu sync.Mutex
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		warm := time.After(*dur / 3)
		var drop <-chan time.Time
		if *dropEvery > 0 {
			t := time.NewTicker(*dropEvery)
			defer t.Stop()
			drop = t.C
		}
		for {
			select {
			case <-stopSampling:
				return
			case <-drop:
				dropper.drop()
			case <-warm:
				writeHeapProfile(*memprofile+".warm", *memprofile, stderr)
			case now := <-tick.C:
				s := takeSample(now.Sub(start))
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}
	}()
	line, _ := rd.ReadString('\n') // "stopping"
	close(stopSampling)
	<-sampled
	writeHeapProfile(*memprofile, *memprofile, stderr)
	res, _ := io.ReadAll(rd)
	if strings.TrimSpace(line) != "stopping" {
		res = append([]byte(line), res...)
	}
	childErr := child.Wait()
	delivered, dropped, closes := daemonCounters(url)
	cancel()
	select {
	case err := <-replayDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "fanoutd soak: replay:", err)
		}
	case <-time.After(30 * time.Second):
		fmt.Fprintln(stderr, "fanoutd soak: the daemon did not stop within 30s")
	}

	var cr soakReport
	if err := json.Unmarshal(bytes.TrimSpace(res), &cr); err != nil {
		fmt.Fprintf(stderr, "fanoutd soak: client report %q: %v (child: %v)\n", res, err, childErr)
		return 1
	}
	if *samplesOut != "" {
		var b strings.Builder
		b.WriteString("t_s,rss_bytes,heap_objects_bytes,live_heap_bytes,goroutines,open_files\n")
		for _, s := range samples {
			fmt.Fprintf(&b, "%.0f,%d,%d,%d,%d,%d\n", s.at.Seconds(), s.rss, s.heap, s.live, s.goroutines, s.fds)
		}
		os.WriteFile(*samplesOut, []byte(b.String()), 0o644)
	}

	var failures []string
	fail := func(format string, a ...any) { failures = append(failures, fmt.Sprintf(format, a...)) }
	fmt.Fprintf(stdout, "soak: %s, %d subscribers (%d healthy, %d stalling, %d flapping, %d named), %d streams, %s replay ×%g respaced %s (loop), links dropped every %s, GOMAXPROCS %d\n",
		time.Since(start).Round(time.Second), *subs, cr.Roles["healthy"], cr.Roles["stall"], cr.Roles["flap"], cr.Roles["named"], len(streams),
		strings.Join(venueNames(found), "+"), *speed, *gap, *dropEvery, runtime.GOMAXPROCS(0))
	fmt.Fprintf(stdout, "events received     %d (%.0f/s); daemon queued %d deliveries, dropped or missed %d\n", cr.Received, float64(cr.Received)/dur.Seconds(), delivered, dropped)
	fmt.Fprintf(stdout, "sessions            %d (reattached %d, closed by the daemon %d), link_down notices %d, dropping %d, resumed %d\n",
		cr.Sessions, cr.Reattached, cr.ClosedByDaemon, cr.LinkDowns, cr.Dropping, cr.Resumed)
	fmt.Fprintf(stdout, "daemon closes      %s (by reason; client_closed includes the teardown)\n", closes)
	fmt.Fprintf(stdout, "losses announced    %d events in %d gaps, all matched to the seqs missing; unannounced %d\n", cr.AnnouncedLost, cr.Gaps, cr.Unannounced)
	if len(samples) < 6 {
		fail("flat: only %d samples; run for at least 6 s", len(samples))
	} else {
		n := len(samples)
		first, last := samples[n/3], samples[n-1]
		mid, end := samples[n/3:2*n/3], samples[2*n/3:]
		fmt.Fprintf(stdout, "RSS                 %s → %s (after warm-up %s; max of 2nd third %s, of last third %s)\n",
			mib(samples[0].rss), mib(last.rss), mib(first.rss), mib(maxOf(mid, sample.getRSS)), mib(maxOf(end, sample.getRSS)))
		fmt.Fprintf(stdout, "live heap (GC)      %s → %s (after warm-up %s; max of 2nd third %s, of last third %s)\n",
			mib(samples[0].live), mib(last.live), mib(first.live), mib(maxOf(mid, sample.getLive)), mib(maxOf(end, sample.getLive)))
		fmt.Fprintf(stdout, "goroutines          %d → %d (max of 2nd third %d, of last third %d; min %d, %d)\n",
			samples[0].goroutines, last.goroutines, maxOf(mid, sample.getG), maxOf(end, sample.getG), minOf(mid, sample.getG), minOf(end, sample.getG))
		fmt.Fprintf(stdout, "open files          %d → %d (max of 2nd third %d, of last third %d)\n",
			samples[0].fds, last.fds, maxOf(mid, sample.getFDs), maxOf(end, sample.getFDs))
		flat := func(what string, get func(sample) int64, tol float64, slack int64) {
			m2, m3 := maxOf(mid, get), maxOf(end, get)
			if limit := int64(float64(m2)*(1+tol)) + slack; m3 > limit {
				fail("flat: %s grew after warm-up: last third's max %d > %d (second third's max %d + %.0f%% + %d)", what, m3, limit, m2, tol*100, slack)
			}
		}
		floor := func(what string, get func(sample) int64, tol float64, slack int64) {
			m2, m3 := minOf(mid, get), minOf(end, get)
			if limit := int64(float64(m2)*(1+tol)) + slack; m3 > limit {
				fail("flat: %s grew after warm-up: last third's min %d > %d (second third's min %d + %.0f%% + %d)", what, m3, limit, m2, tol*100, slack)
			}
		}
		flat("RSS", sample.getRSS, *memTol, 0)
		flat("live heap", sample.getLive, *liveTol, 0)
		// A stalled subscriber's socket backs up and its writer goroutine
		// runs until it drains or the write deadline closes it, so the
		// goroutines' peaks rise and fall with how many stalls overlap,
		// up to one per stalled subscriber; a leak raises the troughs.
		stalled := int64(cr.Roles["stall"])
		flat("goroutines", sample.getG, *grTol, 25+stalled)
		floor("goroutines", sample.getG, *grTol, 25)
		flat("open files", sample.getFDs, *grTol, 25)
	}
	if cr.Received == 0 {
		fail("delivery: the subscribers received no events")
	}
	if cr.Roles["stall"] > 0 && cr.Resumed == 0 {
		fail("coverage: no stalled subscriber was ever dropped and resumed (stall longer, or lower --max-queue-len)")
	}
	if *dropEvery > 0 && *dropEvery < *dur && cr.LinkDowns == 0 {
		fail("coverage: no link_down notice reached the subscribers though links were dropped every %s", *dropEvery)
	}
	failures = append(failures, cr.Failures...)
	if cr.MoreFailures > 0 {
		fail("… and %d more subscriber failures", cr.MoreFailures)
	}
	if childErr != nil {
		fail("clients: %v", childErr)
	}
	if len(failures) == 0 {
		fmt.Fprintln(stdout, "PASS: flat after warm-up, healthy subscribers gapless, every loss announced with its exact gaps")
		return 0
	}
	for _, f := range failures {
		fmt.Fprintln(stdout, "FAIL:", f)
	}
	return 1
}

// writeHeapProfile writes the heap profile, after a GC, to path unless
// flag (the --memprofile value) is empty.
func writeHeapProfile(path, flag string, stderr io.Writer) {
	if flag == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd soak: memprofile:", err)
		return
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Fprintln(stderr, "fanoutd soak: memprofile:", err)
	}
}

func venueNames(found map[string][]string) []string {
	var out []string
	for v := range found {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// sample is one second's reading of this process.
type sample struct {
	at              time.Duration
	rss, heap, live int64 // live: the heap the last GC marked live
	goroutines, fds int64
}

func (s sample) getRSS() int64  { return s.rss }
func (s sample) getLive() int64 { return s.live }
func (s sample) getG() int64    { return s.goroutines }
func (s sample) getFDs() int64  { return s.fds }

func maxOf(ss []sample, get func(sample) int64) int64 {
	var m int64
	for _, s := range ss {
		m = max(m, get(s))
	}
	return m
}

func minOf(ss []sample, get func(sample) int64) int64 {
	m := int64(math.MaxInt64)
	for _, s := range ss {
		m = min(m, get(s))
	}
	return m
}

func takeSample(at time.Duration) sample {
	s := sample{at: at, goroutines: int64(runtime.NumGoroutine())}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				s.rss = kb << 10
			}
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.fds = int64(len(ents))
	}
	ms := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(ms)
	s.heap, s.live = int64(ms[0].Value.Uint64()), int64(ms[1].Value.Uint64())
	return s
}

// daemonCounters reads the daemon's delivered and dropped totals from its
// /metrics.
func daemonCounters(wsURL string) (delivered, dropped int64, closes string) {
	addr := strings.TrimPrefix(wsURL, "ws://")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return -1, -1, ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", addr)
	b, _ := io.ReadAll(c)
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(line, "#") {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch {
		case strings.HasPrefix(f[0], "fanoutd_deliveries_total"):
			delivered += int64(v)
		case strings.HasPrefix(f[0], "fanoutd_drops_total"), strings.HasPrefix(f[0], "fanoutd_missed_total"):
			dropped += int64(v)
		case strings.HasPrefix(f[0], "fanoutd_closes_total{") && v > 0:
			reason := strings.TrimSuffix(strings.TrimPrefix(f[0], `fanoutd_closes_total{reason="`), `"}`)
			closes += fmt.Sprintf(" %s %d", reason, int64(v))
		}
	}
	return delivered, dropped, closes
}

// linkDropper tells every respaced capture to drop its link: each counts
// the drops it has acted on.
type linkDropper struct{ n atomic.Int64 }

func (d *linkDropper) drop() { d.n.Add(1) }

// respaced plays the capture at path with its frames --gap apart in
// recorded time from a common start, so every capture plays at once and
// at a chosen rate. When the dropper says so it writes a disconnect line
// and starts the capture again from its first line: a link drop, then a
// reconnect whose snapshot rebuilds the books, as a live venue would.
// The goroutine writing a File ends at the capture's end; a File closed
// before it (the replay stopped) leaves it blocked until the process exits,
// since a replay.File holds no closer of ours.
func respaced(path, venueName string, gap time.Duration, d *linkDropper) replay.Source {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex // protects next and seen across the loop's reopenings
	var next time.Time
	seen := d.n.Load()
	return replay.Source{Name: path, Venue: venueName, Open: func() (*replay.File, error) {
		mu.Lock()
		next = time.Time{} // Play offsets each loop past the last
		mu.Unlock()
		pr, pw := io.Pipe()
		go func() {
			var line []byte
			restart := true
			var f *os.File
			var br *bufio.Reader
			defer func() {
				if f != nil {
					f.Close()
				}
			}()
			for {
				if restart {
					if f != nil {
						f.Close()
					}
					var err error
					if f, err = os.Open(path); err != nil {
						pw.CloseWithError(err)
						return
					}
					zr, err := gzip.NewReader(f)
					if err != nil {
						pw.CloseWithError(err)
						return
					}
					br = bufio.NewReaderSize(zr, 256<<10)
					restart = false
				}
				var err error
				line, err = br.ReadSlice('\n')
				if errors.Is(err, bufio.ErrBufferFull) {
					rest, _ := br.ReadBytes('\n')
					line = append(slices.Clip(line), rest...)
					err = nil
				}
				if len(line) == 0 && err != nil {
					pw.CloseWithError(nil) // the end: Play reopens (loop)
					return
				}
				mu.Lock()
				if next.IsZero() {
					next = base
				}
				at := next
				next = next.Add(gap)
				n := d.n.Load()
				drop := n != seen
				seen = n
				mu.Unlock()
				var out []byte
				if drop {
					out = replay.AppendTime(out, at)
					out = append(out, " \n"...)
					restart = true
				} else if sp := bytes.IndexByte(line, ' '); sp > 0 {
					out = replay.AppendTime(out, at)
					out = append(out, line[sp:]...)
				} else {
					out = append(out, '\n') // a disconnect line of the capture
				}
				if len(out) == 0 || out[len(out)-1] != '\n' {
					out = append(out, '\n')
				}
				if _, werr := pw.Write(out); werr != nil {
					return
				}
				if err != nil && !drop {
					pw.CloseWithError(nil)
					return
				}
			}
		}()
		return &replay.File{Reader: replay.NewReader(pr, path), Meta: replay.Meta{Venue: venueName}}, nil
	}}
}
