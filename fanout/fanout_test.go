package fanout

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

func TestUnderTheBoundDelivers(t *testing.T) {
	h, f := newHub(t, 3)
	c := subscriber.NewMailbox()
	s := h.NewEphemeral(c)
	h.Subscribe(s, tr)
	f.Publish(trade(tr, 1))
	f.Publish(trade(tr, 2))
	ms := drain(t, c)
	if len(ms) != 2 || ms[0].Seq != 1 || ms[1].Seq != 2 || len(notices(ms)) != 0 {
		t.Fatalf("got %+v, want seq 1 and 2 and no notice", ms)
	}
}

func TestAtTheBoundIsFull(t *testing.T) {
	h, f := newHub(t, 3)
	c := subscriber.NewMailbox()
	s := h.NewEphemeral(c)
	h.Subscribe(s, tr)
	for i := range 4 {
		f.Publish(trade(tr, i))
	}
	if c.Len() != 3 {
		t.Fatalf("queue length %d, want 3 (the bound)", c.Len())
	}
	ms := drain(t, c)
	if got := kinds(ms); !slices.Equal(got, []string{"dropping"}) {
		t.Fatalf("notices %v, want [dropping]", got)
	}
	n := notices(ms)[0]
	if num(t, n, "bound") != 3 || num(t, n, "queue_len") != 3 {
		t.Fatalf("dropping details %+v, want bound 3 queue_len 3", n.Details)
	}
	if ms[0].Type != "notice" {
		t.Fatalf("notice not drained ahead of data: %+v", ms)
	}
	if last := ms[len(ms)-1]; last.Seq != 3 {
		t.Fatalf("last delivered seq %d, want 3 (seq 4 dropped)", last.Seq)
	}
}

func TestSlowSubscriberDoesNotHoldBackHealthyOne(t *testing.T) {
	h, f := newHub(t, 2)
	slow, fast := subscriber.NewMailbox(), subscriber.NewMailbox()
	h.Subscribe(h.NewEphemeral(slow), tr)
	h.Subscribe(h.NewEphemeral(fast), tr)
	var got []uint64
	for i := range 100 {
		f.Publish(trade(tr, i))
		for _, m := range drain(t, fast) {
			got = append(got, m.Seq)
		}
	}
	if len(got) != 100 || got[0] != 1 || got[99] != 100 {
		t.Fatalf("healthy subscriber got %d events, want all 100", len(got))
	}
	if slow.Len() != 2 {
		t.Fatalf("slow queue %d, want its bound 2", slow.Len())
	}
	if d := f.Counters().Dropped.Load(); d != 98 {
		t.Fatalf("dropped %d, want 98", d)
	}
}

func TestDefaultBound(t *testing.T) {
	if DefaultMaxQueueLen != 10000 {
		t.Fatalf("default %d, want 10000", DefaultMaxQueueLen)
	}
	h := NewHub(subscriber.NewRegistry())
	f, _ := h.AddFeed(Options{Venue: "kraken"})
	if n, _ := f.Bounds(); n != 10000 {
		t.Fatalf("feed bound %d, want 10000", n)
	}
}

// TestOptionsValidate: AddFeed refuses bounds a queue cannot have, naming
// the option and the value, and takes every one it can (1 included).
func TestOptionsValidate(t *testing.T) {
	h := NewHub(subscriber.NewRegistry())
	for i, o := range []Options{{MaxQueueLen: 1}, {MaxQueueLen: math.MaxInt32}, {MaxQueueBytes: 0}, {MaxQueueBytes: 1 << 40}} {
		o.Venue = fmt.Sprint("v", i)
		if _, err := h.AddFeed(o); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Venue: "a", MaxQueueLen: -5}, "MaxQueueLen -5"},
		{Options{Venue: "a", MaxQueueBytes: -1}, "MaxQueueBytes -1"},
		{Options{}, "venue"},
	} {
		if _, err := h.AddFeed(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %q", tc.o, err, tc.want)
		}
	}
}

func TestDroppingReportsOnce(t *testing.T) {
	h, f := newHub(t, 2)
	c := subscriber.NewMailbox()
	h.Subscribe(h.NewEphemeral(c), tr)
	for i := range 50 {
		f.Publish(trade(tr, i))
	}
	ms := drainN(t, c, 0)
	if got := kinds(ms); !slices.Equal(got, []string{"dropping"}) {
		t.Fatalf("notices after 48 drops %v, want one dropping", got)
	}
	for i := range 50 {
		f.Publish(trade(tr, i))
	}
	if got := kinds(drainN(t, c, 0)); len(got) != 0 {
		t.Fatalf("already-dropping subscriber got more notices: %v", got)
	}
}

