package client_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/fanoutd/fanoutd/client"
	"github.com/fanoutd/fanoutd/internal/testutil"
)

// The scenario suite (clients/scenarios/*.json, described in its
// README.md) played against a real fanoutd process.

type scenario struct {
	Name   string `json:"name"`
	About  string `json:"about"`
	Daemon struct {
		Command  string   `json:"command"`
		Config   string   `json:"config"`
		Args     []string `json:"args"`
		Captures []struct {
			Path   string  `json:"path"`
			Faults []fault `json:"faults"`
		} `json:"captures"`
		Cluster *struct {
			Edges      int    `json:"edges"`
			EdgeConfig string `json:"edge_config"`
		} `json:"cluster"`
	} `json:"daemon"`
	Steps []step `json:"steps"`
}

type fault struct {
	Kind    string `json:"kind"`
	Line    int    `json:"line"`
	Pattern string `json:"pattern"`
	Repl    string `json:"repl"`
}

type step struct {
	Op       string   `json:"op"`
	Client   string   `json:"client"`
	Token    string   `json:"token"`
	Name     string   `json:"name"`
	Streams  []string `json:"streams"`
	Stream   string   `json:"stream"`
	Error    string   `json:"error"`
	Kind     string   `json:"kind"`
	Sequence []string `json:"sequence"`
	Seconds  float64  `json:"seconds"`
	Times    int      `json:"times"`
	Code     string   `json:"code"`
	HTTP     int      `json:"http"`
	Timeout  float64  `json:"timeout_s"`
	Venue    string   `json:"venue"`
	Count    int      `json:"count"`
	Node     string   `json:"node"`
}

func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd) // this package is client/ at the root
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// fanoutdBin returns $FANOUTD_BIN or a fanoutd built from this tree.
func fanoutdBin(t *testing.T) string {
	if p := os.Getenv("FANOUTD_BIN"); p != "" {
		return p
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fanoutd-scenarios")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "fanoutd")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/fanoutd").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fanoutd processes")
	}
	root := repoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "clients", "scenarios", "*.json"))
	if len(files) < 6 {
		t.Fatalf("found %d scenarios", len(files))
	}
	bin := fanoutdBin(t)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sc scenario
		if err := json.Unmarshal(b, &sc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		t.Run(sc.Name, func(t *testing.T) { play(t, root, bin, &sc) })
	}
}

// run is one scenario's state: the daemon process and the clients.
type run struct {
	t       *testing.T
	root    string
	bin     string
	sc      *scenario
	dir     string
	addr    string
	args    []string
	cmd     *exec.Cmd
	exited  chan struct{}
	log     *syncBuf
	clients map[string]*rec
	holds   []*websocket.Conn
	// A cluster's (daemon.cluster): the NATS URL the ingest embeds, and
	// each edge's address and process, edge1 first.
	natsURL string
	edges   []*node
}

