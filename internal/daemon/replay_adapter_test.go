package daemon

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

type discardSink struct{ n int }

func (s *discardSink) Event(*venue.Event)   { s.n++ }
func (s *discardSink) Notice(notice.Notice) { s.n++ }

// TestReplayAdapterCoverageFollowsLinks: a replay's coverage follows the
// replayed link notices (down, then up, at the capture's times) and
// carries the replay's clock, the newest receive time played; a link_down
// of one connection of several leaves the venue up.
func TestReplayAdapterCoverageFollowsLinks(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	a := &replayAdapter{name: "kraken", feed: &discardSink{}, cov: venue.NewCoverageTracker("kraken"), clock: new(atomic.Int64)}
	a.Start(context.Background())
	if c := a.Coverage(); c.Link != "up" || !c.Since.IsZero() || !c.Clock.IsZero() {
		t.Fatalf("before the clock starts: %+v", c)
	}
	st := venue.Stream("kraken:level2:BTC/USD")
	a.Event(&venue.Event{Kind: venue.KindBook, Stream: st, RecvTime: t0})
	a.Notice(notice.Must(notice.LinkDown, "kraken", "", t0.Add(time.Second), "x", map[string]any{"reason": "recorded"}))
	if c := a.Coverage(); c.Link != "down" || !c.Since.Equal(t0.Add(time.Second)) || len(c.Streams) != 0 || !c.Clock.Equal(t0.Add(time.Second)) {
		t.Fatalf("after link_down: %+v", c)
	}
	a.Notice(notice.Must(notice.LinkUp, "kraken", "", t0.Add(2*time.Second), "x", map[string]any{"url": "ws://x"}))
	a.Event(&venue.Event{Kind: venue.KindBook, Stream: st, RecvTime: t0.Add(3 * time.Second)})
	c := a.Coverage()
	if c.Link != "up" || !c.Since.Equal(t0.Add(2*time.Second)) || len(c.Streams) != 1 || !c.Clock.Equal(t0.Add(3*time.Second)) || !c.DownSince.IsZero() {
		t.Fatalf("after link_up: %+v", c)
	}
	a.Notice(notice.Must(notice.LinkDown, "kraken", "", t0.Add(4*time.Second), "x", map[string]any{"reason": "recorded", "connection": 1, "streams": []string{"kraken:trades:BTC/USD"}}))
	if c := a.Coverage(); c.Link != "up" {
		t.Fatalf("one connection's link_down took the venue down: %+v", c)
	}
}
