package bench

import (
	"strings"
	"testing"
	"time"
)

// TestSeqCheck checks the soak's judge of a subscriber's seqs: what it
// accepts (gapless, announced gaps, resent snapshots) and what it reports.
func TestSeqCheck(t *testing.T) {
	type ev struct {
		seq  uint64
		snap bool
		gap  [2]uint64 // announce this gap first, if set
	}
	for _, tc := range []struct {
		name string
		evs  []ev
		want string // a failure containing this; "" for none
	}{
		{"gapless", []ev{{seq: 5, snap: true}, {seq: 6}, {seq: 7}}, ""},
		{"announced gap then the trigger", []ev{{seq: 1}, {seq: 2}, {gap: [2]uint64{3, 9}}, {seq: 9, snap: true}, {seq: 10}}, ""},
		{"gap announced ahead of queued events", []ev{{seq: 1}, {gap: [2]uint64{4, 6}}, {seq: 2}, {seq: 3}, {seq: 7}}, ""},
		{"one-seq gap, snapshot at that seq", []ev{{seq: 1}, {gap: [2]uint64{2, 2}}, {seq: 2, snap: true}, {seq: 3}}, ""},
		{"reattach snapshot repeats the last seq", []ev{{seq: 1}, {seq: 2}, {seq: 2, snap: true}, {seq: 3}}, ""},
		{"silent hole", []ev{{seq: 1}, {seq: 3}}, "lost without notice"},
		{"gap that does not match", []ev{{seq: 1}, {gap: [2]uint64{2, 3}}, {seq: 6}}, "announced gap [2, 3]"},
		{"going back", []ev{{seq: 4}, {seq: 3}}, "seq 3 after 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := &soakRun{stop: make(chan struct{})}
			c := &soakClient{run: run, role: roleStall}
			c.check = &seqCheck{c: c, streams: map[string]*streamSeq{}}
			for _, e := range tc.evs {
				if e.gap != [2]uint64{} {
					c.check.announce("s", e.gap[0], e.gap[1])
					continue
				}
				c.check.event([]byte("s"), e.seq, e.snap)
			}
			got := strings.Join(run.failures, "; ")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("failures %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRespacedDrops checks the soak's capture source: frames gap apart in
// recorded time, and a drop is a disconnect line (within a few lines: the
// reader reads ahead) followed by the capture from its first line.
func TestRespacedDrops(t *testing.T) {
	d := &linkDropper{}
	src := respaced("../../testdata/replay/kraken.jsonl.gz", "kraken", 500*time.Millisecond, d)
	f, err := src.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var first string
	var prev time.Time
	for i := range 5 {
		rec, err := f.Next()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = string(rec.Frame)
		} else if got := rec.Time.Sub(prev); got != 500*time.Millisecond {
			t.Fatalf("frame %d is %v after the one before, want 500ms", i, got)
		}
		prev = rec.Time
	}
	d.drop()
	// The reader reads ahead of the writer by a line or a few: the
	// disconnect comes within the next lines.
	for i := 0; ; i++ {
		rec, err := f.Next()
		if err != nil || i == 20 {
			t.Fatalf("no disconnect within %d lines of a drop (%v)", i, err)
		}
		if rec.Disconnect {
			break
		}
		prev = rec.Time
	}
	rec, err := f.Next()
	if err != nil || string(rec.Frame) != first || !rec.Time.After(prev) {
		t.Fatalf("after the disconnect: %q at %v (%v), want the first frame again after %v", rec.Frame, rec.Time, err, prev)
	}
}
