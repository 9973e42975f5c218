package api

import (
	"testing"

	"github.com/fanoutd/fanoutd/venue"
)

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		ok   bool
	}{
		{"coinbase:level2:*", "coinbase:level2:BTC-USD", true},
		{"*BTC*", "kraken:trades:BTC/USD", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
	} {
		if matchGlob(tc.p, tc.s) != tc.ok {
			t.Errorf("matchGlob(%q, %q) != %v", tc.p, tc.s, tc.ok)
		}
	}
}

func TestMatchStream(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		ok   bool
	}{
		{"coinbase:level2:*", "coinbase:level2:BTC-USD", true},
		{"coinbase:level2:*", "coinbase:trades:BTC-USD", false},
		{"*:trades:*", "kraken:trades:BTC/USD", true},
		{"*:trades:*", "coinbase:level2:X:trades:Y", false},
		{"*:*:*Y", "coinbase:level2:X:trades:Y", true},
		{"coinbase:level2:X*", "coinbase:level2:X:trades:Y", true},
		{"kraken:trades:BTC/USD", "kraken:trades:BTC/USD", true},
		{"kraken:*:ETH/USD", "kraken:trades:BTC/USD", false},
		{"kraken:*", "kraken:trades:BTC/USD", true},
		{"kraken:*", "coinbase:trades:BTC-USD", false},
		{"kra*", "kraken:level2:BTC/USD", true},
		{"*", "okx:trades:BTC-USDT", true},
		{"*BTC*", "kraken:trades:BTC/USD", false}, // the venue part is "*BTC*"
		{"k*:trades", "kraken:trades:BTC/USD", false},
		{"*:level2*", "kraken:level2:BTC/USD", true},
		{"*:level2*", "kraken:book_snapshot_10_1s:BTC/USD", false},
	} {
		if MatchStream(tc.p, venue.Stream(tc.s)) != tc.ok {
			t.Errorf("MatchStream(%q, %q) != %v", tc.p, tc.s, tc.ok)
		}
	}
}

func TestAllowsVenue(t *testing.T) {
	tok := &Token{Streams: []string{"kraken:trades:*", "bin*:level2:*"}}
	for v, want := range map[string]bool{"kraken": true, "binance": true, "coinbase": false} {
		if tok.AllowsVenue(v) != want {
			t.Errorf("AllowsVenue(%q) != %v", v, want)
		}
	}
	if (&Token{Venues: []string{"okx"}}).AllowsVenue("kraken") || !(*Token)(nil).AllowsVenue("kraken") {
		t.Error("Venues or a nil token")
	}
}