func TestResumeBelowHalfDeliversAndReportsGaps(t *testing.T) {
	h, f := newHub(t, 4)
	c := subscriber.NewMailbox()
	s := h.NewEphemeral(c)
	h.Subscribe(s, tr)
	h.Subscribe(s, tr2)
	for i := range 6 { // seqs 1..4 queued, 5 and 6 dropped
		f.Publish(trade(tr, i))
	}
	f.Publish(trade(tr2, 0)) // tr2 seq 1 dropped
	drainN(t, c, 2)          // queue 2: not below half (2)
	f.Publish(trade(tr, 7))  // tr seq 7 dropped
	if got := kinds(drainN(t, c, 0)); len(got) != 0 {
		t.Fatalf("resumed at half the bound: %v", got)
	}
	drainN(t, c, 1)         // queue 1 < 2
	f.Publish(trade(tr, 8)) // tr seq 8: resumes and is delivered
	ms := drain(t, c)
	if got := kinds(ms); !slices.Equal(got, []string{"resumed"}) {
		t.Fatalf("notices %v, want exactly one resumed", got)
	}
	r := notices(ms)[0]
	gaps := gapsOf(t, r)
	want := map[string][2]uint64{string(tr): {5, 7}, string(tr2): {1, 1}}
	if fmt.Sprint(gaps) != fmt.Sprint(want) {
		t.Fatalf("gaps %v, want %v", gaps, want)
	}
	if num(t, r, "dropped") != 4 || num(t, r, "bound") != 4 || r.Details["reason"] != "drained" {
		t.Fatalf("resumed details %+v", r.Details)
	}
	last := ms[len(ms)-1]
	if last.Stream != string(tr) || last.Seq != 8 {
		t.Fatalf("event of the resuming call not delivered last: %+v", last)
	}
	f.Publish(trade(tr, 9))
	if got := kinds(drain(t, c)); len(got) != 0 {
		t.Fatalf("notices after resume: %v", got)
	}
}

func TestHoveringUnderTheBoundDoesNotFlip(t *testing.T) {
	h, f := newHub(t, 10)
	c := subscriber.NewMailbox()
	h.Subscribe(h.NewEphemeral(c), tr)
	for i := range 9 {
		f.Publish(trade(tr, i))
	}
	for i := range 1000 { // one in, one out: the queue sits at bound-1..bound
		f.Publish(trade(tr, i))
		if got := kinds(drainN(t, c, 1)); len(got) != 0 {
			t.Fatalf("publish %d: notices %v while hovering under the bound", i, got)
		}
	}
	// Now reach the bound, then hover: the consumer takes one message
	// whenever the queue is at the bound, so it sits at bound-1. Without
	// hysteresis it would resume at bound-1, fill, drop, resume… one notice
	// pair per two messages. With it: one dropping, never a resumed.
	f.Publish(trade(tr, 0))
	f.Publish(trade(tr, 0))
	var seen []string
	for i := range 1000 {
		if c.Len() == 10 {
			seen = append(seen, kinds(drainN(t, c, 1))...)
		}
		f.Publish(trade(tr, i))
	}
	seen = append(seen, kinds(drainN(t, c, 0))...)
	if !slices.Equal(seen, []string{"dropping"}) {
		t.Fatalf("hovering at the bound gave notices %v, want one dropping", seen)
	}
}

func TestDeadWhileDroppingLeavesWithoutTransition(t *testing.T) {
	h, f := newHub(t, 2)
	dead, live := subscriber.NewMailbox(), subscriber.NewMailbox()
	ds := h.NewEphemeral(dead)
	h.Subscribe(ds, tr)
	h.Subscribe(h.NewEphemeral(live), tr)
	for i := range 5 {
		f.Publish(trade(tr, i))
		drain(t, live)
	}
	if f.Counters().Dropping.Load() != 1 {
		t.Fatalf("dropping gauge %d, want 1", f.Counters().Dropping.Load())
	}
	drain(t, dead)
	dead.Close() // it dies; nobody has called Detach yet
	for i := range 5 {
		f.Publish(trade(tr, i))
		drain(t, live)
	}
	if ms := drain(t, dead); len(ms) != 0 {
		t.Fatalf("closed conn received %v", kinds(ms))
	}
	h.Detach(ds, dead)
	if f.Counters().Dropping.Load() != 0 {
		t.Fatalf("dropping gauge %d after it left, want 0", f.Counters().Dropping.Load())
	}
	if _, ok := f.entries[ds]; ok || len(f.streams[tr].subs) != 1 {
		t.Fatalf("dead subscriber still in the feed")
	}
}

