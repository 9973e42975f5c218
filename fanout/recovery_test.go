package fanout

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// recHub is newHub with a recovery window of o, and a clock the test moves.
func recHub(t testing.TB, bound int, o RecoveryOptions) (*Hub, *Feed, *time.Time) {
	t.Helper()
	now := t0
	h := NewHub(subscriber.NewRegistry())
	h.SetRecovery(o)
	f, err := h.AddFeed(Options{Venue: "coinbase", MaxQueueLen: bound, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return h, f, &now
}

var bigWindow = RecoveryOptions{MaxEventsPerStream: 1000, MaxBytes: 1 << 30, MaxAge: time.Hour}

// recoveredOf returns the recovered detail of a resumed notice, or nil.
func recoveredOf(t testing.TB, m msg) map[string][2]uint64 {
	t.Helper()
	raw, ok := m.Details["recovered"].(map[string]any)
	if !ok {
		return nil
	}
	out := map[string][2]uint64{}
	for k, v := range raw {
		arr := v.([]any)
		out[k] = [2]uint64{uint64(arr[0].(float64)), uint64(arr[1].(float64))}
	}
	return out
}

// seqsOf returns the seqs of the data events of st in ms, in order
// (snapshots excluded).
func seqsOf(ms []msg, st venue.Stream) []uint64 {
	var out []uint64
	for _, m := range ms {
		if m.Type != "notice" && m.Stream == string(st) && !m.Snapshot {
			out = append(out, m.Seq)
		}
	}
	return out
}

func seqRange(a, b uint64) []uint64 {
	var out []uint64
	for s := a; s <= b; s++ {
		out = append(out, s)
	}
	return out
}

// A window keeps each stream's newest events, evicting by count, by age
// and by the node's byte bound (shared by every feed), and the counters
// say what it holds.
func TestRecoveryWindowBounds(t *testing.T) {
	h, f, now := recHub(t, 100, RecoveryOptions{MaxEventsPerStream: 5, MaxBytes: 1 << 30, MaxAge: time.Minute})
	s := h.NewEphemeral(subscriber.NewMailbox())
	h.Subscribe(s, tr)
	h.Subscribe(s, tr2)
	for i := range 8 {
		f.Publish(trade(tr, i))
	}
	f.Publish(trade(tr2, 0))
	f.mu.Lock()
	st := f.streams[tr]
	if st.win.n != 5 || st.oldest() != 4 || st.win.at(4).Seq != 8 {
		f.mu.Unlock()
		t.Fatalf("count bound: %d held from %d", st.win.n, st.oldest())
	}
	f.mu.Unlock()
	if ev := f.rc.Events.Load(); ev != 6 {
		t.Fatalf("events held %d, want 6", ev)
	}
	*now = now.Add(30 * time.Second)
	f.Publish(trade(tr, 9))
	*now = now.Add(31 * time.Second) // seqs 4..8 are now past a minute old
	f.Publish(trade(tr, 10))
	f.mu.Lock()
	if st.win.n != 2 || st.oldest() != 9 {
		f.mu.Unlock()
		t.Fatalf("age bound: %d held from %d", st.win.n, st.oldest())
	}
	f.mu.Unlock()
	// Unsubscribed, a stream holds nothing.
	h.Unsubscribe(s, tr)
	if ev := f.rc.Events.Load(); ev != 1 {
		t.Fatalf("events held after unsubscribe %d, want tr2's 1", ev)
	}

	// The byte bound is the node's: two feeds share it, and no window
	// ever passes it.
	h2 := NewHub(subscriber.NewRegistry())
	one := cost(&subscriber.Message{Data: trade(tr, 1).AppendJSON(nil)})
	h2.SetRecovery(RecoveryOptions{MaxEventsPerStream: 1000, MaxBytes: 40 * one, MaxAge: time.Hour})
	fa, _ := h2.AddFeed(Options{Venue: "coinbase", MaxQueueLen: 1 << 20, Now: func() time.Time { return t0 }})
	fb, _ := h2.AddFeed(Options{Venue: "kraken", MaxQueueLen: 1 << 20, Now: func() time.Time { return t0 }})
	s2 := h2.NewEphemeral(subscriber.NewMailbox())
	kr := venue.Stream("kraken:trades:BTC/USD")
	for _, st := range []venue.Stream{tr, tr2, kr} {
		if err := h2.Subscribe(s2, st); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 500 {
		fa.Publish(trade(tr, i%10))
		if i%5 == 0 {
			fa.Publish(trade(tr2, i%10))
		}
		if i%3 == 0 {
			ev := trade(kr, i%10)
			fb.Publish(ev)
		}
		if held := h2.rec.bytes.Load(); held > h2.rec.o.MaxBytes {
			t.Fatalf("step %d: %d bytes held, bound %d", i, held, h2.rec.o.MaxBytes)
		}
	}
	if got := fa.rc.Bytes.Load() + fb.rc.Bytes.Load(); got != h2.rec.bytes.Load() {
		t.Fatalf("feeds count %d bytes, the node %d", got, h2.rec.bytes.Load())
	}
	fa.mu.Lock()
	quiet := fa.streams[tr2].win.n
	fa.mu.Unlock()
	if quiet < 5 {
		t.Fatalf("the quiet stream holds %d events: the busy one took its share", quiet)
	}
}

// Keeping an event allocates nothing once a stream's ring has its size:
// Publish costs the same allocations with a window as without.
func TestRecoveryKeepAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	h, f, _ := recHub(t, 1<<20, RecoveryOptions{MaxEventsPerStream: 64, MaxBytes: 1 << 30, MaxAge: time.Hour})
	s := h.NewEphemeral(subscriber.NewMailbox())
	h.Subscribe(s, tr)
	m := &subscriber.Message{Stream: string(tr), Data: []byte(`{"x":1}`), Published: t0}
	seq := uint64(0)
	f.mu.Lock()
	st := f.streams[tr]
	for range 200 { // fill the ring to its bound
		seq++
		m2 := *m
		m2.Seq = seq
		f.keep(st, &m2)
	}
	msgs := make([]subscriber.Message, 1000)
	for i := range msgs {
		msgs[i] = *m
		msgs[i].Seq = seq + 1 + uint64(i)
	}
	i := 0
	allocs := testing.AllocsPerRun(500, func() {
		f.keep(st, &msgs[i])
		i++
	})
	f.mu.Unlock()
	if allocs != 0 {
		t.Fatalf("keep: %v allocs per event", allocs)
	}

	// Publish with a window allocates what it does without one.
	ev := trade(tr, 1)
	hOff, fOff := newHub(t, 1<<20)
	sOff := hOff.NewEphemeral(subscriber.NewMailbox())
	hOff.Subscribe(sOff, tr)
	for range 300 {
		f.Publish(ev)
		fOff.Publish(ev)
	}
	drainAll := func(c *subscriber.Mailbox) { drain(t, c) }
	drainAll(s.Mailbox())
	drainAll(sOff.Mailbox())
	with := testing.AllocsPerRun(200, func() { f.Publish(ev) })
	without := testing.AllocsPerRun(200, func() { fOff.Publish(ev) })
	if with > without {
		t.Fatalf("publish with a window: %v allocs, without: %v", with, without)
	}
}

// A stalled subscriber that drains gets what it lost on a trades stream
// again, in seq order, before anything newer, and resumed says so; a
// stream whose loss is past the window is a gap, as without recovery.
func TestResumeRecoversTrades(t *testing.T) {
	h, f, _ := recHub(t, 4, RecoveryOptions{MaxEventsPerStream: 6, MaxBytes: 1 << 30, MaxAge: time.Hour})
	c := subscriber.NewMailbox()
	s := h.NewEphemeral(c)
	h.Subscribe(s, tr)
	h.Subscribe(s, tr2)
	for i := range 6 { // tr 1..4 queued, 5, 6 dropped
		f.Publish(trade(tr, i))
	}
	for i := range 9 { // tr2 1..9 dropped: more than its window of 6
		f.Publish(trade(tr2, i))
	}
	got := drainN(t, c, 4)  // the dropping notice and 3 events: 1 left < 2
	f.Publish(trade(tr, 7)) // resumes: tr 5, 6 recovered, then 7
	got = append(got, drain(t, c)...)
	ns := notices(got)
	if len(ns) != 2 || ns[0].Kind != "dropping" || ns[1].Kind != "resumed" {
		t.Fatalf("notices %v", kinds(got))
	}
	r := ns[1]
	if rec := recoveredOf(t, r); fmt.Sprint(rec) != fmt.Sprint(map[string][2]uint64{string(tr): {5, 6}}) {
		t.Fatalf("recovered %v", rec)
	}
	if gaps := gapsOf(t, r); fmt.Sprint(gaps) != fmt.Sprint(map[string][2]uint64{string(tr2): {1, 9}}) {
		t.Fatalf("gaps %v", gaps)
	}
	if num(t, r, "dropped") != 9 {
		t.Fatalf("dropped %d, want tr2's 9", num(t, r, "dropped"))
	}
	if seqs := seqsOf(got, tr); !slices.Equal(seqs, seqRange(1, 7)) {
		t.Fatalf("trades seqs %v, want 1..7", seqs)
	}
	k := f.RecoveryCounters()
	if k.Served.Load() != 1 || k.RefusedWindow.Load() != 1 {
		t.Fatalf("served %d refused %d", k.Served.Load(), k.RefusedWindow.Load())
	}
	// The recovered events are the very bytes delivered to others.
	f.mu.Lock()
	st := f.streams[tr]
	held := st.win.at(int(5 - st.oldest()))
	f.mu.Unlock()
	i := slices.IndexFunc(got, func(m msg) bool { return m.Stream == string(tr) && m.Seq == 5 })
	if held.Seq != 5 || &got[i].raw[0] != &held.Data[0] {
		t.Fatal("recovered seq 5 is a copy, not the bytes encoded once")
	}
}

// For level2 the updates lost are sent when they are fewer bytes than the
// book, the snapshot otherwise.
func TestResumeLevel2UpdatesOrSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lost    int
		recover bool
	}{{"few updates", 1, true}, {"many updates", 40, false}} {
		t.Run(tc.name, func(t *testing.T) {
			h, f, _ := recHub(t, 64, bigWindow)
			f.Publish(bookSnap(l2)) // seq 1
			c := subscriber.NewMailbox()
			s := h.NewEphemeral(c)
			h.Subscribe(s, l2) // snapshot at 1
			for i := range 63 + tc.lost {
				f.Publish(bookUpd(l2, i)) // 2..64 queued beside the snapshot, then lost
			}
			got := drain(t, c)
			f.Publish(bookUpd(l2, 1))
			got = append(got, drain(t, c)...)
			var r msg
			for _, m := range notices(got) {
				if m.Kind == "resumed" {
					r = m
				}
			}
			last := uint64(64 + tc.lost)
			rec := recoveredOf(t, r)
			after := got[slices.IndexFunc(got, func(m msg) bool { return m.Kind == "resumed" })+1:]
			if tc.recover {
				if fmt.Sprint(rec) != fmt.Sprint(map[string][2]uint64{string(l2): {65, last}}) || len(gapsOf(t, r)) != 0 {
					t.Fatalf("recovered %v gaps %v", rec, gapsOf(t, r))
				}
				if seqs := seqsOf(got, l2); !slices.Equal(seqs, seqRange(2, last+1)) {
					t.Fatalf("level2 seqs %v", seqs)
				}
				if slices.ContainsFunc(after, func(m msg) bool { return m.Snapshot }) {
					t.Fatal("a snapshot beside the recovered updates")
				}
				return
			}
			if len(rec) != 0 || gapsOf(t, r)[string(l2)] != [2]uint64{65, last} {
				t.Fatalf("recovered %v gaps %v, want the gap and a snapshot", rec, gapsOf(t, r))
			}
			if len(after) < 2 || !after[0].Snapshot || after[0].Seq != last || after[1].Seq != last+1 {
				t.Fatalf("after resumed: %+v", after)
			}
		})
	}
}

