package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateExport = flag.Bool("update-export", false, "rewrite testdata/replay/export.sha256 from the current exports")

// goldenExports is the digest file: one "sha256  name" line per export.
const goldenExports = "../../testdata/replay/export.sha256"

// TestExportGolden: `replay --export` of each testdata capture, and of the
// five at once, is byte for byte the export the digests were taken from
// (written by main before the export's speed work; any change to what an
// export holds must be deliberate: rerun with -update-export and say why).
func TestExportGolden(t *testing.T) {
	venues := []string{"binance", "bybit", "coinbase", "kraken", "okx"}
	cases := map[string][]string{}
	var all []string
	for _, v := range venues {
		p := filepath.Join("..", "..", "testdata", "replay", v+".jsonl.gz")
		cases[v] = []string{p}
		all = append(all, p)
	}
	cases["all"] = all
	got := map[string]string{}
	for _, name := range append(venues, "all") {
		var out, errb bytes.Buffer
		if code := replayCmd(context.Background(), append([]string{"--export", "-"}, cases[name]...), &out, &errb, nil); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errb.String())
		}
		if out.Len() < 1<<20 {
			t.Fatalf("%s: export of %d bytes", name, out.Len())
		}
		sum := sha256.Sum256(out.Bytes())
		got[name] = hex.EncodeToString(sum[:])
	}
	if *updateExport {
		var b strings.Builder
		for _, name := range append(venues, "all") {
			fmt.Fprintf(&b, "%s  %s\n", got[name], name)
		}
		if err := os.WriteFile(goldenExports, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(goldenExports)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("%s: bad line %q", goldenExports, line)
		}
		want[name] = sum
	}
	for _, name := range append(venues, "all") {
		if want[name] == "" {
			t.Errorf("%s: no digest for %s", goldenExports, name)
		} else if got[name] != want[name] {
			t.Errorf("%s: export's sha256 %s, golden %s (compare with main's `fanoutd replay --export - %s`)", name, got[name], want[name], strings.Join(cases[name], " "))
		}
	}
}
