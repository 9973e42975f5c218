//go:build !(linux && (amd64 || arm64))

package wsapi

import "errors"

// ring is io_uring's stand-in where it does not exist: newRing always
// fails and the write pool makes one write(2) per connection.
type ring struct{}

func newRing(uint32) (*ring, error) { return nil, errors.New("io_uring: not on this platform") }

func (r *ring) free() int                                     { return 0 }
func (r *ring) send(int, []byte, uint64)                      {}
func (r *ring) submit(func(userData uint64, res int32)) error { return nil }
func (r *ring) close()                                        {}