// A range is recovered only whole and with room left for the next event:
// one that does not fit is a gap, as without recovery; a subscriber too
// slow for its recovery drops again, told by a dropping notice, and the
// next resume recovers that loss.
func TestRecoveryFitsTheQueueBound(t *testing.T) {
	h, f, _ := recHub(t, 4, bigWindow)
	c := subscriber.NewMailbox()
	s := h.NewEphemeral(c)
	h.Subscribe(s, tr)
	for i := range 8 { // 1..4 queued, 5..8 dropped
		f.Publish(trade(tr, i))
	}
	var got []msg
	got = append(got, drainN(t, c, 4)...) // the dropping notice and 1..3: 4 left
	f.Publish(trade(tr, 9))               // 4 + 4 lost + 9 do not fit 4: a gap
	ms := drain(t, c)
	ns := notices(ms)
	if len(ns) != 1 || recoveredOf(t, ns[0])[string(tr)] != [2]uint64{} || gapsOf(t, ns[0])[string(tr)] != [2]uint64{5, 8} {
		t.Fatalf("notices %+v, want the gap 5..8", ns)
	}
	if f.RecoveryCounters().RefusedQueue.Load() != 1 {
		t.Fatal("refusal for the queue bound not counted")
	}

	for i := range 6 { // 10..13 queued, 14, 15 dropped
		f.Publish(trade(tr, i))
	}
	got = drainN(t, c, 4)    // the dropping notice and 10..12: 13 left
	f.Publish(trade(tr, 16)) // 13, then 14, 15 recovered, then 16: full
	f.Publish(trade(tr, 17)) // dropped: too slow for its recovery
	got = append(got, drain(t, c)...)
	ns = notices(got)
	if fmt.Sprint(kinds(got)) != "[dropping resumed dropping]" || recoveredOf(t, ns[1])[string(tr)] != [2]uint64{14, 15} {
		t.Fatalf("notices %v %+v", kinds(got), ns)
	}
	f.Publish(trade(tr, 18)) // resumes: 17 recovered, then 18
	got = append(got, drain(t, c)...)
	if seqs := seqsOf(got, tr); !slices.Equal(seqs, seqRange(10, 18)) {
		t.Fatalf("trades seqs %v, want 10..18", seqs)
	}
	if r := notices(got)[3]; recoveredOf(t, r)[string(tr)] != [2]uint64{17, 17} {
		t.Fatalf("second resume %+v", r.Details)
	}
}

