package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns a rawReadConn dialled to a listener and the accepted end.
func tcpPair(t *testing.T) (*rawReadConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	r, ok := ReadConn(c).(*rawReadConn)
	if !ok {
		t.Fatal("a TCP connection was not wrapped")
	}
	return r, peer
}

// TestRawReadConn checks that rawReadConn reads what was sent, waits for
// data, and fails as net.TCPConn does: deadline, EOF, closed.
func TestRawReadConn(t *testing.T) {
	r, peer := tcpPair(t)
	if n, err := r.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v", n, err)
	}
	// The peer answers a request: the read below most likely waits for it.
	go func() {
		if _, err := io.ReadFull(peer, make([]byte, 4)); err == nil {
			peer.Write([]byte("hello, venue"))
		}
	}()
	if _, err := r.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	got := []byte{}
	for len(got) < len("hello, venue") {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != "hello, venue" {
		t.Fatalf("read %q", got)
	}
	// A deadline: a timeout net.Error, os.ErrDeadlineExceeded, Op "read".
	r.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err := r.Read(buf)
	var ne net.Error
	var oe *net.OpError
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("read past the deadline: %v", err)
	}
	r.SetReadDeadline(time.Time{})
	// The peer closes: io.EOF itself, as net.Conn returns it.
	peer.Close()
	if _, err := r.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
	// This end closed: net.ErrClosed.
	r.Close()
	if _, err := r.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v, want net.ErrClosed", err)
	}
}

// TestRawReadConnCloseWakesRead checks that closing the connection ends a
// read (most likely waiting on the poller by then).
func TestRawReadConnCloseWakesRead(t *testing.T) {
	r, _ := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 8))
		done <- err
	}()
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("waiting read ended with %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a waiting read")
	}
}
