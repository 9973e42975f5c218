package bench

import (
	"strings"
	"testing"
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
