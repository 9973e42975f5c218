package venue_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// A burst lasts while bad frames keep coming less than BadFrameQuiet apart,
// however long that is; the first frame BadFrameQuiet after the last starts
// the next.
func TestBadFramesOnePerBurst(t *testing.T) {
	var s noticeSink
	b := venue.BadFrames{Conn: 2}
	t0 := time.Unix(1_800_000_000, 0)
	at := t0
	for range 10 {
		if sent := b.Report(&s, "x", at, "", "junk", []byte("junk")); sent != (at == t0) {
			t.Fatalf("frame at %v: sent %v", at.Sub(t0), sent)
		}
		at = at.Add(venue.BadFrameQuiet - time.Nanosecond)
	}
	at = at.Add(time.Nanosecond) // BadFrameQuiet after the last
	if !b.Report(&s, "x", at, "x:level2:A", "crossed", []byte("{}")) {
		t.Fatal("a bad frame BadFrameQuiet after the last did not start a burst")
	}
	if b.Report(&s, "x", at.Add(-time.Second), "", "junk", nil) != true {
		t.Fatal("a receive time that went back did not start a burst")
	}
	if b.Count() != 12 || len(s.ns) != 3 {
		t.Fatalf("count %d, %d notices; want 12 and 3", b.Count(), len(s.ns))
	}
	for _, n := range s.ns {
		if err := notice.CheckDetails(n); err != nil {
			t.Error(err)
		}
	}
	first, second := s.ns[0], s.ns[1]
	if first.Stream != "" || first.Details["connection"] != 2 || first.Details["bad_frames"] != uint64(1) || first.Message != "x: bad frame: junk" {
		t.Errorf("first notice %+v: want no stream, connection 2, bad_frames 1", first)
	}
	if second.Stream != "x:level2:A" || second.Details["connection"] != nil || second.Details["bad_frames"] != uint64(11) {
		t.Errorf("second notice %+v: want its stream, no connection, bad_frames 11", second)
	}
}

func TestSample(t *testing.T) {
	long := strings.Repeat("a", venue.BadFrameSample-1) + "é" // the cut splits é
	if got := venue.Sample([]byte(long)); got != strings.Repeat("a", venue.BadFrameSample-1)+"?" {
		t.Errorf("Sample = %q", got)
	}
	if got := venue.Sample([]byte{0xff, '{'}); got != "?{" {
		t.Errorf("Sample = %q, want ?{", got)
	}
	if got := venue.Sample(nil); got != "" {
		t.Errorf("Sample(nil) = %q", got)
	}
}
