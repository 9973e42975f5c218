package fanout

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

const (
	snap10 = venue.Stream("coinbase:book_snapshot_10_100ms:BTC-USD")
	snap0  = venue.Stream("coinbase:book_snapshot_3_0ms:BTC-USD")
	quote  = venue.Stream("coinbase:quote:BTC-USD")
	bar1s  = venue.Stream("coinbase:trade_bar_1s:BTC-USD")
)

// newClockHub is newHub on the real (in a bubble: fake) clock.
func newClockHub(t testing.TB, bound int) (*Hub, *Feed) {
	t.Helper()
	h := NewHub(subscriber.NewRegistry())
	f, err := h.AddFeed(Options{Venue: "coinbase", MaxQueueLen: bound})
	if err != nil {
		t.Fatal(err)
	}
	return h, f
}

func at(ev *venue.Event) *venue.Event { ev.RecvTime = time.Now(); return ev }

// TestDerivedStreamsLive: derived streams exist while subscribed, each with
// its own seq from 1, computed once whatever the number of subscribers;
// intervals close on a timer when no event comes.
func TestDerivedStreamsLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := newClockHub(t, 1000)
		f.Publish(at(bookSnap(l2)))
		conns := make([]*subscriber.Mailbox, 3)
		subs := make([]*subscriber.Subscriber, 3)
		for i := range conns {
			conns[i] = subscriber.NewMailbox()
			s := h.NewEphemeral(conns[i])
			subs[i] = s
			for _, st := range []venue.Stream{snap10, quote, bar1s} {
				if err := h.Subscribe(s, st); err != nil {
					t.Fatal(err)
				}
			}
		}
		// A quote at once from the book; the snapshot at the interval's end.
		for i := 1; i <= 5; i++ {
			time.Sleep(10 * time.Millisecond)
			f.Publish(at(bookUpd(l2, i)))
			f.Publish(at(trade(tr, i)))
		}
		time.Sleep(time.Second) // no events: the timers close the intervals
		synctest.Wait()
		var first []msg
		for i, c := range conns {
			ms := drain(t, c)
			seqs := map[string][]uint64{}
			for _, m := range ms {
				seqs[m.Stream] = append(seqs[m.Stream], m.Seq)
			}
			if len(seqs[string(snap10)]) < 1 || len(seqs[string(quote)]) < 1 || len(seqs[string(bar1s)]) != 1 {
				t.Fatalf("conn %d: seqs %v", i, seqs)
			}
			for st, ss := range seqs {
				for j, s := range ss {
					if s != uint64(j+1) {
						t.Fatalf("conn %d: %s seqs %v, want 1, 2, …", i, st, ss)
					}
				}
			}
			if i == 0 {
				first = ms
			} else if len(ms) != len(first) {
				t.Fatalf("conn %d got %d messages, conn 0 %d", i, len(ms), len(first))
			} else {
				for j := range ms {
					if string(ms[j].raw) != string(first[j].raw) {
						t.Fatalf("conn %d message %d differs", i, j)
					}
				}
			}
		}
		// Encoded once: every subscriber holds the same bytes.
		if got := f.Counters().Published.Load(); got == 0 {
			t.Fatal("nothing published")
		}
		// The bar counts the five trades.
		for _, m := range first {
			if m.Stream == string(bar1s) {
				var b struct {
					Trades int    `json:"trades"`
					Volume string `json:"volume"`
				}
				json.Unmarshal(m.raw, &b)
				if b.Trades != 5 || b.Volume != "5" {
					t.Fatalf("bar %s", m.raw)
				}
			}
		}
		// Unsubscribed by all, the derived stream goes; again, it restarts at 1.
		for i, c := range conns {
			h.Detach(subs[i], c)
		}
		f.mu.Lock()
		_, live := f.streams[snap10]
		nd := len(f.streams[l2].derived)
		f.mu.Unlock()
		if live || nd != 0 {
			t.Fatalf("derived stream still there (%v, %d) with no subscriber", live, nd)
		}
	})
}

