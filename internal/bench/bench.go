// Package bench is `fanoutd bench`: a load harness that runs a server under
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
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// Main is `fanoutd bench`, the load tool: it runs a server under test, fed at a fixed
// rate, and N websocket subscribers in a child process (so their CPU is
// not the server's), and reports delivered/s, server CPU per delivered
// message and latency percentiles. The server is a daemon in this process
// fed by a test source, or with --peer centrifugo a Centrifugo binary in
// a child process fed through its HTTP publish API, so that both are
// measured on the same machine in the same way.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	subs := fs.Int("subs", 200, "subscribers")
	rate := fs.Int("rate", 2000, "events per second")
	size := fs.Int("size", 200, "approximate event size in bytes")
	dur := fs.Duration("duration", 20*time.Second, "measured duration")
	warm := fs.Duration("warmup", 3*time.Second, "warm-up before measuring")
	delay := fs.String("write-delay", "", "websocket.write_delay of the daemon under test (default: the daemon's default)")
	uring := fs.Bool("io-uring", true, "websocket.io_uring of the daemon under test")
	cpuprofile := fs.String("cpuprofile", "", "write the server's CPU profile of the measured window to this file (fanoutd only)")
	peer := fs.String("peer", "", "measure this peer instead of fanoutd: centrifugo")
	peerBin := fs.String("peer-bin", "", "the peer's binary (default: its name, looked up in PATH)")
	idle := fs.Bool("idle", false, "measure the server's memory per idle subscriber connection instead: --conns connections to one stream at --rate (default 10 here), RSS sampled every second for --duration after --warmup (default 10s here)")
	conns := fs.Int("conns", 10000, "subscriber connections of --idle")
	memprofile := fs.String("memprofile", "", "with --idle: write the server's heap profile at the end of the measured window to this file (fanoutd only)")
	edges := fs.Int("edges", 0, "also run a cluster: one ingest (this process, embedded NATS) and N edge processes, against --role all under the same load")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *idle {
		if !set["rate"] {
			*rate = 10
		}
		if !set["warmup"] {
			*warm = 10 * time.Second
		}
		if *edges > 0 || *conns < 1 || *rate < 1 {
			fmt.Fprintln(stderr, "fanoutd bench: --idle needs --conns ≥ 1 and --rate ≥ 1, and measures one server (no --edges)")
			return 2
		}
	}
	if *edges > 0 {
		if *peer != "" || *cpuprofile != "" {
			fmt.Fprintln(stderr, "fanoutd bench: --edges measures fanoutd itself: --peer and --cpuprofile do not apply")
			return 2
		}
		return clusterMain(*edges, loadOpts{subs: *subs, rate: *rate, size: *size, warm: *warm, dur: *dur, delay: *delay, uring: *uring}, stdout, stderr)
	}
	if *idle && *memprofile != "" {
		runtime.MemProfileRate = 256 // every allocation of a connection's, not one per 512 KiB
	}
	var srv benchServer
	var err error
	switch *peer {
	case "":
		srv, err = startFanoutd(*delay, *uring, stderr)
	case "centrifugo":
		srv, err = startCentrifugo(cmp.Or(*peerBin, "centrifugo"), stderr)
	default:
		fmt.Fprintf(stderr, "fanoutd bench: --peer %q: want centrifugo\n", *peer)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd bench:", err)
		return 1
	}
	defer srv.stop()
	if *idle {
		return connsMain(srv, connsOpts{conns: *conns, rate: *rate, settle: *warm, dur: *dur, memprofile: *memprofile}, stdout, stderr)
	}

	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd bench:", err)
		return 1
	}
	child := exec.Command(exe, "bench-clients", "--url", srv.wsURL(), "--proto", srv.name(),
		"--subs", fmt.Sprint(*subs), "--stream", srv.stream(), "--warmup", warm.String(), "--duration", dur.String())
	child.Stderr = stderr
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		fmt.Fprintln(stderr, "fanoutd bench:", err)
		return 1
	}
	rd := bufio.NewReader(out)
	if line, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		fmt.Fprintf(stderr, "fanoutd bench: clients did not start: %q %v\n", line, err)
		child.Process.Kill()
		child.Wait()
		return 1
	}
	// Pad the trade id so the encoded event is about size bytes.
	mk := func(i int, pad string) *venue.Event {
		now := time.Now()
		return &venue.Event{Kind: venue.KindTrade, Stream: benchStream, TradeID: pad, Price: decimal.New(int64(5000000+i%1000), -2),
			Size: decimal.New(12345, -4), Side: venue.SideBuy, RecvTime: now, VenueTime: now, Seq: uint64(i)}
	}
	probe := mk(1000000, "")
	pad := strings.Repeat("x", max(1, *size-len(probe.AppendJSON(nil))))

	interval := time.Second / time.Duration(*rate)
	start := time.Now()
	measureAt, endAt := start.Add(*warm), start.Add(*warm+*dur)
	var cpu0, cpu1 time.Duration
	var c0, c1 benchCounters
	measuring := false
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if !measuring && !at.Before(measureAt) {
			cpu0, c0 = srv.cpu(), srv.counters()
			measuring = true
			if *cpuprofile != "" && *peer == "" {
				if f, err := os.Create(*cpuprofile); err == nil {
					pprof.StartCPUProfile(f)
					defer f.Close()
				}
			}
		}
		if !at.Before(endAt) {
			cpu1, c1 = srv.cpu(), srv.counters()
			if *cpuprofile != "" && *peer == "" {
				pprof.StopCPUProfile()
			}
			break
		}
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		if err := srv.publish(mk(i, pad)); err != nil {
			fmt.Fprintln(stderr, "fanoutd bench: publish:", err)
			child.Process.Kill()
			child.Wait()
			return 1
		}
	}
	res, _ := io.ReadAll(rd)
	child.Wait()
	var cr clientReport
	if err := json.Unmarshal(bytes.TrimSpace(res), &cr); err != nil {
		fmt.Fprintf(stderr, "fanoutd bench: client report %q: %v\n", res, err)
		return 1
	}
	// The server's own count where it has one; else what the clients read
	// of the events published in the measured window.
	delivered := uint64(cr.Received)
	if c1.ok {
		delivered = c1.delivered - c0.delivered
	}
	cpu := cpu1 - cpu0
	fmt.Fprintf(stdout, "%s: subscribers %d, %d events/s of %d bytes, %s measured after %s warm-up (GOMAXPROCS %d)\n",
		srv.name(), *subs, *rate, len(mk(0, pad).AppendJSON(nil))+8, *dur, *warm, runtime.GOMAXPROCS(0))
	fmt.Fprintf(stdout, "delivered/s         %.0f (clients received %.0f/s)\n", float64(delivered)/dur.Seconds(), float64(cr.Received)/dur.Seconds())
	if c1.ok {
		fmt.Fprintf(stdout, "dropped             %d\n", c1.dropped-c0.dropped)
	}
	fmt.Fprintf(stdout, "server CPU          %.1f%% of one core\n", 100*cpu.Seconds()/dur.Seconds())
	fmt.Fprintf(stdout, "server CPU/message  %.3f µs\n", float64(cpu.Nanoseconds())/float64(max(delivered, 1))/1000)
	fmt.Fprintf(stdout, "latency p50 %s  p99 %s  p999 %s  max %s (publish to client read)\n",
		time.Duration(cr.P50), time.Duration(cr.P99), time.Duration(cr.P999), time.Duration(cr.Max))
	if f, ok := srv.(*fanoutdServer); ok {
		f.report(stdout)
	}
	fmt.Fprintf(stdout, "client process CPU  %.1f%% of one core\n", 100*time.Duration(cr.CPU).Seconds()/dur.Seconds())
	return 0
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

