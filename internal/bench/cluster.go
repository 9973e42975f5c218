package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// loadOpts is the load both runs of bench --edges get.
type loadOpts struct {
	subs, rate, size int
	warm, dur        time.Duration
	delay            string
	uring            bool
}

// loadResult is what one run measured: each process's CPU in the
// measured window (the first is the publishing process) and the clients'
// reports (one per client process).
type loadResult struct {
	cpu        []time.Duration
	diag       []procDiag // per process, as cpu
	reports    []clientReport
	venueSent  int // fed by a venue: frames it sent in the whole run
	eventBytes int // fed in process: the size of an event on the wire
}

// total is the events the clients read in the whole run.
func (r loadResult) total() int64 {
	var n int64
	for _, c := range r.reports {
		n += c.Total
	}
	return n
}

func (r loadResult) received() int64 {
	var n int64
	for _, c := range r.reports {
		n += c.Received
	}
	return n
}

// worst returns the highest of the client processes' percentiles (each
// process measures its own subscribers; the worst is the honest summary).
func (r loadResult) worst(f func(clientReport) int64) time.Duration {
	var w int64
	for _, c := range r.reports {
		w = max(w, f(c))
	}
	return time.Duration(w)
}

// feeder is what feeds a run: publish (an in-process test source, paced
// by drive) or a bench venue child, which paces itself.
type feeder struct {
	stream  string // what the clients subscribe to
	publish func(*venue.Event)
	venue   *venueChild
}

// drive starts one bench-clients child per URL (subs[i] subscribers on
// urls[i]), feeds o.rate events per second, and measures cpus and diags
// (one each per server process) over the measured window.
func drive(feed feeder, cpus []func() time.Duration, diags []func() procDiag, urls []string, subs []int, o loadOpts, stderr io.Writer) (loadResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return loadResult{}, err
	}
	var children []*exec.Cmd
	var outs []*bufio.Reader
	kill := func() {
		for _, c := range children {
			c.Process.Kill()
			c.Wait()
		}
	}
	for i, u := range urls {
		child := exec.Command(exe, "bench-clients", "--url", u, "--proto", "fanoutd",
			"--subs", fmt.Sprint(subs[i]), "--stream", feed.stream, "--warmup", o.warm.String(), "--duration", o.dur.String())
		child.Stderr = stderr
		out, _ := child.StdoutPipe()
		if err := child.Start(); err != nil {
			kill()
			return loadResult{}, err
		}
		children = append(children, child)
		rd := bufio.NewReader(out)
		if line, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
			kill()
			return loadResult{}, fmt.Errorf("clients did not start: %q %v", line, err)
		}
		outs = append(outs, rd)
	}
	mk := benchEvent
	pad := benchPad(o.size)
	// The clients' windows start when they printed ready; the last started
	// last, so the feed's clock starts now.
	start := time.Now()
	measureAt, endAt := start.Add(o.warm), start.Add(o.warm+o.dur)
	cpu0 := make([]time.Duration, len(cpus))
	diag0 := make([]procDiag, len(diags))
	res := loadResult{cpu: make([]time.Duration, len(cpus)), diag: make([]procDiag, len(diags)), eventBytes: len(mk(0, pad).AppendJSON(nil)) + 8}
	begin := func() {
		for j, f := range cpus {
			cpu0[j] = f()
		}
		for j, f := range diags {
			diag0[j] = f()
		}
	}
	end := func() {
		for j, f := range cpus {
			res.cpu[j] = f() - cpu0[j]
		}
		for j, f := range diags {
			res.diag[j] = f().sub(diag0[j])
		}
	}
	if res.venueSent, err = pace(feed.venue, o.rate, start, measureAt, endAt, begin, end, func(i int) error {
		feed.publish(mk(i, pad))
		return nil
	}); err != nil {
		kill()
		return res, err
	}
	for i, rd := range outs {
		b, _ := io.ReadAll(rd)
		children[i].Wait()
		var cr clientReport
		if err := json.Unmarshal(bytes.TrimSpace(b), &cr); err != nil {
			return res, fmt.Errorf("client report %q: %v", b, err)
		}
		res.reports = append(res.reports, cr)
	}
	return res, nil
}

