// Package bench is `fanoutd-bench`: a load harness that runs a server under
// test (this daemon, or a Centrifugo binary as a peer) and subscribers in a
// child process, and reports server CPU per delivered message and latency.
package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/cli"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// Main is `fanoutd-bench bench`, the load tool: it runs a server under test, fed at a fixed
// rate, and N websocket subscribers in a child process (so their CPU is
// not the server's), and reports delivered/s, server CPU per delivered
// message and latency. The server is a daemon in this process fed by an
// in-process test source or (--source venue) by its bybit adapter from a
// Bybit venue in a child process, or with --peer centrifugo a Centrifugo
// binary in a child process fed through client publishes, so that all are
// measured on the same machine in the same way.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.subs, "subs", 200, "subscribers")
	fs.IntVar(&o.rate, "rate", 2000, "events per second")
	fs.IntVar(&o.size, "size", 200, "approximate event size in bytes")
	fs.DurationVar(&o.dur, "duration", 20*time.Second, "measured duration")
	fs.DurationVar(&o.warm, "warmup", 3*time.Second, "warm-up before measuring")
	fs.StringVar(&o.delay, "write-delay", "", "websocket.write_delay of the daemon under test (default: the daemon's default)")
	fs.BoolVar(&o.uring, "io-uring", true, "websocket.io_uring of the daemon under test")
	fs.IntVar(&o.low, "low-latency", 0, "of --subs, this many connect with ?latency=low (writes without batching delay) and are reported apart (fanoutd only)")
	fs.StringVar(&o.reader, "reader", readerEpoll, "how the subscriber process reads its sockets, the same for every server: epoll (a reader per core, each over its share of the sockets through its own epoll instance) or goroutines (one per connection, through Go's network poller)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write the server's CPU profile of the measured window to this file (fanoutd only; with --idle, of the last round's connect phase)")
	fs.StringVar(&o.source, "source", sourceInproc, "what feeds fanoutd: inproc (a test source in this process) or venue (a Bybit venue in a child process, through the bybit adapter over a websocket)")
	fs.StringVar(&o.peer, "peer", "", "measure this peer instead of fanoutd: centrifugo")
	fs.StringVar(&o.peerBin, "peer-bin", "", "the peer's binary (default: its name, looked up in PATH)")
	fs.StringVar(&o.peerPublish, "peer-publish", peerPublishHTTP, "how events go into the peer: http (batched publishes on its HTTP API, one request at a time) or client (client publish commands on one websocket connection)")
	idle := fs.Bool("idle", false, "measure the server's memory per idle subscriber connection instead: for each count of --conns, connections to one stream at --rate (default 10 here) from child processes, RSS sampled every second for --duration after --warmup (default 10s here), the accept rate and the kernel's socket memory beside it; fanoutd and, with --peer, the peer, in turn")
	connsList := fs.String("conns", "10000", "with --idle: subscriber connections, or a comma-separated list of counts, one round each (at most about 19,500: the server holds one descriptor per connection)")
	memprofile := fs.String("memprofile", "", "with --idle: write the server's heap profile at the end of the last fanoutd round's measured window to this file")
	edges := fs.Int("edges", 0, "also run a cluster: one ingest (this process, embedded NATS) and N edge processes, against --role all under the same load (both fed as --source says)")
	rounds := fs.Int("rounds", 1, "with --edges: run both this many times, interleaved, and end with each round's CPU ratio and latency differences and their medians")
	if rest, err := cli.ParseArgs(fs, args); err != nil {
		return 2
	} else if len(rest) > 0 {
		fmt.Fprintf(stderr, "fanoutd: unexpected argument %q\n", rest[0])
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	sourceSet := set["source"]
	var steps []int
	if *idle {
		if !set["rate"] {
			o.rate = 10
		}
		if !set["warmup"] {
			o.warm = 10 * time.Second
		}
		var err error
		if steps, err = parseCounts(*connsList); *edges > 0 || sourceSet || err != nil || o.rate < 1 {
			fmt.Fprintln(stderr, "fanoutd bench: --idle needs --conns (counts ≥ 1, comma-separated) and --rate ≥ 1, and measures one server fed in process (no --edges, no --source)")
			return 2
		}
	}
	switch {
	case o.source != sourceInproc && o.source != sourceVenue:
		fmt.Fprintf(stderr, "fanoutd bench: --source %q: want inproc or venue\n", o.source)
		return 2
	case *rounds < 1 || (*rounds > 1 && *edges == 0):
		fmt.Fprintln(stderr, "fanoutd bench: --rounds ≥ 1, and more than one only with --edges")
		return 2
	case *edges > 0 && (o.peer != "" || o.cpuprofile != ""):
		fmt.Fprintln(stderr, "fanoutd bench: --edges measures fanoutd itself: --peer and --cpuprofile do not apply")
		return 2
	case o.peer != "" && sourceSet:
		fmt.Fprintln(stderr, "fanoutd bench: --source feeds fanoutd: it does not apply to --peer")
		return 2
	case o.low < 0 || o.low > o.subs || (o.low > 0 && o.peer != ""):
		fmt.Fprintln(stderr, "fanoutd bench: --low-latency is between 0 and --subs, and measures fanoutd (not --peer)")
		return 2
	case o.reader != readerEpoll && o.reader != readerGoroutines:
		fmt.Fprintf(stderr, "fanoutd bench: --reader %q: want epoll or goroutines\n", o.reader)
		return 2
	case o.peerPublish != peerPublishHTTP && o.peerPublish != peerPublishClient:
		fmt.Fprintf(stderr, "fanoutd bench: --peer-publish %q: want http or client\n", o.peerPublish)
		return 2
	case o.peer != "" && o.peer != "centrifugo":
		fmt.Fprintf(stderr, "fanoutd bench: --peer %q: want centrifugo\n", o.peer)
		return 2
	}
	if *idle {
		return idleMain(o, steps, *memprofile, stdout, stderr)
	}
	if *edges > 0 {
		return clusterMain(*edges, *rounds, loadOpts{subs: o.subs, rate: o.rate, size: o.size, warm: o.warm, dur: o.dur, delay: o.delay, uring: o.uring}, o.source, stdout, stderr)
	}
	r, err := run(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd bench:", err)
		return 1
	}
	r.print(stdout)
	return 0
}

