//go:build !linux

package wsapi

import "errors"

// poller is the epoll poller's stand-in where there is no epoll:
// newPoller fails and every connection has a reader goroutine.
type poller struct{}

func newPoller() (*poller, error) { return nil, errors.New("wsapi: no epoll on this platform") }

func (p *poller) add(*session) error   { return errors.ErrUnsupported }
func (p *poller) rearm(*session) error { return errors.ErrUnsupported }
func (p *poller) del(*session)         {}
func (p *poller) remove(*session)      {}
func (p *poller) close()               {}
