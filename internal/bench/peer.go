package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/venue"
)

// centrifugoServer is a Centrifugo binary in a child process, the peer
// fanoutd is measured against: default settings but for anonymous access
// (client.insecure, allow_publish_for_client, http_api.insecure). Events
// go in (--peer-publish) as batched publishes on its HTTP API, its
// cheapest way in: one POST /api/batch at a time, carrying every event
// published while the previous one was in flight (one event alone when
// the load is light, so batching adds at most one request's time); or as
// client publish commands on one websocket connection. That path's cost
// is part of its CPU as the test source's is part of fanoutd's. Clients
// subscribe to centrifugoChannel and get each event as the publication's
// data.
type centrifugoServer struct {
	cmd    *exec.Cmd
	dir    string
	base   string
	pub    *websocket.Conn // the publisher's connection
	pubMu  sync.Mutex      // one writer at a time on pub: publish, and readReplies' pongs
	id     int
	body   []byte
	failed atomic.Pointer[error]
	done   chan struct{} // closed when the publisher's reply reader returned
	exited chan struct{}

	http    bool          // publish through the HTTP API's batches
	batchMu sync.Mutex    // protects batch and batched
	batch   []byte        // the commands of the next POST /api/batch, without the closing "]}"
	batched int           // events in batch
	kickc   chan struct{} // capacity 1: batch has events
	stopc   chan struct{} // closed: the HTTP sender ends
}

// The values of --peer-publish.
const (
	peerPublishHTTP   = "http"
	peerPublishClient = "client"
)