// The values of --source.
const (
	sourceInproc = "inproc"
	sourceVenue  = "venue"
)

// options are bench's flags.
type options struct {
	subs, rate, size, low      int
	dur, warm                  time.Duration
	delay, cpuprofile, source  string
	reader                     string
	uring                      bool
	peer, peerBin, peerPublish string
}

// result is one bench run's measurements.
type result struct {
	o          options
	name       string
	eventBytes int
	delivered  uint64 // in the measured window
	counted    bool   // delivered and dropped are the server's own counts
	dropped    uint64
	cpu        time.Duration // the server's, in the measured window
	clients    clientReport
	venueSent  int    // --source venue: frames the venue sent in the whole run
	extra      string // what only the daemon's metrics tell
}

// run runs the load of o once.
func run(o options, stderr io.Writer) (*result, error) {
	r := &result{o: o}
	mk := benchEvent
	pad := benchPad(o.size)
	r.eventBytes = len(mk(0, pad).AppendJSON(nil)) + 8

	var srv benchServer
	var vc *venueChild
	var err error
	switch {
	case o.peer == "centrifugo":
		srv, err = startCentrifugo(cmp.Or(o.peerBin, "centrifugo"), o.peerPublish, stderr)
	case o.source == sourceVenue:
		var vpad int
		vpad, r.eventBytes = venuePad(o.size)
		if vc, err = startVenue(o.rate, vpad, o.warm+o.dur, stderr); err != nil {
			return nil, err
		}
		defer vc.stop()
		f, err := startFanoutd(o.delay, o.uring, vc.url, stderr)
		if err != nil {
			return nil, err
		}
		if err := vc.expect("subscribed", 10*time.Second); err != nil {
			f.stop()
			return nil, err
		}
		srv = f
	default:
		srv, err = startFanoutd(o.delay, o.uring, "", stderr)
	}
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	r.name = srv.name()

	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	child := exec.Command(exe, "bench-clients", "--url", srv.wsURL(), "--proto", srv.name(),
		"--subs", fmt.Sprint(o.subs), "--low-latency", fmt.Sprint(o.low), "--stream", srv.stream(), "--warmup", o.warm.String(), "--duration", o.dur.String(), "--reader", o.reader)
	child.Stderr = stderr
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		return nil, err
	}
	fail := func(err error) (*result, error) {
		child.Process.Kill()
		child.Wait()
		return nil, err
	}
	rd := bufio.NewReader(out)
	if line, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		return fail(fmt.Errorf("clients did not start: %q %v", line, err))
	}

	start := time.Now()
	measureAt, endAt := start.Add(o.warm), start.Add(o.warm+o.dur)
	var cpu0, cpu1 time.Duration
	var c0, c1 benchCounters
	var prof *os.File
	begin := func() {
		cpu0, c0 = srv.cpu(), srv.counters()
		if o.cpuprofile != "" && o.peer == "" {
			if prof, err = os.Create(o.cpuprofile); err == nil {
				pprof.StartCPUProfile(prof)
			}
		}
	}
	end := func() {
		cpu1, c1 = srv.cpu(), srv.counters()
		if prof != nil {
			pprof.StopCPUProfile()
			prof.Close()
		}
	}
	if r.venueSent, err = pace(vc, o.rate, start, measureAt, endAt, begin, end, func(i int) error {
		if err := srv.publish(mk(i, pad)); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	res, _ := io.ReadAll(rd)
	child.Wait()
	if err := json.Unmarshal(bytes.TrimSpace(res), &r.clients); err != nil {
		return nil, fmt.Errorf("client report %q: %v", res, err)
	}
	// The server's own count where it has one; else what the clients read
	// of the events published in the measured window.
	r.delivered = uint64(r.clients.Received)
	if c1.ok {
		r.counted = true
		r.delivered, r.dropped = c1.delivered-c0.delivered, c1.dropped-c0.dropped
	}
	r.cpu = cpu1 - cpu0
	if f, ok := srv.(*fanoutdServer); ok {
		var b strings.Builder
		f.report(&b)
		r.extra = b.String()
	}
	return r, nil
}

func (r *result) print(stdout io.Writer) {
	o := r.o
	fed := ""
	if r.name == "fanoutd" {
		fed = ", fed " + map[string]string{sourceInproc: "in process", sourceVenue: "by a Bybit venue over a websocket"}[o.source]
	}
	if r.name == "centrifugo" {
		fed = ", fed " + map[string]string{peerPublishHTTP: "by batched publishes on its HTTP API", peerPublishClient: "by client publishes on a websocket"}[o.peerPublish]
	}
	fmt.Fprintf(stdout, "%s%s: subscribers %d, %d events/s of %d bytes, %s measured after %s warm-up (GOMAXPROCS %d)\n",
		r.name, fed, o.subs, o.rate, r.eventBytes, o.dur, o.warm, runtime.GOMAXPROCS(0))
	fmt.Fprintf(stdout, "delivered/s         %.0f (clients received %.0f/s)\n", float64(r.delivered)/o.dur.Seconds(), float64(r.clients.Received)/o.dur.Seconds())
	if r.counted {
		fmt.Fprintf(stdout, "dropped             %d\n", r.dropped)
	}
	if o.source == sourceVenue && r.name == "fanoutd" {
		fmt.Fprintf(stdout, "venue frames sent   %d in the whole run; clients read %d of %d\n", r.venueSent, r.clients.Total, r.venueSent*o.subs)
	}
	fmt.Fprintf(stdout, "server CPU          %.1f%% of one core\n", 100*r.cpu.Seconds()/o.dur.Seconds())
	fmt.Fprintf(stdout, "server CPU/message  %.3f µs\n", float64(r.cpu.Nanoseconds())/float64(max(r.delivered, 1))/1000)
	fmt.Fprintf(stdout, "latency p50 %s  p99 %s  p999 %s  max %s (publish to client read)\n",
		time.Duration(r.clients.P50), time.Duration(r.clients.P99), time.Duration(r.clients.P999), time.Duration(r.clients.Max))
	if o.low > 0 {
		c := r.clients
		batched := "none batched"
		if o.subs > o.low {
			batched = fmt.Sprintf("%d batched: p50 %s  p99 %s", o.subs-o.low, time.Duration(c.BatchedP50), time.Duration(c.BatchedP99))
		}
		fmt.Fprintf(stdout, "  of which %s; %d with ?latency=low: p50 %s  p99 %s  p999 %s  max %s\n", batched,
			o.low, time.Duration(c.LowP50), time.Duration(c.LowP99), time.Duration(c.LowP999), time.Duration(c.LowMax))
	}
	io.WriteString(stdout, r.extra)
	fmt.Fprintf(stdout, "client process CPU  %.1f%% of one core\n", 100*time.Duration(r.clients.CPU).Seconds()/o.dur.Seconds())
}

// benchStream is the stream bench loads on fanoutd.
const benchStream = "coinbase:trades:BTC-USD"

// benchServer is a server under load.
type benchServer interface {
	name() string   // also the clients' --proto
	stream() string // what the clients subscribe to
	wsURL() string
	publish(ev *venue.Event) error
	cpu() time.Duration // the server's CPU time so far
	pid() int           // the server's process
	counters() benchCounters
	stop()
}

// benchCounters are a server's own delivery counts, if it keeps them.
type benchCounters struct {
	ok                 bool
	delivered, dropped uint64
}

// fanoutdServer is the daemon in this process, fed by a test source or,
// with a venue URL, by its bybit adapter.
type fanoutdServer struct {
	d      *daemon.Daemon
	src    *testsource.Source // nil when fed by a venue
	strm   string             // the stream loaded
	feed   *fanout.Feed
	url    string
	cancel func()
}

// startFanoutd starts the daemon fed by a test source or, if venueURL is
// set, by the bybit adapter pointed at venueURL, trades only.
func startFanoutd(delay string, uring bool, venueURL string, stderr io.Writer) (*fanoutdServer, error) {
	yml := "listen: 127.0.0.1:0\nlimits:\n  max_connections_per_token: 100000\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n"
	if venueURL != "" {
		yml = "listen: 127.0.0.1:0\nlimits:\n  max_connections_per_token: 100000\nvenues:\n  bybit:\n    ws_url: " + venueURL +
			"\n    symbols: [" + venueSymbol + "]\n    channels: [trades]\n"
	}
	yml += fmt.Sprintf("websocket:\n  io_uring: %t\n", uring)
	if delay != "" {
		yml += "  write_delay: " + delay + "\n"
	}
	cfg, err := config.Parse([]byte(yml), nil)
	if err != nil {
		return nil, err
	}
	f := &fanoutdServer{strm: benchStream}
	src := venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) {
		f.src = testsource.New("coinbase", c)
		return f.src, nil
	}}
	if venueURL != "" {
		src, _ = venues.Lookup("bybit")
		f.strm = venueStream
	}
	f.d, err = daemon.New(daemon.Options{Config: cfg, Venues: []venues.Venue{src},
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
	go func() { runDone <- f.d.Run(ctx, ln) }()
	f.cancel = func() { cancel(); <-runDone }
	f.feed = f.d.Hub().Feed(src.Name)
	f.url = "ws://" + ln.Addr().String() + "/v1/stream"
	return f, nil
}

func (f *fanoutdServer) name() string                  { return "fanoutd" }
func (f *fanoutdServer) wsURL() string                 { return f.url }
func (f *fanoutdServer) stream() string                { return f.strm }
func (f *fanoutdServer) publish(ev *venue.Event) error { f.src.Publish(ev); return nil }
func (f *fanoutdServer) cpu() time.Duration            { return processCPU() }
func (f *fanoutdServer) pid() int                      { return os.Getpid() }
func (f *fanoutdServer) stop()                         { f.cancel() }
func (f *fanoutdServer) counters() benchCounters {
	c := f.feed.Counters()
	return benchCounters{ok: true, delivered: c.Delivered.Load(), dropped: c.Dropped.Load()}
}

// report prints what only the daemon's metrics tell.
func (f *fanoutdServer) report(stdout io.Writer) {
	if writes := histCount(f.d, "fanoutd_write_batch_bytes"); writes > 0 {
		fmt.Fprintf(stdout, "websocket writes    %d in the whole run: %.1f events per write\n", writes, float64(f.feed.Counters().Delivered.Load())/float64(writes))
	}
	fmt.Fprintf(stdout, "server publish-to-write (oldest event of each batch, whole run, bucket bounds) p50 ≤ %s  p99 ≤ %s\n",
		histQuantile(f.d, 0.5), histQuantile(f.d, 0.99))
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type clientReport struct {
	Received            int64 // events published in the measured window
	Total               int64 // events read in the whole run
	P50, P99, P999, Max int64 // nanoseconds
	CPU                 int64 // nanoseconds, during the measured window
	// With --low-latency: the two groups' latencies apart.
	BatchedP50, BatchedP99          int64 `json:",omitempty"`
	LowP50, LowP99, LowP999, LowMax int64 `json:",omitempty"`
}

// Clients is the child of bench: N subscribers that read, count and
// time every event (publish time is the event's recv_time).
func Clients(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-clients", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "")
	subs := fs.Int("subs", 200, "")
	low := fs.Int("low-latency", 0, "")
	stream := fs.String("stream", "", "")
	proto := fs.String("proto", "fanoutd", "fanoutd or centrifugo")
	warm := fs.Duration("warmup", 3*time.Second, "")
	dur := fs.Duration("duration", 20*time.Second, "")
	idle := fs.Bool("idle", false, "")
	reader := fs.String("reader", readerEpoll, "")
	if rest, err := cli.ParseArgs(fs, args); err != nil {
		return 2
	} else if len(rest) > 0 {
		fmt.Fprintf(stderr, "fanoutd: unexpected argument %q\n", rest[0])
		return 2
	}
	if *idle {
		return idleClients(*url, *proto, *stream, *subs, stdout, stderr)
	}
	var wg sync.WaitGroup
	results := make([]latResult, *subs)
	conns := make([]*websocket.Conn, *subs)
	sub := []byte(`{"op":"subscribe","id":"b","streams":["` + *stream + `"]}`)
	for i := range conns {
		u := *url
		if i < *low {
			u += "?latency=low"
		}
		ws, _, err := websocket.DefaultDialer.Dial(u, nil)
		if err != nil {
			fmt.Fprintln(stderr, "bench-clients:", err)
			return 1
		}
		if *proto == "centrifugo" {
			if err := centrifugoConnect(ws, *stream); err != nil {
				fmt.Fprintln(stderr, "bench-clients: subscribe:", err)
				return 1
			}
		} else {
			ws.WriteMessage(websocket.TextMessage, sub)
			if _, m, err := ws.ReadMessage(); err != nil || !bytes.Contains(m, []byte(`"ack"`)) {
				fmt.Fprintf(stderr, "bench-clients: subscribe: %q %v\n", m, err)
				return 1
			}
		}
		conns[i] = ws
	}
	start := time.Now()
	measureFrom, measureTo := start.Add(*warm), start.Add(*warm+*dur)
	for i := range results {
		results[i] = latResult{hist: make([]int64, latBuckets+1), from: measureFrom, to: measureTo, last: measureTo}
	}
	fmt.Fprintln(stdout, "ready")
	cpu0 := processCPU() // replaced by the CPU time when the first measured event arrives
	var cpuOnce sync.Once
	firstMeasured := func() { cpuOnce.Do(func() { cpu0 = processCPU() }) }
	if *reader == readerEpoll && epollRead(conns, results, measureTo, firstMeasured, &wg) {
		// read by epoll readers
	} else {
		for i, ws := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := &results[i]
				buf := make([]byte, 0, 64<<10)
				pong := func(b []byte) { ws.WriteMessage(websocket.TextMessage, b) }
				// Read until a second passes without an event after the
				// window: what was sent in it arrives, however late.
				for {
					ws.SetReadDeadline(r.last.Add(time.Second))
					_, rd, err := ws.NextReader()
					if err != nil {
						return
					}
					if buf, err = venue.ReadFrame(rd, buf); err != nil {
						return
					}
					now := time.Now()
					if now.After(measureTo.Add(30 * time.Second)) {
						return
					}
					r.message(buf, now, pong, firstMeasured)
				}
			}()
		}
	}
	time.Sleep(time.Until(measureTo))
	cpu := processCPU() - cpu0
	wg.Wait()
	for _, ws := range conns {
		ws.Close()
	}
	// merge sums the histograms of results[from:to].
	const bucket, nb = latBucket, latBuckets
	merge := func(from, to int) (hist []int64, total int64) {
		hist = make([]int64, nb+1)
		for _, r := range results[from:to] {
			total += r.received
			for j, c := range r.hist {
				hist[j] += c
			}
		}
		return hist, total
	}
	pct := func(hist []int64, total int64, p float64) int64 {
		target := int64(float64(total) * p)
		var acc int64
		for j, c := range hist {
			acc += c
			if acc > target {
				return int64(time.Duration(j+1) * bucket)
			}
		}
		return int64(time.Duration(nb) * bucket)
	}
	maxOf := func(hist []int64) int64 {
		maxB := 0
		for j, c := range hist {
			if c > 0 {
				maxB = j
			}
		}
		return int64(time.Duration(maxB+1) * bucket)
	}
	var all int64
	for _, r := range results {
		all += r.total
	}
	hist, total := merge(0, len(results))
	rep := clientReport{Received: total, Total: all, P50: pct(hist, total, 0.5), P99: pct(hist, total, 0.99), P999: pct(hist, total, 0.999),
		Max: maxOf(hist), CPU: int64(cpu)}
	if *low > 0 {
		lh, lt := merge(0, *low)
		bh, bt := merge(*low, len(results))
		rep.LowP50, rep.LowP99, rep.LowP999, rep.LowMax = pct(lh, lt, 0.5), pct(lh, lt, 0.99), pct(lh, lt, 0.999), maxOf(lh)
		rep.BatchedP50, rep.BatchedP99 = pct(bh, bt, 0.5), pct(bh, bt, 0.99)
	}
	json.NewEncoder(stdout).Encode(rep)
	return 0
}

