package bench

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/cli"
	"github.com/fanoutd/fanoutd/venue"
)

// The bench venue: a Bybit v5 public spot websocket in a child process
// (`fanoutd-bench bench-venue`), so that `fanoutd-bench --source venue` feeds
// the daemon through its bybit adapter over a real websocket while the
// CPU of making the frames stays out of the server's.

const (
	venueSymbol = "BTCUSDT"
	venueTopic  = "publicTrade." + venueSymbol
	venueStream = "bybit:trades:" + venueSymbol // the stream the adapter makes of venueTopic
)

// VenueMain is `fanoutd-bench bench-venue`, the child of `bench --source venue`.
// It listens on loopback and prints "listening <ws url>", then
// "subscribed" once a client has subscribed to the trade topic; at a line
// on stdin it sends --rate publicTrade frames a second (one trade each,
// its id padded by --pad bytes) for --duration, then prints "sent <n>"
// and serves on (pings) until stdin closes.
func VenueMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-venue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rate := fs.Int("rate", 2000, "frames per second")
	pad := fs.Int("pad", 1, "bytes of padding in each trade id")
	dur := fs.Duration("duration", 23*time.Second, "how long to send")
	if rest, err := cli.ParseArgs(fs, args); err != nil {
		return 2
	} else if len(rest) > 0 {
		fmt.Fprintf(stderr, "fanoutd: unexpected argument %q\n", rest[0])
		return 2
	}
	v := &benchVenue{subscribed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "bench-venue:", err)
		return 1
	}
	srv := &http.Server{Handler: v, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Fprintf(stdout, "listening ws://%s/v5/public/spot\n", ln.Addr())
	in := bufio.NewReader(stdin)
	started := make(chan error, 1)
	go func() { _, err := in.ReadString('\n'); started <- err }()
	select {
	case <-v.subscribed:
	case err := <-started:
		fmt.Fprintln(stderr, "bench-venue: stdin closed before a subscription:", err)
		return 1
	}
	fmt.Fprintln(stdout, "subscribed")
	if err := <-started; err != nil {
		return 1
	}
	n := v.send(*rate, *pad, *dur)
	fmt.Fprintf(stdout, "sent %d\n", n)
	io.Copy(io.Discard, in) // serve pings until the parent is done
	return 0
}

// benchVenue serves Bybit's public protocol as far as the adapter uses it
// for trades: subscribe and ping answered as Bybit answers them, and
// publicTrade frames to the connections subscribed.
type benchVenue struct {
	up         websocket.Upgrader
	mu         sync.Mutex // protects subs and every write
	subs       []*websocket.Conn
	subscribed chan struct{}
	once       sync.Once
	conns      int
}

func (v *benchVenue) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := v.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	v.mu.Lock()
	v.conns++
	connID := "bench-" + strconv.Itoa(v.conns)
	v.mu.Unlock()
	defer v.drop(ws)
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var req struct {
			ReqID string   `json:"req_id"`
			Op    string   `json:"op"`
			Args  []string `json:"args"`
		}
		if json.Unmarshal(msg, &req) != nil {
			return
		}
		reply := `{"success":true,"ret_msg":"` + req.Op + `","conn_id":"` + connID + `","req_id":` + strconv.Quote(req.ReqID) + `,"op":"` + req.Op + `"}`
		if req.Op == "ping" {
			reply = `{"success":true,"ret_msg":"pong","conn_id":"` + connID + `","op":"ping"}`
		}
		v.mu.Lock()
		err = ws.WriteMessage(websocket.TextMessage, []byte(reply))
		if req.Op == "subscribe" {
			for _, a := range req.Args {
				if a == venueTopic {
					v.subs = append(v.subs, ws)
					v.once.Do(func() { close(v.subscribed) })
				}
			}
		}
		v.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (v *benchVenue) drop(ws *websocket.Conn) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, c := range v.subs {
		if c == ws {
			v.subs = append(v.subs[:i], v.subs[i+1:]...)
			return
		}
	}
}

// send sends rate trade frames a second for dur, evenly spaced, and
// returns how many it sent.
func (v *benchVenue) send(rate, pad int, dur time.Duration) int {
	interval := time.Second / time.Duration(rate)
	id := []byte(strings.Repeat("x", pad))
	var f []byte
	start := time.Now()
	n := 0
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= dur {
			return n
		}
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		f = appendTradeFrame(f[:0], time.Now().UnixMilli(), i, id)
		v.mu.Lock()
		for _, ws := range v.subs {
			ws.WriteMessage(websocket.TextMessage, f)
		}
		v.mu.Unlock()
		n++
	}
}

