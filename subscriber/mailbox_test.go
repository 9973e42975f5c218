package subscriber

import (
	"fmt"
	"math"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func msg(s string) *Message { return &Message{Data: []byte(s)} }

func TestOfferBoundIsInclusive(t *testing.T) {
	c := NewMailbox()
	for i := range 3 {
		if n, r := c.Offer(msg("x"), 3, 0); r != Enqueued || n != i {
			t.Fatalf("offer %d: (%d, %v), want (%d, Enqueued)", i, n, r, i)
		}
	}
	if n, r := c.Offer(msg("x"), 3, 0); r != Full || n != 3 {
		t.Fatalf("offer at the bound: (%d, %v), want (3, Full)", n, r)
	}
	if c.Len() != 3 {
		t.Fatalf("Len %d, want 3", c.Len())
	}
}

func TestOfferByteBound(t *testing.T) {
	c := NewMailbox()
	c.Offer(msg("0123456789"), 100, 15)
	if _, r := c.Offer(msg("0123456789"), 100, 15); r != Enqueued {
		t.Fatalf("second offer under the byte bound: %v", r)
	}
	if _, r := c.Offer(msg("x"), 100, 15); r != Full {
		t.Fatalf("offer past the byte bound: %v, want Full", r)
	}
	if c.Bytes() != 20 {
		t.Fatalf("Bytes %d, want 20", c.Bytes())
	}
}

func TestDrainNoticesFirstAndInOrder(t *testing.T) {
	c := NewMailbox()
	c.Offer(msg("d1"), 10, 0)
	c.Offer(msg("d2"), 10, 0)
	c.Notify(msg("n1"))
	c.Force(msg("d3"))
	c.Notify(msg("n2"))
	got, nn := c.Drain(nil, math.MaxInt, math.MaxInt)
	want := []string{"n1", "n2", "d1", "d2", "d3"}
	if nn != 2 || len(got) != len(want) {
		t.Fatalf("drained %d (%d notices), want %v", len(got), nn, want)
	}
	for i, m := range got {
		if string(m.Data) != want[i] {
			t.Fatalf("message %d = %s, want %s", i, m.Data, want[i])
		}
	}
	if c.Len() != 0 || c.Bytes() != 0 {
		t.Fatalf("after drain Len %d Bytes %d", c.Len(), c.Bytes())
	}
}

func TestDrainBatchLimits(t *testing.T) {
	c := NewMailbox()
	for range 100 {
		c.Offer(msg("0123456789"), 1000, 0)
	}
	got, _ := c.Drain(nil, 30, math.MaxInt)
	if len(got) != 30 || c.Len() != 70 {
		t.Fatalf("drained %d leaving %d, want 30 leaving 70", len(got), c.Len())
	}
	got, _ = c.Drain(nil, math.MaxInt, 55)
	if len(got) != 5 {
		t.Fatalf("byte-limited drain took %d, want 5", len(got))
	}
	got, _ = c.Drain(nil, math.MaxInt, 1)
	if len(got) != 1 {
		t.Fatalf("a drain always takes one message when one is queued; took %d", len(got))
	}
}

func TestRingWrapsAndGrows(t *testing.T) {
	c := NewMailbox()
	next, want := 0, 0
	for round := range 50 {
		for range round % 37 {
			c.Offer(&Message{Seq: uint64(next)}, 1<<20, 0)
			next++
		}
		got, _ := c.Drain(nil, round%11+1, math.MaxInt)
		for _, m := range got {
			if int(m.Seq) != want {
				t.Fatalf("got seq %d, want %d", m.Seq, want)
			}
			want++
		}
	}
	got, _ := c.Drain(nil, math.MaxInt, math.MaxInt)
	for _, m := range got {
		if int(m.Seq) != want {
			t.Fatalf("got seq %d, want %d", m.Seq, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("drained %d of %d", want, next)
	}
}

func TestReadySignalsOnTransition(t *testing.T) {
	c := NewMailbox()
	c.Offer(msg("a"), 10, 0)
	c.Offer(msg("b"), 10, 0)
	select {
	case <-c.Ready():
	default:
		t.Fatal("no signal after the first message")
	}
	select {
	case <-c.Ready():
		t.Fatal("second signal without the writer seeing the queue empty")
	default:
	}
	c.Drain(nil, math.MaxInt, math.MaxInt)
	c.Notify(msg("n"))
	select {
	case <-c.Ready():
	default:
		t.Fatal("no signal for a notice on an empty queue")
	}
}

func TestCloseReturnsUnsentAndRefuses(t *testing.T) {
	c := NewMailbox()
	c.Offer(&Message{Stream: "s", Seq: 1}, 10, 0)
	c.Offer(&Message{Stream: "s", Seq: 2}, 10, 0)
	c.Drain(nil, 1, math.MaxInt)
	unsent := c.Close()
	if len(unsent) != 1 || unsent[0].Seq != 2 {
		t.Fatalf("unsent %v, want seq 2", unsent)
	}
	if _, r := c.Offer(msg("x"), 10, 0); r != Closed {
		t.Fatalf("offer after close: %v", r)
	}
	if c.Notify(msg("x")) || c.Force(msg("x")) {
		t.Fatal("notify/force after close accepted")
	}
	if c.Close() != nil {
		t.Fatal("second Close returned messages")
	}
}

func TestAllocsPerOffer(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	c := NewMailbox()
	m := msg("x")
	for range 64 {
		c.Offer(m, 1000, 0)
	}
	c.Drain(nil, math.MaxInt, math.MaxInt)
	buf := make([]*Message, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		for range 32 {
			c.Offer(m, 1000, 0)
		}
		buf, _ = c.Drain(buf[:0], math.MaxInt, math.MaxInt)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 32 offers and a drain, want 0", allocs)
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	e := r.NewEphemeral(NewMailbox(), "")
	c := NewMailbox()
	n, existed, err := r.Attach("desk.1", "", c, nil)
	if err != nil || existed || n.Kind() != Named || e.Kind() != Ephemeral {
		t.Fatalf("attach: %v existed=%v", err, existed)
	}
	if eph, named := r.Count(); eph != 1 || named != 1 {
		t.Fatalf("count %d/%d", eph, named)
	}
	c2 := NewMailbox()
	var prev *Mailbox
	if _, existed, _ := r.Attach("desk.1", "", c2, func(_ *Subscriber, p *Mailbox) { prev = p }); !existed || prev != c {
		t.Fatalf("takeover: existed=%v prev=%p want %p", existed, prev, c)
	}
	if r.Detach(n, c) {
		t.Fatal("detaching a replaced connection detached the new one")
	}
	if n.Resolve() != c2 {
		t.Fatal("new connection lost")
	}
	r.Detach(e, e.Mailbox())
	if eph, _ := r.Count(); eph != 0 {
		t.Fatal("ephemeral left in registry")
	}
	for _, bad := range []string{"", "has space", "x/y", string(make([]byte, 65))} {
		if _, _, err := r.Attach(bad, "", NewMailbox(), nil); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}

// TestDrainBoundsNotices: a drain stays within its byte bound (separators
// counted) for notices as for data, unless it is one message, and takes
// no data while a notice is left.
func TestDrainBoundsNotices(t *testing.T) {
	c := NewMailbox()
	for range 10 {
		c.Notify(msg("0123456789")) // 10 bytes each
	}
	c.Offer(msg("d"), 10, 0)
	got, nn := c.Drain(nil, math.MaxInt, 32) // 10+1+10+1+10 = 32
	if len(got) != 3 || nn != 3 {
		t.Fatalf("drained %d (%d notices), want 3 notices", len(got), nn)
	}
	got, nn = c.Drain(nil, 2, math.MaxInt)
	if len(got) != 2 || nn != 2 {
		t.Fatalf("count-bounded drain took %d (%d notices), want 2 notices", len(got), nn)
	}
	got, nn = c.Drain(nil, math.MaxInt, 1)
	if len(got) != 1 || nn != 1 {
		t.Fatal("a drain always takes one message")
	}
	got, nn = c.Drain(nil, math.MaxInt, math.MaxInt)
	if len(got) != 5 || nn != 4 || string(got[4].Data) != "d" {
		t.Fatalf("last drain took %d (%d notices), want the 4 notices left, then the data", len(got), nn)
	}
}

// TestReplyBound: replies are refused past their byte bound until a drain
// takes them; notices are not bounded.
func TestReplyBound(t *testing.T) {
	c := NewMailbox()
	for i := range 3 {
		if r := c.Reply(msg("0123456789"), 25); r != Enqueued {
			t.Fatalf("reply %d: %v", i, r)
		}
	}
	if r := c.Reply(msg("x"), 25); r != Full {
		t.Fatalf("reply past the bound: %v, want Full", r)
	}
	if !c.Notify(msg("n")) {
		t.Fatal("notice refused")
	}
	c.Drain(nil, 2, math.MaxInt) // two replies leave
	if r := c.Reply(msg("0123456789"), 25); r != Enqueued {
		t.Fatalf("reply after a drain: %v", r)
	}
	c.Close()
	if r := c.Reply(msg("x"), 25); r != Closed {
		t.Fatalf("reply after close: %v", r)
	}
}

// TestConflate: a conflated stream holds at most one message on the queue,
// replaced in place while unsent, past the bound; raw offers keep their
// bound and order.
func TestConflate(t *testing.T) {
	c := NewMailbox()
	cmsg := func(st string, seq uint64, conflate bool) *Message {
		return &Message{Stream: st, Seq: seq, Conflate: conflate, Data: []byte(fmt.Sprintf("%s/%d", st, seq))}
	}
	if _, r := c.Offer(cmsg("raw", 1, false), 2, 0); r != Enqueued {
		t.Fatal(r)
	}
	if r := c.Conflate(cmsg("q", 1, true)); r != Enqueued {
		t.Fatal(r)
	}
	if _, r := c.Offer(cmsg("raw", 2, false), 2, 0); r != Full {
		t.Fatalf("raw offer past the bound: %v", r)
	}
	for seq := uint64(2); seq <= 1000; seq++ {
		if r := c.Conflate(cmsg("q", seq, true)); r != Replaced {
			t.Fatalf("seq %d: %v, want Replaced", seq, r)
		}
		if r := c.Conflate(cmsg("s", seq, true)); seq > 2 && r != Replaced {
			t.Fatalf("seq %d: %v, want Replaced", seq, r)
		}
	}
	if n := c.Len(); n != 3 {
		t.Fatalf("queue holds %d, want 3 (bounded)", n)
	}
	if got := c.Replaced(); got != 999+998 {
		t.Fatalf("Replaced %d", got)
	}
	if b := c.Bytes(); b != len("raw/1")+len("q/1000")+len("s/1000") {
		t.Fatalf("Bytes %d", b)
	}
	got, _ := c.Drain(nil, 100, 1<<20)
	var names []string
	for _, m := range got {
		names = append(names, string(m.Data))
	}
	if fmt.Sprint(names) != "[raw/1 q/1000 s/1000]" {
		t.Fatalf("drained %v", names)
	}
	// After a drain, the next one queues anew, behind raw messages.
	c.Offer(cmsg("raw", 3, false), 10, 0)
	if r := c.Conflate(cmsg("q", 1001, true)); r != Enqueued {
		t.Fatal(r)
	}
	c.Offer(cmsg("raw", 4, false), 10, 0)
	c.Conflate(cmsg("q", 1002, true))
	got, _ = c.Drain(nil, 100, 1<<20)
	names = names[:0]
	for _, m := range got {
		names = append(names, string(m.Data))
	}
	if fmt.Sprint(names) != "[raw/3 q/1002 raw/4]" {
		t.Fatalf("drained %v", names)
	}
	// Across ring growth and wrap-around, the slot stays right.
	for i := range 100 {
		c.Offer(cmsg("raw", uint64(i), false), 1000, 0)
		c.Conflate(cmsg("q", uint64(2000+i), true))
		if i%7 == 0 {
			c.Drain(nil, 3, 1<<20)
		}
	}
	got, _ = c.Drain(nil, 1000, 1<<20)
	last := got[len(got)-1]
	var qs int
	for _, m := range got {
		if m.Stream == "q" {
			qs++
			if m.Seq != 2099 {
				t.Fatalf("queued q is seq %d, want the newest 2099", m.Seq)
			}
		}
	}
	if qs != 1 || last.Stream != "raw" {
		t.Fatalf("%d q messages queued, last %s", qs, last.Data)
	}
	c.Close()
	if r := c.Conflate(cmsg("q", 1, true)); r != Closed {
		t.Fatal(r)
	}
}

// TestRecover: each batch is queued whole or not at all, and only if the
// queue still takes one more message with it; the head goes on the notice
// queue, ahead of them, built with what fit.
func TestRecover(t *testing.T) {
	c := NewMailbox()
	c.Offer(msg("q"), 6, 0)
	a := []*Message{msg("a1"), msg("a2")}
	b := []*Message{msg("b1"), msg("b2"), msg("b3")} // 1+2+3 = 6: no room left after it
	d := []*Message{msg("d1"), msg("d2")}
	var seen string
	ok := c.Recover([][]*Message{a, b, d}, 6, 0, func(ok []bool, queued int) *Message {
		seen = fmt.Sprint(ok, queued)
		return msg("head")
	})
	if fmt.Sprint(ok) != "[true false true]" || seen != "[true false true] 1" {
		t.Fatalf("ok %v, head saw %v", ok, seen)
	}
	if _, r := c.Offer(msg("next"), 6, 0); r != Enqueued {
		t.Fatal("no room for the message after a recovery")
	}
	got, nn := c.Drain(nil, 100, math.MaxInt)
	var names []string
	for _, m := range got {
		names = append(names, string(m.Data))
	}
	if nn != 1 || fmt.Sprint(names) != "[head q a1 a2 d1 d2 next]" {
		t.Fatalf("drained %v (%d notices)", names, nn)
	}
	// The byte bound: the bytes with the batch must stay under it.
	if ok := c.Recover([][]*Message{{msg("xxxx"), msg("yyyy")}, {msg("zzz")}}, 100, 8, nil); fmt.Sprint(ok) != "[false true]" {
		t.Fatalf("byte bound: %v", ok)
	}
	c.Close()
	if c.Recover([][]*Message{a}, 5, 0, nil) != nil {
		t.Fatal("recover on a closed mailbox")
	}
}

// TestHoldDefersDrain: while held, Drain takes nothing, whatever is
// queued; Release signals Ready and the queues drain in order.
func TestHoldDefersDrain(t *testing.T) {
	c := NewMailbox()
	c.Hold()
	c.Reply(&Message{Data: []byte("ack")}, 1<<20)
	<-c.Ready() // the reply signalled; the writer finds nothing to take
	if got, _ := c.Drain(nil, 10, 1<<20); len(got) != 0 {
		t.Fatalf("held: drained %d messages", len(got))
	}
	c.Offer(&Message{Data: []byte("snapshot")}, 10, 0)
	c.Release()
	select {
	case <-c.Ready():
	default:
		t.Fatal("Release with messages queued did not signal Ready")
	}
	got, nn := c.Drain(nil, 10, 1<<20)
	if len(got) != 2 || nn != 1 || string(got[0].Data) != "ack" || string(got[1].Data) != "snapshot" {
		t.Fatalf("after Release: %d messages, %d notices", len(got), nn)
	}
	c.Hold()
	c.Release()
	select {
	case <-c.Ready():
		t.Fatal("Release of empty queues signalled Ready")
	default:
	}
}