// A named subscriber reattaching recovers what it missed while away; with
// a statement of what it read, from right after it.
func TestReattachRecovers(t *testing.T) {
	h, f, _ := recHub(t, 100, bigWindow)
	f.Publish(bookSnap(l2))
	c := subscriber.NewMailbox()
	s, _, _ := h.Attach("desk", "", c, nil)
	h.Subscribe(s, tr)
	h.Subscribe(s, l2)
	for i := range 5 {
		f.Publish(trade(tr, i)) // 1..5
		f.Publish(bookUpd(l2, i))
	}
	drain(t, c)
	h.Detach(s, c)
	for i := range 3 {
		f.Publish(trade(tr, i)) // 6..8 missed
	}
	c2 := subscriber.NewMailbox()
	// It read trades up to 3 only (4 and 5 were written, never read); it
	// states nothing for level2.
	h.AttachFrom("desk", "", c2, map[venue.Stream]uint64{tr: 3}, nil)
	got := drain(t, c2)
	if len(got) == 0 || got[0].Kind != "resumed" || got[0].Details["reason"] != "reattached" {
		t.Fatalf("first on reattach: %+v", got)
	}
	rec := recoveredOf(t, got[0])
	if rec[string(tr)] != [2]uint64{4, 8} {
		t.Fatalf("recovered %v, want trades 4..8", rec)
	}
	if seqs := seqsOf(got, tr); !slices.Equal(seqs, seqRange(4, 8)) {
		t.Fatalf("trades %v", seqs)
	}
	// level2 lost nothing: the reattach snapshot as always.
	if !slices.ContainsFunc(got, func(m msg) bool { return m.Stream == string(l2) && m.Snapshot }) {
		t.Fatal("no level2 snapshot on reattach")
	}
}

