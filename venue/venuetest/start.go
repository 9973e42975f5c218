package venuetest

import (
	"context"
	"testing"

	"github.com/fanoutd/fanoutd/venue"
)

// StartAdapter builds an adapter with newAdapter from cfg and starts it,
// failing t if either fails. When t ends the adapter is stopped, and t
// fails if Stop does not return nil within Wait; then the context Start
// was given is cancelled. It starts no mock and waits for nothing.
func StartAdapter[A venue.Adapter](t testing.TB, newAdapter func(venue.Config) (A, error), cfg venue.Config) A {
	t.Helper()
	ad, err := newAdapter(cfg)
	if err != nil {
		t.Fatalf("NewAdapter: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := ad.Start(ctx); err != nil {
		cancel()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		defer cancel()
		sctx, scancel := context.WithTimeout(context.Background(), Wait)
		defer scancel()
		if err := ad.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return ad
}

// Start starts v's mock (v.Start) and an adapter built by v.NewAdapter from
// cfg, with a new Sink as cfg.Sink and Symbols defaulting to v.Symbol(),
// as StartAdapter does; then it waits, up to Wait, for the first snapshot
// of v.Symbol()'s level2 stream to reach the sink, so cfg must subscribe
// that stream. It returns the adapter and the sink.
func Start(t *testing.T, v Venue, cfg venue.Config) (venue.Adapter, *Sink) {
	t.Helper()
	v.Start(t)
	sink := NewSink()
	cfg.Sink = sink
	if len(cfg.Symbols) == 0 {
		cfg.Symbols = []string{v.Symbol()}
	}
	ad := StartAdapter(t, v.NewAdapter, cfg)
	l2 := venue.NewStream(v.Name(), venue.Level2, v.Symbol())
	sink.WaitEvent(t, Wait, 0, "the first snapshot on "+string(l2), func(e *venue.Event) bool {
		return e.Stream == l2 && e.Snapshot
	})
	return ad, sink
}
