package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// TestBenchEdgesVenueSource runs bench --edges 1 --source venue briefly:
// the --role all run and the ingest each fed by a Bybit venue child
// through the bybit adapter, an edge process, two subscribers; every
// frame the venue sent reaches both subscribers in both runs.
func TestBenchEdgesVenueSource(t *testing.T) {
	buildFanoutd(t)
	t.Setenv("FANOUTD_TEST_AS_MAIN", "1") // the bench's children are this binary as fanoutd-bench
	var out bytes.Buffer
	var errb syncBuffer // the children's stderr copiers write it at once
	code := run([]string{"bench", "--edges", "1", "--source", "venue", "--subs", "2", "--rate", "200",
		"--duration", "1s", "--warmup", "300ms"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	row := func(name string) []int64 {
		for line := range strings.SplitSeq(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, name); ok {
				var v []int64
				for _, f := range strings.Fields(rest) {
					n, err := strconv.ParseInt(f, 10, 64)
					if err != nil {
						t.Fatalf("row %q: %q: %v", name, line, err)
					}
					v = append(v, n)
				}
				if len(v) != 2 {
					t.Fatalf("row %q: %q", name, line)
				}
				return v
			}
		}
		t.Fatalf("no row %q in:\n%s", name, out.String())
		return nil
	}
	sent, read, want := row("venue frames sent (whole run)"), row("clients read (whole run)"), row("  of (frames × subscribers)")
	for i, run := range []string{"--role all", "ingest+1 edge"} {
		// The venue paces to absolute times: rate × (warmup + duration).
		if sent[i] != 260 {
			t.Errorf("%s: venue sent %d frames, want 260", run, sent[i])
		}
		if want[i] != 2*sent[i] || read[i] != want[i] {
			t.Errorf("%s: clients read %d of %d (2 × %d frames): lost on the way", run, read[i], want[i], sent[i])
		}
	}
	if !strings.Contains(out.String(), "fed by a Bybit venue child through the bybit adapter") || !strings.Contains(out.String(), "edge CPU/msg ÷ single process") {
		t.Errorf("report:\n%s", out.String())
	}
}