// pidCPU returns a function reading process pid's CPU time from /proc.
func pidCPU(pid int) func() time.Duration {
	return func() time.Duration {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0
		}
		d, _ := procStatCPU(b)
		return d
	}
}

// clusterMain is bench --edges N: the same load on --role all (one
// process) and on one ingest (this process, with the embedded NATS
// server) feeding N edge processes (fanoutd serve --role edge), the
// subscribers split evenly over the edges; it reports edge CPU per
// delivered message against the single process's, the ingest's CPU per
// event, and publish-to-read latency. source says what feeds the single
// process and the ingest: the in-process test source, or (sourceVenue) a
// bench venue child per run through the bybit adapter. With rounds > 1
// it runs both that many times, interleaved (the single process first in
// odd rounds, the cluster first in even ones), and ends with each round's
// ratio and latency differences and their medians.
func clusterMain(edges, rounds int, o loadOpts, source string, stdout, stderr io.Writer) int {
	b := &clusterBench{edges: edges, o: o, venueFed: source == sourceVenue, stderr: stderr}
	b.feed = feeder{stream: benchStream}
	if b.venueFed {
		b.feed.stream = venueStream
		b.vpad, b.eventBytes = venuePad(o.size)
	}
	var rs []roundResult
	for r := range rounds {
		var one, many loadResult
		var err error
		if r%2 == 0 {
			if one, err = b.single(); err == nil {
				many, err = b.cluster()
			}
		} else {
			if many, err = b.cluster(); err == nil {
				one, err = b.single()
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "fanoutd bench:", err)
			return 1
		}
		if rounds > 1 {
			fmt.Fprintf(stdout, "round %d of %d (%s first), load average %s\n", r+1, rounds, map[bool]string{true: "--role all", false: "the cluster"}[r%2 == 0], loadAvg())
		}
		rs = append(rs, b.report(stdout, one, many))
	}
	if rounds > 1 {
		printRounds(stdout, rs)
	}
	return 0
}

// clusterBench runs the two sides of bench --edges.
type clusterBench struct {
	edges      int
	o          loadOpts
	venueFed   bool
	vpad       int
	eventBytes int // fed by a venue: the size of an event on the wire
	feed       feeder
	stderr     io.Writer
}

// startFeed starts a run's venue (if venue-fed) and returns its URL.
func (b *clusterBench) startFeed() (string, error) {
	if !b.venueFed {
		return "", nil
	}
	var err error
	b.feed.venue, err = startVenue(b.o.rate, b.vpad, b.o.warm+b.o.dur, b.stderr)
	if err != nil {
		return "", err
	}
	return b.feed.venue.url, nil
}

// subscribed waits for the server to have subscribed the venue.
func (b *clusterBench) subscribed() error {
	if !b.venueFed {
		return nil
	}
	return b.feed.venue.expect("subscribed", 20*time.Second)
}

// stopFeed stops the run's venue, if any.
func (b *clusterBench) stopFeed() {
	if b.feed.venue != nil {
		b.feed.venue.stop()
		b.feed.venue = nil
	}
}

// single runs the load on one process (--role all).
func (b *clusterBench) single() (loadResult, error) {
	vurl, err := b.startFeed()
	if err != nil {
		return loadResult{}, err
	}
	defer b.stopFeed()
	single, err := startFanoutd(b.o.delay, b.o.uring, vurl, b.stderr)
	if err != nil {
		return loadResult{}, err
	}
	defer single.stop()
	if err := b.subscribed(); err != nil {
		return loadResult{}, err
	}
	if !b.venueFed {
		b.feed.publish = func(ev *venue.Event) { single.src.Publish(ev) }
	}
	diag := func() procDiag { return readDiag(os.Getpid(), gathered(single.d.Metrics())) }
	return drive(b.feed, []func() time.Duration{processCPU}, []func() procDiag{diag}, []string{single.url}, []int{b.o.subs}, b.o, b.stderr)
}

