//go:build linux && (amd64 || arm64)

package wsapi

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/venue"
)

// tcpPair returns the two ends of a loopback TCP connection and the
// descriptor of the first.
func tcpPair(t *testing.T) (a, b *net.TCPConn, fd int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	a, b = c.(*net.TCPConn), s.(*net.TCPConn)
	t.Cleanup(func() { a.Close(); b.Close() })
	rc, err := a.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(f uintptr) { fd = int(f) })
	return a, b, fd
}

func testRing(t *testing.T, entries uint32) *ring {
	t.Helper()
	r, err := newRing(entries)
	if err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	t.Cleanup(r.close)
	return r
}

type completion struct {
	userData uint64
	res      int32
}

func submitAll(t *testing.T, r *ring) []completion {
	t.Helper()
	var got []completion
	if err := r.submit(func(u uint64, res int32) { got = append(got, completion{u, res}) }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRingSends queues sends on several sockets, a full ring's worth,
// and checks that one submit completes each with its user data and that
// the bytes arrive.
func TestRingSends(t *testing.T) {
	r := testRing(t, 8)
	if r.free() != 8 {
		t.Fatalf("free = %d, want 8", r.free())
	}
	type pair struct {
		peer *net.TCPConn
		msg  []byte
	}
	var pairs []pair
	for i := range 8 {
		_, b, fd := tcpPair(t)
		msg := bytes.Repeat([]byte{byte('a' + i)}, 100+i)
		r.send(fd, msg, uint64(i))
		pairs = append(pairs, pair{b, msg})
	}
	if r.free() != 0 {
		t.Fatalf("free = %d after 8 sends, want 0", r.free())
	}
	got := submitAll(t, r)
	if len(got) != 8 || r.free() != 8 {
		t.Fatalf("%d completions, free %d; want 8, 8", len(got), r.free())
	}
	seen := map[uint64]bool{}
	for _, c := range got {
		if c.userData >= 8 || seen[c.userData] {
			t.Fatalf("completion user data %d", c.userData)
		}
		seen[c.userData] = true
		if want := len(pairs[c.userData].msg); int(c.res) != want {
			t.Errorf("send %d: res %d, want %d", c.userData, c.res, want)
		}
	}
	for i, p := range pairs {
		buf := make([]byte, len(p.msg))
		p.peer.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(p.peer, buf); err != nil || !bytes.Equal(buf, p.msg) {
			t.Errorf("peer %d read %q, %v", i, buf, err)
		}
	}
	// The ring is reusable: a second round on the first socket.
	if got := submitAll(t, r); len(got) != 0 {
		t.Fatalf("empty submit completed %d", len(got))
	}
}

// TestRingFullSocket fills a socket whose peer does not read: sends must
// never wait (a full buffer answers a short count or -EAGAIN, as a
// non-blocking write(2) does), and what they report sent is exactly what
// the peer then reads.
func TestRingFullSocket(t *testing.T) {
	r := testRing(t, 4)
	a, b, fd := tcpPair(t)
	a.SetWriteBuffer(4096)
	b.SetReadBuffer(4096)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	var sent int
	sawShort, sawEAGAIN := false, false
	for round := 0; round < 100 && !sawEAGAIN; round++ {
		r.send(fd, chunk, 1)
		for _, c := range submitAll(t, r) {
			switch {
			case c.res == -int32(syscall.EAGAIN):
				sawEAGAIN = true
			case c.res < 0:
				t.Fatalf("send: errno %d", -c.res)
			default:
				if int(c.res) < len(chunk) {
					sawShort = true
				}
				sent += int(c.res)
			}
		}
	}
	if !sawEAGAIN || !sawShort {
		t.Fatalf("socket never filled: short %v, EAGAIN %v after %d bytes", sawShort, sawEAGAIN, sent)
	}
	a.CloseWrite()
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, b)
	if err != nil || int(n) != sent {
		t.Fatalf("peer read %d bytes (%v), sends reported %d", n, err, sent)
	}
}

// TestRingPeerGone sends to a socket whose peer reset the connection: the
// completion carries the error, nothing panics or hangs.
func TestRingPeerGone(t *testing.T) {
	r := testRing(t, 4)
	_, b, fd := tcpPair(t)
	b.SetLinger(0)
	b.Close() // RST
	var errno syscall.Errno
	for range 50 {
		r.send(fd, []byte("x"), 7)
		got := submitAll(t, r)
		if len(got) != 1 || got[0].userData != 7 {
			t.Fatalf("completions %v", got)
		}
		if got[0].res < 0 {
			errno = syscall.Errno(-got[0].res)
			break
		}
		time.Sleep(10 * time.Millisecond) // the RST is on its way
	}
	if errno != syscall.ECONNRESET && errno != syscall.EPIPE {
		t.Fatalf("send to a reset connection: errno %v, want ECONNRESET or EPIPE", errno)
	}
}

// TestWritePoolRingFails breaks every worker's ring under live
// connections: those whose sends were in the failed submission end
// (write_failed), the workers go on with write(2), and a new connection
// gets its events.
func TestWritePoolRingFails(t *testing.T) {
	var mu sync.Mutex
	var rings []*ring
	defer func(f func(uint32) (*ring, error)) { openRing = f }(openRing)
	openRing = func(n uint32) (*ring, error) {
		r, err := newRing(n)
		if err == nil {
			mu.Lock()
			rings = append(rings, r)
			mu.Unlock()
		}
		return r, err
	}
	feed, url, metrics := poolServer(t, Options{WriteDelay: time.Millisecond, Uring: true}, 0)
	mu.Lock()
	n := len(rings)
	mu.Unlock()
	if n == 0 {
		t.Skip("io_uring unavailable here")
	}
	workers := func() (uring, write float64) {
		return testutil.ToFloat64(metrics.writeWorkers.WithLabelValues("io_uring")), testutil.ToFloat64(metrics.writeWorkers.WithLabelValues("write"))
	}
	if u, w := workers(); u != float64(n) || w != 0 {
		t.Fatalf("fanoutd_write_workers io_uring %v, write %v; want %d, 0", u, w, n)
	}
	pub := func(i int) {
		feed.Publish(&venue.Event{Kind: venue.KindTrade, Stream: "coinbase:trades:BTC-USD", TradeID: "t",
			Price: decimal.New(int64(i), -2), Size: decimal.New(1, 0), Side: venue.SideBuy, RecvTime: time.Now(), VenueTime: time.Now()})
	}
	readTrade := func(ws *websocket.Conn) error {
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, m, err := ws.ReadMessage()
		if err == nil && !bytes.Contains(m, []byte(`"trade"`)) {
			err = fmt.Errorf("read %q, want a trade", m)
		}
		return err
	}
	// One connection per worker (they are dealt round-robin), so that
	// every ring has a send when it fails.
	var conns []*websocket.Conn
	for range n {
		conns = append(conns, dialSubscribed(t, url))
	}
	pub(1)
	for _, ws := range conns {
		if err := readTrade(ws); err != nil {
			t.Fatalf("before the failure: %v", err)
		}
	}
	// /dev/null takes each ring's descriptor number: the next
	// io_uring_enter fails, and closing the ring closes only that.
	null, err := syscall.Open("/dev/null", syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(null)
	mu.Lock()
	for _, r := range rings {
		if err := syscall.Dup2(null, r.fd); err != nil {
			t.Fatal(err)
		}
	}
	mu.Unlock()
	pub(2)
	for i, ws := range conns {
		if err := readTrade(ws); err == nil {
			t.Fatalf("connection %d, whose send failed with its ring, is still open", i)
		}
	}
	if u, w := workers(); u != 0 || w != float64(n) {
		t.Fatalf("after the failure fanoutd_write_workers io_uring %v, write %v; want 0, %d", u, w, n)
	}
	ws2 := dialSubscribed(t, url)
	pub(3)
	if err := readTrade(ws2); err != nil {
		t.Fatalf("a connection after the ring failed: %v", err)
	}
}
