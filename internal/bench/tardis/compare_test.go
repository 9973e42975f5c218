package tardis_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The venues tardis-dev reads fanoutd's captures of (its coinbase and
// kraken mappers read other APIs than the ones fanoutd records).
var venues = []string{"binance", "okx", "bybit"}

func capturePath(v string) string {
	return filepath.Join("..", "..", "..", "testdata", "replay", v+".jsonl.gz")
}

// needHarness skips t unless node and the harness's tardis-dev are installed.
func needHarness(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed: the tardis-dev comparison needs Node.js 20+ (README, Derived streams)")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "tardis-dev", "package.json")); err != nil {
		t.Skip("tardis-dev not installed: run `npm ci` in internal/bench/tardis (README, Derived streams)")
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

// fanoutd builds the command once per test binary.
func fanoutd(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tardis-cmp-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "fanoutd")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/fanoutd/fanoutd/cmd/fanoutd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// snap is one book_snapshot or quote message of either side, and marks a
// disconnect (ours: link_down) when disc is set.
type snap struct {
	at         time.Time // microseconds (tardis-dev's resolution)
	bids, asks [][2]float64
	disc       bool
}

func (s snap) String() string {
	if s.disc {
		return "disconnect at " + s.at.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s bids %v asks %v", s.at.Format(time.RFC3339Nano), s.bids, s.asks)
}

func sameLevels(a, b [][2]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s snap) sameBook(o snap) bool { return sameLevels(s.bids, o.bids) && sameLevels(s.asks, o.asks) }

func num(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return f
}

func levels(t *testing.T, ls [][2]string) [][2]float64 {
	out := make([][2]float64, len(ls))
	for i, l := range ls {
		out[i] = [2]float64{num(t, l[0]), num(t, l[1])}
	}
	return out
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return at
}

// runOurs exports one derived stream of capture with fanoutd.
func runOurs(t *testing.T, capture, stream string) []byte {
	t.Helper()
	cmd := exec.Command(fanoutd(t), "replay", "--export", "-", "--streams", stream, capture)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fanoutd replay --export: %v\n%s", err, stderr.Bytes())
	}
	return out
}

// runTardis runs the harness on capture with args.
func runTardis(t *testing.T, capture string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("node", append(append([]string{"run.js"}, args...), capture)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node run.js %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

func lines(b []byte) [][]byte { return bytes.Split(bytes.TrimSpace(b), []byte("\n")) }

// ourSnaps reads fanoutd's book_snapshot/quote messages and link_down
// notices.
func ourSnaps(t *testing.T, out []byte) []snap {
	var res []snap
	for _, l := range lines(out) {
		var m struct {
			Type, Kind, At string
			Bids, Asks     [][2]string
			Bid, Ask       string
			RecvTime       string `json:"recv_time"`
			BidSize        string `json:"bid_size"`
			AskSize        string `json:"ask_size"`
		}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		switch {
		case m.Type == "notice" && m.Kind == "link_down":
			res = append(res, snap{at: parseTime(t, m.At).Truncate(time.Microsecond), disc: true})
		case m.Type == "book":
			res = append(res, snap{at: parseTime(t, m.RecvTime).Truncate(time.Microsecond), bids: levels(t, m.Bids), asks: levels(t, m.Asks)})
		case m.Type == "quote":
			res = append(res, snap{at: parseTime(t, m.RecvTime).Truncate(time.Microsecond),
				bids: levels(t, [][2]string{{m.Bid, m.BidSize}}), asks: levels(t, [][2]string{{m.Ask, m.AskSize}})})
		}
	}
	return res
}

// tardisSnaps reads the harness's book_snapshot lines named name, and its
// disconnect lines.
func tardisSnaps(t *testing.T, out []byte, name string) []snap {
	var res []snap
	for _, l := range lines(out) {
		var m struct {
			Type, Name, Timestamp, LocalTimestamp string
			Bids, Asks                            [][2]float64
		}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		switch m.Type {
		case "disconnect":
			res = append(res, snap{at: parseTime(t, m.LocalTimestamp), disc: true})
		case "book_snapshot":
			if m.Name != name {
				continue
			}
			res = append(res, snap{at: parseTime(t, m.Timestamp), bids: m.Bids, asks: m.Asks})
		}
	}
	return res
}

// align applies the three conventions in which tardis-dev's computed book
// snapshots differ from fanoutd's (README, Derived streams) to ss, the
// snapshots tardis-dev computed at interval (zero: the same depth at 0ms):
//   - tardis-dev's computables start afresh at the start and after each
//     disconnect, and emit their first snapshot at once, stamped with that
//     change's time; fanoutd emits it at the end of its interval, holding
//     the book then. So the first snapshot of a session moves to its
//     interval's end (where a later one of tardis-dev's may replace it).
//   - after a disconnect tardis-dev emits that first snapshot even when it
//     equals the last one before the drop; fanoutd, continuing the stream,
//     emits only a change.
//   - at a disconnect tardis-dev drops the interval in progress; fanoutd
//     closes it at its end with the book before the drop, when it changed
//     since the last snapshot and the capture goes on.
//
// Disconnect marks are removed.
func align(ss, zero []snap, interval time.Duration) (out []snap, st alignStats) {
	emit := func(s snap) {
		if n := len(out); n > 0 && out[n-1].at.Equal(s.at) {
			out[n-1] = s
			return
		}
		out = append(out, s)
	}
	fresh := true
	for i := 0; i < len(ss); i++ {
		s := ss[i]
		if s.disc {
			fresh = true
			if interval > 0 && len(out) > 0 {
				// The book before the drop, if a session follows.
				var before *snap
				after := false
				for j := range zero {
					if zero[j].disc {
						continue
					}
					if !zero[j].at.After(s.at) {
						before = &zero[j]
					} else {
						after = true
						break
					}
				}
				if after && before != nil && !out[len(out)-1].sameBook(*before) {
					st.closed++
					emit(snap{at: s.at.Truncate(interval).Add(interval), bids: before.bids, asks: before.asks})
				}
			}
			continue
		}
		if fresh {
			fresh = false
			if n := len(out); n > 0 && out[n-1].sameBook(s) {
				st.repeated++
				continue
			}
			if interval > 0 && !s.at.Equal(s.at.Truncate(interval)) {
				st.moved++
				s.at = s.at.Truncate(interval).Add(interval)
			}
		}
		emit(s)
	}
	return out, st
}

// alignStats counts what align did, by convention.
type alignStats struct{ moved, repeated, closed int }

func withoutMarks(ss []snap) []snap {
	var out []snap
	for _, s := range ss {
		if !s.disc {
			out = append(out, s)
		}
	}
	return out
}

// compareSnaps fails t at the first difference.
func compareSnaps(t *testing.T, ours, theirs []snap) {
	t.Helper()
	for i := 0; i < len(ours) && i < len(theirs); i++ {
		if !ours[i].at.Equal(theirs[i].at) || !ours[i].sameBook(theirs[i]) {
			t.Fatalf("message %d differs:\nfanoutd    %v\ntardis-dev %v", i, ours[i], theirs[i])
		}
	}
	if len(ours) != len(theirs) {
		t.Fatalf("fanoutd %d messages, tardis-dev %d", len(ours), len(theirs))
	}
}

// TestBookSnapshotsMatchTardis compares fanoutd's book_snapshot_<d>_<i> and
// quote with tardis-dev's computeBookSnapshots over the receive time, on
// the testdata captures: same levels, prices, sizes and emission times,
// once the two conventions align describes are applied.
func TestBookSnapshotsMatchTardis(t *testing.T) {
	needHarness(t)
	cases := []struct {
		channel  string
		args     []string
		zero     string // the same depth at 0ms
		interval time.Duration
	}{
		{"book_snapshot_10_0ms", []string{"--book-snapshot", "10_0ms"}, "book_snapshot_10_0ms", 0},
		{"book_snapshot_1_1ms", []string{"--book-snapshot", "1_1ms", "--book-snapshot", "1_0ms"}, "book_snapshot_1_0ms", time.Millisecond},
		{"book_snapshot_5_10ms", []string{"--book-snapshot", "5_10ms", "--book-snapshot", "5_0ms"}, "book_snapshot_5_0ms", 10 * time.Millisecond},
		{"book_snapshot_25_100ms", []string{"--book-snapshot", "25_100ms", "--book-snapshot", "25_0ms"}, "book_snapshot_25_0ms", 100 * time.Millisecond},
		{"quote", []string{"--quote"}, "quote", 0},
	}
	for _, v := range venues {
		for _, c := range cases {
			t.Run(v+"/"+c.channel, func(t *testing.T) {
				t.Parallel()
				capture := capturePath(v)
				ours := withoutMarks(ourSnaps(t, runOurs(t, capture, v+":"+c.channel+":*")))
				out := runTardis(t, capture, append(c.args, "--time", "local")...)
				raw := tardisSnaps(t, out, c.channel)
				theirs, st := align(raw, tardisSnaps(t, out, c.zero), c.interval)
				if len(ours) < 3 {
					t.Fatalf("fanoutd wrote %d messages", len(ours))
				}
				compareSnaps(t, ours, theirs)
				t.Logf("%d messages equal; tardis-dev wrote %d: first of a session moved to its interval's end %d, repeated after a disconnect %d; interval closed at a disconnect (fanoutd only) %d",
					len(ours), len(withoutMarks(raw)), st.moved, st.repeated, st.closed)
			})
		}
	}
}