// appendTradeFrame appends a publicTrade frame of one trade as Bybit spot
// writes it; the trade id is i followed by pad.
func appendTradeFrame(f []byte, ms int64, i int, pad []byte) []byte {
	f = append(f, `{"topic":"`+venueTopic+`","ts":`...)
	f = strconv.AppendInt(f, ms, 10)
	f = append(f, `,"type":"snapshot","data":[{"i":"`...)
	f = strconv.AppendInt(f, int64(i), 10)
	f = append(f, pad...)
	f = append(f, `","T":`...)
	f = strconv.AppendInt(f, ms, 10)
	f = append(f, `,"p":"`...)
	f = strconv.AppendInt(f, 50000+int64(i%1000), 10)
	f = append(f, `.00","v":"1.2345","S":"Buy","seq":`...)
	f = strconv.AppendInt(f, 7000000+int64(i), 10)
	f = append(f, `,"s":"`+venueSymbol+`","BT":false,"RPI":false}]}`...)
	return f
}

// venuePad returns the trade id padding that makes the adapter's trade
// event about size bytes, and the event's size on the wire.
func venuePad(size int) (pad, eventBytes int) {
	// The adapter's trade event: a millisecond venue time, the venue's
	// trade id (a counter and the padding).
	probe := &venue.Event{Kind: venue.KindTrade, Stream: venueStream, TradeID: "1000000", Price: decimal.New(50000, 0),
		Size: decimal.New(12345, -4), Side: venue.SideBuy, RecvTime: time.Now(), VenueTime: time.UnixMilli(time.Now().UnixMilli()), Seq: 1000000}
	pad = max(1, size-len(probe.AppendJSON(nil)))
	probe.TradeID += strings.Repeat("x", pad)
	return pad, len(probe.AppendJSON(nil)) + 8
}

// venueChild is a running bench venue.
type venueChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	url string
}

// startVenue starts `fanoutd-bench bench-venue` and reads the URL it serves.
func startVenue(rate, pad int, dur time.Duration, stderr io.Writer) (*venueChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	v := &venueChild{cmd: exec.Command(exe, "bench-venue", "--rate", strconv.Itoa(rate), "--pad", strconv.Itoa(pad), "--duration", dur.String())}
	v.cmd.Stderr = stderr
	if v.in, err = v.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := v.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	v.out = bufio.NewReader(out)
	if err := v.cmd.Start(); err != nil {
		return nil, err
	}
	line, err := v.line(10 * time.Second)
	if u, ok := strings.CutPrefix(line, "listening "); ok && err == nil {
		v.url = u
		return v, nil
	}
	v.stop()
	return nil, fmt.Errorf("bench venue did not start: %q %v", line, err)
}

// line reads the venue's next line of output, waiting at most d.
func (v *venueChild) line(d time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() { s, err := v.out.ReadString('\n'); ch <- res{strings.TrimSpace(s), err} }()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-time.After(d):
		v.cmd.Process.Kill() // unblocks the read
		return "", fmt.Errorf("bench venue said nothing for %v", d)
	}
}

// expect waits for the line want.
func (v *venueChild) expect(want string, d time.Duration) error {
	line, err := v.line(d)
	if err == nil && line != want {
		err = fmt.Errorf("bench venue said %q, want %q", line, want)
	}
	return err
}

// begin makes the venue start sending.
func (v *venueChild) begin() error {
	_, err := io.WriteString(v.in, "go\n")
	return err
}

// sent waits for the venue to have sent everything and returns how many
// frames it sent.
func (v *venueChild) sent(d time.Duration) (int, error) {
	line, err := v.line(d)
	if err != nil {
		return 0, err
	}
	n, ok := strings.CutPrefix(line, "sent ")
	if !ok {
		return 0, fmt.Errorf("bench venue said %q, want sent <n>", line)
	}
	return strconv.Atoi(n)
}

func (v *venueChild) stop() {
	v.in.Close()
	done := make(chan struct{})
	go func() { v.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		v.cmd.Process.Kill()
		<-done
	}
}