// TestConflatedStalledSubscriber: a subscriber that stops reading keeps at
// most one message per conflated stream; after it reads again, its newest
// message is the current state, and it got no dropping notice for them.
// A raw stream on the same connection keeps drop-newest.
func TestConflatedStalledSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 8
		h, f := newClockHub(t, bound)
		f.Publish(at(bookSnap(l2)))
		onlyC := subscriber.NewMailbox() // conflated streams only
		mixed := subscriber.NewMailbox() // and raw level2
		so, sm := h.NewEphemeral(onlyC), h.NewEphemeral(mixed)
		for _, st := range []venue.Stream{snap10, snap0, quote} {
			h.Subscribe(so, st)
			h.Subscribe(sm, st)
		}
		h.Subscribe(sm, l2)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range 20000 {
			ev := &venue.Event{Kind: venue.KindBook, Stream: l2, RecvTime: time.Now(),
				Bids: []venue.Level{lvl(90+int64(r.IntN(10)), int64(r.IntN(3)))}, Asks: []venue.Level{lvl(101+int64(r.IntN(10)), int64(r.IntN(3)))}}
			f.Publish(ev)
			if i%10 == 0 {
				time.Sleep(7 * time.Millisecond)
			}
			if n := onlyC.Len(); n > 3 {
				t.Fatalf("event %d: conflated-only queue holds %d, want at most 3", i, n)
			}
			if n := mixed.Len(); n > bound+3 {
				t.Fatalf("event %d: mixed queue holds %d, want at most bound+3", i, n)
			}
		}
		time.Sleep(time.Second)
		synctest.Wait()
		book, _ := f.Book(l2)
		for name, c := range map[string]*subscriber.Mailbox{"conflated only": onlyC, "mixed": mixed} {
			newest := map[string]msg{}
			for _, m := range drain(t, c) {
				if m.Type == "notice" && m.Kind == "dropping" && name == "conflated only" {
					t.Fatalf("%s: a dropping notice: %s", name, m.raw)
				}
				if m.Type == "notice" && m.Kind == "resumed" {
					for st := range m.Details["gaps"].(map[string]any) {
						if st != string(l2) {
							t.Fatalf("%s: a gap on %s", name, st)
						}
					}
				}
				if m.Stream != "" && m.Type != "notice" {
					newest[m.Stream] = m
				}
			}
			for _, st := range []venue.Stream{snap10, snap0, quote} {
				m, ok := newest[string(st)]
				if !ok {
					t.Fatalf("%s: nothing of %s", name, st)
				}
				var ev venue.Event
				if err := json.Unmarshal(m.raw, &ev); err != nil {
					t.Fatal(err)
				}
				d, _ := st.Channel().Derivation()
				if st == quote {
					if !ev.Bid.Equal(book.Bids[0].Price) || !ev.BidSize.Equal(book.Bids[0].Size) || !ev.Ask.Equal(book.Asks[0].Price) || !ev.AskSize.Equal(book.Asks[0].Size) {
						t.Fatalf("%s: newest quote %s is not the top of the book", name, m.raw)
					}
					continue
				}
				if !eqTop(ev.Bids, book.Bids, d.Depth) || !eqTop(ev.Asks, book.Asks, d.Depth) {
					t.Fatalf("%s: newest %s %s is not the current top", name, st, m.raw)
				}
			}
		}
		if f.Counters().Replaced.Load() == 0 || onlyC.Replaced() == 0 {
			t.Fatal("no replaced message counted")
		}
		h.Detach(so, onlyC)
		h.Detach(sm, mixed)
	})
}

func eqTop(got, book []venue.Level, d int) bool {
	want := book[:min(d, len(book))]
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !got[i].Price.Equal(want[i].Price) || !got[i].Size.Equal(want[i].Size) {
			return false
		}
	}
	return true
}

