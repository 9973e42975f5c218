package venue_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// CheckSymbols names the venue and the first symbol it cannot ask for:
// one no stream can carry, or one holding a reserved character.
func TestCheckSymbols(t *testing.T) {
	if err := venue.CheckSymbols("v", "/@", "BTCUSDT", "ETH-USD"); err != nil {
		t.Fatalf("good symbols: %v", err)
	}
	for _, c := range []struct{ reserved, sym, want string }{
		{"", "a b", `v: bad symbol "a b"`},
		{"", "", `v: bad symbol ""`},
		{"/@", "BTC/USD", `v: bad symbol "BTC/USD"`},
	} {
		err := venue.CheckSymbols("v", c.reserved, "OK", c.sym)
		if !errors.Is(err, venue.ErrBadSymbol) || err.Error() != c.want {
			t.Errorf("CheckSymbols(%q) = %v, want %s", c.sym, err, c.want)
		}
	}
	if err := venue.CheckSymbols("v", "", "BTC/USD"); err != nil {
		t.Errorf("BTC/USD with nothing reserved: %v", err)
	}
}

// SetDefaults fills only the fields left zero, and a logger.
func TestConfigSetDefaults(t *testing.T) {
	d := venue.Defaults{WSURL: "wss://v", RESTURL: "https://v", ReadTimeout: 15 * time.Second, PingInterval: 10 * time.Second, Depth: 10}
	var c venue.Config
	c.SetDefaults(d)
	if c.WSURL != d.WSURL || c.RESTURL != d.RESTURL || c.ReadTimeout != d.ReadTimeout || c.PingInterval != d.PingInterval || c.Depth != d.Depth || c.Logger == nil {
		t.Fatalf("zero config filled as %+v", c)
	}
	set := venue.Config{WSURL: "ws://mock", ReadTimeout: time.Second, PingInterval: -1, Depth: 25}
	set.SetDefaults(d)
	if set.WSURL != "ws://mock" || set.ReadTimeout != time.Second || set.PingInterval != d.PingInterval || set.Depth != 25 {
		t.Fatalf("set config became %+v", set)
	}
}

// AddSymbols keeps each symbol once, in the order first asked for, and
// names only those it added.
func TestAddSymbols(t *testing.T) {
	all, added := venue.AddSymbols([]string{"A", "B"}, "B", "C", "A", "C", "D")
	if !slices.Equal(all, []string{"A", "B", "C", "D"}) || !slices.Equal(added, []string{"C", "D"}) {
		t.Fatalf("all %v added %v, want [A B C D] [C D]", all, added)
	}
}
