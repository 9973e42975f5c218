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
	"runtime/debug"
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
	steps      []int // connection counts, one round each
	rate       int
	settle     time.Duration // after the last connection subscribed, before measuring
	dur        time.Duration // the measured window, sampled every second
	memprofile string        // fanoutd only: the heap profile at the end of the window
	cpuprofile string        // fanoutd only: the CPU profile of the connect phase
}

// clientsPerChild is how many connections one bench-clients child opens:
// a process may hold at most 20,000 open files here, so the clients are
// spread over processes of their own (none in the server's).
const clientsPerChild = 5000

// connsRound is one server's figures at one connection count.
type connsRound struct {
	server     string
	conns      int
	connected  time.Duration // from the first dial to the last connection subscribed
	connectCPU time.Duration // the server's CPU time meanwhile
	steadyCPU  time.Duration // the server's CPU time over the measured window
	window     time.Duration // the measured window
	base, mean memSample
	max        int64 // RSS
	gcBase     memSample
	gcd        memSample
	sockBase   sockMem
	sock       sockMem
	open       int
	received   float64 // events/s over all connections
}

// idleMain is bench --idle: for each connection count of steps, fanoutd
// (fed in process) and, with --peer, the peer, one after the other, each
// a fresh server measured by connsMain; then a table of the rounds.
func idleMain(o options, steps []int, memprofile string, stdout, stderr io.Writer) int {
	if memprofile != "" {
		runtime.MemProfileRate = 256 // every allocation of a connection's, not one per 512 KiB
	}
	servers := []string{"fanoutd"}
	if o.peer != "" {
		servers = append(servers, o.peer)
	}
	var rounds []connsRound
	for _, n := range steps {
		for _, name := range servers {
			var srv benchServer
			var err error
			if name == "centrifugo" {
				srv, err = startCentrifugo(cmp.Or(o.peerBin, "centrifugo"), o.peerPublish, stderr)
			} else {
				// A fresh daemon in a heap returned to the system: what
				// the rounds before left is not counted.
				runtime.GC()
				debug.FreeOSMemory()
				srv, err = startFanoutd(o.delay, o.uring, "", stderr)
			}
			if err != nil {
				fmt.Fprintln(stderr, "fanoutd bench:", err)
				return 1
			}
			r, ok := connsMain(srv, connsOpts{steps: []int{n}, rate: o.rate, settle: o.warm, dur: o.dur, memprofile: memprofile, cpuprofile: o.cpuprofile}, stdout, stderr)
			srv.stop()
			if !ok {
				return 1
			}
			rounds = append(rounds, r)
		}
	}
	if len(rounds) > 1 {
		printConnsTable(stdout, rounds)
	}
	return 0
}

// acceptCPU is the server's CPU time for accepting and subscribing the
// round's connections: its CPU over the connect phase less what
// delivering the stream cost meanwhile, taken at the measured window's
// rate with, on average, half of the connections open.
func (r connsRound) acceptCPU() time.Duration {
	if r.window <= 0 {
		return r.connectCPU
	}
	deliver := time.Duration(float64(r.steadyCPU) / float64(r.window) * float64(r.connected) / 2)
	return max(r.connectCPU-deliver, time.Microsecond)
}

