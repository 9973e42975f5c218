package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// rawReadConn is a TCP connection whose Read makes read(2) as a
// RawSyscall inside RawConn.Read, which waits on the poller as net.Conn
// does. A plain net.Conn read goes through the scheduler's syscall
// bookkeeping, and each entersyscall wakes the runtime's sysmon thread
// from its idle sleep into a 20 µs polling loop: with a frame every few
// hundred µs, that was about 5 % of the daemon's CPU (docs/performance.md).
// Errors are those net.TCPConn.Read returns.
type rawReadConn struct {
	*net.TCPConn
	rc     syscall.RawConn
	readFn func(uintptr) bool

	mu    sync.Mutex // one Read at a time uses the fields below
	b     []byte
	n     int
	errno syscall.Errno
}

// ReadConn returns c reading with RawSyscall (rawReadConn) if it is a
// TCP connection, else c itself. The venue links dial with it
// (venue/wsconn), and so does a cluster node's NATS connection
// (internal/cluster): an edge reads NATS about once per event.
func ReadConn(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	r := &rawReadConn{TCPConn: tc, rc: rc}
	r.readFn = r.readFD
	return r
}

func (c *rawReadConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if len(b) > 1<<30 { // as the poller's reads do
		b = b[:1<<30]
	}
	c.mu.Lock()
	c.b = b
	err := c.rc.Read(c.readFn)
	n, errno := c.n, c.errno
	c.b, c.n, c.errno = nil, 0, 0
	c.mu.Unlock()
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			err = oe.Err
		}
		return 0, c.opError(err)
	}
	if errno != 0 {
		return 0, c.opError(os.NewSyscallError("read", errno))
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// readFD reads once; false (wait for the poller) if nothing is there yet.
func (c *rawReadConn) readFD(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(c.b))), uintptr(len(c.b)))
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			c.n = int(n)
		default:
			c.errno = errno
		}
		return true
	}
}

func (c *rawReadConn) opError(err error) error {
	return &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
