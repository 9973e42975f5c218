package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/fanoutd/fanoutd/internal/config"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// A test that needs fanoutd as a separate process (kill -9) runs this
	// test binary as the command.
	if os.Getenv("FANOUTD_TEST_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain(os.Args[1:]))
	}
	// The embedded default claim store is ./data/claims: keep tests that
	// run on defaults out of the source tree.
	dir, err := os.MkdirTemp("", "fanoutd-claims-")
	if err != nil {
		panic(err)
	}
	config.DefaultClaimDir = dir
	defer os.RemoveAll(dir)
	goleak.VerifyTestMain(m)
}

func TestUnknownCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "frobnicate") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestNoBenchInTheProductionBinary: the load harness and the soak are
// fanoutd-bench's, and fanoutd's help does not list them.
func TestNoBenchInTheProductionBinary(t *testing.T) {
	for _, cmd := range []string{"bench", "soak", "bench-clients", "bench-venue", "soak-clients"} {
		var out, errb bytes.Buffer
		if code := run([]string{cmd}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
			t.Errorf("%s: exit %d, stderr %q", cmd, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	run([]string{"help"}, &out, &errb)
	if strings.Contains(out.String(), "bench") || strings.Contains(out.String(), "soak") {
		t.Errorf("help lists the harness:\n%s", out.String())
	}
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "fanoutd ") {
		t.Fatalf("exit %d, stdout %q", code, out.String())
	}
}