// The recover op answers with the events from a seq the window holds,
// after its reply; else ErrNotRecoverable with the oldest seq held.
func TestRecoverOp(t *testing.T) {
	h, f, _ := recHub(t, 10, RecoveryOptions{MaxEventsPerStream: 4, MaxBytes: 1 << 30, MaxAge: time.Hour})
	c := subscriber.NewMailbox()
	s := h.NewEphemeral(c)
	h.Subscribe(s, tr)
	for i := range 6 {
		f.Publish(trade(tr, i)) // window 3..6
	}
	drain(t, c)
	reply := func(r Recovered) *subscriber.Message {
		return &subscriber.Message{Data: fmt.Appendf(nil, `{"type":"recover","from":%d,"to":%d}`, r.From, r.To), Reply: true}
	}
	r, err := h.Recover(s, tr, 4, reply)
	if err != nil || r.From != 4 || r.To != 6 {
		t.Fatalf("recover from 4: %+v %v", r, err)
	}
	got := drain(t, c)
	if got[0].Type != "recover" || !slices.Equal(seqsOf(got, tr), seqRange(4, 6)) {
		t.Fatalf("answer %+v", got)
	}
	if r, err := h.Recover(s, tr, 2, reply); err == nil || r.Oldest != 3 || r.Newest != 6 {
		t.Fatalf("recover from 2: %+v %v, want not recoverable, oldest 3", r, err)
	}
	if r, err := h.Recover(s, tr, 7, reply); err != nil || r.To != 6 {
		t.Fatalf("recover from the next seq: %+v %v, want nothing to send", r, err)
	}
	drain(t, c)
	if _, err := h.Recover(s, tr2, 1, reply); err != ErrNotSubscribed {
		t.Fatalf("unsubscribed stream: %v", err)
	}
	for i := range 10 {
		f.Publish(trade(tr, i)) // 7..16: the queue is full
	}
	if _, err := h.Recover(s, tr, 14, reply); err == nil {
		t.Fatal("recover into a full queue accepted")
	}
	if c.Queued() != 10 {
		for _, m := range drain(t, c) {
			t.Logf("%s", m.raw)
		}
		t.Fatalf("a refused recover queued something")
	}
}