// FanoutdBinary is the fanoutd binary the edges run as `fanoutd serve`:
// FANOUTD_BIN if set, else fanoutd beside this executable, else fanoutd on
// PATH.
func FanoutdBinary() (string, error) {
	if p := os.Getenv("FANOUTD_BIN"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "fanoutd")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("fanoutd")
	if err != nil {
		return "", errors.New("the edges run fanoutd serve: build it (go build ./cmd/fanoutd) beside fanoutd-bench, or name it in FANOUTD_BIN")
	}
	return p, nil
}

// cluster runs the load on one ingest (this process) and the edges.
func (b *clusterBench) cluster() (loadResult, error) {
	o := b.o
	dir, err := os.MkdirTemp("", "fanoutd-bench-")
	if err != nil {
		return loadResult{}, err
	}
	defer os.RemoveAll(dir)
	vurl, err := b.startFeed()
	if err != nil {
		return loadResult{}, err
	}
	defer b.stopFeed() // after the ingest stopped (defers run last first)
	ing, err := startIngest(dir, vurl, b.stderr)
	if err != nil {
		return loadResult{}, err
	}
	defer ing.stop()
	if err := b.subscribed(); err != nil {
		return loadResult{}, err
	}
	exe, err := FanoutdBinary()
	if err != nil {
		return loadResult{}, err
	}
	edgeCfg := filepath.Join(dir, "edge.yaml")
	yml := fmt.Sprintf("limits:\n  max_connections_per_token: 100000\nlog_level: warn\nwebsocket:\n  io_uring: %t\n", o.uring)
	if o.delay != "" {
		yml += "  write_delay: " + o.delay + "\n"
	}
	if b.venueFed {
		yml += "venues:\n  bybit:\n    symbols: []\n"
	} else {
		yml += "venues:\n  coinbase:\n    symbols: []\n"
	}
	if err := os.WriteFile(edgeCfg, []byte(yml), 0o644); err != nil {
		return loadResult{}, err
	}
	var urls []string
	var subs []int
	cpus := []func() time.Duration{processCPU}
	var diags []func() procDiag
	for i := range b.edges {
		port, err := freePort()
		if err != nil {
			return loadResult{}, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(exe, "serve", "--role", "edge", "--nats", ing.natsURL, "--listen", addr, "--config", edgeCfg)
		cmd.Stderr = b.stderr
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(runtime.GOMAXPROCS(0)), "FANOUTD_NATS_TOKEN="+ing.edgeToken)
		if err := cmd.Start(); err != nil {
			return loadResult{}, err
		}
		defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
		if err := waitReady("http://" + addr + "/readyz"); err != nil {
			return loadResult{}, fmt.Errorf("edge %d: %w", i, err)
		}
		urls = append(urls, "ws://"+addr+"/v1/stream")
		subs = append(subs, o.subs/b.edges+btoi(i < o.subs%b.edges))
		cpus = append(cpus, pidCPU(cmd.Process.Pid))
		pid, metrics := cmd.Process.Pid, scraped("http://"+addr+"/metrics")
		diags = append(diags, func() procDiag { return readDiag(pid, metrics) })
	}
	if !b.venueFed {
		b.feed.publish = func(ev *venue.Event) { ing.src.Publish(ev) }
	}
	return drive(b.feed, cpus, diags, urls, subs, o, b.stderr)
}

// roundResult is one round's comparison.
type roundResult struct {
	oneMsg, edgeMsg float64 // server CPU per delivered message, µs
	one, many       [3]time.Duration
}

func (r roundResult) ratio() float64 { return r.edgeMsg / max(r.oneMsg, 1e-9) }

