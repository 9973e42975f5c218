package venuetest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP on 127.0.0.1 to a target until killed: a venue that
// goes away. Point an adapter's ws_url at Addr.
type Proxy struct {
	Addr string // host:port to dial instead of the target

	ln    net.Listener
	mu    sync.Mutex // protects conns
	conns []net.Conn
}

// NewProxy starts a proxy to target; it is killed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(p.Kill)
	return p
}

// Kill closes the listener and every connection: dials are refused.
func (p *Proxy) Kill() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
