//go:build linux

package wsapi

import (
	"os"
	"sync"
	"syscall"
)

// poller watches the sockets of parked connections (nothing read and
// unconsumed, no goroutine reading) in one epoll instance, and starts a
// reader goroutine for one when it becomes readable, so an idle
// connection holds no goroutine and no stack.
//
// Each socket is registered level-triggered with EPOLLONESHOT: one event,
// then nothing until the reader re-arms it as it parks again, and a
// re-arm of a socket already readable reports it at once, so no bytes are
// missed between the reader's last read and the re-arm. Every epoll_ctl
// names the descriptor inside syscall.RawConn.Control, which keeps it
// open (a closed number may be reused by another connection), and an
// event names its connection by slot and generation, not by descriptor.
//
// The epoll descriptor is itself waited on through Go's network poller,
// so the poller goroutine holds no thread while nothing is readable.
type poller struct {
	epfd int
	f    *os.File // epfd, for the network poller

	mu    sync.Mutex // protects slots and free
	slots []pollSlot
	free  []uint32

	done chan struct{} // closed when the poller goroutine returned
}

type pollSlot struct {
	s   *session
	gen uint32
}

const pollEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

func newPoller() (*poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	p := &poller{epfd: epfd, f: os.NewFile(uintptr(epfd), "epoll"), done: make(chan struct{})}
	rc, err := p.f.SyscallConn()
	if err != nil {
		p.f.Close()
		return nil, err
	}
	go p.run(rc)
	return p, nil
}

// run waits for events and starts the readers of the connections they
// name, until the poller is closed.
func (p *poller) run(rc syscall.RawConn) {
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
		p.mu.Lock()
		for _, ev := range evs[:n] {
			i, gen := uint32(ev.Fd), uint32(ev.Pad)
			if int(i) < len(p.slots) && p.slots[i].gen == gen && p.slots[i].s != nil {
				p.slots[i].s.readable()
			}
		}
		p.mu.Unlock()
	}
}

// add registers s's socket (s.raw), armed: s must already be parked.
func (p *poller) add(s *session) error {
	p.mu.Lock()
	var i uint32
	if k := len(p.free); k > 0 {
		i, p.free = p.free[k-1], p.free[:k-1]
	} else {
		i = uint32(len(p.slots))
		p.slots = append(p.slots, pollSlot{})
	}
	p.slots[i].s = s
	gen := p.slots[i].gen
	p.mu.Unlock()
	s.pslot, s.pgen = i, gen
	ev := syscall.EpollEvent{Events: pollEvents, Fd: int32(i), Pad: int32(gen)}
	err := p.ctl(s, syscall.EPOLL_CTL_ADD, &ev)
	if err != nil {
		p.remove(s)
	}
	return err
}

// rearm asks for one more event for s, which has parked.
func (p *poller) rearm(s *session) error {
	ev := syscall.EpollEvent{Events: pollEvents, Fd: int32(s.pslot), Pad: int32(s.pgen)}
	return p.ctl(s, syscall.EPOLL_CTL_MOD, &ev)
}

// del unregisters s's socket; it is called before the socket closes.
func (p *poller) del(s *session) {
	p.ctl(s, syscall.EPOLL_CTL_DEL, &syscall.EpollEvent{})
}

// remove frees s's slot: an event still naming it is dropped.
func (p *poller) remove(s *session) {
	p.mu.Lock()
	if sl := &p.slots[s.pslot]; sl.s == s {
		sl.s = nil
		sl.gen++
		p.free = append(p.free, s.pslot)
	}
	p.mu.Unlock()
}

func (p *poller) ctl(s *session, op int, ev *syscall.EpollEvent) error {
	var errno error
	err := s.raw.Control(func(fd uintptr) { errno = syscall.EpollCtl(p.epfd, op, int(fd), ev) })
	if err != nil {
		return err
	}
	if errno != nil {
		return os.NewSyscallError("epoll_ctl", errno)
	}
	return nil
}

// close stops the poller goroutine and waits for it.
func (p *poller) close() {
	p.f.Close()
	<-p.done
}