func startCentrifugo(bin, publish string, stderr io.Writer) (*centrifugoServer, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("--peer centrifugo: %w (install it with: go install github.com/centrifugal/centrifugo/v6@v6.9.1, then --peer-bin $(go env GOPATH)/bin/centrifugo)", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fanoutd-bench-centrifugo")
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`{"http_server":{"address":"127.0.0.1","port":%d},"client":{"insecure":true,"ping_interval":"60s","pong_timeout":"50s"},`+
		`"http_api":{"insecure":true},"channel":{"without_namespace":{"allow_publish_for_client":true}},"log":{"level":"error"},"usage_stats":{"disabled":true}}`, port)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &centrifugoServer{dir: dir, base: "http://127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{}), done: make(chan struct{}),
		http: publish != peerPublishClient, kickc: make(chan struct{}, 1), stopc: make(chan struct{})}
	c.cmd = exec.Command(path, "--config", filepath.Join(dir, "config.json"))
	c.cmd.Stdout, c.cmd.Stderr = stderr, stderr
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { c.cmd.Wait(); close(c.exited) }()
	// Ready when the publisher's connection is accepted.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws, _, err := websocket.DefaultDialer.Dial(c.wsURL(), nil)
		if err == nil {
			if err = centrifugoConnect(ws, ""); err == nil {
				c.pub, c.id = ws, 1
				go c.readReplies()
				if c.http {
					go c.sendBatches()
				}
				return c, nil
			}
			ws.Close()
		}
		select {
		case <-c.exited:
			c.stop()
			return nil, fmt.Errorf("centrifugo exited at start-up: %v", c.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("centrifugo not ready after 10s: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// centrifugoChannel is the channel bench loads: without a ':' (in
// Centrifugo a namespace boundary), so it needs no namespace.
const centrifugoChannel = "bench.trades"

func (c *centrifugoServer) name() string   { return "centrifugo" }
func (c *centrifugoServer) stream() string { return centrifugoChannel }
func (c *centrifugoServer) wsURL() string {
	return "ws" + strings.TrimPrefix(c.base, "http") + "/connection/websocket"
}

// publish sends the event as a client publish command on the publisher's
// connection and returns the first error any reply reported.
func (c *centrifugoServer) publish(ev *venue.Event) error {
	if err := c.failed.Load(); err != nil {
		return *err
	}
	if c.http {
		c.batchMu.Lock()
		if c.batched == 0 {
			c.batch = append(c.batch[:0], `{"commands":[`...)
		} else {
			c.batch = append(c.batch, ',')
		}
		c.batch = append(c.batch, `{"publish":{"channel":"`+centrifugoChannel+`","data":`...)
		c.batch = append(ev.AppendJSON(c.batch), "}}"...)
		c.batched++
		c.batchMu.Unlock()
		select {
		case c.kickc <- struct{}{}:
		default:
		}
		return nil
	}
	c.id++
	c.body = fmt.Appendf(c.body[:0], `{"id":%d,"publish":{"channel":"%s","data":`, c.id, centrifugoChannel)
	c.body = append(ev.AppendJSON(c.body), "}}"...)
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	return c.pub.WriteMessage(websocket.TextMessage, c.body)
}

// sendBatches posts what publish queued, one request at a time, until
// stop: each request carries every event queued while the previous one
// was in flight.
func (c *centrifugoServer) sendBatches() {
	var body []byte
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		select {
		case <-c.stopc:
			return
		case <-c.kickc:
		}
		c.batchMu.Lock()
		body, c.batch = c.batch, body
		n := c.batched
		c.batched = 0
		c.batchMu.Unlock()
		if n == 0 {
			continue
		}
		body = append(body, "]}"...)
		resp, err := client.Post(c.base+"/api/batch", "application/json", bytes.NewReader(body))
		if err == nil {
			var reply []byte
			reply, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && (resp.StatusCode != http.StatusOK || bytes.Contains(reply, []byte(`"error"`))) {
				err = fmt.Errorf("%s: %.200s", resp.Status, reply)
			}
		}
		if err != nil {
			err = fmt.Errorf("centrifugo /api/batch: %w", err)
			c.failed.CompareAndSwap(nil, &err)
		}
	}
}

// readReplies reads the publisher's replies (and answers pings) until
// its connection closes.
func (c *centrifugoServer) readReplies() {
	defer close(c.done)
	for {
		_, m, err := c.pub.ReadMessage()
		if err != nil {
			err = fmt.Errorf("centrifugo closed the publisher's connection: %w", err)
			c.failed.CompareAndSwap(nil, &err)
			return
		}
		for line := range bytes.SplitSeq(m, []byte("\n")) {
			switch {
			case string(line) == "{}": // Centrifugo's ping: answer with a pong
				c.pubMu.Lock()
				c.pub.WriteMessage(websocket.TextMessage, line)
				c.pubMu.Unlock()
			case bytes.Contains(line, []byte(`"error"`)):
				err := fmt.Errorf("centrifugo: %s", line)
				c.failed.CompareAndSwap(nil, &err)
			}
		}
	}
}

// cpu reads the child's user and system time from /proc.
func (c *centrifugoServer) cpu() time.Duration { return pidCPU(c.cmd.Process.Pid)() }

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procStatCPU returns utime+stime of a /proc/<pid>/stat line.
func procStatCPU(b []byte) (time.Duration, error) {
	user, sys, err := procStatTimes(b)
	return user + sys, err
}

// procStatTimes returns utime and stime of a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces, so the
// fields are counted from the last ')'.
func procStatTimes(b []byte) (user, sys time.Duration, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("no ')' in /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, err
	}
	return time.Duration(ut) * time.Second / clockTicks, time.Duration(st) * time.Second / clockTicks, nil
}

func (c *centrifugoServer) counters() benchCounters { return benchCounters{} }
func (c *centrifugoServer) pid() int                { return c.cmd.Process.Pid }

func (c *centrifugoServer) stop() {
	close(c.stopc)
	if c.pub != nil {
		c.pub.Close()
		<-c.done
	}
	if c.cmd.Process != nil {
		c.cmd.Process.Signal(os.Interrupt)
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
			c.cmd.Process.Kill()
			<-c.exited
		}
	}
	os.RemoveAll(c.dir)
}

// centrifugoConnect connects one client over Centrifugo's JSON protocol
// and, unless channel is "", subscribes it (connect, then subscribe, each
// answered by a reply with its id).
func centrifugoConnect(ws *websocket.Conn, channel string) error {
	ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	defer ws.SetReadDeadline(time.Time{})
	want := 1
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"connect":{}}`)); err != nil {
		return err
	}
	if channel != "" {
		want = 2
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"id":2,"subscribe":{"channel":"`+channel+`"}}`)); err != nil {
			return err
		}
	}
	for got := 0; got < want; {
		_, m, err := ws.ReadMessage()
		if err != nil {
			return err
		}
		for line := range bytes.SplitSeq(m, []byte("\n")) {
			switch {
			case bytes.Contains(line, []byte(`"error"`)):
				return fmt.Errorf("centrifugo: %s", line)
			case bytes.HasPrefix(line, []byte(`{"id":1,`)), bytes.HasPrefix(line, []byte(`{"id":2,`)):
				got++
			}
		}
	}
	return nil
}
