package natstest

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// RouteProxy is a TCP proxy in front of one server's route port. Pause
// cuts that server off from the others: every route connection through
// the proxy is closed and new ones are closed as they arrive, until
// Resume.
type RouteProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	paused bool
	conns  map[net.Conn]struct{}
}

func newRouteProxy(t testing.TB, target string) *RouteProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &RouteProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Pause() })
	return p
}

// Addr is the proxy's host:port.
func (p *RouteProxy) Addr() string { return p.ln.Addr().String() }

func (p *RouteProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.paused {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		go p.pipe(c)
	}
}

func (p *RouteProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.paused {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Pause closes every connection through the proxy and every new one.
func (p *RouteProxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	for c := range p.conns {
		c.Close()
	}
}

// Resume lets route connections through again.
func (p *RouteProxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// Cut is the pausable proxies on one server's routes.
type Cut []*RouteProxy

// Pause cuts the server off from the others.
func (c Cut) Pause() {
	for _, p := range c {
		p.Pause()
	}
}

// Resume lets the server's routes connect again.
func (c Cut) Resume() {
	for _, p := range c {
		p.Resume()
	}
}

// PartitionCluster runs n nats-server processes clustered on loopback, as
// Cluster does, where any one can be cut off from the others: server i
// dials server j's route port only through a proxy of its own
// (i→j), and every server advertises a route address nobody listens on,
// so none learns a way around the proxies. cut(k) returns the proxies of
// every route of server k (k→j and j→k). Each server also serves NATS
// monitoring (MonitorURL: /connz names the clients connected to it).
func PartitionCluster(t testing.TB, n int, extra string) (servers []*Server, cut func(k int) Cut) {
	t.Helper()
	bin := Binary(t)
	rports := make([]int, n)
	for i := range rports {
		rports[i] = freePort(t)
	}
	dead := freePort(t)                 // nobody listens here
	proxies := make([][]*RouteProxy, n) // [from][to]
	for i := range n {
		proxies[i] = make([]*RouteProxy, n)
		for j := range n {
			if i != j {
				proxies[i][j] = newRouteProxy(t, "127.0.0.1:"+strconv.Itoa(rports[j]))
			}
		}
	}
	servers = make([]*Server, n)
	for i := range n {
		s := &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t), http: freePort(t)}
		var routes []string
		for j := range n {
			if i != j {
				routes = append(routes, "nats-route://"+proxies[i][j].Addr())
			}
		}
		conf := fmt.Sprintf("server_name: n%d\nhttp: 127.0.0.1:%d\nlame_duck_grace_period: 1s\nlame_duck_duration: 30s\ncluster {\n  name: fanoutd-test\n  listen: 127.0.0.1:%d\n  advertise: \"127.0.0.1:%d\"\n  routes: [%s]\n}\n%s\n",
			i, s.http, rports[i], dead, strings.Join(routes, ", "), extra)
		s.conf = filepath.Join(s.dir, "nats-server.conf")
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		servers[i] = s
	}
	for _, s := range servers {
		s.Start()
		t.Cleanup(s.Kill)
	}
	cut = func(k int) Cut {
		var c Cut
		for j := range n {
			if j != k {
				c = append(c, proxies[k][j], proxies[j][k])
			}
		}
		return c
	}
	return servers, cut
}

// MonitorURL is the server's monitoring base URL (PartitionCluster's
// servers only; "" otherwise).
func (s *Server) MonitorURL() string {
	if s.http == 0 {
		return ""
	}
	return "http://127.0.0.1:" + strconv.Itoa(s.http)
}
