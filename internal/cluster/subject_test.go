package cluster

import (
	"strings"
	"testing"

	"github.com/fanoutd/fanoutd/venue"
)

func TestEscapeTokenKeepsOneToken(t *testing.T) {
	for _, s := range []string{"BTC-USD", "XBT/USD", "1000.PEPE", "a*b", "a>b", "a b", "50%", "é", "x_y"} {
		e := EscapeToken(s)
		if strings.ContainsAny(e, ".*> \t%") && !strings.Contains(e, "%") || strings.ContainsAny(e, ".*> \t") {
			t.Errorf("%q escapes to %q", s, e)
		}
		if back, ok := UnescapeToken(e); !ok || back != s {
			t.Errorf("%q → %q → %q, %v", s, e, back, ok)
		}
	}
	if got := (Subjects{"fanoutd"}).Event(venue.Stream("kraken:level2:XBT/USD")); got != "fanoutd.ev.kraken.level2.XBT%2FUSD" {
		t.Errorf("subject %q", got)
	}
	for _, bad := range []string{"a.b", "%2", "%41", "%zz", "a b"} {
		if _, ok := UnescapeToken(bad); ok {
			t.Errorf("UnescapeToken(%q) accepted", bad)
		}
	}
}
