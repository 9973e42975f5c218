// Package natstest runs a real NATS server (JetStream on) on 127.0.0.1
// for tests.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start runs a server on port (0: any free port), storing under dir, and
// waits until it takes connections. The caller shuts it down (it may
// restart one on the same port and dir); Run does it at the test's end.
func Start(t testing.TB, port int, dir string) *server.Server {
	t.Helper()
	if port == 0 {
		port = -1
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	return s
}

// Run is Start on a free port and a temporary directory, shut down when
// the test ends.
func Run(t testing.TB) *server.Server {
	t.Helper()
	s := Start(t, 0, t.TempDir())
	t.Cleanup(s.Shutdown)
	return s
}
