package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/replay"
)

func capture(v string) string { return filepath.Join("..", "..", "testdata", "replay", v+".jsonl.gz") }

// startReplay runs fanoutd replay with args (plus --listen 127.0.0.1:0)
// and returns its address and a channel with its exit code.
func startReplay(t *testing.T, ctx context.Context, args ...string) (string, chan int, *syncBuffer) {
	t.Helper()
	ready := make(chan string, 1)
	done := make(chan int, 1)
	stderr := &syncBuffer{}
	go func() {
		done <- replayCmd(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), os.Stdout, stderr, ready)
	}()
	select {
	case addr := <-ready:
		return addr, done, stderr
	case code := <-done:
		t.Fatalf("replay exited %d: %s", code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("replay did not listen")
	}
	return "", nil, nil
}

// exportedEvents is the number of events replay --export gives for path.
func exportedEvents(t *testing.T, path string) int {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run([]string{"replay", "--export", "-", path}, &out, &errb); code != 0 {
		t.Fatalf("export: %d %s", code, errb.String())
	}
	return len(eventLines(strings.Split(out.String(), "\n")))
}

type obj struct {
	Type   string `json:"type"`
	Kind   string `json:"kind"`
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	ID     string `json:"id"`
}

func parse(t *testing.T, l string) obj {
	t.Helper()
	var o obj
	if err := json.Unmarshal([]byte(l), &o); err != nil {
		t.Fatalf("bad line %q", l)
	}
	return o
}

// TestReplayServedAtMaxSpeed: --wait holds the clock until the second
// subscription; then the subscriber gets every event of the capture with
// contiguous seq from 1, a link_down and a link_up at the capture's link
// drop (none for the disconnect line that ends the capture), replay_end at
// its end, and the command exits by itself.
func TestReplayServedAtMaxSpeed(t *testing.T) {
	want := exportedEvents(t, capture("kraken"))
	cfg := writeConfig(t, "venues:\n  kraken:\n    max_queue_len: 1000000\n    max_queue_bytes: 0\n")
	addr, done, stderr := startReplay(t, context.Background(), "--speed", "max", "--wait", "2", "--config", cfg, capture("kraken"))
	c := dialLines(t, "ws://"+addr+"/v1/stream")
	c.send(t, `{"op":"subscribe","id":"1","streams":["kraken:level2:BTC/USD"]}`)
	c.until(t, 10*time.Second, func(l string) bool { return strings.Contains(l, `"type":"ack"`) })
	// One subscription of two: the clock has not started, no book exists.
	if code, body := httpGet(t, "http://"+addr+"/v1/books/kraken/BTC/USD", nil); code != 404 || !strings.Contains(body, "no_book") {
		t.Fatalf("before --wait is met: %d %s", code, body)
	}
	c.send(t, `{"op":"subscribe","id":"2","streams":["kraken:trades:BTC/USD"]}`)
	// Notices are written ahead of queued events, so replay_end may come
	// before the stream's last events; the daemon's shutdown notice comes
	// after them (it waits for the queues to drain, --grace).
	lines := c.until(t, 60*time.Second, func(l string) bool { return strings.Contains(l, `"kind":"shutdown"`) })
	var seq uint64
	linkDowns, linkUps, ends := 0, 0, 0
	for _, l := range lines {
		o := parse(t, l)
		switch {
		case o.Type == "book":
			if o.Seq != seq+1 {
				t.Fatalf("seq %d after %d", o.Seq, seq)
			}
			seq = o.Seq
		case o.Kind == "link_down":
			linkDowns++
		case o.Kind == "link_up":
			linkUps++
		case o.Kind == "replay_end" && o.Stream == "kraken:level2:BTC/USD":
			ends++
		case o.Kind == "dropping":
			t.Fatalf("dropping: %s", l)
		}
	}
	if int(seq) != want || linkDowns != 1 || linkUps != 1 || ends != 1 {
		t.Fatalf("%d events (want %d), %d link_down and %d link_up (want 1 each), %d replay_end (want 1)", seq, want, linkDowns, linkUps, ends)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("replay did not exit at the end of the capture")
	}
}