// The subscriber process's readers (--reader): epoll, a few goroutines
// each reading its share of the sockets through an epoll instance of its
// own (one read(2) per readable socket, no goroutine woken per read), or
// goroutines, one per connection through gorilla/websocket and Go's
// network poller (a wake-up and a second read that finds the socket
// empty per frame).
const (
	readerEpoll      = "epoll"
	readerGoroutines = "goroutines"
)

// latBucket and latBuckets are the latency histogram's: 2 s of 10 µs
// buckets and one past it.
const (
	latBucket  = 10 * time.Microsecond
	latBuckets = 200000
)

// latResult is what one subscriber connection read.
type latResult struct {
	hist     []int64
	received int64 // events published in [from, to)
	total    int64 // events read in the whole run
	from, to time.Time
	last     time.Time // of the last event read, at least to
}

var recvTimeKey = []byte(`"recv_time":"`)

// message counts and times the events of one text message read at now;
// a line without a recv_time that is Centrifugo's ping ("{}") is answered
// with pong. measured is called at the first event of the window.
func (r *latResult) message(buf []byte, now time.Time, pong func([]byte), measured func()) {
	for rest := buf; len(rest) > 0; {
		line := rest
		if j := bytes.IndexByte(rest, '\n'); j >= 0 {
			line, rest = rest[:j], rest[j+1:]
		} else {
			rest = nil
		}
		k := bytes.Index(line, recvTimeKey)
		if k < 0 {
			if string(line) == "{}" { // Centrifugo's ping: answer with a pong
				pong(line)
			}
			continue
		}
		r.total++
		if now.After(r.last) {
			r.last = now
		}
		pub, ok := fastTime(line[k+len(recvTimeKey):], now)
		if !ok || pub.Before(r.from) || !pub.Before(r.to) {
			continue
		}
		measured()
		r.received++
		b := int(now.Sub(pub) / latBucket)
		r.hist[min(max(b, 0), latBuckets)]++
	}
}

