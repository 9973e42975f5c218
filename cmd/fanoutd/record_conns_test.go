package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

// serve records a venue spread over connections (Coinbase, 20 level2
// products: 2 connections) into one segment series per connection, and
// replay --export of them together ends with every book as the daemon
// had it live, with no resync.
func TestServeRecordsConnectionsApart(t *testing.T) {
	m := &coinbasetest.Mock{}
	syms := m.Serve(20)
	m.Start(t)
	dir := t.TempDir()
	cfgPath := writeConfig(t, fmt.Sprintf(`
record:
  enabled: true
  dir: %s
venues:
  coinbase:
    ws_url: %s
    symbols: [%s]
    channels: [level2]
`, dir, m.Server().URL, strings.Join(syms, ", ")))
	var mu sync.Mutex
	var segs []replay.Segment
	ld := startLiveDaemon(t, cfgPath, daemon.Options{
		OnSegment: func(s replay.Segment) { mu.Lock(); segs = append(segs, s); mu.Unlock() },
	})
	trueBook := func(s string) *venue.Book {
		if s == coinbasetest.Symbol {
			return m.Book()
		}
		return m.ProductBook(s)
	}
	feed := ld.d.Hub().Feed("coinbase")
	m.Step(20)
	m.StepProducts(5, syms[1:]...)
	checkFor(t, 20*time.Second, "every book of the daemon to match the venue's", func() bool {
		for _, s := range syms {
			st := venue.NewStream("coinbase", venue.Level2, s)
			ev, ok := feed.Book(st)
			want := trueBook(s).Snapshot(st)
			if !ok || levelsOf(ev.Bids) != levelsOf(want.Bids) || levelsOf(ev.Asks) != levelsOf(want.Asks) {
				return false
			}
		}
		return true
	})
	if n := len(m.Level2()); n != 2 {
		t.Fatalf("level2 on %d connections, want 2", n)
	}
	ld.stop(t)

	mu.Lock()
	defer mu.Unlock()
	if len(segs) != 2 {
		t.Fatalf("%d segments, want one per connection: %+v", len(segs), segs)
	}
	slices.SortFunc(segs, func(a, b replay.Segment) int { return a.Conn - b.Conn })
	args := []string{"replay", "--config", cfgPath, "--export", filepath.Join(t.TempDir(), "export.jsonl")}
	for i, s := range segs {
		base := filepath.Base(s.Path)
		if s.Conn != i || filepath.Dir(s.Path) != filepath.Join(dir, "coinbase") || strings.Contains(base, "-c") != (i > 0) {
			t.Errorf("segment %d: conn %d at %s", i, s.Conn, s.Path)
		}
		args = append(args, s.Path)
	}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("replay --export: exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(args[4])
	if err != nil {
		t.Fatal(err)
	}
	books := map[venue.Stream]*venue.Book{}
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(l, `"kind":"book_resync"`) {
			t.Errorf("replayed %s", l)
		}
		if !strings.HasPrefix(l, `{"type":"book"`) {
			continue
		}
		var ev venue.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		if books[ev.Stream] == nil {
			if !ev.Snapshot {
				t.Fatalf("%s: an update before the snapshot", ev.Stream)
			}
			books[ev.Stream] = &venue.Book{}
		}
		books[ev.Stream].Apply(&ev)
	}
	for _, s := range syms {
		st := venue.NewStream("coinbase", venue.Level2, s)
		got, want := books[st], trueBook(s)
		if got == nil || !got.Equal(want) {
			t.Errorf("%s: the replayed book differs from the venue's", s)
		}
	}
}
