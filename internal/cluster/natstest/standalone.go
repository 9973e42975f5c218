package natstest

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BinaryEnv names a nats-server binary for Standalone to run instead of
// building one (to test another version, e.g. the oldest supported, 2.14).
const BinaryEnv = "FANOUTD_NATS_SERVER"

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Binary returns the path of a nats-server binary: $FANOUTD_NATS_SERVER,
// or else one built (once per test process) from the nats-server module
// go.mod requires, so no network is needed beyond the module cache.
// RemoveBinary deletes it.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinaryEnv); p != "" {
		return p
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "fanoutd-nats-server-"); built.err != nil {
			return
		}
		p := filepath.Join(built.dir, "nats-server")
		out, err := exec.Command("go", "build", "-o", p, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			built.err = &buildError{err: err, out: string(out)}
			return
		}
		built.path = p
	})
	if built.err != nil {
		t.Fatalf("natstest: building nats-server: %v", built.err)
	}
	return built.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// RemoveBinary deletes the binary Binary built, if any (a TestMain's
// cleanup).
func RemoveBinary() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// Server is a nats-server running as a separate process.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	http int    // the monitoring port, if any
	conf string // a configuration file, if any (-c)
	cmd  *exec.Cmd
	done chan struct{} // closes when the process exited
}

// Standalone runs the nats-server binary (Binary) as its own process
// with JetStream on, storing under a temporary directory, listening on
// 127.0.0.1 on a free port, and waits until it takes connections. It is
// killed when the test ends.
func Standalone(t testing.TB) *Server { t.Helper(); return StandaloneConfig(t, "") }

// StandaloneConfig is Standalone with conf (nats-server's configuration
// syntax, e.g. an authorization block) as its configuration file; the
// flags still set JetStream, the store, the address and the port.
func StandaloneConfig(t testing.TB, conf string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), port: port}
	if conf != "" {
		s.conf = filepath.Join(s.dir, "nats-server.conf")
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// URL is the server's client URL.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// Start (re)starts the process on the same port and store, and waits until
// it answers a client's connection with its INFO line.
func (s *Server) Start() {
	s.t.Helper()
	args := []string{"-js", "-sd", s.dir, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port)}
	if s.conf != "" {
		args = append(args, "-c", s.conf)
	}
	s.cmd = exec.Command(s.bin, args...)
	if testing.Verbose() {
		s.cmd.Stderr = os.Stderr
	}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	s.done = done
	go func(cmd *exec.Cmd) { cmd.Wait(); close(done) }(s.cmd)
	deadline := time.Now().Add(20 * time.Second)
	for !s.ready() {
		select {
		case <-done:
			s.t.Fatalf("natstest: nats-server exited: %v", s.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatal("natstest: nats-server not ready within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) ready() bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "INFO ")
}

// Kill kills the process (SIGKILL) and waits for it to exit.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
}

// Version runs the binary with --version and returns what it prints
// ("nats-server: v2.15.2").
func Version(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(Binary(t), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
