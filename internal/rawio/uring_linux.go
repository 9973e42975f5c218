//go:build linux && (amd64 || arm64)

package rawio

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Ring is the smallest io_uring a websocket write-pool worker needs
// (internal/wsapi): it queues one send per connection for a round and
// hands them all to the kernel in one io_uring_enter, instead of one
// write(2) each. Written here rather than
// taken from a library because no io_uring module is served to this
// project, and because the product needs only this: sends with
// MSG_DONTWAIT (so a full socket answers EAGAIN, exactly as a
// non-blocking write(2) does), submitted and reaped synchronously by one
// goroutine. internal/wsapi's writeShard says what it saves.
//
// A Ring is used by one goroutine at a time.
type Ring struct {
	fd      int
	entries uint32
	ringMem []byte
	sqeMem  []byte

	sqHead, sqTail *uint32 // shared with the kernel
	sqMask         uint32
	sqArray        []uint32
	sqes           []uringSQE
	tail           uint32 // our submission tail, published on submit
	queued         uint32 // SQEs queued since the last submit

	cqHead, cqTail *uint32 // shared with the kernel
	cqMask         uint32
	cqes           []uringCQE
}

// Linux io_uring ABI (include/uapi/linux/io_uring.h); the system call
// numbers are the same on every architecture built here.
const (
	sysIOUringSetup    = 425
	sysIOUringEnter    = 426
	sysIOUringRegister = 427

	uringRegisterProbe = 8
	uringOpSupported   = 1 << 0

	uringOffSQRing = 0
	uringOffSQEs   = 0x10000000

	uringFeatSingleMmap = 1 << 0
	uringSetupSubmitAll = 1 << 7
	uringSetupCoopTask  = 1 << 8
	uringEnterGetEvents = 1 << 0
	uringOpSend         = 26
)

type uringSQRingOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type uringCQRingOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  uringSQRingOffsets
	cqOff                                                                  uringCQRingOffsets
}

type uringSQE struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	opFlags  uint32
	userData uint64
	bufIndex uint16
	persona  uint16
	spliceFD int32
	addr3    uint64
	pad      uint64
}

type uringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

func init() {
	if unsafe.Sizeof(uringSQE{}) != 64 || unsafe.Sizeof(uringCQE{}) != 16 || unsafe.Sizeof(uringParams{}) != 120 || unsafe.Sizeof(uringProbe{}) != 16+256*8 {
		panic("rawio: io_uring ABI structs have the wrong size")
	}
}

