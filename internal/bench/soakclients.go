package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/cli"
)

// soakReport is what the soak's subscribers report to the parent.
type soakReport struct {
	Roles                                              map[string]int
	Received                                           int64 // events read
	Sessions, Reattached, LinkDowns, Dropping, Resumed int64
	ClosedByDaemon                                     int64 // connections the daemon closed unasked
	AnnouncedLost, Gaps, Unannounced                   int64
	Failures                                           []string
	MoreFailures                                       int
}

// soakRoles are what a soak subscriber does.
const (
	roleHealthy = "healthy" // reads everything: must lose nothing
	roleStall   = "stall"   // stops reading for --stall-for, again and again
	roleFlap    = "flap"    // ephemeral: drops its connection and connects again
	roleNamed   = "named"   // named: closes, then reattaches under its name
)

// soakRun is the state the subscribers share.
type soakRun struct {
	url      string
	stallFor time.Duration
	start    time.Time
	stop     chan struct{} // closed at the end of the run

	mu       sync.Mutex // protects failures and more
	failures []string
	more     int

	received, sessions, reattached, linkDowns, dropping, resumed atomic.Int64
	closedByDaemon                                               atomic.Int64
	lost, gaps, unannounced                                      atomic.Int64
}

func (r *soakRun) fail(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) < 50 {
		r.failures = append(r.failures, fmt.Sprintf("[%.0fs] ", time.Since(r.start).Seconds())+fmt.Sprintf(format, a...))
	} else {
		r.more++
	}
}

func (r *soakRun) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// SoakClients is the child of soak: the subscribers. It prints "ready" once
// every subscriber has connected and subscribed, runs for --duration,
// prints "stopping", closes them all and prints its report as JSON.
func SoakClients(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak-clients", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "")
	subs := fs.Int("subs", 2000, "")
	streamList := fs.String("streams", "", "")
	dur := fs.Duration("duration", 2*time.Minute, "")
	stallFrac := fs.Float64("stall", 0.05, "")
	flapFrac := fs.Float64("flap", 0.05, "")
	namedFrac := fs.Float64("named", 0.05, "")
	stallFor := fs.Duration("stall-for", 12*time.Second, "")
	if rest, err := cli.ParseArgs(fs, args); err != nil {
		return 2
	} else if len(rest) > 0 {
		fmt.Fprintf(stderr, "fanoutd: unexpected argument %q\n", rest[0])
		return 2
	}
	streams := strings.Split(*streamList, ",")
	run := &soakRun{url: *url, stallFor: *stallFor, start: time.Now(), stop: make(chan struct{})}
	roles := map[string]int{}
	nStall, nFlap, nNamed := int(float64(*subs)**stallFrac), int(float64(*subs)**flapFrac), int(float64(*subs)**namedFrac)
	clients := make([]*soakClient, *subs)
	for i := range clients {
		c := &soakClient{run: run, id: i, role: roleHealthy}
		switch {
		case i < nStall:
			c.role = roleStall
		case i < nStall+nFlap:
			c.role = roleFlap
		case i < nStall+nFlap+nNamed:
			c.role = roleNamed
			c.name = fmt.Sprintf("soak-%d-%d", time.Now().UnixNano()%1e6, i)
		}
		roles[c.role]++
		// A stalled subscriber holds every stream, so its queue fills
		// fast; the others one or two.
		if c.role == roleStall {
			c.streams = streams
		} else {
			c.streams = []string{streams[i%len(streams)]}
			if i%2 == 1 && len(streams) > 1 {
				c.streams = append(c.streams, streams[(i+1)%len(streams)])
			}
		}
		clients[i] = c
	}
	// Connect with some parallelism; each client reads as soon as it is
	// subscribed.
	var ready, done sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, c := range clients {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			sem <- struct{}{}
			conn, err := c.connect(true)
			<-sem
			ready.Done()
			if err != nil {
				run.fail("%s: first connect: %v", c, err)
				return
			}
			c.loop(conn)
		}()
	}
	ready.Wait()
	run.start = time.Now()
	fmt.Fprintln(stdout, "ready")
	time.Sleep(*dur)
	fmt.Fprintln(stdout, "stopping") // the parent stops sampling: what follows is teardown
	close(run.stop)
	for _, c := range clients {
		c.closeNow()
	}
	done.Wait()
	rep := soakReport{Roles: roles, Received: run.received.Load(), Sessions: run.sessions.Load(), Reattached: run.reattached.Load(),
		ClosedByDaemon: run.closedByDaemon.Load(), LinkDowns: run.linkDowns.Load(), Dropping: run.dropping.Load(), Resumed: run.resumed.Load(),
		AnnouncedLost: run.lost.Load(), Gaps: run.gaps.Load(), Unannounced: run.unannounced.Load(),
		Failures: run.failures, MoreFailures: run.more}
	json.NewEncoder(stdout).Encode(rep)
	return 0
}

