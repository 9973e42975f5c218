package okx

import (
	"fmt"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
)

func frameAt(action string, prev, seq int64, px string) []byte {
	return fmt.Appendf(nil, `{"arg":{"channel":"books","instId":"BTC-USDT"},"action":%q,"data":[{"asks":[[%q,"1","0","1"]],"bids":[["1","1","0","1"]],"ts":"1","checksum":0,"prevSeqId":%d,"seqId":%d}]}`,
		action, px, prev, seq)
}

// TestResyncRetry: a gap asks the link for a resync once; if no snapshot
// comes while updates keep arriving, it asks again after resyncRetry (by
// receive time), not before.
func TestResyncRetry(t *testing.T) {
	sink := venuetest.NewSink()
	d := NewDecoder(venue.Config{Sink: sink})
	var asked []string
	d.hooks.resync = func(id string) { asked = append(asked, id) }
	t0 := time.Unix(1_700_000_000, 0)
	d.Frame(t0, frameAt("snapshot", -1, 10, "100"))
	d.Frame(t0, frameAt("update", 11, 12, "101")) // gap: 11 != 10
	if len(asked) != 1 || asked[0] != "BTC-USDT" {
		t.Fatalf("after a gap resync asked for %v, want [BTC-USDT]", asked)
	}
	d.Frame(t0.Add(resyncRetry/2), frameAt("update", 12, 13, "102"))
	if len(asked) != 1 {
		t.Fatalf("asked again before resyncRetry: %v", asked)
	}
	d.Frame(t0.Add(resyncRetry), frameAt("update", 13, 14, "103"))
	if len(asked) != 2 {
		t.Fatalf("not asked again after resyncRetry: %v", asked)
	}
	d.Frame(t0.Add(resyncRetry), frameAt("snapshot", -1, 20, "100"))
	d.Frame(t0.Add(resyncRetry), frameAt("update", 20, 21, "104"))
	if n := sink.NumEvents(); n != 3 {
		t.Fatalf("%d events, want snapshot, snapshot, update", n)
	}
	sink.Check(t)
}

// TestBadSnapshotNoLoop: a snapshot that fails its checksum is reported
// and resynced once; further bad snapshots are reported but the next
// request waits for the doubling retry.
func TestBadSnapshotNoLoop(t *testing.T) {
	sink := venuetest.NewSink()
	d := NewDecoder(venue.Config{Sink: sink})
	var asked int
	d.hooks.resync = func(string) { asked++ }
	t0 := time.Unix(1_700_000_000, 0)
	bad := []byte(`{"arg":{"channel":"books","instId":"BTC-USDT"},"action":"snapshot","data":[{"asks":[["101","1","0","1"]],"bids":[["100","1","0","1"]],"ts":"1","checksum":1,"prevSeqId":-1,"seqId":5}]}`)
	d.Frame(t0, bad)
	d.Frame(t0, bad)
	d.Frame(t0, bad)
	if n := len(sink.Notices()); n != 3 || asked != 1 {
		t.Fatalf("%d notices, %d resync requests; want 3 and 1", n, asked)
	}
	d.Frame(t0.Add(retryAfter(3)-time.Second), frameAt("update", 5, 6, "102"))
	if asked != 1 {
		t.Fatalf("asked again before the doubled retry")
	}
	d.Frame(t0.Add(retryAfter(3)), frameAt("update", 6, 7, "102"))
	if asked != 2 {
		t.Fatalf("not asked again after the doubled retry")
	}
	d.Frame(t0.Add(retryAfter(3)), frameAt("snapshot", -1, 20, "100"))
	if n := sink.NumEvents(); n != 1 {
		t.Fatalf("%d events after a good snapshot, want 1", n)
	}
	sink.Check(t)
}