// fanoutdServer is the daemon in this process, fed by a test source.
type fanoutdServer struct {
	d      *daemon.Daemon
	src    *testsource.Source
	feed   *fanout.Feed
	url    string
	cancel func()
}

func startFanoutd(delay string, uring bool, stderr io.Writer) (*fanoutdServer, error) {
	yml := "listen: 127.0.0.1:0\nlimits:\n  max_connections_per_token: 100000\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n"
	yml += fmt.Sprintf("websocket:\n  io_uring: %t\n", uring)
	if delay != "" {
		yml += "  write_delay: " + delay + "\n"
	}
	cfg, err := config.Parse([]byte(yml), nil)
	if err != nil {
		return nil, err
	}
	f := &fanoutdServer{}
	src := venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) {
		f.src = testsource.New("coinbase", c)
		return f.src, nil
	}}
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
	f.feed = f.d.Hub().Feed("coinbase")
	f.url = "ws://" + ln.Addr().String() + "/v1/stream"
	return f, nil
}

func (f *fanoutdServer) name() string                  { return "fanoutd" }
func (f *fanoutdServer) wsURL() string                 { return f.url }
func (f *fanoutdServer) stream() string                { return benchStream }
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
	Received            int64
	P50, P99, P999, Max int64 // nanoseconds
	CPU                 int64 // nanoseconds, during the measured window
}