// soakClient is one subscriber across its connections.
type soakClient struct {
	run     *soakRun
	id      int
	role    string
	name    string
	streams []string
	check   *seqCheck

	mu   sync.Mutex // protects conn
	conn *websocket.Conn
}

func (c *soakClient) String() string { return fmt.Sprintf("subscriber %d (%s)", c.id, c.role) }

func (c *soakClient) closeNow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.UnderlyingConn().Close()
	}
}

// connect opens a connection; it subscribes unless this is a named
// subscriber reattaching (its subscriptions are kept).
func (c *soakClient) connect(first bool) (*websocket.Conn, error) {
	d := *websocket.DefaultDialer
	d.HandshakeTimeout = 30 * time.Second
	if c.role == roleStall {
		// A small receive buffer, so a stalled reader's backlog is in the
		// daemon's queue, not in the kernel's; and an Ethernet-sized MSS:
		// with loopback's 64 KiB MSS above the buffer, the kernel never
		// advertises the window reopening, and the sender waits for its
		// zero-window probe, backed off past the write timeout after a
		// long stall.
		d.NetDial = func(network, addr string) (net.Conn, error) {
			nd := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) {
					syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8192)
					syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1448)
				})
			}}
			return nd.Dial(network, addr)
		}
	}
	url := c.run.url
	if c.name != "" {
		url += "?name=" + c.name
	}
	ws, resp, err := d.Dial(url, http.Header{})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%w (HTTP %d)", err, resp.StatusCode)
		}
		return nil, err
	}
	c.run.sessions.Add(1)
	if c.check == nil || c.role == roleFlap {
		c.check = &seqCheck{c: c, streams: map[string]*streamSeq{}}
	}
	if first || c.name == "" {
		b, _ := json.Marshal(map[string]any{"op": "subscribe", "id": "s", "streams": c.streams})
		if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
			ws.Close()
			return nil, err
		}
	}
	c.mu.Lock()
	c.conn = ws
	c.mu.Unlock()
	if c.run.stopped() {
		ws.Close()
		return nil, nil
	}
	return ws, nil
}

// loop runs the client's sessions until the run stops.
func (c *soakClient) loop(ws *websocket.Conn) {
	rng := rand.New(rand.NewPCG(uint64(c.id), 7))
	for ws != nil {
		var until time.Time
		switch c.role {
		case roleFlap:
			until = time.Now().Add(time.Duration(3+rng.IntN(8)) * time.Second)
		case roleNamed:
			until = time.Now().Add(time.Duration(5+rng.IntN(10)) * time.Second)
		}
		if closed := c.session(ws, until, rng); closed && c.name == "" {
			// The daemon closed an ephemeral subscriber: the close is its
			// word on the loss; the next connection is a new subscriber.
			c.run.closedByDaemon.Add(1)
			c.check = nil
		}
		if c.run.stopped() {
			return
		}
		select {
		case <-c.run.stop:
			return
		case <-time.After(time.Duration(500+rng.IntN(3000)) * time.Millisecond):
		}
		var err error
		ws, err = c.connect(false)
		if err != nil && !c.run.stopped() {
			c.run.fail("%s: reconnect: %v", c, err)
			return
		}
	}
}

// session reads ws until the run stops, or until until (if set): a
// flapping client then drops the connection, a named one closes it
// cleanly, reading what the daemon wrote before its close.
// It reports whether the daemon closed the connection unasked.
func (c *soakClient) session(ws *websocket.Conn, until time.Time, rng *rand.Rand) (closedByDaemon bool) {
	defer ws.UnderlyingConn().Close()
	nextStall := time.Now().Add(time.Duration(4+rng.IntN(8)) * time.Second)
	closing := false
	var buf []byte
	for {
		if c.role == roleStall && time.Now().After(nextStall) {
			select {
			case <-c.run.stop:
				return false
			case <-time.After(c.run.stallFor):
			}
			nextStall = time.Now().Add(time.Duration(6+rng.IntN(8)) * time.Second)
		}
		if !until.IsZero() && !closing && time.Now().After(until) {
			if c.role == roleFlap {
				return false
			}
			closing = true
			ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "soak"), time.Now().Add(5*time.Second))
			ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		}
		_, rd, err := ws.NextReader()
		if err != nil {
			if c.run.stopped() {
				return false
			}
			if !closing {
				c.run.fail("%s: closed by the daemon: %v", c, err)
				return true
			}
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				c.run.fail("%s: clean close: %v", c, err)
			}
			return false
		}
		if buf, err = readAllInto(rd, buf[:0]); err != nil {
			if c.run.stopped() {
				return false
			}
			c.run.fail("%s: closed by the daemon mid-message: %v", c, err)
			return !closing
		}
		for rest := buf; len(rest) > 0; {
			line := rest
			if j := bytes.IndexByte(rest, '\n'); j >= 0 {
				line, rest = rest[:j], rest[j+1:]
			} else {
				rest = nil
			}
			c.line(line)
		}
	}
}

