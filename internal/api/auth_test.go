package api

import (
	"strings"
	"testing"
	"unicode/utf8"

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

func TestHosts(t *testing.T) {
	for _, tc := range []struct {
		listen, host string
		ok           bool
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", "localhost:8080", true},
		{"127.0.0.1:8080", "LOCALHOST.", true},
		{"127.0.0.1:8080", "[::1]:8080", true},
		{"127.0.0.1:8080", "127.9.9.9", true},
		{"127.0.0.1:8080", "attacker.example:8080", false},
		{"127.0.0.1:8080", "attacker.example", false},
		{"127.0.0.1:8080", "localhost.attacker.example", false},
		{"127.0.0.1:8080", "10.0.0.5:8080", false},
		{"127.0.0.1:8080", "", false},
		{"10.0.0.5:8080", "10.0.0.5:8080", true},
		{"0.0.0.0:8080", "10.0.0.5:8080", true},
		{"[::]:8080", "[fe80::1]:8080", true},
		{"0.0.0.0:8080", "desk.example:8080", false},
		{"desk.internal:8080", "Desk.Internal:8080", true},
	} {
		if NewHosts(tc.listen).Allows(tc.host) != tc.ok {
			t.Errorf("listen %s: Allows(%q) != %v", tc.listen, tc.host, tc.ok)
		}
	}
}

func TestShorten(t *testing.T) {
	long := strings.Repeat("é", 1000) + ": no book"
	s := Shorten(long, 256)
	if len(s) > 256+len("…") || !strings.HasSuffix(s, ": no book") || !utf8.ValidString(s) {
		t.Errorf("Shorten: %d bytes %q", len(s), s)
	}
	if Shorten("short", 256) != "short" {
		t.Error("a short message changed")
	}
}
