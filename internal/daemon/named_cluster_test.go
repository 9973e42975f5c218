package daemon_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestClusterNamedSurvivesEdgeLoss: a named subscriber's edge is killed
// (its daemon aborted: no flush, nothing released); the subscriber
// reattaches on the other edge and gets resumed/reattached with exact
// gaps — starting after what it states it read, ending where the new edge
// continues — and a snapshot of its level2 stream; its subscriptions came
// from the NATS key-value bucket.
func TestClusterNamedSurvivesEdgeLoss(t *testing.T) {
	_, src, ingest, edgeA, edgeB, _ := startCluster(t)
	src.step()
	a := dialNamed(t, edgeA.URL("ws"), "desk1", nil, l2BTC, trBTC)
	stop := make(chan struct{})
	done := src.run(stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	waitFor(t, 10*time.Second, "trades on edge A", func() bool { return lastOf(a.all(), trBTC) > 30 })
	time.Sleep(1500 * time.Millisecond) // the bucket has the subscriptions
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
	close(stop)
	<-done
	settle(t, b, ingest, "edge B")

	// Without a statement, the gaps start after the last seq the bucket
	// recorded as written (at most a sync interval old) and are still
	// continuous with what follows.
	b.ws.Close()
	<-b.done
	got := b.all()
	c := dialNamed(t, edgeB.URL("ws"), "desk1", nil)
	src.step()
	src.step()
	src.step()
	waitFor(t, 10*time.Second, "trades after the second reattach", func() bool { return lastOf(c.all(), trBTC) > 0 })
	g := checkReattach(t, c.all(), nil) // continuous with what follows
	if tg, ok := g[trBTC]; ok && (tg[0] > tg[1] || tg[0] == 0) {
		t.Fatalf("trades gap %v (the client read up to %d)", tg, lastOf(got, trBTC))
	}
}

// TestClusterNamedTakeoverAcrossEdges: a name held on edge A is attached
// on edge B: A's connection is told taken_over and closed with 4001; a
// name is one connection cluster-wide.
func TestClusterNamedTakeoverAcrossEdges(t *testing.T) {
	_, src, _, edgeA, edgeB, _ := startCluster(t)
	src.step()
	a := dialNamed(t, edgeA.URL("ws"), "desk2", nil, l2BTC)
	waitFor(t, 10*time.Second, "the book on A", func() bool { return lastOf(a.all(), l2BTC) > 0 })
	time.Sleep(300 * time.Millisecond) // the subscription is in the bucket
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
