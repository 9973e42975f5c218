package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
)

func TestRecordConfig(t *testing.T) {
	cfg, err := config.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Record{Dir: "./data/captures", MaxBytes: 256 << 20, MaxAge: time.Hour, Queue: 65536}
	if cfg.Record != want {
		t.Fatalf("defaults %+v, want %+v", cfg.Record, want)
	}
	cfg, err = config.Parse([]byte("record:\n  enabled: true\n  dir: /x\n  max_bytes: 1000\n  max_age: 10m\n  queue: 5\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want = config.Record{Enabled: true, Dir: "/x", MaxBytes: 1000, MaxAge: 10 * time.Minute, Queue: 5}
	if cfg.Record != want {
		t.Fatalf("got %+v, want %+v", cfg.Record, want)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"record:\n  max_bytes: -1\n", "record.max_bytes: -1"},
		{"record:\n  max_bytes: \"1GB\"\n", `record.max_bytes: "1GB"`},
		{"record:\n  max_age: soon\n", `record.max_age: "soon"`},
		{"record:\n  queue: 0\n", "record.queue: 0"},
		{"record:\n  enabled: maybe\n", "record.enabled"},
		{"record:\n  directory: /x\n", "record.directory: unknown key"},
	} {
		p := writeConfig(t, tc.yaml)
		var out, errb bytes.Buffer
		code := run([]string{"check-config", p}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.yaml, code, errb.String(), tc.want)
		}
	}
}

// liveDaemon runs a daemon with the real venue constructors on cfgPath.
type liveDaemon struct {
	d      *daemon.Daemon
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func startLiveDaemon(t testing.TB, cfgPath string, o daemon.Options) *liveDaemon {
	t.Helper()
	cfg, err := config.Load(cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	o.Config, o.Logger = cfg, log
	d, err := daemon.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ld := &liveDaemon{d: d, addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { ld.done <- d.Run(ctx, ln) }()
	t.Cleanup(func() { ld.stop(t) })
	return ld
}

func (ld *liveDaemon) stop(t testing.TB) {
	ld.cancel()
	select {
	case err := <-ld.done:
		ld.done <- err
		if err != nil {
			t.Errorf("daemon: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not stop")
	}
}

// rawClient reads a websocket's objects as the raw lines the server sent.
type rawClient struct {
	ws    *websocket.Conn
	lines chan string
}

func dialLines(t *testing.T, url string) *rawClient {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	c := &rawClient{ws: ws, lines: make(chan string, 1<<20)}
	go func() {
		defer close(c.lines)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			for _, l := range bytes.Split(b, []byte{'\n'}) {
				c.lines <- string(l)
			}
		}
	}()
	return c
}

func (c *rawClient) send(t *testing.T, msg string) {
	t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// until reads lines until pred holds, failing after d; it returns them.
func (c *rawClient) until(t *testing.T, d time.Duration, pred func(string) bool) []string {
	t.Helper()
	var out []string
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("connection ended; last lines %q", lastOf(out, 3))
			}
			out = append(out, l)
			if pred(l) {
				return out
			}
		case <-timeout:
			t.Fatalf("timed out; last lines %q", lastOf(out, 3))
		}
	}
}

func lastOf(s []string, n int) []string { return s[max(0, len(s)-n):] }

var recvTimeRE = regexp.MustCompile(`,"recv_time":"[^"]*"`)

// eventLines returns the event objects among lines, receive times removed.
func eventLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, `{"type":"book"`) || strings.HasPrefix(l, `{"type":"trade"`) || strings.HasPrefix(l, `{"type":"ticker"`) {
			out = append(out, recvTimeRE.ReplaceAllString(l, ""))
		}
	}
	return out
}

func levelsOf(ls []venue.Level) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%s@%s ", l.Size, l.Price)
	}
	return b.String()
}

// TestServeRecordsAndReplayExportsTheSameEvents: serve with recording on,
// against a mock Kraken; a websocket client subscribed before the first
// event collects the live stream; after shutdown, replay --export of the
// recording gives byte-identical events, receive times aside.
func TestServeRecordsAndReplayExportsTheSameEvents(t *testing.T) {
	t.Run("file", func(t *testing.T) { testServeRecords(t, false) })
	t.Run("check_in", func(t *testing.T) { testServeRecords(t, true) })
}

