package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/venue"
)

// connsOpts are the flags of bench --idle.
type connsOpts struct {
	conns      int
	rate       int
	settle     time.Duration // after the last connection subscribed, before measuring
	dur        time.Duration // the measured window, sampled every second
	memprofile string        // fanoutd only: the heap profile at the end of the window
}

// idleMain starts the server of o (fanoutd fed in process, or the peer)
// and runs connsMain on it.
func idleMain(o options, conns int, memprofile string, stdout, stderr io.Writer) int {
	if memprofile != "" {
		runtime.MemProfileRate = 256 // every allocation of a connection's, not one per 512 KiB
	}
	var srv benchServer
	var err error
	if o.peer == "centrifugo" {
		srv, err = startCentrifugo(cmp.Or(o.peerBin, "centrifugo"), o.peerPublish, stderr)
	} else {
		srv, err = startFanoutd(o.delay, o.uring, "", stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd bench:", err)
		return 1
	}
	defer srv.stop()
	return connsMain(srv, connsOpts{conns: conns, rate: o.rate, settle: o.warm, dur: o.dur, memprofile: memprofile}, stdout, stderr)
}

// connsMain is bench --idle: the server's memory per subscriber
// connection. It reads the server's RSS with the publisher running and no
// subscriber (the baseline), has a child process open o.conns subscriber
// connections to one stream published at o.rate, waits o.settle, then
// samples the server's RSS every second for o.dur and reports the growth
// over the baseline per connection. For fanoutd, which runs in this
// process, it also reports the runtime's own accounts (live heap, goroutine
// stacks, goroutines) the same way.
func connsMain(srv benchServer, o connsOpts, stdout, stderr io.Writer) int {
	if err := raiseNoFile(o.conns + 256); err != nil {
		fmt.Fprintln(stderr, "fanoutd bench:", err)
		return 1
	}
	pid := srv.pid()
	_, inProcess := srv.(*fanoutdServer)
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() { pubDone <- publishAt(srv, o.rate, stop) }()
	stopPub := sync.OnceValue(func() error { close(stop); return <-pubDone })
	defer stopPub()

	// The baseline: the server running, the publisher publishing, nobody
	// subscribed; the median of three readings a second apart (and, in
	// this process, the runtime's accounts after a collection).
	time.Sleep(time.Second)
	base := medianSample(pid, inProcess, 3)
	var gcBase memSample
	if inProcess {
		runtime.GC()
		gcBase = readMem(pid, inProcess)
	}

	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd bench:", err)
		return 1
	}
	child := exec.Command(exe, "bench-clients", "--idle", "--url", srv.wsURL(), "--proto", srv.name(),
		"--subs", strconv.Itoa(o.conns), "--stream", srv.stream())
	child.Stderr = stderr
	stdin, _ := child.StdinPipe()
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		fmt.Fprintln(stderr, "fanoutd bench:", err)
		return 1
	}
	connectStart := time.Now()
	rd := bufio.NewReader(out)
	if line, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		fmt.Fprintf(stderr, "fanoutd bench: clients did not connect: %q %v\n", line, err)
		child.Process.Kill()
		child.Wait()
		return 1
	}
	connectTook := time.Since(connectStart)
	time.Sleep(o.settle)
	var samples []memSample
	for end := time.Now().Add(o.dur); time.Now().Before(end); time.Sleep(time.Second) {
		samples = append(samples, readMem(pid, inProcess))
	}
	// The runtime's own accounts after a collection (which also shrinks
	// goroutine stacks that use less than a quarter of their size): the
	// live heap and stacks a connection keeps, apart from the garbage and
	// the freed memory the RSS still holds.
	var gcd memSample
	if inProcess {
		runtime.GC()
		gcd = readMem(pid, inProcess)
	}
	if o.memprofile != "" && inProcess {
		if f, err := os.Create(o.memprofile); err == nil {
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	stdin.Close() // the clients close their connections and report
	res, _ := io.ReadAll(rd)
	child.Wait()
	var cr idleReport
	if err := json.Unmarshal(bytes.TrimSpace(res), &cr); err != nil {
		fmt.Fprintf(stderr, "fanoutd bench: client report %q: %v\n", res, err)
		return 1
	}
	if err := stopPub(); err != nil {
		fmt.Fprintln(stderr, "fanoutd bench: publish:", err)
		return 1
	}

	n := float64(o.conns)
	per := func(v, b int64) string { return fmt.Sprintf("%.1f KB", float64(v-b)/n/1000) }
	rss := func(s memSample) int64 { return s.rss }
	fmt.Fprintf(stdout, "%s: %d idle subscriber connections to one stream at %d events/s (connected in %s), %s measured after %s (GOMAXPROCS %d)\n",
		srv.name(), o.conns, o.rate, connectTook.Round(time.Millisecond), o.dur, o.settle, runtime.GOMAXPROCS(0))
	fmt.Fprintf(stdout, "server RSS          %s before connecting, %s mean, %s max while connected\n",
		mib(base.rss), mib(meanOf(samples, rss)), mib(maxMem(samples, rss)))
	fmt.Fprintf(stdout, "RSS per connection  %s (mean of %d samples), %s (max)\n",
		per(meanOf(samples, rss), base.rss), len(samples), per(maxMem(samples, rss), base.rss))
	if inProcess {
		stacks := func(s memSample) int64 { return s.stacks }
		g := func(s memSample) int64 { return s.goroutines }
		fmt.Fprintf(stdout, "  goroutine stacks  %s per connection (after a forced GC: %s)\n", per(meanOf(samples, stacks), base.stacks), per(gcd.stacks, gcBase.stacks))
		fmt.Fprintf(stdout, "  live heap         %s per connection after a forced GC\n", per(gcd.live, gcBase.live))
		fmt.Fprintf(stdout, "  goroutines        %.2f per connection\n", float64(meanOf(samples, g)-base.goroutines)/n)
	}
	fmt.Fprintf(stdout, "clients             %d of %d open at the end, %.0f events/s received in all\n", cr.Open, o.conns, float64(cr.Received)/cr.Seconds)
	if cr.Open != o.conns {
		why := ""
		if f, ok := srv.(*fanoutdServer); ok {
			why = " (fanoutd's closes: " + closesByReason(f) + ")"
		}
		fmt.Fprintf(stderr, "fanoutd bench: %d connections were closed during the run%s\n", o.conns-cr.Open, why)
		return 1
	}
	return 0
}

// publishAt publishes an event of about 200 bytes every 1/rate s until stop.
func publishAt(srv benchServer, rate int, stop chan struct{}) error {
	t := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
	defer t.Stop()
	pad := strings.Repeat("x", 60)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		now := time.Now()
		ev := &venue.Event{Kind: venue.KindTrade, Stream: benchStream, TradeID: pad, Price: decimal.New(int64(5000000+i%1000), -2),
			Size: decimal.New(12345, -4), Side: venue.SideBuy, RecvTime: now, VenueTime: now, Seq: uint64(i)}
		if err := srv.publish(ev); err != nil {
			return err
		}
	}
}