// printConnsTable ends bench --idle with one line per round.
func printConnsTable(w io.Writer, rounds []connsRound) {
	fmt.Fprintln(w, "\n| server | connections | RSS per connection, mean (max) | marginal RSS per connection | connected and subscribed per second (per server core-second) | kernel TCP per connection pair (slab; sockstat mem) | events/s received | open at the end |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	prev := map[string]connsRound{}
	for _, r := range rounds {
		n := float64(r.conns)
		// The growth from the server's previous count to this one, per
		// connection added: what one more connection costs, without the
		// costs paid once whatever the count.
		marginal := "–"
		if p, ok := prev[r.server]; ok && r.conns > p.conns {
			marginal = fmt.Sprintf("%.1f KB", float64((r.mean.rss-r.base.rss)-(p.mean.rss-p.base.rss))/float64(r.conns-p.conns)/1000)
		}
		prev[r.server] = r
		fmt.Fprintf(w, "| %s | %d | %.1f KB (%.1f) | %s | %.0f (%.0f) | %.1f KB; %.1f KB | %.0f | %d |\n", r.server, r.conns,
			float64(r.mean.rss-r.base.rss)/n/1000, float64(r.max-r.base.rss)/n/1000, marginal,
			n/r.connected.Seconds(), n/r.acceptCPU().Seconds(), float64(r.sock.slab-r.sockBase.slab)/n/1000,
			float64(r.sock.mem-r.sockBase.mem)/n/1000, r.received, r.open)
	}
}

// connsMain is one round of bench --idle: the server's memory per
// subscriber connection. It reads the server's RSS with the publisher
// running and no subscriber, after one connection came and went (the
// baseline), has child processes open
// o.steps[0] subscriber connections to one stream published at o.rate
// (at most clientsPerChild each, all dialling at once, 64 dials in
// flight per process, each read once all are up or from readAfter on),
// waits o.settle,
// then samples the server's RSS every second for o.dur and reports the
// growth over the baseline per connection, how fast the connections were
// accepted and subscribed, and the kernel's socket memory
// (/proc/net/sockstat, /proc/slabinfo) beside it. For fanoutd, which runs
// in this process, it also reports the runtime's own accounts (live heap,
// goroutine stacks, goroutines) the same way.
func connsMain(srv benchServer, o connsOpts, stdout, stderr io.Writer) (connsRound, bool) {
	conns := o.steps[0]
	r := connsRound{server: srv.name(), conns: conns}
	if err := raiseNoFile(conns + 256); err != nil { // the server's own, in this process or the peer's
		fmt.Fprintln(stderr, "fanoutd bench:", err)
		return r, false
	}
	pid := srv.pid()
	_, inProcess := srv.(*fanoutdServer)
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() { pubDone <- publishAt(srv, o.rate, stop) }()
	stopPub := sync.OnceValue(func() error { close(stop); return <-pubDone })
	defer stopPub()

	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "fanoutd bench:", err)
		return r, false
	}
	// One connection first, closed before the baseline: the code of the
	// connection path (paged in from the executable, shared by every
	// process that runs it) and what a server makes once, at its first
	// connection, are then in every round's baseline, as they already are
	// in a later round's of this process.
	if err := warmUp(exe, srv); err != nil {
		fmt.Fprintln(stderr, "fanoutd bench: warm-up connection:", err)
		return r, false
	}
	// The baseline: the server running, the publisher publishing, nobody
	// subscribed; the median of three readings a second apart (and, in
	// this process, the runtime's accounts after a collection).
	time.Sleep(time.Second)
	r.base = medianSample(pid, inProcess, 3)
	if inProcess {
		runtime.GC()
		r.gcBase = readMem(pid, inProcess)
	}
	r.sockBase = readSockMem()

	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		rd    *bufio.Reader
		n     int
	}
	var children []*child
	defer func() {
		for _, c := range children {
			c.stdin.Close()
			c.cmd.Wait()
		}
	}()
	var prof *os.File
	if o.cpuprofile != "" && inProcess {
		if prof, err = os.Create(o.cpuprofile); err == nil {
			pprof.StartCPUProfile(prof)
		}
	}
	connectStart, cpuStart := time.Now(), srv.cpu()
	for left := conns; left > 0; left -= clientsPerChild {
		n := min(left, clientsPerChild)
		cmd := exec.Command(exe, "bench-clients", "--idle", "--url", srv.wsURL(), "--proto", srv.name(),
			"--subs", strconv.Itoa(n), "--stream", srv.stream())
		cmd.Stderr = stderr
		stdin, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(stderr, "fanoutd bench:", err)
			return r, false
		}
		children = append(children, &child{cmd: cmd, stdin: stdin, rd: bufio.NewReader(out), n: n})
	}
	for _, c := range children {
		if line, err := c.rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
			fmt.Fprintf(stderr, "fanoutd bench: clients did not connect: %q %v\n", line, err)
			for _, c := range children {
				c.cmd.Process.Kill()
			}
			return r, false
		}
	}
	r.connected, r.connectCPU = time.Since(connectStart), srv.cpu()-cpuStart
	for _, c := range children { // every connection is up: the clients read from now on
		io.WriteString(c.stdin, "read\n")
	}
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
	}
	time.Sleep(o.settle)
	var samples []memSample
	for _, c := range children {
		io.WriteString(c.stdin, "measure\n")
	}
	winStart, winCPU := time.Now(), srv.cpu()
	for end := time.Now().Add(o.dur); time.Now().Before(end); time.Sleep(time.Second) {
		samples = append(samples, readMem(pid, inProcess))
	}
	r.window, r.steadyCPU = time.Since(winStart), srv.cpu()-winCPU
	r.sock = readSockMem()
	// The runtime's own accounts after a collection (which also shrinks
	// goroutine stacks that use less than a quarter of their size): the
	// live heap and stacks a connection keeps, apart from the garbage and
	// the freed memory the RSS still holds.
	if inProcess {
		runtime.GC()
		r.gcd = readMem(pid, inProcess)
	}
	if o.memprofile != "" && inProcess {
		if f, err := os.Create(o.memprofile); err == nil {
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	var cr idleReport
	for _, c := range children {
		c.stdin.Close() // the clients close their connections and report
		res, _ := io.ReadAll(c.rd)
		c.cmd.Wait()
		var one idleReport
		if err := json.Unmarshal(bytes.TrimSpace(res), &one); err != nil {
			fmt.Fprintf(stderr, "fanoutd bench: client report %q: %v\n", res, err)
			children = nil
			return r, false
		}
		cr.Open += one.Open
		cr.Received += one.Received
		cr.Seconds = max(cr.Seconds, one.Seconds)
		cr.Error = cmp.Or(cr.Error, one.Error)
	}
	children = nil
	if err := stopPub(); err != nil {
		// The memory is still measured; the events/s received say how
		// much of the window had a stream.
		fmt.Fprintln(stderr, "fanoutd bench: publish:", err)
	}
	r.open, r.received = cr.Open, float64(cr.Received)/cr.Seconds

	n := float64(conns)
	per := func(v, b int64) string { return fmt.Sprintf("%.1f KB", float64(v-b)/n/1000) }
	rss := func(s memSample) int64 { return s.rss }
	r.mean, r.max = memSample{rss: meanOf(samples, rss)}, maxMem(samples, rss)
	fmt.Fprintf(stdout, "%s: %d idle subscriber connections to one stream at %d events/s from %d client processes (connected and subscribed in %s: %.0f/s), %s measured after %s (GOMAXPROCS %d)\n",
		srv.name(), conns, o.rate, (conns+clientsPerChild-1)/clientsPerChild, r.connected.Round(time.Millisecond), n/r.connected.Seconds(), o.dur, o.settle, runtime.GOMAXPROCS(0))
	fmt.Fprintf(stdout, "accepting           %.0f µs of server CPU per connection accepted and subscribed, %.0f µs net of the deliveries meanwhile: %.0f/s per core-second\n",
		float64(r.connectCPU.Microseconds())/n, r.acceptCPU().Seconds()*1e6/n, n/r.acceptCPU().Seconds())
	fmt.Fprintf(stdout, "steady state        %.1f%% of a core for the %d connections\n", 100*r.steadyCPU.Seconds()/r.window.Seconds(), conns)
	fmt.Fprintf(stdout, "server RSS          %s before connecting, %s mean, %s max while connected\n",
		mib(r.base.rss), mib(r.mean.rss), mib(r.max))
	fmt.Fprintf(stdout, "RSS per connection  %s (mean of %d samples), %s (max)\n",
		per(r.mean.rss, r.base.rss), len(samples), per(r.max, r.base.rss))
	if inProcess {
		stacks := func(s memSample) int64 { return s.stacks }
		g := func(s memSample) int64 { return s.goroutines }
		fmt.Fprintf(stdout, "  goroutine stacks  %s per connection (after a forced GC: %s)\n", per(meanOf(samples, stacks), r.base.stacks), per(r.gcd.stacks, r.gcBase.stacks))
		fmt.Fprintf(stdout, "  live heap         %s per connection after a forced GC\n", per(r.gcd.live, r.gcBase.live))
		fmt.Fprintf(stdout, "  goroutines        %.2f per connection\n", float64(meanOf(samples, g)-r.base.goroutines)/n)
	}
	fmt.Fprintf(stdout, "kernel (whole machine, both ends of each connection): TCP sockets in use +%d, socket buffers (sockstat mem) %s, TCP socket slabs %s per connection\n",
		r.sock.inuse-r.sockBase.inuse, per(r.sock.mem, r.sockBase.mem), per(r.sock.slab, r.sockBase.slab))
	fmt.Fprintf(stdout, "clients             %d of %d open at the end, %.0f events/s received in all\n", cr.Open, conns, r.received)
	if cr.Open != conns {
		why := ""
		if f, ok := srv.(*fanoutdServer); ok {
			why = " (fanoutd's closes: " + closesByReason(f) + ")"
		}
		// Reported, and the rounds go on: a server that sheds connections
		// under this load is a result, not a harness failure.
		fmt.Fprintf(stderr, "fanoutd bench: %d connections were closed during the run%s; a client read: %s\n", conns-cr.Open, why, cr.Error)
	}
	return r, true
}

// warmUp has a bench-clients child subscribe one connection to srv's
// stream, read it for a moment and close it.
func warmUp(exe string, srv benchServer) error {
	cmd := exec.Command(exe, "bench-clients", "--idle", "--url", srv.wsURL(), "--proto", srv.name(),
		"--subs", "1", "--stream", srv.stream())
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer cmd.Wait()
	rd := bufio.NewReader(out)
	if line, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		stdin.Close()
		cmd.Process.Kill()
		return fmt.Errorf("%q %v %s", line, err, bytes.TrimSpace(errOut.Bytes()))
	}
	io.WriteString(stdin, "read\nmeasure\n")
	time.Sleep(300 * time.Millisecond) // a few events delivered
	stdin.Close()
	io.Copy(io.Discard, rd)
	return nil
}

