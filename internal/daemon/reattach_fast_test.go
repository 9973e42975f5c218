package daemon_test

import (
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venues"
)

// TestFastNamedReattach: a named subscriber whose client closes and
// reattaches at once, again and again while events flow (the old
// connection's session may not have ended yet), gets on every new
// connection resumed (reason reattached) first, and its trades continue
// from what it read with every seq either received or announced, none
// twice.
func TestFastNamedReattach(t *testing.T) {
	src := &source{}
	d := daemontest.Start(t, "venues:\n  coinbase:\n    symbols: [BTC-USD]\n", daemon.Options{Venues: []venues.Venue{src.adapter()}})
	src.step()
	c := dialNamed(t, d.URL("ws"), "fast", nil, l2BTC, trBTC)
	src.run(t)
	waitFor(t, 10*time.Second, "trades", func() bool { return lastOf(c.all(), trBTC) > 3 })
	for i := range 20 {
		c.ws.Close()
		<-c.done
		read := map[string]uint64{trBTC: lastOf(c.all(), trBTC), l2BTC: lastOf(c.all(), l2BTC)}
		c = dialNamed(t, d.URL("ws"), "fast", read)
		waitFor(t, 10*time.Second, "a trade after the reattach", func() bool { return lastOf(c.all(), trBTC) > read[trBTC] })
		ms := c.all()
		if ms[0].Kind != "resumed" || ms[0].Details["reason"] != "reattached" {
			t.Fatalf("reattach %d: first message %s, want resumed/reattached", i, ms[0].raw)
		}
		next := read[trBTC] + 1
		if g, ok := rangeOf(ms[0], "gaps")[trBTC]; ok {
			if g[0] != next {
				t.Fatalf("reattach %d: trades gap %v, read up to %d", i, g, read[trBTC])
			}
			next = g[1] + 1
		}
		contiguous(t, ms, trBTC, "trade", next)
		if _, rec := rangeOf(ms[0], "recovered")[l2BTC]; !rec && !hasSnapshot(ms, l2BTC) {
			t.Fatalf("reattach %d: level2 neither recovered nor sent a snapshot: %s", i, ms[0].raw)
		}
	}
}

func hasSnapshot(ms []wireMsg, st string) bool {
	for _, m := range ms {
		if m.Stream == st && m.Snapshot {
			return true
		}
	}
	return false
}
