package daemon_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fanoutd/fanoutd/internal/cluster"
	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
)

// TestClusterNamedSurvivesEdgeLoss: a named subscriber's edge is killed
// (its daemon aborted: no flush, nothing released); the subscriber
// reattaches on the other edge and gets resumed/reattached with exact
// gaps — starting after what it states it read, ending where the new edge
// continues — and a snapshot of its level2 stream; its subscriptions came
// from the NATS key-value bucket.
func TestClusterNamedSurvivesEdgeLoss(t *testing.T) {
	ns, src, ingest, edgeA, edgeB, _ := startCluster(t)
	src.step()
	a := dialNamed(t, edgeA.URL("ws"), "desk1", nil, l2BTC, trBTC)
	stop := src.run(t)
	waitFor(t, 10*time.Second, "trades on edge A", func() bool { return lastOf(a.all(), trBTC) > 30 })
	awaitName(t, ns.ClientURL(), "desk1", func(r cluster.NameRecord) bool { return len(r.Streams) == 2 && r.Last[trBTC] > 0 })
	edgeA.Abort()
	<-a.done
	ms := a.all()
	read := map[string]uint64{trBTC: lastOf(ms, trBTC) - 5, l2BTC: lastOf(ms, l2BTC) - 5}
	b := dialNamed(t, edgeB.URL("ws"), "desk1", read) // no subscribe: the bucket has them
	waitFor(t, 10*time.Second, "events on edge B", func() bool { return lastOf(b.all(), trBTC) > 0 && lastOf(b.all(), l2BTC) > 0 })
	gaps := checkReattach(t, b.all(), read)
	if len(gaps) != 2 {
		t.Fatalf("gaps %v, want both streams", gaps)
	}
	stop()
	settle(t, b, ingest, "edge B")

	// Without a statement, the gaps start after the last seq the bucket
	// recorded as written (at most a sync interval old) and are still
	// continuous with what follows.
	b.ws.Close()
	<-b.done
	got := b.all()
	c := dialNamed(t, edgeB.URL("ws"), "desk1", nil)
	// Trades published before the reattach completes are part of its gap:
	// keep publishing until some arrive after it.
	waitFor(t, 20*time.Second, "trades after the second reattach", func() bool {
		src.step()
		return lastOf(c.all(), trBTC) > 0
	})
	g := checkReattach(t, c.all(), nil) // continuous with what follows
	if tg, ok := g[trBTC]; ok && (tg[0] > tg[1] || tg[0] == 0) {
		t.Fatalf("trades gap %v (the client read up to %d)", tg, lastOf(got, trBTC))
	}
}

// TestClusterNamedTakeoverAcrossEdges: a name held on edge A is attached
// on edge B: A's connection is told taken_over and closed with 4001; a
// name is one connection cluster-wide.
func TestClusterNamedTakeoverAcrossEdges(t *testing.T) {
	ns, src, _, edgeA, edgeB, _ := startCluster(t)
	src.step()
	a := dialNamed(t, edgeA.URL("ws"), "desk2", nil, l2BTC)
	waitFor(t, 10*time.Second, "the book on A", func() bool { return lastOf(a.all(), l2BTC) > 0 })
	awaitName(t, ns.ClientURL(), "desk2", func(r cluster.NameRecord) bool { return len(r.Streams) == 1 })
	b := dialNamed(t, edgeB.URL("ws"), "desk2", nil)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatal("edge A's connection was not closed")
	}
	ms := a.all()
	if len(ms) == 0 || ms[len(ms)-1].Type != "error" || !containsCode(ms[len(ms)-1].raw, "taken_over") {
		t.Fatalf("edge A's last message: %s", ms[len(ms)-1].raw)
	}
	if _, _, err := a.ws.ReadMessage(); !websocket.IsCloseError(err, 4001) && err == nil {
		t.Fatalf("close: %v", err)
	}
	waitFor(t, 10*time.Second, "the book on B", func() bool { return lastOf(b.all(), l2BTC) > 0 })
}

func containsCode(b []byte, code string) bool {
	return len(b) > 0 && string(b) != "" && (strings.Contains(string(b), `"code":"`+code+`"`))
}

// TestClusterNameBelongsToItsToken: a name created under one token on
// edge A is refused (HTTP 409 name_taken) to another token on edge B; its
// own token attaches it on edge B.
func TestClusterNameBelongsToItsToken(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	ns := natstest.Start(t, 0, t.TempDir())
	t.Cleanup(func() { ns.Shutdown() })
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	yml := fmt.Sprintf("tokens:\n  - name: desk-a\n    sha256: %s\n  - name: desk-b\n    sha256: %s\ncluster:\n  role: edge\n  nats_url: %s\nvenues:\n  coinbase:\n    symbols: []\n",
		sum("alpha-secret"), sum("beta-secret"), ns.ClientURL())
	edgeA := daemontest.Start(t, yml, daemon.Options{})
	edgeB := daemontest.Start(t, yml, daemon.Options{})
	dial := func(base, secret string) (*websocket.Conn, *http.Response, error) {
		return websocket.DefaultDialer.Dial(base+"/v1/stream?name=shared", http.Header{"Authorization": {"Bearer " + secret}})
	}
	a, _, err := dial(edgeA.URL("ws"), "alpha-secret")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, r, err := dial(edgeB.URL("ws"), "beta-secret")
	if err == nil || r == nil || r.StatusCode != http.StatusConflict {
		t.Fatalf("another token on edge B: %v %v, want 409", r, err)
	}
	b, _, err := dial(edgeB.URL("ws"), "alpha-secret")
	if err != nil {
		t.Fatalf("its own token on edge B: %v", err)
	}
	b.Close()
}

// awaitName waits until the names bucket's record of name satisfies ok.
func awaitName(t *testing.T, url, name string, ok func(cluster.NameRecord) bool) {
	t.Helper()
	js := jetStream(t, url)
	waitFor(t, 20*time.Second, "the bucket's record of "+name, func() bool {
		var r cluster.NameRecord
		return kvValue(t, js, "fanoutd_names", name, &r) && ok(r)
	})
}