// sockMem is the kernel's TCP socket memory, machine-wide: sockets in
// use and the pages of their buffers (/proc/net/sockstat), and the bytes
// of the slab caches every socket takes (/proc/slabinfo, where readable).
type sockMem struct {
	inuse, mem, slab int64
}

// socketSlabs are the slab caches a TCP socket's descriptor takes: the
// socket, its inode, the open file and the epoll entries watching it.
var socketSlabs = map[string]bool{"TCP": true, "sock_inode_cache": true, "filp": true, "eventpoll_epi": true, "dentry": true}

func readSockMem() sockMem {
	var m sockMem
	if b, err := os.ReadFile("/proc/net/sockstat"); err == nil {
		m.inuse, m.mem = parseSockstat(b)
	}
	if b, err := os.ReadFile("/proc/slabinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) > 3 && socketSlabs[f[0]] {
				active, _ := strconv.ParseInt(f[1], 10, 64)
				size, _ := strconv.ParseInt(f[3], 10, 64)
				m.slab += active * size
			}
		}
	}
	return m
}

// parseSockstat returns the TCP line's inuse and mem (pages, returned in
// bytes) of /proc/net/sockstat.
func parseSockstat(b []byte) (inuse, mem int64) {
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "TCP:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		for i := 0; i+1 < len(f); i += 2 {
			v, _ := strconv.ParseInt(f[i+1], 10, 64)
			switch f[i] {
			case "inuse":
				inuse = v
			case "mem":
				mem = v * int64(os.Getpagesize())
			}
		}
	}
	return inuse, mem
}