// With recovery off, resumed is exactly as it has always been: no
// recovered key.
func TestRecoveryOffKeepsGaps(t *testing.T) {
	h, f, _ := recHub(t, 4, RecoveryOptions{MaxEventsPerStream: 0, MaxBytes: 1 << 30, MaxAge: time.Hour})
	c := subscriber.NewMailbox()
	s := h.NewEphemeral(c)
	h.Subscribe(s, tr)
	for i := range 6 {
		f.Publish(trade(tr, i))
	}
	drainN(t, c, 4)
	f.Publish(trade(tr, 7))
	ns := notices(drain(t, c))
	r := ns[len(ns)-1]
	if _, ok := r.Details["recovered"]; ok || gapsOf(t, r)[string(tr)] != [2]uint64{5, 6} {
		t.Fatalf("resumed %+v", r.Details)
	}
}

// On an edge the window holds the bytes forwarded as they came from the
// bus; a seq that skips (a bus gap) starts the window again, so a loss
// spanning it is a gap, never a range with a hole.
func TestRecoveryForwarded(t *testing.T) {
	h, f, _ := recHub(t, 4, bigWindow)
	c := subscriber.NewMailbox()
	s := h.NewEphemeral(c)
	h.Subscribe(s, tr)
	wire := func(seq uint64) []byte {
		ev := trade(tr, int(seq))
		ev.Seq = seq
		return ev.AppendJSON(nil)
	}
	for seq := uint64(1); seq <= 6; seq++ { // 1..4 queued, 5, 6 dropped
		f.Forward(tr, seq, wire(seq), nil)
	}
	drainN(t, c, 4)                // the dropping notice and 1..3
	f.Forward(tr, 7, wire(7), nil) // resumes: 5, 6 recovered, then 7
	got := drain(t, c)
	if r := recoveredOf(t, notices(got)[0]); r[string(tr)] != [2]uint64{5, 6} {
		t.Fatalf("recovered %v", r)
	}
	if seqs := seqsOf(got, tr); !slices.Equal(seqs, []uint64{4, 5, 6, 7}) {
		t.Fatalf("seqs %v", seqs)
	}
	for seq := uint64(8); seq <= 12; seq++ { // 8..11 queued, 12 dropped
		f.Forward(tr, seq, wire(seq), nil)
	}
	f.Forward(tr, 16, wire(16), nil) // the bus lost 13..15; 16 dropped
	drain(t, c)
	f.Forward(tr, 17, wire(17), nil)
	got = drain(t, c)
	r := notices(got)[0]
	if len(recoveredOf(t, r)) != 0 || gapsOf(t, r)[string(tr)] != [2]uint64{12, 16} {
		t.Fatalf("resumed %+v: want the gap 12..16, not a recovery across the bus gap", r.Details)
	}
}

// BenchmarkPublishOneSubscriber is the publish path for one trade to one
// subscriber, with and without a recovery window at the daemon's
// defaults: what keeping the event costs.
func BenchmarkPublishOneSubscriber(b *testing.B) {
	for _, tc := range []struct {
		name string
		o    RecoveryOptions
	}{{"window=off", RecoveryOptions{}}, {"window=default", RecoveryOptions{MaxEventsPerStream: DefaultRecoveryEvents, MaxBytes: DefaultRecoveryBytes, MaxAge: DefaultRecoveryAge}}} {
		b.Run(tc.name, func(b *testing.B) {
			h, f, _ := recHub(b, DefaultMaxQueueLen, tc.o)
			c := subscriber.NewMailbox()
			h.Subscribe(h.NewEphemeral(c), tr)
			buf := make([]*subscriber.Message, 0, 80)
			ev := trade(tr, 1)
			for range 2 * DefaultRecoveryEvents { // the window full: eviction in every publish
				f.Publish(ev)
				buf, _ = c.Drain(buf[:0], math.MaxInt, math.MaxInt)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				f.Publish(ev)
				if i%64 == 63 {
					buf, _ = c.Drain(buf[:0], math.MaxInt, math.MaxInt)
				}
			}
		})
	}
}
