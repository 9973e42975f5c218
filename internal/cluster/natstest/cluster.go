package natstest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cluster runs n nats-server processes (Binary) clustered on loopback:
// routes between all of them, JetStream on each, every one on a free
// client port. extra is added to each configuration file (e.g. an
// accounts block). It returns once every server takes connections; the
// JetStream cluster elects its meta leader soon after (a client's first
// JetStream request may have to retry). Each is killed when the test ends.
func Cluster(t testing.TB, n int, extra string) []*Server {
	t.Helper()
	routes := make([]string, n)
	rports := make([]int, n)
	for i := range n {
		rports[i] = freePort(t)
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", rports[i])
	}
	bin := Binary(t)
	out := make([]*Server, n)
	for i := range n {
		s := &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t)}
		conf := fmt.Sprintf("server_name: n%d\nlame_duck_grace_period: 1s\nlame_duck_duration: 30s\ncluster {\n  name: fanoutd-test\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n%s\n",
			i, rports[i], strings.Join(routes, ", "), extra)
		s.conf = filepath.Join(s.dir, "nats-server.conf")
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		out[i] = s
	}
	for _, s := range out {
		s.Start()
		t.Cleanup(s.Kill)
	}
	return out
}

// URLs returns the servers' client URLs, comma-separated
// (cluster.nats_url's form).
func URLs(servers []*Server) string {
	u := make([]string, len(servers))
	for i, s := range servers {
		u[i] = s.URL()
	}
	return strings.Join(u, ",")
}

// LameDuck puts the server in lame-duck mode (SIGUSR2, as `nats-server
// --signal ldm` does): it stops accepting connections, tells its clients,
// and exits after its lame-duck duration. It returns at once; Wait waits
// for the exit.
func (s *Server) LameDuck() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGUSR2)
	}
}

// Wait waits (at most d) for the process to exit and reports whether it did.
func (s *Server) Wait(d time.Duration) bool {
	select {
	case <-s.done:
		return true
	case <-time.After(d):
		return false
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
