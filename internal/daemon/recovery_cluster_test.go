package daemon_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/cluster"
)

// recoveredOf returns a resumed notice's recovered ranges, by stream.
func recoveredOf(m wireMsg) map[string][2]uint64 {
	out := map[string][2]uint64{}
	r, _ := m.Details["recovered"].(map[string]any)
	for st, g := range r {
		a := g.([]any)
		out[st] = [2]uint64{uint64(a[0].(float64)), uint64(a[1].(float64))}
	}
	return out
}

// contiguous checks that the events of st in ms (snapshots aside) are the
// seqs from first on, each once, in order, and returns the last.
func contiguous(t *testing.T, ms []wireMsg, st, kind string, first uint64) uint64 {
	t.Helper()
	next := first
	for _, m := range ms {
		if m.Stream != st || m.Type != kind || m.Snapshot {
			continue
		}
		if m.Seq != next {
			t.Fatalf("%s: seq %d where %d was next (from %d)", st, m.Seq, next, first)
		}
		next++
	}
	return next - 1
}

// TestClusterNamedRecoveredAcrossEdges: a named subscriber's edge is
// killed; it reattaches on the other edge, which never served its
// streams, stating what it read: the new edge fills its window from the
// ingest's, and the subscriber gets every trade it did not read, in order,
// none twice, announced in resumed.recovered; its book is whole again
// (recovered or a snapshot, whichever is fewer bytes) and equal to the
// ingest's.
func TestClusterNamedRecoveredAcrossEdges(t *testing.T) {
	ns, src, ingest, edgeA, edgeB, _ := startClusterWith(t, "")
	src.step()
	a := dialNamed(t, edgeA.URL("ws"), "desk-r", nil, l2BTC, trBTC)
	stop := src.run(t)
	waitFor(t, 10*time.Second, "trades on edge A", func() bool { return lastOf(a.all(), trBTC) > 30 })
	awaitName(t, ns.ClientURL(), "desk-r", func(r cluster.NameRecord) bool { return len(r.Streams) == 2 && r.Last[trBTC] > 0 })
	edgeA.Abort()
	<-a.done
	ms := a.all()
	read := map[string]uint64{trBTC: lastOf(ms, trBTC) - 5, l2BTC: lastOf(ms, l2BTC) - 5}
	b := dialNamed(t, edgeB.URL("ws"), "desk-r", read)
	waitFor(t, 10*time.Second, "events on edge B", func() bool { return lastOf(b.all(), trBTC) > read[trBTC]+20 })
	stop()
	settle(t, b, ingest, "edge B")
	got := b.all()
	if len(got) == 0 || got[0].Kind != "resumed" || got[0].Details["reason"] != "reattached" {
		t.Fatalf("first message %+v, want resumed/reattached", got)
	}
	rec := recoveredOf(got[0])
	if g := rec[trBTC]; g[0] != read[trBTC]+1 || g[1] < g[0] {
		t.Fatalf("trades recovered %v, want from %d (resumed %s)", g, read[trBTC]+1, got[0].raw)
	}
	gaps, _ := got[0].Details["gaps"].(map[string]any)
	if _, ok := gaps[trBTC]; ok {
		t.Fatalf("a trades gap beside its recovery: %s", got[0].raw)
	}
	_, l2rec := rec[l2BTC]
	_, l2gap := gaps[l2BTC]
	if l2rec == l2gap {
		t.Fatalf("level2 recovered %v, gap %v: want exactly one (%s)", l2rec, l2gap, got[0].raw)
	}
	if l2rec {
		contiguous(t, got, l2BTC, "book", read[l2BTC]+1)
	}
	if last := contiguous(t, got, trBTC, "trade", read[trBTC]+1); last < rec[trBTC][1] {
		t.Fatalf("trades up to %d, recovered up to %d", last, rec[trBTC][1])
	}
}

// TestClusterBusGapRecovered: events dropped between NATS and an edge are
// sent again from the ingest's window: the subscriber's trades and book
// updates continue with every seq, in order, no book_resync, no
// stream_gap, and its book is the ingest's.
func TestClusterBusGapRecovered(t *testing.T) {
	ms, _, edgeB := dropOnBus(t, "")
	for _, kind := range []string{"book_resync", "stream_gap"} {
		if n := kindsOf(ms, kind); len(n) != 0 {
			t.Fatalf("%s after a recoverable bus loss: %s", kind, n[0].raw)
		}
	}
	first := uint64(0)
	for _, m := range ms {
		if m.Stream == trBTC && m.Type == "trade" {
			first = m.Seq
			break
		}
	}
	if last := contiguous(t, ms, trBTC, "trade", first); last < first+10 {
		t.Fatalf("trades %d..%d", first, last)
	}
	snaps := 0
	for _, m := range ms {
		if m.Stream == l2BTC && m.Snapshot {
			snaps++
		}
	}
	if snaps != 1 {
		t.Fatalf("%d snapshots, want only the first", snaps)
	}
	body := metricsText(t, edgeB.URL("http"))
	if !strings.Contains(body, `fanoutd_cluster_bus_recovered_total{result="recovered",venue="coinbase"}`) ||
		strings.Contains(body, `fanoutd_cluster_bus_recovered_total{result="recovered",venue="coinbase"} 0`) {
		t.Fatalf("no recovered ranges counted:\n%s", grepLines(body, "bus_recovered"))
	}
}
