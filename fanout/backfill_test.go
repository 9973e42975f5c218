package fanout

import (
	"slices"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

func wireTrade(seq uint64) []byte {
	ev := trade(tr, int(seq))
	ev.Seq = seq
	return ev.AppendJSON(nil)
}

// An ingest's feed (KeepWindows) keeps every stream's window without a
// subscriber, and Range reads it in pieces no larger than asked, from a
// seq it holds only.
func TestRangeKeepsWithoutSubscribers(t *testing.T) {
	h := NewHub(subscriber.NewRegistry())
	h.SetRecovery(RecoveryOptions{MaxEventsPerStream: 8, MaxBytes: 1 << 20, MaxAge: time.Hour})
	f, _ := h.AddFeed(Options{Venue: "coinbase", KeepWindows: true})
	for i := range 12 {
		f.Publish(trade(tr, i))
	}
	if _, oldest, newest, ok := f.Range(tr, 4, 12, 1<<20); ok || oldest != 5 || newest != 12 {
		t.Fatalf("from 4: ok %v, window %d..%d; want refused, 5..12", ok, oldest, newest)
	}
	one := len(wireTrade(5))
	var got []uint64
	for from := uint64(5); from <= 12; {
		data, _, _, ok := f.Range(tr, from, 12, 3*one)
		if !ok || len(data) == 0 || len(data) > 3 {
			t.Fatalf("from %d: ok %v, %d events", from, ok, len(data))
		}
		for i, d := range data {
			got = append(got, from+uint64(i))
			if want := f.streams[tr].win.at(int(from + uint64(i) - 5)).Data; string(d) != string(want) {
				t.Fatalf("seq %d: %s", from+uint64(i), d)
			}
		}
		from += uint64(len(data))
	}
	if !slices.Equal(got, seqRange(5, 12)) {
		t.Fatalf("read %v", got)
	}
	// Without KeepWindows a stream with no subscriber holds nothing.
	g, _ := h.AddFeed(Options{Venue: "kraken"})
	k := venue.Stream("kraken:trades:XBT/USD")
	g.Publish(trade(k, 1))
	if _, _, _, ok := g.Range(k, 1, 1, 1<<20); ok {
		t.Fatal("a stream without subscribers kept a window")
	}
}

// An edge's window, filled before its oldest event from the ingest's
// range, recovers a reattaching named subscriber's whole gap; a range that
// does not join the window is refused, and the count bound holds.
func TestBackfillRecoversReattach(t *testing.T) {
	h, f, _ := recHub(t, 100, RecoveryOptions{MaxEventsPerStream: 20, MaxBytes: 1 << 20, MaxAge: time.Hour})
	s, _, _ := h.AttachFrom("desk", "", nil, nil, nil) // adopted: no connection yet
	h.Subscribe(s, tr)
	f.Baseline(tr, 10) // the edge learned seq 10 from a heartbeat
	for seq := uint64(11); seq <= 14; seq++ {
		f.Forward(tr, seq, wireTrade(seq), nil)
	}
	var data [][]byte
	for seq := uint64(1); seq <= 9; seq++ {
		data = append(data, wireTrade(seq))
	}
	if got := f.Backfill(tr, 1, data); got != 11 {
		t.Fatalf("a range ending at 9 joined a window from 11: oldest %d", got)
	}
	data = append(data, wireTrade(10), wireTrade(11)) // 1..11, overlapping the window
	if got := f.Backfill(tr, 1, data); got != 1 {
		t.Fatalf("oldest %d after the backfill, want 1", got)
	}
	if f.streams[tr].win.n != 14 || f.streams[tr].win.at(10).Seq != 11 {
		t.Fatalf("window of %d", f.streams[tr].win.n)
	}
	c := subscriber.NewMailbox()
	h.AttachFrom("desk", "", c, map[venue.Stream]uint64{tr: 3}, nil)
	got := drain(t, c)
	if r := recoveredOf(t, notices(got)[0]); r[string(tr)] != [2]uint64{4, 14} {
		t.Fatalf("recovered %v (%s)", r, got[0].raw)
	}
	if seqs := seqsOf(got, tr); !slices.Equal(seqs, seqRange(4, 14)) {
		t.Fatalf("seqs %v", seqs)
	}

	// The count bound: of a range longer than the window has room for,
	// the newest are kept.
	h2, f2, _ := recHub(t, 100, RecoveryOptions{MaxEventsPerStream: 5, MaxBytes: 1 << 20, MaxAge: time.Hour})
	s2 := h2.NewEphemeral(subscriber.NewMailbox())
	h2.Subscribe(s2, tr)
	f2.Baseline(tr, 9)
	if got := f2.Backfill(tr, 1, data[:9]); got != 5 || f2.streams[tr].win.n != 5 {
		t.Fatalf("oldest %d, %d held; want 5, 5", got, f2.streams[tr].win.n)
	}
}