// node is an edge process of a cluster scenario.
type node struct {
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func play(t *testing.T, root, bin string, sc *scenario) {
	r := &run{t: t, root: root, bin: bin, sc: sc, dir: t.TempDir(), clients: map[string]*rec{}, log: &syncBuf{}}
	r.addr = freeAddr(t)
	if cl := sc.Daemon.Cluster; cl != nil {
		r.natsURL = "nats://" + freeAddr(t)
		for range cl.Edges {
			r.edges = append(r.edges, &node{addr: freeAddr(t)})
		}
	}
	r.prepare()
	t.Cleanup(func() {
		for _, c := range r.clients {
			c.cancel()
			<-c.c.Done()
		}
		for _, h := range r.holds {
			h.CloseNow()
		}
		r.kill()
		for _, e := range r.edges {
			e.kill()
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", r.log.String())
		}
	})
	for i, s := range sc.Steps {
		if s.Client == "" {
			s.Client = "main"
		}
		if s.Timeout == 0 {
			s.Timeout = 60
		}
		if err := r.step(&s); err != nil {
			t.Fatalf("step %d (%s): %v", i+1, s.Op, err)
		}
	}
}

// prepare writes the config and the (faulted) captures, and the args.
func (r *run) prepare() {
	d := &r.sc.Daemon
	r.args = []string{d.Command, "--listen", r.addr}
	if d.Cluster != nil {
		// The ingest: the venues, the embedded NATS server, and its
		// generated credentials in the scenario's directory.
		r.args = append(r.args, "--role", "ingest", "--embedded-nats", "--nats", r.natsURL)
		d.Config += "cluster:\n  nats_dir: " + filepath.Join(r.dir, "nats") + "\n  node: ingest\n"
	}
	if d.Config != "" {
		p := filepath.Join(r.dir, "fanoutd.yaml")
		if err := os.WriteFile(p, []byte(d.Config), 0o600); err != nil {
			r.t.Fatal(err)
		}
		r.args = append(r.args, "--config", p)
	} else {
		p := filepath.Join(r.dir, "empty.yaml")
		os.WriteFile(p, []byte("{}\n"), 0o600)
		r.args = append(r.args, "--config", p)
	}
	r.args = append(r.args, d.Args...)
	for i, c := range d.Captures {
		src := filepath.Join(r.root, c.Path)
		if len(c.Faults) == 0 {
			r.args = append(r.args, src)
			continue
		}
		dst := filepath.Join(r.dir, fmt.Sprintf("fault%d-%s", i, strings.TrimSuffix(filepath.Base(src), ".gz")))
		if err := writeFaulted(src, dst, c.Faults); err != nil {
			r.t.Fatalf("%s: %v", c.Path, err)
		}
		r.args = append(r.args, dst)
	}
}

// writeFaulted writes the capture src with faults applied as a plain
// capture dst with its metadata sidecar.
func writeFaulted(src, dst string, faults []fault) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst+".meta.json", []byte(zr.Comment), 0o600); err != nil {
		return err
	}
	var lines []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return err
	}
	// Apply from the last line back so line numbers are the original's.
	slices.SortStableFunc(faults, func(a, b fault) int { return b.Line - a.Line })
	for _, ft := range faults {
		i := ft.Line - 1
		if i < 0 || i >= len(lines) {
			return fmt.Errorf("fault line %d out of range", ft.Line)
		}
		switch ft.Kind {
		case "drop":
			lines = slices.Delete(lines, i, i+1)
		case "blank":
			lines = slices.Insert(lines, i, "")
		case "regex":
			re, err := regexp.Compile(ft.Pattern)
			if err != nil {
				return err
			}
			loc := re.FindStringIndex(lines[i])
			if loc == nil {
				return fmt.Errorf("line %d: %q does not match", ft.Line, ft.Pattern)
			}
			lines[i] = lines[i][:loc[0]] + ft.Repl + lines[i][loc[1]:]
		default:
			return fmt.Errorf("unknown fault %q", ft.Kind)
		}
	}
	return os.WriteFile(dst, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

func (r *run) start() error {
	cmd := exec.Command(r.bin, r.args...)
	cmd.Stdout, cmd.Stderr = r.log, r.log
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd, r.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(r.exited) }()
	return waitFor(30*time.Second, "the daemon's /healthz", func() bool {
		resp, err := http.Get("http://" + r.addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// startEdges starts every edge of a cluster scenario, with the edge
// token the ingest generated, and waits until each is ready (its venues'
// links up through the bus).
func (r *run) startEdges() error {
	var token []byte
	err := waitFor(30*time.Second, "the ingest's edge token", func() bool {
		b, err := os.ReadFile(filepath.Join(r.dir, "nats", "edge.token"))
		token = bytes.TrimSpace(b)
		return err == nil && len(token) > 0
	})
	if err != nil {
		return err
	}
	cfg := filepath.Join(r.dir, "edge.yaml")
	if err := os.WriteFile(cfg, []byte(r.sc.Daemon.Cluster.EdgeConfig), 0o600); err != nil {
		return err
	}
	for _, e := range r.edges {
		cmd := exec.Command(r.bin, "serve", "--role", "edge", "--nats", r.natsURL, "--listen", e.addr, "--config", cfg)
		cmd.Env = append(os.Environ(), "FANOUTD_NATS_TOKEN="+string(token))
		cmd.Stdout, cmd.Stderr = r.log, r.log
		if err := cmd.Start(); err != nil {
			return err
		}
		e.cmd, e.exited = cmd, make(chan struct{})
		go func() { cmd.Wait(); close(e.exited) }()
	}
	for _, e := range r.edges {
		err := waitFor(30*time.Second, "the edge's /readyz", func() bool {
			resp, err := http.Get("http://" + e.addr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (e *node) kill() {
	if e.cmd == nil {
		return
	}
	e.cmd.Process.Kill()
	<-e.exited
	e.cmd = nil
}

// urls is what a client connects to: the daemon, or every edge.
func (r *run) urls() []string {
	if len(r.edges) == 0 {
		return []string{r.url()}
	}
	var out []string
	for _, e := range r.edges {
		out = append(out, "ws://"+e.addr+"/v1/stream")
	}
	return out
}

func (r *run) kill() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// waitFor is testutil.Poll for a scenario step, which reports its failure
// as an error.
func waitFor(d time.Duration, what string, cond func() bool) error {
	if !testutil.Poll(d, cond) {
		return fmt.Errorf("timed out after %v waiting for %s", d, what)
	}
	return nil
}

// rec is one client and what its handler saw.
type rec struct {
	c      *client.Client
	token  string
	cancel context.CancelFunc

	mu          sync.Mutex
	states      map[string][]string
	notices     []*client.Notice
	gaps        []gapAt
	events      map[string][]evAt
	epoch       int
	connects    int
	disconnects int
	lastRead    map[string]uint64 // per stream, the last book event seq handed out, this epoch
	dropLast    map[string]uint64 // lastRead when the connection last ended
	pauseUntil  time.Time
	targets     map[string]uint64
	captured    map[string]client.BookSnapshot
}

type gapAt struct {
	g     client.Gap
	epoch int
}

type evAt struct {
	seq      uint64
	snapshot bool
	epoch    int
}

func (c *rec) handle(m client.Message) {
	c.mu.Lock()
	until := c.pauseUntil
	c.mu.Unlock()
	if d := time.Until(until); d > 0 {
		time.Sleep(d) // the client stops reading
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m := m.(type) {
	case *client.BookState:
		s := string(m.Reason)
		if m.State == client.Valid {
			s = "valid"
		}
		c.states[m.Stream] = append(c.states[m.Stream], s)
	case *client.Notice:
		c.notices = append(c.notices, m)
	case *client.Gap:
		c.gaps = append(c.gaps, gapAt{*m, c.epoch})
	case *client.Connected:
		c.connects++
	case *client.Disconnected:
		c.disconnects++
		c.dropLast = c.lastRead
		c.lastRead = map[string]uint64{}
		c.epoch++
	case *client.BookEvent:
		c.events[m.Stream] = append(c.events[m.Stream], evAt{m.Seq, m.Snapshot, c.epoch})
		c.lastRead[m.Stream] = m.Seq
		if c.targets[m.Stream] == m.Seq {
			if b := c.c.Book(m.Stream); b != nil {
				if s := b.Snapshot(); s.Seq == m.Seq {
					c.captured[m.Stream] = s
					delete(c.targets, m.Stream)
				}
			}
		}
	}
}

func (r *run) url() string { return "ws://" + r.addr + "/v1/stream" }

func (r *run) step(s *step) error {
	timeout := time.Duration(s.Timeout * float64(time.Second))
	c := r.clients[s.Client]
	if c == nil && s.Op != "connect" && s.Op != "start" && s.Op != "kill" && s.Op != "hold" {
		return fmt.Errorf("no client %q", s.Client)
	}
	switch s.Op {
	case "start":
		if err := r.start(); err != nil || len(r.edges) == 0 {
			return err
		}
		return r.startEdges()
	case "kill":
		if i, ok := strings.CutPrefix(s.Node, "edge"); ok {
			n, err := strconv.Atoi(i)
			if err != nil || n < 1 || n > len(r.edges) {
				return fmt.Errorf("no node %q", s.Node)
			}
			before := map[*rec]int{}
			for _, c := range r.clients {
				c.mu.Lock()
				before[c] = c.disconnects
				c.mu.Unlock()
			}
			r.edges[n-1].kill()
			for name, c := range r.clients {
				err := waitFor(timeout, name+" to lose its connection", func() bool {
					c.mu.Lock()
					defer c.mu.Unlock()
					return c.disconnects > before[c]
				})
				if err != nil {
					return err
				}
			}
			return nil
		}
		r.kill()
		return nil
	case "hold":
		h := http.Header{}
		if s.Token != "" {
			h.Set("Authorization", "Bearer "+s.Token)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, _, err := websocket.Dial(ctx, r.urls()[0], &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			return err
		}
		b, _ := json.Marshal(map[string]any{"op": "subscribe", "id": "hold", "streams": s.Streams})
		r.holds = append(r.holds, conn)
		return conn.Write(ctx, websocket.MessageText, b)
	case "connect":
		c := &rec{token: s.Token, states: map[string][]string{}, events: map[string][]evAt{}, lastRead: map[string]uint64{},
			targets: map[string]uint64{}, captured: map[string]client.BookSnapshot{}}
		cl, err := client.New(client.Options{URLs: r.urls(), Token: s.Token, Name: s.Name, Handler: c.handle, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
		if err != nil {
			return err
		}
		c.c = cl
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		go cl.Run(ctx)
		r.clients[s.Client] = c
		return nil
	case "subscribe":
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		for _, st := range s.Streams {
			c.mu.Lock()
			if _, ok := c.states[st]; !ok {
				c.states[st] = []string{"subscribing"}
			}
			c.mu.Unlock()
		}
		err := c.c.Subscribe(ctx, s.Streams...)
		if s.Error == "" {
			return err
		}
		var e *client.Error
		if !errors.As(err, &e) || string(e.Code) != s.Error {
			return fmt.Errorf("subscribe: %v, want the error %s", err, s.Error)
		}
		return nil
	case "notice":
		return waitFor(timeout, "notice "+s.Kind+" "+strings.Join(s.Streams, ","), func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(s.Streams) == 0 {
				n := 0
				for _, x := range c.notices {
					if x.Kind == s.Kind && (s.Venue == "" || x.Venue == s.Venue) {
						n++
					}
				}
				return n >= max(s.Count, 1)
			}
			for _, st := range s.Streams {
				if !slices.ContainsFunc(c.notices, func(n *client.Notice) bool { return n.Kind == s.Kind && n.Stream == st }) {
					return false
				}
			}
			return true
		})
	case "valid":
		return waitFor(timeout, "valid books", func() bool {
			for _, st := range s.Streams {
				if b := c.c.Book(st); b == nil {
					return false
				} else if v, _ := b.State(); v != client.Valid {
					return false
				}
			}
			return true
		})
	case "states":
		var got []string
		err := waitFor(timeout, fmt.Sprintf("states %v of %s", s.Sequence, s.Stream), func() bool {
			c.mu.Lock()
			got = slices.Clone(c.states[s.Stream])
			c.mu.Unlock()
			return subsequence(got, s.Sequence)
		})
		if err != nil {
			return fmt.Errorf("%v (went through %v)", err, tail(got, 30))
		}
		return nil
	case "pause":
		c.mu.Lock()
		c.pauseUntil = time.Now().Add(time.Duration(s.Seconds * float64(time.Second)))
		c.mu.Unlock()
		return nil
	case "match_daemon":
		times := max(s.Times, 1)
		for range times {
			for _, st := range s.Streams {
				if err := r.match(c, st, timeout); err != nil {
					return fmt.Errorf("%s: %v", st, err)
				}
			}
		}
		return nil
	case "no_duplicates":
		c.mu.Lock()
		defer c.mu.Unlock()
		for st, evs := range c.events {
			var last uint64
			for _, e := range evs {
				if e.snapshot {
					if e.seq < last { // a daemon that restarted numbers from 1 again
						last = 0
					}
					last = max(last, e.seq)
					continue
				}
				if e.seq <= last {
					return fmt.Errorf("%s: seq %d handed out after %d", st, e.seq, last)
				}
				last = e.seq
			}
		}
		return nil
	case "drop":
		c.mu.Lock()
		n := c.disconnects
		c.mu.Unlock()
		c.c.Reconnect()
		return waitFor(timeout, "the drop", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.disconnects > n
		})
	case "gap_exact":
		var first evAt
		var epoch int
		err := waitFor(timeout, "the book valid after the reattach", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			epoch = c.epoch
			found := false
			for _, e := range c.events[s.Stream] {
				if e.epoch == epoch {
					first, found = e, true
					break
				}
			}
			v, _ := c.c.Book(s.Stream).State()
			return found && v == client.Valid
		})
		if err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		last := c.dropLast[s.Stream]
		var got [][2]uint64
		for _, g := range c.gaps {
			if g.epoch == epoch && g.g.Stream == s.Stream {
				got = append(got, [2]uint64{g.g.First, g.g.Last})
			}
		}
		// Not read: up to the first snapshot's seq (it stands for them), or
		// up to the first update's seq minus one.
		end := first.seq
		if !first.snapshot {
			end--
		}
		var want [][2]uint64
		if end > last {
			want = [][2]uint64{{last + 1, end}}
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("gaps %v after the reattach, want %v (last read %d, first event %+v)", got, want, last, first)
		}
		r.t.Logf("%s: read up to %d, reattached, first event %+v: gaps %v", s.Stream, last, first, got)
		return nil
	case "fatal":
		select {
		case <-c.c.Done():
		case <-time.After(timeout):
			return errors.New("the client is still running")
		}
		var e *client.Error
		if runErr := c.c.Err(); !errors.As(runErr, &e) || string(e.Code) != s.Code || (s.HTTP != 0 && e.HTTPStatus != s.HTTP) {
			return fmt.Errorf("run ended with %v, want %s (HTTP %d)", c.c.Err(), s.Code, s.HTTP)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.connects != 0 || c.disconnects != 1 {
			return fmt.Errorf("%d connections, %d attempts ended: want one refused attempt", c.connects, c.disconnects)
		}
		return nil
	case "connected":
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.disconnects != 0 || c.connects != 1 {
			return fmt.Errorf("%d connections, %d disconnects", c.connects, c.disconnects)
		}
		return nil
	}
	return fmt.Errorf("unknown op %q", s.Op)
}

// match compares the client's book with /v1/books at the same seq.
func (r *run) match(c *rec, stream string, timeout time.Duration) error {
	parts := strings.SplitN(stream, ":", 3)
	u := "http://" + r.addr + "/v1/books/" + parts[0] + "/" + parts[2]
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", u, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		var d struct {
			Seq  uint64      `json:"seq"`
			Bids [][2]string `json:"bids"`
			Asks [][2]string `json:"asks"`
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &d); err != nil {
			return err
		}
		var got client.BookSnapshot
		ok := false
		c.mu.Lock()
		if s := c.c.Book(stream).Snapshot(); s.Seq == d.Seq {
			got, ok = s, true
		} else if s.Seq < d.Seq {
			c.targets[stream] = d.Seq
			delete(c.captured, stream)
		}
		c.mu.Unlock()
		if !ok {
			waitFor(5*time.Second, "the client at the daemon's seq", func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				got, ok = c.captured[stream]
				return ok
			})
		}
		if !ok {
			continue // the client passed that seq without a book at it (a loss): read again
		}
		if got.State != client.Valid && (got.Reason == client.ReasonDropping || got.Reason == client.ReasonGap) {
			continue // a fresh loss, announced and marked: read again once it is repaired
		}
		if got.State != client.Valid && got.Reason != client.ReasonLinkDown {
			return fmt.Errorf("book at seq %d is %v (%s)", got.Seq, got.State, got.Reason)
		}
		want := func(ls [][2]string) []client.RawLevel {
			out := make([]client.RawLevel, len(ls))
			for i, l := range ls {
				out[i] = client.RawLevel{Price: l[0], Size: l[1]}
			}
			return out
		}
		if !slices.Equal(got.Bids, want(d.Bids)) || !slices.Equal(got.Asks, want(d.Asks)) {
			return fmt.Errorf("book at seq %d differs from /v1/books: bids %d/%d asks %d/%d levels", d.Seq, len(got.Bids), len(d.Bids), len(got.Asks), len(d.Asks))
		}
		r.t.Logf("%s: book equals /v1/books at seq %d (%d bids, %d asks, %s)", stream, d.Seq, len(d.Bids), len(d.Asks), stateString(got))
		return nil
	}
	return errors.New("never caught the client's book at the daemon's seq")
}

func stateString(s client.BookSnapshot) string {
	if s.State == client.Valid {
		return "valid"
	}
	return string(s.Reason)
}

// subsequence reports whether want appears in got in order.
func subsequence(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return append([]string{"…" + strconv.Itoa(len(s)-n)}, s[len(s)-n:]...)
	}
	return s
}