// testServeRecords records a mock Kraken through serve and replays the
// capture with replay --export: from the segment file, and with checkIn
// (record.check_in) also from its claim in the claim check.
func testServeRecords(t *testing.T, checkIn bool) {
	m := &krakentest.Mock{}
	m.Start(t)
	dir := t.TempDir()
	extra := ""
	if checkIn {
		extra = fmt.Sprintf("  check_in: true\nclaim_check:\n  stores: [{kind: dir, path: %s}]\n", t.TempDir())
	}
	cfgPath := writeConfig(t, fmt.Sprintf(`
record:
  enabled: true
  dir: %s
%svenues:
  kraken:
    ws_url: %s
    symbols: []
    channels: [level2]
`, dir, extra, m.Server().URL))
	var mu sync.Mutex
	var segs []replay.Segment
	var claims []claimcheck.Claim
	ld := startLiveDaemon(t, cfgPath, daemon.Options{
		OnSegment: func(s replay.Segment) { mu.Lock(); segs = append(segs, s); mu.Unlock() },
		OnCheckIn: func(s replay.Segment, c claimcheck.Claim) { mu.Lock(); claims = append(claims, c); mu.Unlock() },
	})

	st := venue.NewStream("kraken", venue.Level2, m.Symbol())
	c := dialLines(t, "ws://"+ld.addr+"/v1/stream")
	// No symbol is subscribed at start: this subscription makes the adapter
	// subscribe, so the client is there before the venue's first frame.
	c.send(t, `{"op":"subscribe","id":"1","streams":["`+string(st)+`"]}`)
	lines := c.until(t, 10*time.Second, func(l string) bool { return strings.Contains(l, `"snapshot":true`) })
	feed := ld.d.Hub().Feed("kraken")
	for range 5 {
		m.Step(100)
	}
	// Wait until the daemon's book is the venue's, then until the client
	// has read up to that seq.
	var last uint64
	checkFor(t, 20*time.Second, "the daemon's book to match the venue's", func() bool {
		ev, ok := feed.Book(st)
		if !ok {
			return false
		}
		want := m.Book().Snapshot(st)
		last = ev.Seq
		return levelsOf(ev.Bids) == levelsOf(want.Bids) && levelsOf(ev.Asks) == levelsOf(want.Asks)
	})
	lines = append(lines, c.until(t, 10*time.Second, func(l string) bool { return strings.Contains(l, fmt.Sprintf(`"seq":%d,`, last)) })...)
	ld.stop(t)

	mu.Lock()
	defer mu.Unlock()
	if len(segs) != 1 {
		t.Fatalf("%d segments announced, want 1", len(segs))
	}
	seg := segs[0]
	if filepath.Dir(seg.Path) != filepath.Join(dir, "kraken") || !strings.HasSuffix(seg.Path, ".jsonl.gz") {
		t.Fatalf("segment at %s", seg.Path)
	}
	f, err := replay.Open(seg.Path)
	if err != nil {
		t.Fatal(err)
	}
	meta := f.Meta
	f.Close()
	if meta.Venue != "kraken" || meta.Endpoint != m.Server().URL || meta.Fanoutd != daemon.Version {
		t.Fatalf("metadata %+v", meta)
	}
	if partial, _ := filepath.Glob(filepath.Join(dir, "kraken", "*.partial")); len(partial) > 0 {
		t.Fatalf("left behind: %v", partial)
	}

	live := eventLines(lines)
	if len(live) < 500 || uint64(len(live)) != last {
		t.Fatalf("the live client read %d events, last seq %d", len(live), last)
	}
	captures := []string{seg.Path}
	if checkIn {
		if len(claims) != 1 || claims[0].Kind != claimcheck.KindCapture || claims[0].Stream != "kraken" {
			t.Fatalf("claims checked in: %+v", claims)
		}
		captures = append(captures, claims[0].URL)
	} else if len(claims) != 0 {
		t.Fatalf("claims checked in without check_in: %+v", claims)
	}
	for _, capture := range captures {
		out := filepath.Join(t.TempDir(), "export.jsonl")
		var stdout, stderr bytes.Buffer
		if code := run([]string{"replay", "--config", cfgPath, "--export", out, capture}, &stdout, &stderr); code != 0 {
			t.Fatalf("replay --export %s: exit %d: %s", capture, code, stderr.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		replayed := eventLines(strings.Split(strings.TrimSpace(string(b)), "\n"))
		if len(live) != len(replayed) {
			t.Fatalf("%s: live %d events, replay %d", capture, len(live), len(replayed))
		}
		for i := range live {
			if live[i] != replayed[i] {
				t.Fatalf("%s: event %d differs:\nlive   %s\nreplay %s", capture, i, live[i], replayed[i])
			}
		}
	}
}

// TestRecordCommand records a mock Kraken with --duration: the recorder is
// closed cleanly and the capture replays.
func TestRecordCommand(t *testing.T) {
	m := &krakentest.Mock{}
	m.Start(t)
	cfgPath := writeConfig(t, fmt.Sprintf("venues:\n  kraken:\n    ws_url: %s\n", m.Server().URL))
	dir := t.TempDir()
	old := recordProgressEvery
	recordProgressEvery = 100 * time.Millisecond
	defer func() { recordProgressEvery = old }()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- recordCmd(context.Background(), []string{"--venue", "kraken", "--streams", "kraken:level2:" + m.Symbol(), m.Symbol(),
			"--out", dir, "--duration", "1500ms", "--config", cfgPath}, io.Discard, &stderr, venues.All)
	}()
	m.Server().WaitAccepted(t, 1, 10*time.Second)
	var code int
	// Step the venue until the command ends (the first steps may come
	// before the adapter subscribed; the venue then sends nothing).
steps:
	for {
		select {
		case code = <-done:
			break steps
		default:
			m.Step(10)
		}
	}
	if code != 0 {
		t.Fatalf("record: exit %d: %s", code, stderr.String())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "kraken", "*.jsonl.gz"))
	if len(files) != 1 {
		t.Fatalf("segments %v; stderr %s", files, stderr.String())
	}
	if !strings.Contains(stderr.String(), "segments,") || !strings.Contains(stderr.String(), "frames/s") {
		t.Fatalf("no progress line: %s", stderr.String())
	}
	var out, errb bytes.Buffer
	if code := run([]string{"replay", "--export", "-", files[0]}, &out, &errb); code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errb.String())
	}
	if n := len(eventLines(strings.Split(out.String(), "\n"))); n < 10 {
		t.Fatalf("the recording replays to %d events:\n%s", n, errb.String())
	}
	if !strings.Contains(out.String(), `"type":"book","stream":"kraken:level2:BTC/USD","seq":1,"snapshot":true`) {
		t.Fatalf("no snapshot in the replay")
	}
}

func TestRecordUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--streams", "BTC/USD", "--out", "x"}, "--venue is required"},
		{[]string{"--venue", "nasdaq", "--streams", "X", "--out", "x"}, `unknown venue "nasdaq"`},
		{[]string{"--venue", "kraken", "--out", "x"}, "no stream given"},
		{[]string{"--venue", "kraken", "--streams", "okx:trades:BTC-USDT"}, "not a stream of kraken"},
		{[]string{"--venue", "kraken", "--streams", "kraken:level3:BTC/USD"}, "kraken:level3:BTC/USD"},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"record"}, tc.args...), &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
	syms, chans, err := recordStreams("kraken", []string{"kraken:trades:BTC/USD,ETH/USD", "kraken:level2:BTC/USD"})
	if err != nil || fmt.Sprint(syms) != "[BTC/USD ETH/USD]" || len(chans) != 3 {
		t.Fatalf("%v %v %v", syms, chans, err)
	}
}

// TestRecordingFailureIsANotice: a segment that cannot be created (a file
// where the venue's directory should be) gives the venue's subscribers a
// recording_failed notice and counts in the metrics; serving goes on.
func TestRecordingFailureIsANotice(t *testing.T) {
	m := &krakentest.Mock{}
	m.Start(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kraken"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeConfig(t, fmt.Sprintf("record:\n  enabled: true\n  dir: %s\nvenues:\n  kraken:\n    ws_url: %s\n    symbols: []\n    channels: [level2]\n", dir, m.Server().URL))
	ld := startLiveDaemon(t, cfgPath, daemon.Options{})
	c := dialLines(t, "ws://"+ld.addr+"/v1/stream")
	c.send(t, `{"op":"subscribe","id":"1","streams":["kraken:level2:`+m.Symbol()+`"]}`)
	// The first failure may come before the subscription (the venue's
	// greeting); the recorder retries a second later, on a later frame: keep
	// the venue sending until a notice arrives.
	var notice string
	updates := 0
	deadline := time.After(20 * time.Second)
	for notice == "" {
		m.Step(1)
		select {
		case l := <-c.lines:
			if strings.Contains(l, `"kind":"recording_failed"`) {
				notice = l
			}
			if strings.Contains(l, `"snapshot":false`) {
				updates++
			}
		case <-deadline:
			t.Fatal("no recording_failed notice")
		}
	}
	if !strings.Contains(notice, `"severity":"warning","venue":"kraken"`) {
		t.Fatalf("notice %s", notice)
	}
	// Serving goes on: updates keep flowing while recording fails.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(20 * time.Second); updates == 0; {
		select {
		case l := <-c.lines:
			if strings.Contains(l, `"snapshot":false`) {
				updates++
			}
		case <-tick.C:
			m.Step(1)
		case <-deadline:
			t.Fatal("no update after the recording failure")
		}
	}
	_, body := httpGet(t, "http://"+ld.addr+"/metrics", nil)
	if !strings.Contains(body, `fanoutd_recording_errors_total{venue="kraken"}`) {
		t.Fatal("no recording error metric")
	}
}