// fastTime reads the RFC3339Nano UTC time at the start of b
// ("2026-11-30T05:42:48.123456789Z") as a time on now's day, without
// time.Parse: the clients must cost little next to the server.
func fastTime(b []byte, now time.Time) (time.Time, bool) {
	if len(b) < 20 || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	num := func(x []byte) int {
		n := 0
		for _, c := range x {
			n = n*10 + int(c-'0')
		}
		return n
	}
	ns := 0
	if b[19] == '.' {
		j := 20
		scale := 100000000
		for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
			ns += int(b[j]-'0') * scale
			scale /= 10
		}
	}
	y, m, d := now.UTC().Date()
	if num(b[0:4]) != y || num(b[5:7]) != int(m) || num(b[8:10]) != d {
		return time.Time{}, false
	}
	return time.Date(y, m, d, num(b[11:13]), num(b[14:16]), num(b[17:19]), ns, time.UTC), true
}

// histQuantile returns the upper bound of the bucket of the daemon's
// publish-to-write histogram that holds quantile q.
func histQuantile(d *daemon.Daemon, q float64) string {
	mfs, err := d.Metrics().Gather()
	if err != nil {
		return "?"
	}
	for _, mf := range mfs {
		if mf.GetName() != "fanoutd_publish_to_write_seconds" || len(mf.GetMetric()) == 0 {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		target := q * float64(h.GetSampleCount())
		for _, b := range h.GetBucket() {
			if float64(b.GetCumulativeCount()) >= target {
				return time.Duration(b.GetUpperBound() * float64(time.Second)).String()
			}
		}
		return "> " + time.Duration(h.GetBucket()[len(h.GetBucket())-1].GetUpperBound()*float64(time.Second)).String()
	}
	return "?"
}

// histCount returns the sample count of the daemon's histogram name.
func histCount(d *daemon.Daemon, name string) uint64 {
	mfs, _ := d.Metrics().Gather()
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// pace runs the load from start: the venue child vc paces its own frames
// (pace returns how many it sent), or without one, publish(i) is called
// rate times a second. begin and end bracket the measured window
// [measureAt, endAt).
func pace(vc *venueChild, rate int, start, measureAt, endAt time.Time, begin, end func(), publish func(i int) error) (venueSent int, err error) {
	if vc != nil {
		if err := vc.begin(); err != nil {
			return 0, err
		}
		time.Sleep(time.Until(measureAt))
		begin()
		time.Sleep(time.Until(endAt))
		end()
		return vc.sent(10 * time.Second)
	}
	interval := time.Second / time.Duration(rate)
	measuring := false
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if !measuring && !at.Before(measureAt) {
			begin()
			measuring = true
		}
		if !at.Before(endAt) {
			end()
			return 0, nil
		}
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		if err := publish(i); err != nil {
			return 0, err
		}
	}
}

// benchEvent is the i-th event of the load: a trade whose id is pad.
func benchEvent(i int, pad string) *venue.Event {
	now := time.Now()
	return &venue.Event{Kind: venue.KindTrade, Stream: benchStream, TradeID: pad, Price: decimal.New(int64(5000000+i%1000), -2),
		Size: decimal.New(12345, -4), Side: venue.SideBuy, RecvTime: now, VenueTime: now, Seq: uint64(i)}
}

// benchPad is the trade id that makes an encoded benchEvent about size
// bytes.
func benchPad(size int) string {
	return strings.Repeat("x", max(1, size-len(benchEvent(1000000, "").AppendJSON(nil))))
}
