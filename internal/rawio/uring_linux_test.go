//go:build linux && (amd64 || arm64)

package rawio

import (
	"bytes"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// sendPair returns the two ends of a loopback TCP connection and the
// descriptor of the first.
func sendPair(t *testing.T) (a, b *net.TCPConn, fd int) {
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

func testRing(t *testing.T, entries uint32) *Ring {
	t.Helper()
	r, err := NewRing(entries)
	if err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

type completion struct {
	userData uint64
	res      int32
}

func submitAll(t *testing.T, r *Ring) []completion {
	t.Helper()
	var got []completion
	if err := r.Submit(func(u uint64, res int32) { got = append(got, completion{u, res}) }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRingSends queues sends on several sockets, a full ring's worth,
// and checks that one submit completes each with its user data and that
// the bytes arrive.
func TestRingSends(t *testing.T) {
	r := testRing(t, 8)
	if r.Free() != 8 {
		t.Fatalf("free = %d, want 8", r.Free())
	}
	type pair struct {
		peer *net.TCPConn
		msg  []byte
	}
	var pairs []pair
	for i := range 8 {
		_, b, fd := sendPair(t)
		msg := bytes.Repeat([]byte{byte('a' + i)}, 100+i)
		r.Send(fd, msg, uint64(i))
		pairs = append(pairs, pair{b, msg})
	}
	if r.Free() != 0 {
		t.Fatalf("free = %d after 8 sends, want 0", r.Free())
	}
	got := submitAll(t, r)
	if len(got) != 8 || r.Free() != 8 {
		t.Fatalf("%d completions, free %d; want 8, 8", len(got), r.Free())
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
	a, b, fd := sendPair(t)
	a.SetWriteBuffer(4096)
	b.SetReadBuffer(4096)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	var sent int
	sawShort, sawEAGAIN := false, false
	for round := 0; round < 100 && !sawEAGAIN; round++ {
		r.Send(fd, chunk, 1)
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
	_, b, fd := sendPair(t)
	b.SetLinger(0)
	b.Close() // RST
	var errno syscall.Errno
	for range 50 {
		r.Send(fd, []byte("x"), 7)
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
