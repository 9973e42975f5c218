//go:build linux

package bench

import (
	"encoding/binary"
	"net"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// epollRead reads conns (subscribed, nothing buffered past their last
// reply) with GOMAXPROCS readers, each an epoll instance of its own over
// its share of the sockets, level-triggered: one read(2) per readable
// socket, the frames parsed in place. Each reader returns, Done on wg,
// when a second passes after measureTo without an event on its sockets,
// or 30 s after it. It returns false, having started nothing, if a socket
// or an epoll instance is not to be had.
func epollRead(conns []*websocket.Conn, results []latResult, measureTo time.Time, measured func(), wg *sync.WaitGroup) bool {
	fds := make([]int, len(conns))
	for i, ws := range conns {
		tc, ok := ws.NetConn().(*net.TCPConn)
		if !ok {
			return false
		}
		rc, err := tc.SyscallConn()
		if err != nil {
			return false
		}
		rc.Control(func(fd uintptr) { fds[i] = int(fd) })
	}
	n := min(runtime.GOMAXPROCS(0), len(conns))
	eps := make([]int, n)
	for k := range eps {
		ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			for _, e := range eps[:k] {
				syscall.Close(e)
			}
			return false
		}
		eps[k] = ep
	}
	for i, fd := range fds {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(i)}
		if err := syscall.EpollCtl(eps[i%n], syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			for _, e := range eps {
				syscall.Close(e)
			}
			return false
		}
	}
	for k, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer syscall.Close(ep)
			epollReader(ep, k, n, fds, results, measureTo, measured)
			runtime.KeepAlive(conns)
		}()
	}
	return true
}

// epollReader is one reader of epollRead: the sockets k, k+n, k+2n… of fds.
func epollReader(ep, k, n int, fds []int, results []latResult, measureTo time.Time, measured func()) {
	bufs := make(map[int][]byte)
	for i := k; i < len(fds); i += n {
		bufs[i] = make([]byte, 0, 64<<10)
	}
	open := len(bufs)
	evs := make([]syscall.EpollEvent, 64)
	last := measureTo
	for open > 0 {
		now := time.Now()
		if now.After(last.Add(time.Second)) || now.After(measureTo.Add(30*time.Second)) {
			return
		}
		m, err := syscall.EpollWait(ep, evs, 100)
		if err != nil && err != syscall.EINTR {
			return
		}
		for _, ev := range evs[:max(m, 0)] {
			i := int(ev.Fd)
			buf := bufs[i]
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			got, err := syscall.Read(fds[i], buf[len(buf):cap(buf)])
			if err == syscall.EAGAIN || err == syscall.EINTR {
				continue
			}
			if err != nil || got == 0 {
				syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, fds[i], nil)
				open--
				continue
			}
			now := time.Now()
			buf = buf[:len(buf)+got]
			r := &results[i]
			fd := fds[i]
			rest, closed := serverFrames(buf, func(op byte, payload []byte) {
				switch op {
				case websocket.TextMessage:
					r.message(payload, now, func(b []byte) { syscall.Write(fd, clientFrame(websocket.TextMessage, b)) }, measured)
				case websocket.PingMessage:
					syscall.Write(fd, clientFrame(websocket.PongMessage, payload))
				}
			})
			if r.last.After(last) {
				last = r.last
			}
			if closed {
				syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, fds[i], nil)
				open--
				continue
			}
			bufs[i] = buf[:copy(buf, rest)]
		}
	}
}

// serverFrames calls frame for each whole server-to-client (unmasked,
// unfragmented) websocket frame at the start of b, and returns what
// follows them and whether a close frame was among them.
func serverFrames(b []byte, frame func(op byte, payload []byte)) (rest []byte, closed bool) {
	for len(b) >= 2 {
		op, n, h := b[0]&0x0f, int(b[1]&0x7f), 2
		switch n {
		case 126:
			if len(b) < 4 {
				return b, false
			}
			n, h = int(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			if len(b) < 10 {
				return b, false
			}
			n, h = int(binary.BigEndian.Uint64(b[2:])), 10
		}
		if len(b) < h+n {
			return b, false
		}
		if op == websocket.CloseMessage {
			return nil, true
		}
		frame(op, b[h:h+n])
		b = b[h+n:]
	}
	return b, false
}

// clientFrame is a final, masked (with a zero key) client frame of op
// with payload (at most 125 bytes: a pong or Centrifugo's "{}").
func clientFrame(op int, payload []byte) []byte {
	payload = payload[:min(len(payload), 125)]
	return append([]byte{0x80 | byte(op), 0x80 | byte(len(payload)), 0, 0, 0, 0}, payload...)
}
