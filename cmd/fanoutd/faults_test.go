package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venues/kraken/krakentest"
)

// childEnv makes the test binary run fanoutd (childMain) instead of the
// tests: the recorder's faults need a process of their own to signal and
// to limit. childFSizeEnv sets the child's RLIMIT_FSIZE (bytes), a disk
// that is full for every file past that size; SIGUSR1 lifts it (the disk
// freed again).
const (
	childEnv      = "FANOUTD_TEST_CHILD"
	childFSizeEnv = "FANOUTD_TEST_FSIZE"
)

func childMain(args []string) int {
	if v := os.Getenv(childFSizeEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		// Past the limit a write fails with EFBIG instead of killing the
		// process with SIGXFSZ.
		signal.Ignore(syscall.SIGXFSZ)
		var lim syscall.Rlimit
		syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim)
		hard := lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: hard}); err != nil {
			fmt.Fprintln(os.Stderr, "child: setrlimit:", err)
			return 2
		}
		free := make(chan os.Signal, 1)
		signal.Notify(free, syscall.SIGUSR1)
		go func() {
			<-free
			syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: hard, Max: hard})
			fmt.Fprintln(os.Stderr, "child: RLIMIT_FSIZE lifted")
		}()
	}
	return run(args, os.Stdout, os.Stderr)
}

// child is `fanoutd serve` in a child process.
type child struct {
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex // protects stderr
	stderr bytes.Buffer
	exited chan struct{}
	code   int
}

var listeningRE = regexp.MustCompile(`msg="fanoutd listening" addr=(\S+)`)

// startChild runs `fanoutd serve --config cfgPath` in a child process with
// env added, and waits until it listens.
func startChild(t *testing.T, cfgPath string, env ...string) *child {
	t.Helper()
	c := &child{exited: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "serve", "--config", cfgPath)
	c.cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	pr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.stderr.Write(sc.Bytes())
			c.stderr.WriteByte('\n')
			c.mu.Unlock()
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, pr)
		err := c.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			c.code = ee.ExitCode()
		}
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			c.cmd.Process.Kill()
			<-c.exited
		}
		if t.Failed() {
			t.Logf("child stderr:\n%s", c.log())
		}
	})
	select {
	case c.addr = <-addr:
	case <-c.exited:
		t.Fatalf("child exited %d before listening:\n%s", c.code, c.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("child not listening after 30s:\n%s", c.log())
	}
	return c
}

func (c *child) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// term sends SIGTERM and returns the exit code.
func (c *child) term(t *testing.T) int {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return c.code
	case <-time.After(60 * time.Second):
		t.Fatalf("child did not exit within 60s of SIGTERM:\n%s", c.log())
		return -1
	}
}

// segments returns the closed segments and the .partial files under dir.
func segments(t *testing.T, dir string) (closed, partial []string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil || d.IsDir():
		case strings.HasSuffix(p, ".partial"):
			partial = append(partial, p)
		case strings.HasSuffix(p, ".jsonl.gz"):
			closed = append(closed, p)
		}
		return nil
	})
	return closed, partial
}