// TestDerivedResync: a book_resync of the source reaches the subscribers of
// its derived streams, naming each; a link drop marks the open bar.
func TestDerivedResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := newClockHub(t, 100)
		f.Publish(at(bookSnap(l2)))
		c := subscriber.NewMailbox()
		s := h.NewEphemeral(c)
		h.Subscribe(s, quote)
		h.Subscribe(s, bar1s)
		f.Publish(at(trade(tr, 1)))
		f.Notice(notice.Must(notice.BookResync, "coinbase", string(l2), time.Now(), "gap", map[string]any{"reason": "gap"}))
		f.Notice(notice.Must(notice.LinkDown, "coinbase", "", time.Now(), "down", map[string]any{"reason": "eof"}))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		var resync, gapBar bool
		for _, m := range drain(t, c) {
			if m.Kind == "book_resync" && m.Stream == string(quote) {
				resync = true
				if err := notice.CheckDetails(notice.Notice{Kind: notice.BookResync, Details: m.Details}); err != nil {
					t.Fatal(err)
				}
			}
			if m.Stream == string(bar1s) {
				var b struct{ Gap bool }
				json.Unmarshal(m.raw, &b)
				gapBar = b.Gap
			}
		}
		if !resync || !gapBar {
			t.Fatalf("resync notice %v, bar marked %v", resync, gapBar)
		}
		h.Detach(s, c)
	})
}

// TestDerivedTimerSpeed: in a replay paced at Speed N, an open interval
// with no later event closes N times sooner in real time than in the
// capture's.
func TestDerivedTimerSpeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHub(subscriber.NewRegistry())
		f, err := h.AddFeed(Options{Venue: "coinbase", MaxQueueLen: 100, Speed: 10})
		if err != nil {
			t.Fatal(err)
		}
		c := subscriber.NewMailbox()
		if err := h.Subscribe(h.NewEphemeral(c), bar1s); err != nil {
			t.Fatal(err)
		}
		capture := time.Date(2026, 11, 30, 6, 0, 0, 100e6, time.UTC) // 900 ms before its interval ends
		ev := trade(tr, 1)
		ev.RecvTime = capture
		f.Publish(ev)
		time.Sleep(80 * time.Millisecond)
		synctest.Wait()
		if n := c.Len(); n != 0 {
			t.Fatalf("%d messages after 80 ms at speed 10, want none before 90 ms", n)
		}
		time.Sleep(20 * time.Millisecond)
		synctest.Wait()
		if ms := drain(t, c); len(ms) != 1 || ms[0].Type != "trade_bar" {
			t.Fatalf("after 100 ms at speed 10: %v, want the bar (900 ms of capture time)", ms)
		}
	})
}

// TestDerivedOneReadPerEvent: however many derived streams of one source
// are subscribed, of whatever depths and intervals, each source event
// reads the book's top at most twice (closing intervals, applying it),
// and every stream still gets its own depth.
func TestDerivedOneReadPerEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := newClockHub(t, 1<<20)
		h.SetDerivedLimits(DerivedLimits{PerToken: 1000, PerSource: 1000, Weight: 1 << 20})
		f.Publish(at(bookSnap(l2)))
		c := subscriber.NewMailbox()
		s := h.NewEphemeral(c)
		var ids []venue.Stream
		for d := 1; d <= 40; d++ {
			ids = append(ids, venue.Stream(fmt.Sprintf("coinbase:book_snapshot_%d_0ms:BTC-USD", d)))
			ids = append(ids, venue.Stream(fmt.Sprintf("coinbase:book_snapshot_%d_%dms:BTC-USD", d, 10*(1+d%4))))
		}
		ids = append(ids, quote)
		for _, id := range ids {
			if err := h.Subscribe(s, id); err != nil {
				t.Fatal(err)
			}
		}
		before := f.Counters().DerivedReads.Load()
		const events = 200
		for i := range events {
			time.Sleep(3 * time.Millisecond)
			ev := at(bookUpd(l2, i))
			ev.Bids = append(ev.Bids, lvl(99, int64(1+i%7))) // the best bid changes: every stream is touched
			f.Publish(ev)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if reads := f.Counters().DerivedReads.Load() - before; reads > 2*events+10 {
			t.Fatalf("%d reads of the book for %d events and %d derived streams", reads, events, len(ids))
		}
		book, _ := f.Book(l2)
		newest := map[string]msg{}
		for _, m := range drain(t, c) {
			newest[m.Stream] = m
		}
		for _, id := range ids[:len(ids)-1] {
			var ev venue.Event
			if err := json.Unmarshal(newest[string(id)].raw, &ev); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			d, _ := id.Channel().Derivation()
			if !eqTop(ev.Bids, book.Bids, d.Depth) || !eqTop(ev.Asks, book.Asks, d.Depth) {
				t.Fatalf("%s: newest %s is not the current top %d", id, newest[string(id)].raw, d.Depth)
			}
		}
		h.Detach(s, c)
	})
}