// NewRing sets up a ring of at least entries submission slots. It fails
// where io_uring is missing or forbidden (old kernels, seccomp,
// kernel.io_uring_disabled); the caller then writes with write(2).
func NewRing(entries uint32) (*Ring, error) {
	var p uringParams
	p.flags = uringSetupSubmitAll | uringSetupCoopTask
	fd, _, errno := syscall.Syscall(sysIOUringSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno == syscall.EINVAL { // a kernel older than 5.19: no such flags
		p = uringParams{}
		fd, _, errno = syscall.Syscall(sysIOUringSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	}
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd), entries: p.sqEntries}
	if p.features&uringFeatSingleMmap == 0 {
		r.Close()
		return nil, errors.New("io_uring: kernel lacks IORING_FEAT_SINGLE_MMAP (5.4)")
	}
	size := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(uringCQE{})))
	var err error
	if r.ringMem, err = syscall.Mmap(r.fd, uringOffSQRing, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		r.Close()
		return nil, fmt.Errorf("io_uring: mmap rings: %w", err)
	}
	if r.sqeMem, err = syscall.Mmap(r.fd, uringOffSQEs, int(p.sqEntries)*int(unsafe.Sizeof(uringSQE{})), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		r.Close()
		return nil, fmt.Errorf("io_uring: mmap sqes: %w", err)
	}
	u32 := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&r.ringMem[off])) }
	r.sqHead, r.sqTail, r.sqMask = u32(p.sqOff.head), u32(p.sqOff.tail), *u32(p.sqOff.ringMask)
	r.sqArray = unsafe.Slice(u32(p.sqOff.array), p.sqEntries)
	r.sqes = unsafe.Slice((*uringSQE)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead, r.cqTail, r.cqMask = u32(p.cqOff.head), u32(p.cqOff.tail), *u32(p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*uringCQE)(unsafe.Pointer(&r.ringMem[p.cqOff.cqes])), p.cqEntries)
	r.tail = atomic.LoadUint32(r.sqTail)
	if err := r.probeSend(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// uringProbe is struct io_uring_probe with room for 256 operations.
type uringProbe struct {
	lastOp, opsLen uint8
	resv           uint16
	resv2          [3]uint32
	ops            [256]struct {
		op, resv uint8
		flags    uint16
		resv2    uint32
	}
}

// probeSend checks that the kernel knows IORING_OP_SEND (5.6): a ring
// without it would fail every send, and the pool is better off with
// write(2).
func (r *Ring) probeSend() error {
	var p uringProbe
	_, _, errno := syscall.Syscall6(sysIOUringRegister, uintptr(r.fd), uringRegisterProbe, uintptr(unsafe.Pointer(&p)), uintptr(len(p.ops)), 0, 0)
	if errno != 0 {
		return fmt.Errorf("io_uring: probe: %w", errno)
	}
	if p.lastOp < uringOpSend || p.ops[uringOpSend].flags&uringOpSupported == 0 {
		return errors.New("io_uring: the kernel has no IORING_OP_SEND (5.6)")
	}
	return nil
}

// Free returns how many more sends can be queued before Submit.
func (r *Ring) Free() int { return int(r.entries - r.queued) }

// Send queues a send of b on the socket fd with MSG_DONTWAIT and
// MSG_NOSIGNAL. b must stay alive and unchanged until Submit returns.
func (r *Ring) Send(fd int, b []byte, userData uint64) {
	idx := r.tail & r.sqMask
	r.sqes[idx] = uringSQE{opcode: uringOpSend, fd: int32(fd), addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))),
		len: uint32(len(b)), opFlags: syscall.MSG_DONTWAIT | syscall.MSG_NOSIGNAL, userData: userData}
	r.sqArray[idx] = idx
	r.tail++
	r.queued++
}

// Submit hands the queued sends to the kernel, waits for all of their
// completions and calls done with each (its userData, and the bytes sent
// or a negated errno). Sends with MSG_DONTWAIT complete during the
// system call, so the wait is for work the kernel does inline.
//
// io_uring_enter is a RawSyscall for the reason Socket.TryWrite's write(2) is.
func (r *Ring) Submit(done func(userData uint64, res int32)) error {
	n := r.queued
	if n == 0 {
		return nil
	}
	atomic.StoreUint32(r.sqTail, r.tail)
	var got uint32
	for idle := 0; got < n; {
		toSubmit := r.tail - atomic.LoadUint32(r.sqHead)
		_, _, errno := syscall.RawSyscall6(sysIOUringEnter, uintptr(r.fd), uintptr(toSubmit), uintptr(n-got), uringEnterGetEvents, 0, 0)
		if errno != 0 && errno != syscall.EINTR && errno != syscall.EAGAIN && errno != syscall.EBUSY {
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
		k := r.reap(done)
		got += k
		// Interrupted or busy calls are retried, but not for ever: a ring
		// that completes nothing is given up (the pool then uses write(2)).
		if idle++; k > 0 {
			idle = 0
		} else if idle == 1000 {
			return fmt.Errorf("io_uring_enter: %d of %d sends completed after %d calls without progress (last errno %v)", got, n, idle, errno)
		}
	}
	r.queued = 0
	return nil
}

// reap calls done with every completion there is and returns how many.
func (r *Ring) reap(done func(userData uint64, res int32)) uint32 {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for h := head; h != tail; h++ {
		c := &r.cqes[h&r.cqMask]
		done(c.userData, c.res)
	}
	atomic.StoreUint32(r.cqHead, tail)
	return tail - head
}

// FD is the ring's own descriptor.
func (r *Ring) FD() int { return r.fd }

// Close unmaps the ring and closes its descriptor.
func (r *Ring) Close() {
	if r.sqeMem != nil {
		syscall.Munmap(r.sqeMem)
	}
	if r.ringMem != nil {
		syscall.Munmap(r.ringMem)
	}
	syscall.Close(r.fd)
}