func TestEphemeralLeavesNoEntry(t *testing.T) {
	h := NewHub(subscriber.NewRegistry())
	fa, _ := h.AddFeed(Options{Venue: "coinbase"})
	fb, _ := h.AddFeed(Options{Venue: "kraken"})
	kr := venue.Stream("kraken:trades:BTC/USD")
	for range 100 {
		c := subscriber.NewMailbox()
		s := h.NewEphemeral(c)
		h.Subscribe(s, tr)
		h.Subscribe(s, kr)
		fa.Publish(trade(tr, 1))
		h.Detach(s, c)
	}
	if len(fa.entries) != 0 || len(fa.streams[tr].subs) != 0 || len(fb.entries) != 0 || len(fb.streams[kr].subs) != 0 {
		t.Fatalf("entries left: coinbase %d/%d kraken %d/%d", len(fa.entries), len(fa.streams[tr].subs), len(fb.entries), len(fb.streams[kr].subs))
	}
	if e, n := h.Registry().Count(); e != 0 || n != 0 {
		t.Fatalf("registry holds %d ephemeral %d named", e, n)
	}
}

func TestResolve(t *testing.T) {
	reg := subscriber.NewRegistry()
	c := subscriber.NewMailbox()
	live := reg.NewEphemeral(c, "")
	if live.Resolve() != c {
		t.Fatal("live ephemeral does not resolve to its conn")
	}
	c.Close()
	if live.Resolve() != nil {
		t.Fatal("closed ephemeral resolves")
	}
	nc := subscriber.NewMailbox()
	named, _, err := reg.Attach("desk-1", "", nc, nil)
	if err != nil || named.Resolve() != nc {
		t.Fatalf("attached named does not resolve: %v", err)
	}
	reg.Detach(named, nc)
	if named.Resolve() != nil {
		t.Fatal("detached named resolves")
	}
	if reg.Named("desk-1") == nil {
		t.Fatal("detached named forgotten")
	}
	if _, _, err := reg.Attach("bad name!", "", nc, nil); err == nil {
		t.Fatal("bad name accepted")
	}
}

func TestNoticePathUsesResolve(t *testing.T) {
	h, f := newHub(t, 10)
	c := subscriber.NewMailbox()
	s, _, _ := h.Attach("n1", "", c, nil)
	h.Subscribe(s, tr)
	f.Notice(notice.Must(notice.LinkDown, "coinbase", "", t0, "down", nil))
	if got := kinds(drain(t, c)); !slices.Equal(got, []string{"link_down"}) {
		t.Fatalf("attached got %v", got)
	}
	h.Detach(s, c)
	f.Notice(notice.Must(notice.LinkUp, "coinbase", "", t0, "up", nil))
	if got := kinds(drain(t, c)); len(got) != 0 {
		t.Fatalf("detached conn got %v", got)
	}
}

func TestLevel2SnapshotThenUpdates(t *testing.T) {
	h, f := newHub(t, 100)
	f.Publish(bookSnap(l2))
	for i := range 5 {
		f.Publish(bookUpd(l2, i))
	}
	c := subscriber.NewMailbox()
	h.Subscribe(h.NewEphemeral(c), l2)
	for i := range 3 {
		f.Publish(bookUpd(l2, 10+i))
	}
	ms := drain(t, c)
	if len(ms) != 4 || !ms[0].Snapshot || ms[0].Seq != 6 {
		t.Fatalf("first message %+v, want snapshot at seq 6", ms[0])
	}
	for i, m := range ms[1:] {
		if m.Snapshot || m.Seq != uint64(7+i) {
			t.Fatalf("message %d: %+v, want update seq %d", i+1, m, 7+i)
		}
	}
	// A consumer applying them holds the feed's book.
	var got venue.Book
	for _, m := range ms {
		var ev venue.Event
		if err := ev.UnmarshalJSON(m.raw); err != nil {
			t.Fatal(err)
		}
		got.Apply(&ev)
	}
	if !got.Equal(f.streams[l2].book) {
		t.Fatal("consumer's book differs from the feed's")
	}
}

