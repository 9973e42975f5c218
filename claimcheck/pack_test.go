package claimcheck_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/claimcheck/claimchecktest"
)

var t0 = time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC)

func samplePack(t testing.TB, layout claimcheck.Layout) (*claimcheck.Pack, []claimcheck.PackClaim) {
	t.Helper()
	var pcs []claimcheck.PackClaim
	for i := range 4 {
		pcs = append(pcs, claimcheck.PackClaim{Stream: "kraken:level2:BTC/USD", Seq: uint64(10 + i), Time: t0.Add(time.Duration(i) * time.Minute),
			Recorded: t0.Add(time.Duration(i)*time.Minute + time.Millisecond), ContentType: "application/json",
			Data: []byte(strings.Repeat("{\"bids\":[]}", i*3+1))})
	}
	pcs = append(pcs, claimcheck.PackClaim{Kind: claimcheck.KindCapture, Data: nil}) // empty claim
	p, err := claimcheck.BuildPack("acme_1", layout, pcs)
	if err != nil {
		t.Fatal(err)
	}
	return p, pcs
}

func TestPackDeterministicAndReadable(t *testing.T) {
	p1, pcs := samplePack(t, claimcheck.LayoutFlat)
	p2, _ := samplePack(t, claimcheck.LayoutFlat)
	if !bytes.Equal(p1.Data, p2.Data) || p1.ID != p2.ID || p1.Key() != p2.Key() {
		t.Fatal("the same claims made different packs")
	}
	pcs[0].Seq++
	p3, _ := claimcheck.BuildPack("acme_1", claimcheck.LayoutFlat, pcs)
	if p3.ID == p1.ID {
		t.Fatal("different claims made the same pack id")
	}
	if want := "claims/tenant=acme_1/dt=2026-05-06/" + p1.ID.String() + ".zip"; p1.Key() != want {
		t.Fatalf("key %q, want %q", p1.Key(), want)
	}
	ps, _ := samplePack(t, claimcheck.LayoutSharded)
	if k := ps.Key(); len(k) < 5 || k[4] != '/' || !strings.HasSuffix(k, "/claims/tenant=acme_1/dt=2026-05-06/"+ps.ID.String()+".zip") {
		t.Fatalf("sharded key %q", k)
	}

	// Any zip tool reads it: entries stored, in order, with the bytes.
	zr, err := zip.NewReader(bytes.NewReader(p1.Data), int64(len(p1.Data)))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"claimcheck.idx", "claims/000000", "claims/000001", "claims/000002", "claims/000003", "claims/000004", "manifest.json"}
	if len(zr.File) != len(names) {
		t.Fatalf("%d entries", len(zr.File))
	}
	for i, f := range zr.File {
		if f.Name != names[i] || f.Method != zip.Store {
			t.Fatalf("entry %d: %s method %d", i, f.Name, f.Method)
		}
		if i >= 1 && i <= 5 {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(b, pcs[i-1].Data) {
				t.Fatalf("entry %s: wrong bytes", f.Name)
			}
		}
	}
	m, pi, err := claimcheck.ReadPack(p1.Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Claims) != 5 || m.Claims[2].ID != p1.ClaimID(2).String() || m.Claims[1].Seq != 11 || m.Claims[4].Kind != "capture" ||
		!m.Claims[3].Time.Equal(pcs[3].Time) || m.Tenant != "acme_1" {
		t.Fatalf("manifest %+v", m)
	}
	// Two ranged reads locate and read claim i.
	for i, e := range pi.Entries {
		id := p1.ClaimID(i)
		idx, err := claimcheck.ParseIndexPrefix(p1.Data[:claimcheck.IndexPrefixLen(id.Count)], id.Count)
		if err != nil {
			t.Fatal(err)
		}
		got := idx.Entries[i]
		if got != e || !bytes.Equal(p1.Data[got.Offset:got.Offset+got.Length], pcs[i].Data) {
			t.Fatalf("claim %d: entry %+v", i, got)
		}
	}
}

