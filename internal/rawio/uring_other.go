//go:build !(linux && (amd64 || arm64))

package rawio

import "errors"

// Ring is io_uring's stand-in where it does not exist: NewRing always
// fails and callers make one write(2) per send.
type Ring struct{}

// NewRing fails: there is no io_uring here.
func NewRing(uint32) (*Ring, error) { return nil, errors.New("io_uring: not on this platform") }

func (r *Ring) Free() int                                     { return 0 }
func (r *Ring) Send(int, []byte, uint64)                      {}
func (r *Ring) Submit(func(userData uint64, res int32)) error { return nil }
func (r *Ring) FD() int                                       { return -1 }
func (r *Ring) Close()                                        {}