// report prints one round and returns its comparison.
func (b *clusterBench) report(stdout io.Writer, one, many loadResult) roundResult {
	o, edges := b.o, b.edges
	var edgeCPU time.Duration
	for _, c := range many.cpu[1:] {
		edgeCPU += c
	}
	perMsg := func(cpu time.Duration, n int64) float64 {
		return float64(cpu.Nanoseconds()) / float64(max(n, 1)) / 1000
	}
	events := int64(float64(o.rate) * o.dur.Seconds())
	eventBytes := b.eventBytes
	if !b.venueFed {
		eventBytes = one.eventBytes
	}
	oneMsg, edgeMsg := perMsg(one.cpu[0], one.received()), perMsg(edgeCPU, many.received())
	fed := "fed in process"
	if b.venueFed {
		fed = "fed by a Bybit venue child through the bybit adapter (the venue's CPU not counted)"
	}
	fmt.Fprintf(stdout, "bench --edges %d: %d subscribers, %d events/s of %d bytes, %s measured after %s warm-up, %s (GOMAXPROCS %d, one machine)\n",
		edges, o.subs, o.rate, eventBytes, o.dur, o.warm, fed, runtime.GOMAXPROCS(0))
	fmt.Fprintf(stdout, "%-34s %14s %16s\n", "", "--role all", fmt.Sprintf("ingest+%d edges", edges))
	fmt.Fprintf(stdout, "%-34s %14.0f %16.0f\n", "delivered/s (clients read)", float64(one.received())/o.dur.Seconds(), float64(many.received())/o.dur.Seconds())
	fmt.Fprintf(stdout, "%-34s %14.3f %16.3f\n", "server CPU per delivered msg, µs", oneMsg, edgeMsg)
	fmt.Fprintf(stdout, "%-34s %14s %16.3f\n", "ingest CPU per event, µs (+NATS)", "-", perMsg(many.cpu[0], events))
	fmt.Fprintf(stdout, "%-34s %14.1f %16.1f\n", "server CPU, % of one core", 100*one.cpu[0].Seconds()/o.dur.Seconds(), 100*edgeCPU.Seconds()/o.dur.Seconds())
	fmt.Fprintf(stdout, "%-34s %14.1f %16.1f\n", "ingest+NATS CPU, % of one core", 0.0, 100*many.cpu[0].Seconds()/o.dur.Seconds())
	r := roundResult{oneMsg: oneMsg, edgeMsg: edgeMsg}
	for i, q := range []struct {
		name string
		f    func(clientReport) int64
	}{
		{"p50", func(c clientReport) int64 { return c.P50 }},
		{"p99", func(c clientReport) int64 { return c.P99 }},
		{"p99.9", func(c clientReport) int64 { return c.P999 }},
	} {
		r.one[i], r.many[i] = one.worst(q.f), many.worst(q.f)
		fmt.Fprintf(stdout, "%-34s %14s %16s\n", "publish-to-read "+q.name, r.one[i], r.many[i])
	}
	if b.venueFed {
		fmt.Fprintf(stdout, "%-34s %14d %16d\n", "venue frames sent (whole run)", one.venueSent, many.venueSent)
		fmt.Fprintf(stdout, "%-34s %14d %16d\n", "clients read (whole run)", one.total(), many.total())
		fmt.Fprintf(stdout, "%-34s %14d %16d\n", "  of (frames × subscribers)", int64(one.venueSent)*int64(o.subs), int64(many.venueSent)*int64(o.subs))
	}
	var edgeDiag procDiag
	for _, d := range many.diag {
		edgeDiag = edgeDiag.add(d)
	}
	printDiag(stdout, one.diag[0], edgeDiag, one.received(), many.received())
	hop := r.many[1] - r.one[1]
	fmt.Fprintf(stdout, "edge CPU/msg ÷ single process: %.2f× (target ≤ 1.1×: %s); the hop adds %s to p99 (target ≤ 1ms: %s)\n",
		r.ratio(), met(r.ratio() <= 1.1), hop, met(hop <= time.Millisecond))
	return r
}

