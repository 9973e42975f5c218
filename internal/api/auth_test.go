package api

import "testing"

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		ok   bool
	}{
		{"coinbase:level2:*", "coinbase:level2:BTC-USD", true},
		{"coinbase:level2:*", "coinbase:trades:BTC-USD", false},
		{"*:trades:*", "kraken:trades:BTC/USD", true},
		{"*BTC*", "kraken:trades:BTC/USD", true},
		{"kraken:trades:BTC/USD", "kraken:trades:BTC/USD", true},
		{"kraken:*:ETH/USD", "kraken:trades:BTC/USD", false},
	} {
		if matchGlob(tc.p, tc.s) != tc.ok {
			t.Errorf("matchGlob(%q, %q) != %v", tc.p, tc.s, tc.ok)
		}
	}
}
