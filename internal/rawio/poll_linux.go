//go:build linux

package rawio

import (
	"os"
	"syscall"
)

// Poller watches sockets in one epoll instance for its owner, which has
// no goroutine blocked on them: each socket is registered with an id,
// level-triggered with EPOLLONESHOT, and reported (Poller's ready func
// called with the id, on the Poller's goroutine) once when it becomes
// readable, has an error or its peer closed; then not again until
// Rearm. A re-arm of a socket that is readable already reports it at
// once, so no bytes are missed between the owner's last read and the
// re-arm.
//
// Every epoll_ctl names the descriptor inside syscall.RawConn.Control,
// which keeps it open (a closed number may be reused by another socket),
// and an event names its socket by id, never by descriptor. The epoll
// descriptor is itself waited on through Go's network poller, so the
// Poller's goroutine holds no thread while nothing is readable.
type Poller struct {
	epfd  int
	f     *os.File // epfd, for the network poller
	ready func(id uint64)
	done  chan struct{} // closed when the goroutine returned
}

const pollEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

// NewPoller starts a Poller that calls ready for each event.
func NewPoller(ready func(id uint64)) (*Poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	p := &Poller{epfd: epfd, f: os.NewFile(uintptr(epfd), "epoll"), ready: ready, done: make(chan struct{})}
	rc, err := p.f.SyscallConn()
	if err != nil {
		p.f.Close()
		return nil, err
	}
	go p.run(rc)
	return p, nil
}

// run waits for events and reports them until the Poller is closed.
func (p *Poller) run(rc syscall.RawConn) {
	defer close(p.done)
	evs := make([]syscall.EpollEvent, 128)
	var n int
	var werr error
	wait := func(fd uintptr) bool {
		n, werr = syscall.EpollWait(int(fd), evs, 0)
		if werr == syscall.EINTR {
			n, werr = 0, nil
		}
		return n > 0 || werr != nil
	}
	for {
		if err := rc.Read(wait); err != nil || werr != nil {
			return
		}
		for _, ev := range evs[:n] {
			p.ready(uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32)
		}
	}
}

// Add registers rc's socket under id, armed.
func (p *Poller) Add(rc syscall.RawConn, id uint64) error {
	return p.ctl(rc, syscall.EPOLL_CTL_ADD, id)
}

// Rearm asks for one more event of rc's socket.
func (p *Poller) Rearm(rc syscall.RawConn, id uint64) error {
	return p.ctl(rc, syscall.EPOLL_CTL_MOD, id)
}

// Del unregisters rc's socket; call it before the socket closes.
func (p *Poller) Del(rc syscall.RawConn) {
	p.ctl(rc, syscall.EPOLL_CTL_DEL, 0)
}

func (p *Poller) ctl(rc syscall.RawConn, op int, id uint64) error {
	ev := syscall.EpollEvent{Events: pollEvents, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	var errno error
	if err := rc.Control(func(fd uintptr) { errno = syscall.EpollCtl(p.epfd, op, int(fd), &ev) }); err != nil {
		return err
	}
	if errno != nil {
		return os.NewSyscallError("epoll_ctl", errno)
	}
	return nil
}

// Close stops the Poller's goroutine and waits for it.
func (p *Poller) Close() {
	p.f.Close()
	<-p.done
}
