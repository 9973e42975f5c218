package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// generatedToken waits for the secret an ingest's embedded NATS server
// generated for role in natsDir, and returns it.
func generatedToken(t *testing.T, natsDir, role string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(natsDir, role+".token")); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s token in %s", role, natsDir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplayFeedsACluster: replay --role ingest --embedded-nats feeds a
// cluster as live venues do: an edge's subscriber gets the capture's level2
// stream with the ingest's seq, a snapshot first, then contiguous updates.
func TestReplayFeedsACluster(t *testing.T) {
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
	natsDir := t.TempDir()
	cfg := writeConfig(t, "cluster:\n  nats_dir: "+natsDir+"\n  node: replay-in\nvenues:\n  kraken:\n    max_queue_len: 1000000\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, done, stderr := startReplay(t, ctx, "--role", "ingest", "--embedded-nats", "--nats", natsURL, "--speed", "20", "--loop", "--config", cfg, capture("kraken"))
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("replay exit %d: %s", code, stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("replay did not stop")
		}
	}()
	edge := daemontest.Start(t, "cluster:\n  role: edge\n  nats_url: "+natsURL+"\n  token: "+generatedToken(t, natsDir, "edge")+"\nvenues:\n  kraken:\n    symbols: []\n", daemon.Options{})
	c := dialLines(t, edge.URL("ws")+"/v1/stream")
	c.send(t, `{"op":"subscribe","id":"1","streams":["kraken:level2:BTC/USD"]}`)
	var seq uint64
	n := 0
	c.until(t, 30*time.Second, func(l string) bool {
		if !strings.Contains(l, `"type":"book"`) {
			if strings.Contains(l, `"book_resync"`) {
				t.Fatalf("resync: %s", l)
			}
			return false
		}
		o := parse(t, l)
		snap := strings.Contains(l, `"snapshot":true`)
		switch {
		case seq == 0 && !snap:
			t.Fatalf("first book event is not a snapshot: %s", l)
		case seq != 0 && !snap && o.Seq != seq+1:
			t.Fatalf("seq %d after %d", o.Seq, seq)
		}
		seq = o.Seq
		n++
		return n >= 50
	})
	fmt.Fprintln(os.Stderr, "replay→cluster: 50 book events through the edge, last seq", seq)
}