// readCapture reads every record of a capture to its end and returns the
// frames and the last receive time.
func readCapture(t *testing.T, path string) (frames int, last time.Time) {
	t.Helper()
	f, err := replay.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	for {
		rec, err := f.Next()
		if errors.Is(err, io.EOF) {
			return frames, last
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !rec.Disconnect {
			frames++
			last = rec.Time
		}
	}
}

// stepping makes the mock send three updates every 2 ms until the test ends.
func stepping(t *testing.T, m *krakentest.Mock) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				m.Step(3)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

func recordConfig(t *testing.T, m *krakentest.Mock, dir, extra string) string {
	return writeConfig(t, fmt.Sprintf(`listen: 127.0.0.1:0
record:
  enabled: true
  dir: %s
%sclaim_check:
  stores:
    - kind: dir
      path: %s
venues:
  kraken:
    ws_url: %s
    symbols: [%q]
    channels: [level2]
`, dir, extra, t.TempDir(), m.Server().URL, m.Symbol()))
}

// TestFaultSIGTERMMidRecording: `fanoutd serve` with record.enabled,
// recording a venue that keeps sending, gets SIGTERM while a segment is
// open. Promise checked: exit 0; no .partial file is left (every segment
// was flushed, fsynced and renamed); every segment reads to its end and
// replays (`replay --export` exits 0 with every frame).
func TestFaultSIGTERMMidRecording(t *testing.T) {
	m := &krakentest.Mock{}
	m.Start(t)
	dir := t.TempDir()
	c := startChild(t, recordConfig(t, m, dir, "  max_bytes: 65536\n"))
	stepping(t, m)
	// Mid-recording: segments have rotated and one is open.
	checkFor(t, 30*time.Second, "two closed segments and an open one", func() bool {
		closed, partial := segments(t, dir)
		return len(closed) >= 2 && len(partial) == 1
	})
	if code := c.term(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, c.log())
	}
	closed, partial := segments(t, dir)
	if len(partial) != 0 {
		t.Fatalf("left open after SIGTERM: %v", partial)
	}
	total := 0
	for _, p := range closed {
		n, _ := readCapture(t, p)
		if n == 0 {
			t.Errorf("%s: no frames", p)
		}
		total += n
	}
	out := filepath.Join(t.TempDir(), "export.jsonl")
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"replay", "--export", out}, closed...), &stdout, &stderr); code != 0 {
		t.Fatalf("replay --export of the segments: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("replayed %d frames", total)) {
		t.Errorf("replay --export: %s; want %d frames", strings.TrimSpace(stderr.String()), total)
	}
	t.Logf("%d segments, %d frames, all closed and readable after SIGTERM", len(closed), total)
}

// TestFaultRecorderDiskFills: the child's RLIMIT_FSIZE (SIGXFSZ ignored)
// makes every write past 4 KiB of a file fail with EFBIG, as a full disk
// would; then SIGUSR1 lifts it (the disk freed). Promise checked: a
// subscriber of the venue gets recording_failed; serving goes on; once the
// disk is free, recording resumes by itself (a segment holds frames
// received after the free, and no recording_failed follows); SIGTERM then
// exits 0 and every closed segment replays.
func TestFaultRecorderDiskFills(t *testing.T) {
	m := &krakentest.Mock{}
	m.Start(t)
	dir := t.TempDir()
	c := startChild(t, recordConfig(t, m, dir, ""), childFSizeEnv+"=4096")
	cl := dialLines(t, "ws://"+c.addr+"/v1/stream")
	cl.send(t, `{"op":"subscribe","id":"1","streams":["kraken:level2:`+m.Symbol()+`"]}`)
	stepping(t, m)
	cl.until(t, 30*time.Second, func(l string) bool { return strings.Contains(l, `"kind":"recording_failed"`) })
	c.cmd.Process.Signal(syscall.SIGUSR1)
	checkFor(t, 10*time.Second, "the child to lift the limit", func() bool { return strings.Contains(c.log(), "RLIMIT_FSIZE lifted") })
	freed := time.Now()
	// Read for 4 s after the free: updates flow; a recording_failed may
	// still come from a write in flight at the free, none after 1.5 s.
	updates := 0
	for deadline := time.After(4 * time.Second); ; {
		select {
		case l, ok := <-cl.lines:
			if !ok {
				t.Fatal("connection ended")
			}
			if strings.Contains(l, `"snapshot":false`) {
				updates++
			}
			if strings.Contains(l, `"kind":"recording_failed"`) && time.Since(freed) > 1500*time.Millisecond {
				t.Errorf("recording_failed %v after the disk was freed: %s", time.Since(freed), l)
			}
			continue
		case <-deadline:
		}
		break
	}
	if updates == 0 {
		t.Error("no updates after the recording failed")
	}
	if code := c.term(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	closed, partial := segments(t, dir)
	resumed := false
	total := 0
	for _, p := range closed {
		n, last := readCapture(t, p)
		total += n
		resumed = resumed || last.After(freed.Add(time.Second))
	}
	if !resumed {
		t.Errorf("no closed segment holds frames from after the free: %v", closed)
	}
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"replay", "--export", filepath.Join(t.TempDir(), "x.jsonl")}, closed...), &stdout, &stderr); code != 0 {
		t.Fatalf("replay --export: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(c.log(), "recording failed") {
		t.Error("no recording failure logged")
	}
	t.Logf("%d closed segments (%d frames) replay; %d failed segments left as .partial: %v", len(closed), total, len(partial), partial)
}