// raiseNoFile raises this process's open-file limit to at least need
// (its children inherit it), up to the hard limit.
func raiseNoFile(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= uint64(need) {
		return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) // explicit, so children keep it
	}
	if lim.Max < uint64(need) {
		return fmt.Errorf("RLIMIT_NOFILE hard limit %d is below the %d descriptors needed (raise it with ulimit -Hn)", lim.Max, need)
	}
	lim.Cur = uint64(need)
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// memSample is one reading of the server's memory.
type memSample struct {
	rss                      int64
	live, stacks, goroutines int64 // this process's runtime's; zero for a peer
}

func readMem(pid int, inProcess bool) memSample {
	s := memSample{rss: procRSS(pid)}
	if inProcess {
		ms := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/sched/goroutines:goroutines"}}
		metrics.Read(ms)
		s.live, s.stacks, s.goroutines = int64(ms[0].Value.Uint64()), int64(ms[1].Value.Uint64()), int64(ms[2].Value.Uint64())
	}
	return s
}

// medianSample is the reading of median RSS of n, a second apart.
func medianSample(pid int, inProcess bool, n int) memSample {
	var ss []memSample
	for i := range n {
		if i > 0 {
			time.Sleep(time.Second)
		}
		ss = append(ss, readMem(pid, inProcess))
	}
	slices.SortFunc(ss, func(a, b memSample) int { return int(a.rss - b.rss) })
	return ss[len(ss)/2]
}

