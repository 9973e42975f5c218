//go:build !linux

package rawio

import (
	"errors"
	"syscall"
)

// Poller is epoll's stand-in where there is none: NewPoller fails.
type Poller struct{}

// NewPoller fails: there is no epoll on this platform.
func NewPoller(func(id uint64)) (*Poller, error) {
	return nil, errors.New("rawio: no epoll on this platform")
}

func (p *Poller) Add(syscall.RawConn, uint64) error   { return errors.ErrUnsupported }
func (p *Poller) Rearm(syscall.RawConn, uint64) error { return errors.ErrUnsupported }
func (p *Poller) Del(syscall.RawConn)                 {}
func (p *Poller) Close()                              {}
