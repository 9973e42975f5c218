package rawio

import (
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Socket writes to a TCP socket with write(2) made as a RawSyscall:
// TryWrite never waits for the socket, WaitWrite waits on the poller
// until the socket takes some bytes or the connection's write deadline
// passes. A write of a non-blocking socket does not block, so the
// scheduler's syscall bookkeeping (and the sysmon wake-up each
// entersyscall costs) buys nothing. Neither allocates.
//
// A Socket is used under its owner's lock: one write at a time.
type Socket struct {
	rc     syscall.RawConn
	fd     int
	buf    []byte // the write's argument and results
	n      int
	err    error
	tryFn  func(fd uintptr)      // s.tryFD, bound once so a write allocates nothing
	waitFn func(fd uintptr) bool // s.waitFD, likewise
}

// Init points s at c's descriptor and reports whether c has one (a
// syscall.Conn); without one s must not be used.
func (s *Socket) Init(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	s.rc, s.fd = rc, -1
	s.tryFn, s.waitFn = s.tryFD, s.waitFD
	rc.Control(func(fd uintptr) { s.fd = int(fd) })
	return s.fd >= 0
}

// FD is the socket's descriptor, valid while the connection is open (an
// io_uring send names it).
func (s *Socket) FD() int { return s.fd }

// TryWrite makes one non-blocking write(2) of b and returns how much the
// socket took (0 if its buffer is full).
//
// It goes through RawConn.Control, which keeps the descriptor open while
// the callback runs (all a write that never waits needs); why not
// RawConn.Write or Syscall is in docs/design.md.
func (s *Socket) TryWrite(b []byte) (int, error) {
	s.buf = b
	err := s.rc.Control(s.tryFn)
	return s.result(err)
}

// WaitWrite waits until the socket takes some of b, at most until the
// connection's write deadline, and returns how much it took. The attempt
// is made inside RawConn.Write, after its poller is armed, so no wake-up
// is lost between a full socket and the wait.
func (s *Socket) WaitWrite(b []byte) (int, error) {
	s.buf = b
	err := s.rc.Write(s.waitFn)
	return s.result(err)
}

func (s *Socket) result(err error) (int, error) {
	n := s.n
	if err == nil {
		err = s.err
	}
	s.buf, s.n, s.err = nil, 0, nil
	return n, err
}

// tryFD is TryWrite's callback for syscall.RawConn.Control: it writes
// once and never waits for the socket.
func (s *Socket) tryFD(fd uintptr) {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(s.buf))), uintptr(len(s.buf)))
		switch errno {
		case 0:
			s.n = int(n)
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
		default:
			s.err = &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", errno)}
		}
		return
	}
}

// waitFD is WaitWrite's callback for syscall.RawConn.Write: one
// non-blocking write; done once the socket took bytes or failed.
func (s *Socket) waitFD(fd uintptr) bool {
	s.tryFD(fd)
	return s.n > 0 || s.err != nil
}