func TestResumeSendsSnapshotBeforeTheEvent(t *testing.T) {
	h, f := newHub(t, 2)
	f.Publish(bookSnap(l2))
	c := subscriber.NewMailbox()
	h.Subscribe(h.NewEphemeral(c), l2) // snapshot at seq 1, forced
	for i := range 4 {                 // seq 2 queued; 3,4,5 dropped
		f.Publish(bookUpd(l2, i))
	}
	drain(t, c)
	f.Publish(bookUpd(l2, 9)) // seq 6: resume
	ms := drain(t, c)
	if len(ms) != 3 || ms[0].Kind != "resumed" || !ms[1].Snapshot || ms[1].Seq != 5 || ms[2].Seq != 6 || ms[2].Snapshot {
		t.Fatalf("got %+v, want resumed, snapshot@5, update@6", ms)
	}
	if g := gapsOf(t, ms[0]); g[string(l2)] != [2]uint64{3, 5} {
		t.Fatalf("gaps %v, want 3..5", g)
	}
}

func TestNamedReattachIsToldWhatItMissed(t *testing.T) {
	h, f := newHub(t, 100)
	f.Publish(bookSnap(l2))
	c1 := subscriber.NewMailbox()
	s, existed, _ := h.Attach("desk", "", c1, nil)
	if existed {
		t.Fatal("new name reported as existing")
	}
	h.Subscribe(s, l2)
	h.Subscribe(s, tr)
	f.Publish(bookUpd(l2, 1)) // l2 seq 2 queued on c1, never written
	f.Publish(trade(tr, 1))   // tr seq 1 likewise
	drainN(t, c1, 1)          // the snapshot was written
	h.Detach(s, c1)
	f.Publish(bookUpd(l2, 2)) // l2 seq 3 missed while detached
	f.Publish(trade(tr, 2))   // tr seq 2 missed
	if s.Resolve() != nil || f.entries[s] == nil {
		t.Fatal("named subscriber lost its subscriptions on detach")
	}
	c2 := subscriber.NewMailbox()
	if _, existed, _ := h.Attach("desk", "", c2, nil); !existed {
		t.Fatal("reattach not reported as existing")
	}
	ms := drain(t, c2)
	if len(ms) < 2 || ms[0].Kind != "resumed" || ms[0].Details["reason"] != "reattached" {
		t.Fatalf("first message %+v, want resumed reattached", ms)
	}
	g := gapsOf(t, ms[0])
	if g[string(l2)] != [2]uint64{2, 3} || g[string(tr)] != [2]uint64{1, 2} {
		t.Fatalf("gaps %v, want l2 2..3 and trades 1..2", g)
	}
	if !ms[1].Snapshot || ms[1].Seq != 3 {
		t.Fatalf("second message %+v, want snapshot at seq 3", ms[1])
	}
	f.Publish(trade(tr, 3))
	if ms := drain(t, c2); len(ms) != 1 || ms[0].Seq != 3 {
		t.Fatalf("after reattach got %+v, want trade seq 3", ms)
	}
}

func TestNamedTakeover(t *testing.T) {
	h, f := newHub(t, 100)
	c1 := subscriber.NewMailbox()
	s, _, _ := h.Attach("desk", "", c1, nil)
	h.Subscribe(s, tr)
	f.Publish(trade(tr, 1)) // queued on c1, never written
	c2 := subscriber.NewMailbox()
	var told *subscriber.Mailbox
	h.Attach("desk", "", c2, func(prev *subscriber.Mailbox) { told = prev })
	if told != c1 || !c1.IsClosed() {
		t.Fatal("previous connection not handed over and closed")
	}
	ms := drain(t, c2)
	if len(ms) != 1 || ms[0].Kind != "resumed" || gapsOf(t, ms[0])[string(tr)] != [2]uint64{1, 1} {
		t.Fatalf("takeover got %+v, want resumed with trades gap 1..1", ms)
	}
}

func TestByteBound(t *testing.T) {
	h := NewHub(subscriber.NewRegistry())
	f, _ := h.AddFeed(Options{Venue: "coinbase", MaxQueueLen: 1000, MaxQueueBytes: 1000})
	c := subscriber.NewMailbox()
	h.Subscribe(h.NewEphemeral(c), tr)
	for i := range 100 {
		f.Publish(trade(tr, i))
	}
	if c.Bytes() > 1000+300 || c.Len() >= 100 {
		t.Fatalf("queue holds %d bytes in %d messages past a 1000-byte bound", c.Bytes(), c.Len())
	}
	if got := kinds(drainN(t, c, 0)); !slices.Equal(got, []string{"dropping"}) {
		t.Fatalf("notices %v, want dropping", got)
	}
}
