package daemon

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

func newTestDaemon(t *testing.T, yml string) (*Daemon, *testsource.Source) {
	t.Helper()
	cfg, err := config.Parse([]byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClaimCheck.Stores[0].Path = t.TempDir()
	var src *testsource.Source
	cb := venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) {
		src = testsource.New("coinbase", c)
		return src, nil
	}}
	d, err := New(Options{Config: cfg, Venues: []venues.Venue{cb}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	return d, src
}

// TestSymbolsUnsubscribedAfterGrace: a symbol a client asked for is
// unsubscribed at the venue, and its streams forgotten, once nobody has
// held it for unsubscribe_after; configured symbols and held ones stay
// (a symbol nobody wants is not kept forever).
func TestSymbolsUnsubscribedAfterGrace(t *testing.T) {
	d, src := newTestDaemon(t, "venues:\n  coinbase:\n    symbols: [BTC-USD]\n    unsubscribe_after: 5m\n")
	sub := d.hub.NewEphemeral(subscriber.NewMailbox())
	for _, sym := range []string{"ETH-USD", "SOL-USD"} {
		st := venue.NewStream("coinbase", venue.Trades, sym)
		if err := d.checkLocal(st); err != nil {
			t.Fatal(err)
		}
		if err := d.hub.Subscribe(sub, st); err != nil {
			t.Fatal(err)
		}
		d.onSubscribe(st)
	}
	if got := src.Symbols(); !slices.Equal(got, []string{"BTC-USD", "ETH-USD", "SOL-USD"}) {
		t.Fatalf("venue symbols %v", got)
	}
	d.hub.Unsubscribe(sub, venue.NewStream("coinbase", venue.Trades, "ETH-USD"))

	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	d.sweepSymbols(t0)                                  // ETH-USD found idle
	d.sweepSymbols(t0.Add(5*time.Minute - time.Second)) // not yet
	if got := src.Symbols(); !slices.Contains(got, "ETH-USD") {
		t.Fatalf("ETH-USD unsubscribed before its grace passed: %v", got)
	}
	d.sweepSymbols(t0.Add(5 * time.Minute))
	if got := src.Symbols(); !slices.Equal(got, []string{"BTC-USD", "SOL-USD"}) {
		t.Fatalf("after the grace the venue subscribes %v, want BTC-USD (configured) and SOL-USD (held)", got)
	}
	if d.byName["coinbase"].feed.Wanted("ETH-USD") || d.symbolsOf("coinbase") != 2 {
		t.Fatalf("ETH-USD still tracked: %d symbols", d.symbolsOf("coinbase"))
	}

	// Asked for again, it is subscribed again.
	st := venue.NewStream("coinbase", venue.Trades, "ETH-USD")
	d.hub.Subscribe(sub, st)
	d.onSubscribe(st)
	if got := src.Symbols(); !slices.Contains(got, "ETH-USD") {
		t.Fatalf("ETH-USD not subscribed again: %v", got)
	}
}

// TestSymbolCapAndInstruments: past max_symbols a new symbol is refused
// with too_many_symbols; with an instrument list, an unknown symbol is
// refused with unknown_symbol; symbols already subscribed always pass.
func TestSymbolCapAndInstruments(t *testing.T) {
	d, src := newTestDaemon(t, "venues:\n  coinbase:\n    symbols: [BTC-USD]\n    max_symbols: 2\n")
	sub := d.hub.NewEphemeral(subscriber.NewMailbox())
	add := func(sym string) error {
		st := venue.NewStream("coinbase", venue.Level2, sym)
		if err := d.checkLocal(st); err != nil {
			return err
		}
		d.hub.Subscribe(sub, st)
		d.onSubscribe(st)
		return nil
	}
	if err := add("ETH-USD"); err != nil {
		t.Fatal(err)
	}
	err := add("SOL-USD")
	if !refusedWith(err, "too_many_symbols") {
		t.Fatalf("third symbol past max_symbols 2: %v", err)
	}
	if err := add("ETH-USD"); err != nil {
		t.Fatalf("a symbol already subscribed refused: %v", err)
	}

	if got := src.Symbols(); len(got) != 2 {
		t.Fatalf("the venue subscribes %v, want 2 symbols", got)
	}

	d2, src2 := newTestDaemon(t, "venues:\n  coinbase:\n    symbols: [BTC-USD]\n")
	src2.SetInstruments([]string{"BTC-USD", "ETH-USD"})
	if err := d2.checkLocal(venue.NewStream("coinbase", venue.Trades, "NOPE-USD")); !refusedWith(err, "unknown_symbol") {
		t.Fatalf("an invented symbol: %v", err)
	}
	if err := d2.checkLocal(venue.NewStream("coinbase", venue.Trades, "ETH-USD")); err != nil {
		t.Fatalf("a listed symbol: %v", err)
	}
}

func refusedWith(err error, code string) bool {
	r, ok := err.(*api.Refusal)
	return ok && string(r.Code) == code
}

func (d *Daemon) symbolsOf(name string) int { return int(d.byName[name].symbolCount()) }
