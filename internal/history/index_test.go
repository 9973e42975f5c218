package history

import (
	"context"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/claimcheck"
)

// Two writers on one store (two nodes on one bucket) each add entries;
// each index then lists both writers' entries, once per entry, in order.
func TestIndexTwoWriters(t *testing.T) {
	st, err := claimcheck.NewDirStore("dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, b := NewIndex([]claimcheck.Store{st}, "default"), NewIndex([]claimcheck.Store{st}, "default")
	a.ttl, b.ttl = 0, 0
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	add := func(x *Index, v string, conn int, at time.Time, claim string) {
		t.Helper()
		if err := x.Add(ctx, Entry{Venue: v, Connection: conn, Symbols: []string{"X"}, First: at, Last: at.Add(time.Minute), Claim: "default/" + claim}); err != nil {
			t.Fatal(err)
		}
	}
	add(a, "okx", 0, t0.Add(time.Hour), "c1")
	add(b, "okx", 0, t0, "c2")
	add(b, "binance", 1, t0, "c3")
	add(a, "binance", 0, t0, "c4")
	for _, x := range []*Index{a, b} {
		es, err := x.Entries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.Claim)
		}
		if len(got) != 4 || got[0] != "default/c4" || got[1] != "default/c3" || got[2] != "default/c2" || got[3] != "default/c1" {
			t.Fatalf("entries %v", got)
		}
	}
	rs := Ranges(mustEntries(t, a))
	if len(rs) != 2 || rs[1].Venue != "okx" || !rs[1].From.Equal(t0) || !rs[1].To.Equal(t0.Add(time.Hour+time.Minute)) || rs[1].Segments != 2 {
		t.Fatalf("ranges %+v", rs)
	}
	// Chains: per connection, overlapping the range, in time order.
	cs := Chains(mustEntries(t, a), map[string]map[string]bool{"okx": nil}, t0.Add(30*time.Second), t0.Add(2*time.Hour))
	if len(cs) != 1 || len(cs[0]) != 2 || cs[0][0].Claim != "default/c2" {
		t.Fatalf("chains %+v", cs)
	}
	if cs := Chains(mustEntries(t, a), map[string]map[string]bool{"okx": {"Y": true}}, t0, t0.Add(2*time.Hour)); len(cs) != 0 {
		t.Fatalf("chains of an unrecorded symbol: %+v", cs)
	}
}

func mustEntries(t *testing.T, x *Index) []Entry {
	t.Helper()
	es, err := x.Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return es
}