// Clients is the child of bench: N subscribers that read, count and
// time every event (publish time is the event's recv_time).
func Clients(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-clients", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "")
	subs := fs.Int("subs", 200, "")
	stream := fs.String("stream", "", "")
	proto := fs.String("proto", "fanoutd", "fanoutd or centrifugo")
	warm := fs.Duration("warmup", 3*time.Second, "")
	dur := fs.Duration("duration", 20*time.Second, "")
	idle := fs.Bool("idle", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *idle {
		return idleClients(*url, *proto, *stream, *subs, stdout, stderr)
	}
	const bucket = 10 * time.Microsecond
	const nb = 200000 // 2 s of 10 µs buckets
	type result struct {
		hist     []int64
		received int64
	}
	var wg sync.WaitGroup
	results := make([]result, *subs)
	conns := make([]*websocket.Conn, *subs)
	sub := []byte(`{"op":"subscribe","id":"b","streams":["` + *stream + `"]}`)
	for i := range conns {
		ws, _, err := websocket.DefaultDialer.Dial(*url, nil)
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
	fmt.Fprintln(stdout, "ready")
	cpu0 := processCPU() // replaced by the CPU time when the first measured event arrives
	var cpuOnce sync.Once
	key := []byte(`"recv_time":"`)
	for i, ws := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			r.hist = make([]int64, nb+1)
			buf := make([]byte, 0, 64<<10)
			for {
				ws.SetReadDeadline(measureTo.Add(2 * time.Second))
				_, rd, err := ws.NextReader()
				if err != nil {
					return
				}
				if buf, err = venue.ReadFrame(rd, buf); err != nil {
					return
				}
				now := time.Now()
				if now.After(measureTo.Add(time.Second)) {
					return
				}
				for rest := buf; len(rest) > 0; {
					line := rest
					if j := bytes.IndexByte(rest, '\n'); j >= 0 {
						line, rest = rest[:j], rest[j+1:]
					} else {
						rest = nil
					}
					k := bytes.Index(line, key)
					if k < 0 {
						if string(line) == "{}" { // Centrifugo's ping: answer with a pong
							ws.WriteMessage(websocket.TextMessage, line)
						}
						continue
					}
					ts := line[k+len(key):]
					pub, ok := fastTime(ts, now)
					if !ok || pub.Before(measureFrom) || !pub.Before(measureTo) {
						continue
					}
					cpuOnce.Do(func() { cpu0 = processCPU() })
					r.received++
					b := int(now.Sub(pub) / bucket)
					r.hist[min(max(b, 0), nb)]++
				}
			}
		}()
	}
	time.Sleep(time.Until(measureTo))
	cpu := processCPU() - cpu0
	wg.Wait()
	for _, ws := range conns {
		ws.Close()
	}
	hist := make([]int64, nb+1)
	var total int64
	for _, r := range results {
		total += r.received
		for j, c := range r.hist {
			hist[j] += c
		}
	}
	pct := func(p float64) int64 {
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
	maxB := 0
	for j, c := range hist {
		if c > 0 {
			maxB = j
		}
	}
	json.NewEncoder(stdout).Encode(clientReport{Received: total, P50: pct(0.5), P99: pct(0.99), P999: pct(0.999),
		Max: int64(time.Duration(maxB+1) * bucket), CPU: int64(cpu)})
	return 0
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
