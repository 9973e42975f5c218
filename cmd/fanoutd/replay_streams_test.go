package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestExportStreams: --export --streams writes only the streams named,
// derived ones computed from the capture, each with its own seq from 1;
// a bad channel is a usage error.
func TestExportStreams(t *testing.T) {
	var out, errb bytes.Buffer
	const want = "binance:book_snapshot_2_10ms:BTCUSDT"
	code := replayCmd(context.Background(), []string{"--export", "-", "--streams", "binance:book_snapshot_2_10ms:*", "../../testdata/replay/binance.jsonl.gz"}, &out, &errb, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			Type, Stream string
			Seq          int
			Snapshot     bool
			Bids         [][2]string
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m.Type == "notice" {
			continue
		}
		n++
		if m.Stream != want || m.Seq != n || !m.Snapshot || len(m.Bids) > 2 {
			t.Fatalf("line %q: want %s seq %d, a snapshot of at most 2 levels", line, want, n)
		}
	}
	if n < 2 {
		t.Fatalf("%d snapshots", n)
	}
	if code := replayCmd(context.Background(), []string{"--export", "-", "--streams", "binance:book_snap_2:*", "../../testdata/replay/binance.jsonl.gz"}, &out, &errb, nil); code != 2 {
		t.Fatalf("bad channel: exit %d", code)
	}
}
