package bench

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// childEnv makes this test binary run as fanoutd's bench children
// (bench-clients, bench-venue), which bench starts as os.Executable().
const childEnv = "FANOUTD_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" && len(os.Args) > 1 {
		switch os.Args[1] {
		case "bench-clients":
			os.Exit(Clients(os.Args[2:], os.Stdout, os.Stderr))
		case "bench-venue":
			os.Exit(VenueMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		}
	}
	os.Exit(m.Run())
}

// TestBenchVenueSource runs bench --source venue briefly: a Bybit venue
// in a child process, the daemon's bybit adapter on a real websocket, and
// subscribers in another child; every trade the venue sent reaches every
// subscriber, and the server counted deliveries in the window.
func TestBenchVenueSource(t *testing.T) {
	t.Setenv(childEnv, "1")
	const subs, rate = 3, 200
	o := options{subs: subs, rate: rate, size: 200, dur: time.Second, warm: 300 * time.Millisecond, source: sourceVenue, uring: true}
	stderr := &lockedBuffer{}
	r, err := run(o, stderr)
	if err != nil {
		t.Fatalf("run: %v; stderr:\n%s", err, stderr.String())
	}
	// The venue paces to absolute times: it sends exactly rate × (warmup + duration).
	if want := rate * 13 / 10; r.venueSent != want {
		t.Fatalf("venue sent %d frames, want %d", r.venueSent, want)
	}
	if r.clients.Total != int64(r.venueSent*subs) {
		t.Errorf("clients read %d events, want %d (%d subscribers × %d frames): lost on the venue path", r.clients.Total, r.venueSent*subs, subs, r.venueSent)
	}
	if !r.counted || r.dropped != 0 || r.delivered == 0 || r.clients.Received == 0 || r.cpu <= 0 {
		t.Errorf("counted %v, delivered %d, dropped %d, clients received %d in the window, cpu %v", r.counted, r.delivered, r.dropped, r.clients.Received, r.cpu)
	}
	var out bytes.Buffer
	r.print(&out)
	for _, want := range []string{"fanoutd, fed by a Bybit venue over a websocket: subscribers 3", "dropped             0", "venue frames sent   260 in the whole run; clients read 780 of 780"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBenchBadSource(t *testing.T) {
	for _, args := range [][]string{
		{"--source", "nats"},
		{"--source", "venue", "--peer", "centrifugo"},
	} {
		var out, errb bytes.Buffer
		if code := Main(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--source") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// lockedBuffer is a bytes.Buffer that the children's stderr copiers and
// the daemon's logger may write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