// procRSS is VmRSS of /proc/<pid>/status in bytes, or 0.
func procRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	return parseVmRSS(b)
}

func parseVmRSS(status []byte) int64 {
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func meanOf(ss []memSample, get func(memSample) int64) int64 {
	var sum int64
	for _, s := range ss {
		sum += get(s)
	}
	return sum / int64(max(len(ss), 1))
}

func maxMem(ss []memSample, get func(memSample) int64) int64 {
	var m int64
	for _, s := range ss {
		m = max(m, get(s))
	}
	return m
}

// idleReport is the child's report of bench --idle.
type idleReport struct {
	Open     int     // connections still open when told to stop
	Received int64   // events read over all connections
	Seconds  float64 // since the last connection subscribed
}

// idleClients is bench-clients --idle: subs connections subscribed to one
// stream, each read (and Centrifugo's pings answered) by a goroutine from
// the moment it subscribed, until stdin closes; then it reports how many
// were still open.
func idleClients(url, proto, stream string, subs int, stdout, stderr io.Writer) int {
	conns := make([]*websocket.Conn, subs)
	sub := []byte(`{"op":"subscribe","id":"b","streams":["` + stream + `"]}`)
	var next, received, open atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	read := func(ws *websocket.Conn) {
		defer open.Add(-1)
		for {
			_, m, err := ws.ReadMessage()
			if err != nil {
				return
			}
			for line := range bytes.SplitSeq(m, []byte("\n")) {
				if string(line) == "{}" { // Centrifugo's ping: answer with a pong
					ws.WriteMessage(websocket.TextMessage, line)
				} else {
					received.Add(1)
				}
			}
		}
	}
	for range 32 { // dial in parallel: 10,000 one at a time take long
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < subs && failed.Load() == nil; i = int(next.Add(1) - 1) {
				ws, err := idleDial(url, proto, stream, sub)
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				conns[i] = ws
				open.Add(1)
				go read(ws)
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		fmt.Fprintln(stderr, "bench-clients:", *err)
		return 1
	}
	start, received0 := time.Now(), received.Load()
	fmt.Fprintln(stdout, "ready")
	io.Copy(io.Discard, os.Stdin)
	r := idleReport{Open: int(open.Load()), Received: received.Load() - received0, Seconds: time.Since(start).Seconds()}
	for _, ws := range conns {
		ws.Close()
	}
	json.NewEncoder(stdout).Encode(r)
	return 0
}

func idleDial(url, proto, stream string, sub []byte) (*websocket.Conn, error) {
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		return nil, err
	}
	if proto == "centrifugo" {
		if err := centrifugoConnect(ws, stream); err != nil {
			ws.Close()
			return nil, fmt.Errorf("subscribe: %w", err)
		}
		return ws, nil
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer ws.SetReadDeadline(time.Time{})
	ws.WriteMessage(websocket.TextMessage, sub)
	// The ack, then possibly events already: read until the ack is seen.
	for {
		_, m, err := ws.ReadMessage()
		if err != nil {
			ws.Close()
			return nil, fmt.Errorf("subscribe: %w", err)
		}
		if bytes.Contains(m, []byte(`"ack"`)) {
			return ws, nil
		}
	}
}

// closesByReason lists the daemon's fanoutd_closes_total by reason.
func closesByReason(f *fanoutdServer) string {
	mfs, _ := f.d.Metrics().Gather()
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "fanoutd_closes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				out = append(out, fmt.Sprintf("%s %.0f", l.GetValue(), m.GetCounter().GetValue()))
			}
		}
	}
	return strings.Join(out, ", ")
}
