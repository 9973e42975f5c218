package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestMain(m *testing.M) {
	// The harness starts os.Executable() for its children: this test
	// binary, run as fanoutd-bench.
	if os.Getenv("FANOUTD_TEST_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// buildFanoutd builds cmd/fanoutd for the edges the harness starts as
// `fanoutd serve`, and names it in FANOUTD_BIN.
func buildFanoutd(t *testing.T) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fanoutd")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, "../fanoutd")...).CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fanoutd: %v\n%s", err, out)
	}
	t.Setenv("FANOUTD_BIN", bin)
}

func TestHelpAndUnknownCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"help"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "soak") || !strings.Contains(out.String(), "bench") {
		t.Fatalf("help: exit %d, stdout %q", code, out.String())
	}
	if code := run([]string{"serve"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "serve"`) {
		t.Fatalf("serve: exit %d, stderr %q", code, errb.String())
	}
}

// TestBenchAndSoakFlags: the commands take the flags they took inside
// fanoutd (a bad value is a usage error naming it).
func TestBenchAndSoakFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--subs", "x"},
		{"bench", "--rate", "x"},
		{"soak", "--drop-every", "x"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "x") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
