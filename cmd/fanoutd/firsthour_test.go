package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

func coverage(t *testing.T, addr string) []venue.Coverage {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/v1/coverage", nil)
	var cs []venue.Coverage
	if code != 200 || json.Unmarshal([]byte(body), &cs) != nil {
		t.Fatalf("/v1/coverage: %d %s", code, body)
	}
	return cs
}

// TestReplayPlaysCapturesTogether: the five testdata captures, recorded
// minutes apart, replayed looping at the recorded pace with no other flag,
// hold until the first subscription, then give every venue's stream data
// (aligned starts: by absolute time all five have data only after about 18
// minutes). Coverage is on the replay's clock, and the subscriber sees the
// capture's link drop as a link_down followed by a link_up.
func TestReplayPlaysCapturesTogether(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var args []string
	for _, v := range venues.Names() {
		args = append(args, capture(v))
	}
	addr, done, stderr := startReplay(t, ctx, append([]string{"--loop"}, args...)...)
	for _, c := range coverage(t, addr) {
		if len(c.Streams) != 0 || !c.Clock.IsZero() {
			t.Fatalf("before the first subscription %s has played: %+v", c.Venue, c)
		}
	}
	c := dialLines(t, "ws://"+addr+"/v1/stream")
	c.send(t, `{"op":"subscribe","id":"1","streams":["kraken:level2:BTC/USD"]}`)
	checkFor(t, 60*time.Second, "every venue's stream to have data", func() bool {
		for _, c := range coverage(t, addr) {
			if len(c.Streams) == 0 {
				return false
			}
		}
		return true
	})
	for _, c := range coverage(t, addr) {
		if c.Clock.IsZero() {
			t.Fatalf("%s: no replay clock: %+v", c.Venue, c)
		}
		for _, s := range c.Streams {
			if age := c.Clock.Sub(s.Last); age < 0 || age > time.Minute {
				t.Errorf("%s: last event %v before the replay's clock %v", s.Stream, age, c.Clock)
			}
		}
	}
	var kinds []string
	c.until(t, 60*time.Second, func(l string) bool {
		o := parse(t, l)
		if o.Kind == "link_down" || o.Kind == "link_up" {
			kinds = append(kinds, o.Kind)
		}
		return len(kinds) == 4
	})
	if strings.Join(kinds, " ") != "link_down link_up link_down link_up" {
		t.Fatalf("link notices %v, want link_down then link_up, each loop", kinds)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// TestServeUnreachableSaysSoOnce: a daemon that reaches none of its venues
// says so once, with the offline hint, however often it retries; coverage
// shows each venue down since its first failure, with the dial error.
func TestServeUnreachableSaysSoOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "ws://" + ln.Addr().String() + "/ws"
	ln.Close()
	yml := "listen: 127.0.0.1:0\nclaim_check: {stores: [{kind: dir, path: " + t.TempDir() + "}]}\nvenues:\n"
	for _, v := range venues.Names() {
		yml += fmt.Sprintf("  %s:\n    ws_url: %s\n    rest_url: http://%s\n", v, closed, ln.Addr())
	}
	p := writeConfig(t, yml)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan int, 1)
	errb := &syncBuffer{}
	go func() { done <- serve(ctx, []string{"--config", p}, &nopWriter{}, errb, daemon.Options{}, ready) }()
	addr := <-ready
	checkFor(t, 60*time.Second, "the offline hint", func() bool { return strings.Contains(errb.String(), daemon.OfflineHint) })
	first := map[string]time.Time{}
	for _, c := range coverage(t, addr) {
		if c.Link == "up" || c.DownSince.IsZero() || !strings.Contains(c.Error, "refused") {
			t.Fatalf("%s: %+v, want down with the dial error", c.Venue, c)
		}
		first[c.Venue] = c.DownSince
	}
	n := strings.Count(errb.String(), "dial failed")
	checkFor(t, 60*time.Second, "more dial attempts", func() bool { return strings.Count(errb.String(), "dial failed") >= n+2*len(first) })
	if got := strings.Count(errb.String(), "no venue could be reached"); got != 1 {
		t.Fatalf("said %d times that no venue could be reached:\n%s", got, errb.String())
	}
	for _, c := range coverage(t, addr) {
		if !c.DownSince.Equal(first[c.Venue]) {
			t.Errorf("%s: down since %v, then %v: it restarted at a reconnect attempt", c.Venue, first[c.Venue], c.DownSince)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d", code)
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
