package bench

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestProcStatCPU(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	line := []byte("4242 (cent (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 37 0 0 20 0 8 0 100 0 0\n")
	got, err := procStatCPU(line)
	if err != nil || got != 2870*time.Millisecond {
		t.Fatalf("procStatCPU = %v, %v; want 2.87s", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 0 0"} {
		if _, err := procStatCPU([]byte(bad)); err == nil {
			t.Errorf("procStatCPU(%q): no error", bad)
		}
	}
	// This process's own line parses, and lies between getrusage's figures
	// taken before and after it, give or take the /proc clock tick (other
	// tests' goroutines may burn CPU meanwhile).
	ru0 := processCPU()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getpid()) + "/stat")
	if err != nil {
		t.Skip("no /proc here")
	}
	ru1 := processCPU()
	d, err := procStatCPU(b)
	if err != nil {
		t.Fatal(err)
	}
	const tick = time.Second / clockTicks
	if d < ru0-2*tick || d > ru1+2*tick {
		t.Errorf("/proc says %v of CPU, getrusage %v before and %v after", d, ru0, ru1)
	}
}

func TestBenchBadPeer(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"--peer", "nats"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `--peer "nats"`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := Main([]string{"--peer", "centrifugo", "--peer-bin", "/nonexistent/centrifugo"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "go install github.com/centrifugal/centrifugo") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestBenchRoundsNeedEdges: --rounds is at least 1, and more than one
// only with --edges (the rounds interleave the two sides of a cluster
// bench).
func TestBenchRoundsNeedEdges(t *testing.T) {
	for _, args := range [][]string{{"--rounds", "3"}, {"--edges", "1", "--rounds", "0"}} {
		var out, errb bytes.Buffer
		if code := Main(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--rounds") {
			t.Fatalf("%q: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// TestPrintRounds: each round's ratio and differences, then the lowest,
// the median (the mean of the middle two of an even count) and the
// highest of each column.
func TestPrintRounds(t *testing.T) {
	ms := time.Millisecond
	rs := []roundResult{
		{oneMsg: 1, edgeMsg: 1.2, one: [3]time.Duration{ms, 10 * ms, 20 * ms}, many: [3]time.Duration{2 * ms, 11 * ms, 30 * ms}},
		{oneMsg: 1, edgeMsg: 1.0, one: [3]time.Duration{ms, 10 * ms, 20 * ms}, many: [3]time.Duration{ms, 13 * ms, 20 * ms}},
		{oneMsg: 2, edgeMsg: 2.2, one: [3]time.Duration{ms, 10 * ms, 20 * ms}, many: [3]time.Duration{3 * ms, 9 * ms, 25 * ms}},
		{oneMsg: 1, edgeMsg: 1.5, one: [3]time.Duration{ms, 10 * ms, 20 * ms}, many: [3]time.Duration{ms, 10 * ms, 20 * ms}},
	}
	var b bytes.Buffer
	printRounds(&b, rs)
	for _, want := range []string{
		"1           1.20×          1ms          1ms         10ms",
		"lowest      1.00×           0s         -1ms           0s",
		"median      1.15×        500µs        500µs        2.5ms",
		"highest     1.50×          2ms          3ms         10ms",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("no line %q in\n%s", want, b.String())
		}
	}
}