// TestDerivedDetachedNamedNotComputed: a conflated derived stream held only
// by a detached named subscriber costs nothing per source event; when a
// connection attaches again it is told what it missed and gets the
// stream's current state at once.
func TestDerivedDetachedNamedNotComputed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := newClockHub(t, 1000)
		f.Publish(at(bookSnap(l2)))
		c := subscriber.NewMailbox()
		s, _, err := h.Attach("desk", "tok", c, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range []venue.Stream{snap0, snap10, quote, l2} {
			h.Subscribe(s, st)
		}
		f.Publish(at(bookUpd(l2, 1)))
		h.Detach(s, c)
		reads, pub := f.Counters().DerivedReads.Load(), f.Counters().Published.Load()
		for i := range 100 {
			time.Sleep(3 * time.Millisecond)
			f.Publish(at(bookUpd(l2, 2+i)))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if r, p := f.Counters().DerivedReads.Load()-reads, f.Counters().Published.Load()-pub; r != 0 || p != 100 {
			t.Fatalf("detached: %d reads of the book, %d events published for 100 source events; want 0 and 100", r, p)
		}
		c2 := subscriber.NewMailbox()
		if _, _, err := h.Attach("desk", "tok", c2, nil); err != nil {
			t.Fatal(err)
		}
		book, _ := f.Book(l2)
		got := map[string]msg{}
		var resumed bool
		for _, m := range drain(t, c2) {
			if m.Kind == "resumed" {
				resumed = true
			}
			got[m.Stream] = m
		}
		if !resumed {
			t.Fatal("no resumed notice on reattach")
		}
		for _, st := range []venue.Stream{snap0, snap10} {
			var ev venue.Event
			if err := json.Unmarshal(got[string(st)].raw, &ev); err != nil {
				t.Fatalf("%s: nothing on reattach (%v)", st, err)
			}
			d, _ := st.Channel().Derivation()
			if !eqTop(ev.Bids, book.Bids, d.Depth) || !eqTop(ev.Asks, book.Asks, d.Depth) {
				t.Fatalf("%s on reattach: %s, not the current top", st, got[string(st)].raw)
			}
		}
		var q venue.Event
		json.Unmarshal(got[string(quote)].raw, &q)
		if !q.Bid.Equal(book.Bids[0].Price) || !q.Ask.Equal(book.Asks[0].Price) {
			t.Fatalf("quote on reattach: %s", got[string(quote)].raw)
		}
		// Computed again: the next change reaches the new connection.
		r := f.Counters().DerivedReads.Load()
		ev := at(bookUpd(l2, 500))
		ev.Bids = []venue.Level{lvl(99, 9)}
		f.Publish(ev)
		if f.Counters().DerivedReads.Load() == r {
			t.Fatal("not computed after reattach")
		}
		h.Forget("desk")
	})
}
