// Package testsource is a venue.Adapter whose events the caller makes up:
// the daemon's end-to-end tests and the bench load tool publish through it
// exactly as a venue adapter would, through the feed's Sink.
package testsource

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Source is a venue.Adapter that emits what Publish is given. Its link is
// "up" from Start to Stop. The zero Source is not usable; call New.
type Source struct {
	name string
	cfg  venue.Config
	cov  *venue.CoverageTracker

	instruments venue.Instruments // SetInstruments' list

	mu      sync.Mutex // protects the fields below, and serialises the sink
	symbols []string
	started bool
}

var (
	_ venue.Adapter       = (*Source)(nil)
	_ venue.SymbolChecker = (*Source)(nil)
)

// SetInstruments gives the source an instrument list (KnownSymbol).
func (s *Source) SetInstruments(symbols []string) { s.instruments.SetList(symbols) }

// KnownSymbol reports whether sym is in the list SetInstruments gave;
// listed is false before any was given.
func (s *Source) KnownSymbol(sym string) (known, listed bool) { return s.instruments.KnownSymbol(sym) }

// New returns a source for venueName built from cfg (cfg.Sink is where
// Publish delivers).
func New(venueName string, cfg venue.Config) *Source {
	return &Source{name: venueName, cfg: cfg, cov: venue.NewCoverageTracker(venueName), symbols: slices.Clone(cfg.Symbols)}
}

// Venue returns the venue name.
func (s *Source) Venue() string { return s.name }

// Start marks the link up.
func (s *Source) Start(ctx context.Context) error {
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	s.cov.SetLink(venue.LinkUp, time.Now())
	return nil
}

// Stop marks the link down.
func (s *Source) Stop(ctx context.Context) error {
	s.cov.SetLink(venue.LinkDown, time.Now())
	return nil
}

// Subscribe records symbols.
func (s *Source) Subscribe(symbols ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sym := range symbols {
		if !slices.Contains(s.symbols, sym) {
			s.symbols = append(s.symbols, sym)
		}
	}
	return nil
}

// Unsubscribe forgets symbols.
func (s *Source) Unsubscribe(symbols ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.symbols = slices.DeleteFunc(s.symbols, func(x string) bool { return slices.Contains(symbols, x) })
	return nil
}

// Symbols returns the symbols subscribed, in order.
func (s *Source) Symbols() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.symbols)
}

// Coverage reports the link and the streams published.
func (s *Source) Coverage() venue.Coverage { return s.cov.Snapshot() }

// Publish hands ev to the sink (RecvTime set to now if zero). The sink
// owns ev afterwards.
func (s *Source) Publish(ev *venue.Event) {
	if ev.RecvTime.IsZero() {
		ev.RecvTime = time.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cov.Observe(ev.Stream, ev.RecvTime)
	s.cfg.Sink.Event(ev)
}

// Notice hands n to the sink.
func (s *Source) Notice(n notice.Notice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Sink.Notice(n)
}

// SetLink sets the venue link's state, as a real adapter's connection
// would (coverage and readiness follow it).
func (s *Source) SetLink(state venue.LinkState) { s.cov.SetLink(state, time.Now()) }