func TestPackCorruptionDetected(t *testing.T) {
	p, _ := samplePack(t, claimcheck.LayoutFlat)
	e := p.Entries[1]
	bad := bytes.Clone(p.Data)
	bad[e.Offset] ^= 1 // flip one claim byte
	if _, _, err := claimcheck.ReadPack(bad); !errors.Is(err, claimcheck.ErrBadPack) {
		t.Fatalf("flipped byte: %v", err)
	}
	for _, n := range []int{0, 10, len(p.Data) / 2, len(p.Data) - 1} {
		if _, _, err := claimcheck.ReadPack(p.Data[:n]); !errors.Is(err, claimcheck.ErrBadPack) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	id := p.ClaimID(0)
	if _, err := claimcheck.ParseIndexPrefix(p.Data[:claimcheck.IndexPrefixLen(id.Count)], id.Count+1); err == nil {
		t.Fatal("an index prefix with a wrong count parsed")
	}
}

func TestBuildPackRejects(t *testing.T) {
	ok := claimcheck.PackClaim{Time: t0, Data: []byte("x")}
	for name, tc := range map[string]struct {
		tenant string
		pcs    []claimcheck.PackClaim
	}{
		"bad tenant":  {"a/b", []claimcheck.PackClaim{ok}},
		"no claims":   {"a", nil},
		"long ctype":  {"a", []claimcheck.PackClaim{{Time: t0, ContentType: strings.Repeat("x", 49)}}},
		"ctype ctrl":  {"a", []claimcheck.PackClaim{{Time: t0, ContentType: "a\nb"}}},
		"before 1970": {"a", []claimcheck.PackClaim{{Time: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		"long stream": {"a", []claimcheck.PackClaim{{Time: t0, Stream: strings.Repeat("x", claimcheck.MaxStream+1)}}},
		"stream ctrl": {"a", []claimcheck.PackClaim{{Time: t0, Stream: "a\x00b"}}},
	} {
		if _, err := claimcheck.BuildPack(tc.tenant, claimcheck.LayoutFlat, tc.pcs); err == nil {
			t.Errorf("%s: built", name)
		}
	}
}

func TestIndexCarriesStream(t *testing.T) {
	_, pcs := samplePack(t, claimcheck.LayoutFlat)
	long := strings.Repeat("s", claimcheck.MaxStream)
	pcs = append(pcs, claimcheck.PackClaim{Stream: long, Time: t0})
	p, err := claimcheck.BuildPack("acme_1", claimcheck.LayoutFlat, pcs)
	if err != nil {
		t.Fatal(err)
	}
	id := p.ClaimID(0)
	pi, err := claimcheck.ParseIndexPrefix(p.Data[:claimcheck.IndexPrefixLen(id.Count)], id.Count)
	if err != nil {
		t.Fatal(err)
	}
	if pi.Version != 2 || pi.Entries[0].Stream != "kraken:level2:BTC/USD" || pi.Entries[4].Stream != "" || pi.Entries[5].Stream != long {
		t.Fatalf("index %+v", pi)
	}
	for e, want := range map[claimcheck.IndexEntry]string{
		{Stream: "kraken:level2:BTC/USD"}: "kraken:level2:BTC/USD",
		{Stream: "kraken"}:                "kraken:*:*",
		{}:                                "*:*:*",
	} {
		if got := e.Scope(); got != want {
			t.Errorf("Scope(%q) = %q, want %q", e.Stream, got, want)
		}
	}
}

// A version 1 pack (96-byte entries, no stream), written before the
// stream moved into the index, still reads.
func TestReadsVersion1Pack(t *testing.T) {
	data, err := os.ReadFile("testdata/packs/v1-mixed.zip")
	if err != nil {
		t.Fatal(err)
	}
	m, pi, err := claimcheck.ReadPack(data)
	if err != nil {
		t.Fatal(err)
	}
	if pi.Version != 1 || len(pi.Entries) != 2 || pi.Entries[1].Stream != "" || m.Claims[1].Stream != "kraken:level2:XBT/USD" {
		t.Fatalf("v1 pack: %+v %+v", pi, m)
	}
	// IndexPrefixLen covers a v1 index too (it reads past it, or to the end).
	pi2, err := claimcheck.ParseIndexPrefix(data[:min(int64(len(data)), claimcheck.IndexPrefixLen(2))], 2)
	if err != nil || pi2.Entries[1] != pi.Entries[1] {
		t.Fatalf("v1 prefix: %v", err)
	}
}

func FuzzReadPack(f *testing.F) {
	p, _ := samplePack(f, claimcheck.LayoutFlat)
	f.Add(p.Data)
	f.Add(p.Data[:len(p.Data)/2])
	f.Add(p.Data[:claimcheck.IndexPrefixLen(5)])
	f.Add([]byte("PK\x03\x04"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, pi, err := claimcheck.ReadPack(b)
		if err != nil {
			if !errors.Is(err, claimcheck.ErrBadPack) {
				t.Fatalf("error not wrapping ErrBadPack: %v", err)
			}
		} else if len(m.Claims) != len(pi.Entries) {
			t.Fatal("manifest and index disagree")
		}
		for _, c := range []uint32{1, 5} {
			if int64(len(b)) >= claimcheck.IndexPrefixLen(c) {
				if pi, err := claimcheck.ParseIndexPrefix(b, c); err == nil {
					for _, e := range pi.Entries {
						if e.Offset < 0 || e.Length < 0 {
							t.Fatalf("negative entry %+v", e)
						}
					}
				}
			}
		}
	})
}

func TestClaimIDRoundTrip(t *testing.T) {
	p, _ := samplePack(t, claimcheck.LayoutSharded)
	for i := range p.Entries {
		id := p.ClaimID(i)
		s := id.String()
		got, err := claimcheck.ParseClaimID(s)
		if err != nil || got != id {
			t.Fatalf("%q: %+v %v", s, got, err)
		}
		if strings.ContainsAny(s, "+/=") {
			t.Fatalf("%q is not URL-safe", s)
		}
		if !got.Date().Equal(time.Date(2026, 5, 6, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("date %v", got.Date())
		}
	}
	good := p.ClaimID(1).String()
	for _, s := range []string{"", "abc", good + "A", good[:len(good)-1], strings.Repeat("A", 33), "!" + good[1:],
		claimcheck.ClaimID{Index: 5, Count: 5}.String(), claimcheck.ClaimID{Count: 0}.String(), claimcheck.ClaimID{Layout: 7, Count: 1}.String()} {
		if _, err := claimcheck.ParseClaimID(s); !errors.Is(err, claimcheck.ErrBadClaimID) {
			t.Errorf("ParseClaimID(%q) = %v, want ErrBadClaimID", s, err)
		}
	}
	ref, err := claimcheck.ParseRef("https://example.com/x/v1/claims/acme/" + good + "?a=b")
	if err != nil || ref.Tenant != "acme" || ref.ID != p.ClaimID(1) || ref.Path() != "/v1/claims/acme/"+good {
		t.Fatalf("ParseRef: %+v %v", ref, err)
	}
	for _, s := range []string{"acme", "a b/" + good, "acme/xyz"} {
		if _, err := claimcheck.ParseRef(s); !errors.Is(err, claimcheck.ErrBadRef) {
			t.Errorf("ParseRef(%q) = %v", s, err)
		}
	}
}

func TestValidTenant(t *testing.T) {
	for s, want := range map[string]bool{"a": true, "A-z_09": true, strings.Repeat("x", 64): true, strings.Repeat("x", 65): false,
		"": false, "a/b": false, "a.b": false, "ä": false, "a b": false} {
		if got := claimcheck.ValidTenant(s); got != want {
			t.Errorf("ValidTenant(%q) = %v", s, got)
		}
	}
}

func FuzzParseClaimID(f *testing.F) {
	p, _ := samplePack(f, claimcheck.LayoutFlat)
	for i := range p.Entries {
		f.Add(p.ClaimID(i).String())
	}
	f.Add(claimcheck.ClaimID{Index: 65535, Count: 65536, Day: 65535, Layout: 1}.String())
	f.Add("AQAAAAAAAAAAAAAAAAAAAAAAAAAB")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := claimcheck.ParseClaimID(s)
		if err != nil {
			if !errors.Is(err, claimcheck.ErrBadClaimID) {
				t.Fatalf("error %v does not wrap ErrBadClaimID", err)
			}
			return
		}
		if id.String() != s || id.Index >= id.Count || id.Count > claimcheck.MaxClaimsPerPack {
			t.Fatalf("accepted %q as %+v", s, id)
		}
	})
}

func TestDirStoreConformance(t *testing.T) {
	claimchecktest.RunStore(t, func(t *testing.T) claimcheck.Store {
		s, err := claimcheck.NewDirStore("dir", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestDirStoreRejectsEscapingKeys(t *testing.T) {
	s, _ := claimcheck.NewDirStore("dir", t.TempDir())
	for _, k := range []string{"../x", "/etc/passwd", "a/../../b", ""} {
		if err := s.Put(context.Background(), k, []byte("x")); err == nil {
			t.Errorf("Put(%q) succeeded", k)
		}
	}
}

// docs/claim-check.md's claim id lengths: 30 characters while both uvarints fit a
// byte (packs of at most 127 claims), at most 35.
func TestClaimIDLength(t *testing.T) {
	for _, tc := range []struct {
		index, count uint32
		want         int
	}{{0, 1, 30}, {126, 127, 30}, {0, 128, 31}, {200, 300, 32}, {200, 20000, 34}, {65535, 65536, 35}} {
		id := claimcheck.ClaimID{Index: tc.index, Count: tc.count}
		if got := len(id.String()); got != tc.want {
			t.Errorf("index %d count %d: %d characters, want %d", tc.index, tc.count, got, tc.want)
		}
	}
}