// shifted writes path's frames to a plain capture in dir whose receive
// times start at start (so captures recorded at different times play
// interleaved), with a sidecar naming venueName.
func shifted(t *testing.T, path, venueName string, start time.Time, dir string) string {
	t.Helper()
	in, err := replay.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out := filepath.Join(dir, venueName+".jsonl")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	w := replay.NewWriter(bw)
	var delta time.Duration
	var last time.Time
	for {
		rec, err := in.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Disconnect {
			w.Disconnect()
			continue
		}
		if delta == 0 {
			delta = start.Sub(rec.Time)
		}
		last = rec.Time.Add(delta)
		w.Frame(last, rec.Frame)
	}
	if err := errors.Join(bw.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
	meta, _ := json.Marshal(replay.Meta{Venue: venueName, Subscriptions: in.Meta.Subscriptions})
	os.WriteFile(out+".meta.json", meta, 0o644)
	return out
}

func firstTime(t *testing.T, path string) time.Time {
	t.Helper()
	f, err := replay.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec, err := f.Next()
	if err != nil {
		t.Fatal(err)
	}
	return rec.Time
}

// TestReplayStalledSubscriber: two captures merged, looping at max speed;
// a subscriber that does not read gets dropping at its (small) queue
// bound instead of a growing queue, and resumed once it reads; a reader
// of the other venue beside it gets a whole pass with contiguous seq.
func TestReplayStalledSubscriber(t *testing.T) {
	want := exportedEvents(t, capture("kraken"))
	// The stalled subscriber must outlast the reader's whole pass and the
	// wait for its dropping: about 3 s here, but past the default 10 s
	// write_timeout (which closes it, so it never shows as dropping) on a
	// loaded machine. The write and silence bounds are not what this test
	// is about: both are far longer than any load makes the test.
	cfg := writeConfig(t, `
websocket:
  send_buffer_bytes: 4096
  write_timeout: 10m
  ping_interval: 10m
venues:
  kraken:
    max_queue_len: 1000000
    max_queue_bytes: 0
  bybit:
    max_queue_len: 50
    max_queue_bytes: 0
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The testdata captures were recorded minutes apart: merged by receive
	// time, kraken would loop for minutes before bybit's first frame.
	bybit := shifted(t, capture("bybit"), "bybit", firstTime(t, capture("kraken")), t.TempDir())
	addr, done, stderr := startReplay(t, ctx, "--speed", "max", "--loop", "--wait", "2", "--config", cfg, capture("kraken"), bybit)
	url := "ws://" + addr + "/v1/stream"
	reader := dialLines(t, url)
	stalled := dial(t, url, dialOpts{readBuf: 4096, paused: true})
	stalled.send(map[string]any{"op": "subscribe", "id": "s", "streams": []string{"bybit:level2:BTCUSDT"}})
	reader.send(t, `{"op":"subscribe","id":"r","streams":["kraken:level2:BTC/USD"]}`)
	var seq uint64
	reader.until(t, 60*time.Second, func(l string) bool {
		o := parse(t, l)
		if o.Type == "book" {
			if o.Seq != seq+1 {
				t.Fatalf("reader: seq %d after %d", o.Seq, seq)
			}
			seq = o.Seq
		}
		return seq == uint64(want)
	})
	reader.ws.Close() // one whole pass is enough

	// The subscribers route shows the stalled subscriber dropping.
	checkFor(t, 30*time.Second, "the stalled subscriber to be dropping", func() bool {
		_, body := httpGet(t, "http://"+addr+"/v1/subscribers", nil)
		return strings.Contains(body, `"dropping": true`)
	})
	_, body := httpGet(t, "http://"+addr+"/v1/subscribers", nil)
	var subs []daemon.SubscriberView
	json.Unmarshal([]byte(body), &subs)
	for _, s := range subs {
		if s.Dropping && s.QueueLen > 50+1 { // the bound, plus at most one forced snapshot
			t.Fatalf("stalled subscriber queue %d past its bound 50", s.QueueLen)
		}
	}
	stalled.start()
	got := stalled.until(func(w wire) bool { return w.Kind == "resumed" })
	dropping := false
	for _, w := range got {
		dropping = dropping || w.Kind == "dropping"
	}
	if !dropping {
		t.Fatal("resumed without dropping")
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("replay did not stop on cancel")
	}
}

func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("2026-11-29T12:00:00.1234567Z {}\nnot a line\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--speed", "0", capture("kraken")}, 2, `--speed: "0"`},
		{[]string{"--speed", "fast", capture("kraken")}, 2, `--speed: "fast"`},
		{[]string{"--export", "-", "--venue", "nasdaq", capture("kraken")}, 2, `unknown venue "nasdaq"`},
		{[]string{"--export", "-", bad}, 2, "does not say which venue"},
		{[]string{"--export", "-", "--venue", "kraken", bad}, 1, bad + ":2:"},
		{[]string{"--export", "-", filepath.Join(dir, "missing.jsonl.gz")}, 2, "missing.jsonl.gz"},
		{[]string{"--export", "-", "--loop", capture("kraken")}, 2, "--loop"},
		{[]string{"--export", "-", dir}, 2, "is a directory"},
		{[]string{"--export", "-", "--venue", "kraken", dir}, 2, "is a directory"},
		{[]string{}, 2, "usage"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"replay"}, tc.args...), &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"replay", "--export", "-", capture("okx"), capture("coinbase")}, &out, &errb); code != 0 {
		t.Fatalf("two venues: %d %s", code, errb.String())
	}
	n := strings.Count(out.String(), `"kind":"replay_end"`)
	if n < 2 || !strings.Contains(errb.String(), "frames/s") {
		t.Fatalf("%d replay_end notices; stderr %s", n, errb.String())
	}
}