// printRounds prints each round's ratio and latency differences (cluster
// minus single process), then their medians, lowest and highest.
func printRounds(stdout io.Writer, rs []roundResult) {
	fmt.Fprintf(stdout, "\n%d interleaved rounds: edge CPU/msg ÷ single process, and the cluster's publish-to-read minus the single process's\n", len(rs))
	fmt.Fprintf(stdout, "%-8s %8s %12s %12s %12s\n", "round", "ratio", "Δp50", "Δp99", "Δp99.9")
	ratios := make([]float64, len(rs))
	var deltas [3][]time.Duration
	for i, r := range rs {
		ratios[i] = r.ratio()
		fmt.Fprintf(stdout, "%-8d %7.2f× %12s %12s %12s\n", i+1, r.ratio(), r.many[0]-r.one[0], r.many[1]-r.one[1], r.many[2]-r.one[2])
		for q := range deltas {
			deltas[q] = append(deltas[q], r.many[q]-r.one[q])
		}
	}
	slices.Sort(ratios)
	for q := range deltas {
		slices.Sort(deltas[q])
	}
	n := len(rs)
	// at returns the value at sorted position i; for the median (i < 0)
	// the middle one, or the mean of the middle two.
	at := func(i int) (float64, [3]time.Duration) {
		lo, hi := i, i
		if i < 0 {
			lo, hi = (n-1)/2, n/2
		}
		var d [3]time.Duration
		for q := range d {
			d[q] = (deltas[q][lo] + deltas[q][hi]) / 2
		}
		return (ratios[lo] + ratios[hi]) / 2, d
	}
	for _, row := range []struct {
		name string
		i    int
	}{{"lowest", 0}, {"median", -1}, {"highest", n - 1}} {
		r, d := at(row.i)
		fmt.Fprintf(stdout, "%-8s %7.2f× %12s %12s %12s\n", row.name, r, d[0], d[1], d[2])
	}
}

// loadAvg returns the 1-minute load average, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func waitReady(url string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get(url); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within 20s", url)
}

// ingestServer is bench's ingest: a daemon in this process with the
// embedded NATS server, fed by a test source or, with a venue URL, by the
// bybit adapter pointed at it, trades only.
type ingestServer struct {
	src       *testsource.Source
	natsURL   string
	edgeToken string // the edges' secret the embedded server generated
	stop      func()
}

func startIngest(dir, venueURL string, stderr io.Writer) (*ingestServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	in := &ingestServer{natsURL: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	yml := fmt.Sprintf("listen: 127.0.0.1:0\ncluster:\n  role: ingest\n  node: bench-ingest\n  embedded_nats: true\n  nats_url: %s\n  nats_dir: %s\n",
		in.natsURL, filepath.Join(dir, "nats"))
	if venueURL != "" {
		yml += "venues:\n  bybit:\n    ws_url: " + venueURL + "\n    symbols: [" + venueSymbol + "]\n    channels: [trades]\n"
	} else {
		yml += "venues:\n  coinbase:\n    symbols: [BTC-USD]\n"
	}
	cfg, err := config.Parse([]byte(yml), nil)
	if err != nil {
		return nil, err
	}
	cfg.ClaimCheck.Stores[0].Path = filepath.Join(dir, "claims")
	src := venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) {
		in.src = testsource.New("coinbase", c)
		return in.src, nil
	}}
	if venueURL != "" {
		src, _ = venues.Lookup("bybit")
	}
	d, err := daemon.New(daemon.Options{Config: cfg, Venues: []venues.Venue{src},
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- d.Run(ctx, ln) }()
	in.stop = func() { cancel(); <-runDone }
	// Lead the venue before the load starts.
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := http.Get("http://" + ln.Addr().String() + "/v1/coverage")
		if err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if bytes.Contains(b, []byte(`"leading": true`)) {
				tok, err := os.ReadFile(filepath.Join(dir, "nats", "edge.token"))
				if err != nil {
					in.stop()
					return nil, err
				}
				in.edgeToken = strings.TrimSpace(string(tok))
				return in, nil
			}
		}
		if time.Now().After(deadline) {
			in.stop()
			return nil, fmt.Errorf("the bench ingest did not lead its venue within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