// parseCounts parses --conns: counts ≥ 1, comma-separated.
func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--conns %q: want counts ≥ 1, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
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

// readAfter bounds how long bench-clients --idle leaves its connections
// unread while connecting: 5 s of the stream is ~12 KB a connection.
const readAfter = 5 * time.Second

// idleReport is the child's report of bench --idle.
type idleReport struct {
	Open     int     // connections still open when told to stop
	Received int64   // events read over all connections
	Seconds  float64 // since the last connection subscribed
	Error    string  // the first read error of a connection that closed, if any
}

// idleClients is bench-clients --idle: subs connections subscribed to one
// stream, each read (and Centrifugo's pings answered) by a goroutine from
// the line "read" on stdin (or readAfter after it began), until stdin
// closes; then it reports how many
// were still open and the events read since the line "measure".
func idleClients(url, proto, stream string, subs int, stdout, stderr io.Writer) int {
	conns := make([]*websocket.Conn, subs)
	sub := []byte(`{"op":"subscribe","id":"b","streams":["` + stream + `"]}`)
	var next, received, open atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	var readErr atomic.Pointer[string]
	read := func(ws *websocket.Conn) {
		defer open.Add(-1)
		for {
			_, m, err := ws.ReadMessage()
			if err != nil {
				e := err.Error()
				readErr.CompareAndSwap(nil, &e)
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
	// A connection is read from the parent's "read" (every client process
	// has connected), or from readAfter on if connecting takes longer, so
	// that what the kernel holds for it meanwhile stays within its socket
	// buffers and the server's write deadline is never reached.
	var readMu sync.Mutex
	reading, pending := false, []*websocket.Conn{}
	startReading := func() {
		readMu.Lock()
		defer readMu.Unlock()
		if !reading {
			reading = true
			for _, ws := range pending {
				go read(ws)
			}
			pending = nil
		}
	}
	readTimer := time.AfterFunc(readAfter, startReading)
	defer readTimer.Stop()
	for range 64 { // dial in parallel: 10,000 one at a time take long
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
				readMu.Lock()
				if reading {
					go read(ws)
				} else {
					pending = append(pending, ws)
				}
				readMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		fmt.Fprintln(stderr, "bench-clients:", *err)
		return 1
	}
	fmt.Fprintln(stdout, "ready")
	// Until "read" the kernel holds what the server wrote, and the clients
	// take no CPU from the server while it accepts, so the connect phase's
	// rate is the server's.
	in := bufio.NewReader(os.Stdin)
	in.ReadString('\n')
	startReading()
	in.ReadString('\n') // "measure": the backlog is read, the window begins
	start, received0 := time.Now(), received.Load()
	io.Copy(io.Discard, in)
	r := idleReport{Open: int(open.Load()), Received: received.Load() - received0, Seconds: time.Since(start).Seconds()}
	if e := readErr.Load(); e != nil && r.Open < subs {
		r.Error = *e
	}
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
	ws.SetReadDeadline(time.Now().Add(60 * time.Second))
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