func readAllInto(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

var (
	keyStream   = []byte(`"stream":"`)
	keySeq      = []byte(`"seq":`)
	keySnapshot = []byte(`,"snapshot":true`)
)

// line handles one JSON object from the daemon.
func (c *soakClient) line(line []byte) {
	switch {
	case bytes.HasPrefix(line, []byte(`{"type":"notice"`)):
		var n struct {
			Kind    string `json:"kind"`
			Details struct {
				Reason string               `json:"reason"`
				Gaps   map[string][2]uint64 `json:"gaps"`
			} `json:"details"`
		}
		if err := json.Unmarshal(line, &n); err != nil {
			c.run.fail("%s: notice %q: %v", c, line, err)
			return
		}
		switch n.Kind {
		case "link_down":
			c.run.linkDowns.Add(1)
		case "dropping":
			c.run.dropping.Add(1)
			if c.role == roleHealthy || c.role == roleFlap {
				c.run.fail("%s: a reading subscriber got dropping: %s", c, line)
			}
		case "resumed":
			c.run.resumed.Add(1)
			if n.Details.Reason == "reattached" {
				c.run.reattached.Add(1)
			}
			if c.role == roleHealthy || c.role == roleFlap {
				c.run.fail("%s: a reading subscriber got resumed: %s", c, line)
			}
			for st, g := range n.Details.Gaps {
				c.check.announce(st, g[0], g[1])
			}
		}
	case bytes.HasPrefix(line, []byte(`{"type":"error"`)):
		c.run.fail("%s: error reply: %s", c, line)
	case bytes.HasPrefix(line, []byte(`{"type":"ack"`)), bytes.HasPrefix(line, []byte(`{"type":"pong"`)):
	default:
		i := bytes.Index(line, keyStream)
		if i < 0 {
			c.run.fail("%s: unexpected line %.200q", c, line)
			return
		}
		st := line[i+len(keyStream):]
		j := bytes.IndexByte(st, '"')
		k := bytes.Index(st, keySeq)
		if j < 0 || k < 0 {
			c.run.fail("%s: unexpected event %.200q", c, line)
			return
		}
		rest := st[k+len(keySeq):]
		var seq uint64
		d := 0
		for ; d < len(rest) && rest[d] >= '0' && rest[d] <= '9'; d++ {
			seq = seq*10 + uint64(rest[d]-'0')
		}
		c.run.received.Add(1)
		c.check.event(st[:j], seq, bytes.HasPrefix(rest[d:], keySnapshot))
	}
}

// seqCheck checks one subscriber's events, per stream: every seq after
// the first is the one before plus one, unless the missing seqs are
// exactly a gap a resumed notice announced (notices travel ahead of
// queued events, so a gap may be announced before the events preceding
// it arrive). A snapshot may repeat the last seq received or the last
// seq of a gap (the book at that seq).
type seqCheck struct {
	c       *soakClient
	streams map[string]*streamSeq
}

type streamSeq struct {
	next    uint64      // the seq expected; 0 before the first event
	pending [][2]uint64 // gaps announced, not yet reached
}

func (k *seqCheck) get(stream []byte) *streamSeq {
	s := k.streams[string(stream)]
	if s == nil {
		s = &streamSeq{}
		k.streams[string(stream)] = s
	}
	return s
}

func (k *seqCheck) announce(stream string, first, last uint64) {
	s := k.get([]byte(stream))
	if last < first || s.next > 0 && first < s.next && len(s.pending) == 0 {
		k.c.run.fail("%s: %s: gap [%d, %d] announced, but seq %d was the next expected", k.c, stream, first, last, s.next)
		return
	}
	s.pending = append(s.pending, [2]uint64{first, last})
	k.c.run.gaps.Add(1)
	k.c.run.lost.Add(int64(last - first + 1))
}

func (k *seqCheck) event(stream []byte, seq uint64, snapshot bool) {
	s := k.get(stream)
	switch {
	case s.next == 0 && len(s.pending) == 0:
		s.next = seq + 1
	case snapshot && len(s.pending) > 0 && s.pending[0] == [2]uint64{s.next, seq}:
		// A gap of events, then the snapshot of the book at its last seq.
		s.pending = s.pending[1:]
		s.next = seq + 1
	case seq == s.next:
		s.next++
	case seq > s.next:
		if len(s.pending) > 0 {
			g := s.pending[0]
			if g[0] == s.next && (g[1] == seq-1 || snapshot && g[1] == seq) || s.next == 0 {
				s.pending = s.pending[1:]
				s.next = seq + 1
				return
			}
			k.c.run.fail("%s: %s: seqs [%d, %d] missing, announced gap [%d, %d]", k.c, stream, s.next, seq-1, g[0], g[1])
		} else {
			k.c.run.fail("%s: %s: seqs [%d, %d] lost without notice", k.c, stream, s.next, seq-1)
		}
		k.c.run.unannounced.Add(1)
		s.next = seq + 1
	case snapshot && seq == s.next-1:
		// A resent snapshot: the book at the last seq received.
	default:
		k.c.run.fail("%s: %s: seq %d after %d", k.c, stream, seq, s.next-1)
	}
}
