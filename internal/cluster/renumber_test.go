package cluster

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

const rnL2 = venue.Stream("coinbase:level2:BTC-USD")

// rnPublisher is one ingest as the bus sees it: a feed that numbers and
// encodes its events, and the instance its messages name.
type rnPublisher struct {
	instance string
	feed     *fanout.Feed
	mu       sync.Mutex
	wire     map[uint64][]byte
}

func newRNPublisher(t *testing.T, instance string) *rnPublisher {
	t.Helper()
	p := &rnPublisher{instance: instance, wire: map[uint64][]byte{}}
	h := fanout.NewHub(subscriber.NewRegistry())
	f, err := h.AddFeed(fanout.Options{Venue: "coinbase", Tap: func(_ venue.Stream, seq uint64, data []byte) {
		p.mu.Lock()
		p.wire[seq] = bytes.Clone(data)
		p.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	p.feed = f
	return p
}

func rnLevel(p, s int64) venue.Level {
	return venue.Level{Price: decimal.New(p, 0), Size: decimal.New(s, 0)}
}

// publish numbers ev in p's feed and returns its seq.
func (p *rnPublisher) publish(ev *venue.Event) uint64 {
	ev.Stream, ev.Kind, ev.RecvTime = rnL2, venue.KindBook, time.Unix(1, 0).UTC()
	p.feed.Publish(ev)
	b, _ := p.feed.Book(rnL2)
	return b.Seq
}

// send puts p's event seq on the bus, as its Tap would, in epoch.
func (p *rnPublisher) send(t *testing.T, nc *nats.Conn, subj Subjects, epoch string, seq uint64) {
	t.Helper()
	p.mu.Lock()
	data := p.wire[seq]
	p.mu.Unlock()
	err := nc.PublishMsg(&nats.Msg{Subject: subj.Event(rnL2), Data: data,
		Header: nats.Header{HeaderEpoch: {epoch}, HeaderSeq: {strconv.FormatUint(seq, 10)}, HeaderLeader: {p.instance}}})
	if err != nil {
		t.Fatal(err)
	}
}

// rnEdge starts an edge on nc with a feed for coinbase and one subscriber
// of rnL2, whose mailbox it returns.
func rnEdge(t *testing.T, nc *nats.Conn, subj Subjects, log *slog.Logger, recoverGaps bool) (*Edge, *fanout.Feed, *subscriber.Mailbox) {
	t.Helper()
	e := NewEdge(subj, "edge", log)
	e.RecoverGaps = recoverGaps
	h := fanout.NewHub(subscriber.NewRegistry())
	f, err := h.AddFeed(fanout.Options{Venue: "coinbase", OnWanted: e.Wanted})
	if err != nil {
		t.Fatal(err)
	}
	e.Venue(f)
	if err := e.Start(nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	c := subscriber.NewMailbox()
	h.Subscribe(h.NewEphemeral(c), rnL2)
	return e, f, c
}

func rnSameBook(a, b *venue.Event) bool {
	var x, y venue.Book
	x.Apply(a)
	y.Apply(b)
	return a.Seq == b.Seq && x.Equal(&y)
}

// TestEdgeBookAcrossRenumberedFailover: a standby that takes a venue over
// continues the seqs it saw, which can be behind what the old leader
// published meanwhile (a partition kept the old leader publishing to this
// edge), in the same epoch. The edge then holds the old leader's book at
// a seq the new leader reuses for other updates: it must not apply the
// new leader's updates to that book. It announces a book_resync (reason
// failover), refuses a book of the new leader not past the last seq it
// forwarded (seq never goes back), and its book is the new leader's
// afterwards, at the same seq; the same when the first leader takes the
// venue back, its failover snapshot below the edge's seq. A snapshot of
// the same publisher at the seq of the book the edge fetched (the book's
// answer overtook the event) is no publisher change.
func TestEdgeBookAcrossRenumberedFailover(t *testing.T) {
	nc := testNATS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	subj := Subjects{Prefix: "t"}
	const epoch = "e1"
	a, b := newRNPublisher(t, "in-a~11111111"), newRNPublisher(t, "in-b~22222222")

	// The book responder answers for the publisher leading now; stale, if
	// set, is answered once first (a book the new leader had earlier).
	var leader atomic.Pointer[rnPublisher]
	var stale atomic.Pointer[venue.Event]
	leader.Store(a)
	var answered atomic.Int64
	rsub, err := nc.Subscribe(subj.Book("coinbase", "BTC-USD"), func(m *nats.Msg) {
		p := leader.Load()
		ev := stale.Swap(nil)
		if ev == nil {
			ev, _ = p.feed.Book(rnL2)
			ev.Snapshot = true
		}
		m.RespondMsg(&nats.Msg{Data: ev.AppendJSON(nil),
			Header: nats.Header{HeaderEpoch: {epoch}, HeaderSeq: {strconv.FormatUint(ev.Seq, 10)}, HeaderLeader: {p.instance}}})
		answered.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rsub.Unsubscribe() })

	// The shared start: both had seen the same 5 events.
	for _, p := range []*rnPublisher{a, b} {
		p.publish(&venue.Event{Snapshot: true, Bids: []venue.Level{rnLevel(99, 1)}, Asks: []venue.Level{rnLevel(101, 1)}})
		for i := range int64(4) {
			p.publish(&venue.Event{Bids: []venue.Level{rnLevel(90+i, 1)}})
		}
	}

	_, f, c := rnEdge(t, nc, subj, log, false)
	bookIs := func(what string, p *rnPublisher) {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, what, func() bool {
			got, ok := f.Book(rnL2)
			want, _ := p.feed.Book(rnL2)
			return ok && rnSameBook(got, want)
		})
	}
	bookIs("the edge's first book, a's", a)

	// a goes on alone (the partition): seqs 6..12 reach the edge.
	for i := range int64(7) {
		a.send(t, nc, subj, epoch, a.publish(&venue.Event{Asks: []venue.Level{rnLevel(110+i, 2)}}))
	}
	bookIs("a's book through the edge", a)
	aLast, _ := a.feed.Book(rnL2)

	// b took over having seen seq 5: its failover snapshot is seq 6, its
	// updates 7..15 are other updates than a's 7..12.
	first := b.publish(&venue.Event{Snapshot: true, Bids: []venue.Level{rnLevel(50, 3)}, Asks: []venue.Level{rnLevel(150, 3)}})
	for i := range int64(3) {
		b.publish(&venue.Event{Bids: []venue.Level{rnLevel(60+i, 4)}})
	}
	early, _ := b.feed.Book(rnL2) // seq 9: behind the edge's 12
	early.Snapshot = true
	for i := range int64(6) {
		b.publish(&venue.Event{Asks: []venue.Level{rnLevel(140+i, 5)}})
	}
	stale.Store(early)
	leader.Store(b)
	before := answered.Load()
	bLast, _ := b.feed.Book(rnL2)
	for seq := first; seq <= bLast.Seq; seq++ {
		b.send(t, nc, subj, epoch, seq)
	}
	bookIs("b's book through the edge", b)
	if answered.Load()-before < 2 {
		t.Errorf("the edge asked b's book %d times: the one behind its seq was taken", answered.Load()-before)
	}
	for i := range int64(3) {
		b.send(t, nc, subj, epoch, b.publish(&venue.Event{Bids: []venue.Level{rnLevel(70+i, 6)}}))
	}
	bookIs("b's updates applied to b's book", b)
	// b's own snapshot again, below the edge's seq (as an event the book
	// answer overtook): ignored, no resync; the next update applies.
	b.send(t, nc, subj, epoch, first)
	b.send(t, nc, subj, epoch, b.publish(&venue.Event{Bids: []venue.Level{rnLevel(75, 9)}}))
	bookIs("b's update after its old snapshot", b)

	// a takes the venue back, numbering from its own seq 12, below the
	// edge's 18 (b's): its snapshot and updates are another publisher's
	// numbering again.
	bNow, _ := b.feed.Book(rnL2)
	if aLast.Seq >= bNow.Seq {
		t.Fatalf("a's seq %d, b's %d: the case needs a behind", aLast.Seq, bNow.Seq)
	}
	leader.Store(a)
	snap := a.publish(&venue.Event{Snapshot: true, Bids: []venue.Level{rnLevel(20, 7)}, Asks: []venue.Level{rnLevel(180, 7)}})
	a.send(t, nc, subj, epoch, snap)
	for bNow.Seq >= snap {
		snap = a.publish(&venue.Event{Asks: []venue.Level{rnLevel(181, 8)}})
		a.send(t, nc, subj, epoch, snap)
	}
	bookIs("a's book again through the edge", a)

	// What the subscriber got: seq never back, and each publisher change
	// announced before the book that follows it.
	ms, _ := c.Drain(nil, math.MaxInt, math.MaxInt)
	var last uint64
	resyncs := 0
	for _, m := range ms {
		var x struct {
			Type    string         `json:"type"`
			Kind    string         `json:"kind"`
			Seq     uint64         `json:"seq"`
			Details map[string]any `json:"details"`
		}
		if err := json.Unmarshal(m.Data, &x); err != nil {
			t.Fatal(err)
		}
		if x.Type == "notice" {
			if x.Kind == "book_resync" && x.Details["reason"] == "failover" {
				resyncs++
			}
			continue
		}
		if x.Seq <= last {
			t.Errorf("seq %d after %d", x.Seq, last)
		}
		last = x.Seq
	}
	if resyncs != 2 {
		t.Errorf("%d book_resync (failover), want 2 (one per publisher change)", resyncs)
	}
}

// TestEdgeResyncDuringRecovery: a link_up's book check (a resync) that
// starts while the edge is recovering a range lost on the bus gives the
// range up: the book replaces it, the loss is announced, and the updates
// after the book are forwarded, not held until the hold overflows.
func TestEdgeResyncDuringRecovery(t *testing.T) {
	nc := testNATS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	subj := Subjects{Prefix: "t"}
	const epoch = "e1"
	a := newRNPublisher(t, "in-a~11111111")
	rsub, err := nc.Subscribe(subj.Book("coinbase", "BTC-USD"), func(m *nats.Msg) {
		ev, _ := a.feed.Book(rnL2)
		ev.Snapshot = true
		m.RespondMsg(&nats.Msg{Data: ev.AppendJSON(nil),
			Header: nats.Header{HeaderEpoch: {epoch}, HeaderSeq: {strconv.FormatUint(ev.Seq, 10)}, HeaderLeader: {a.instance}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rsub.Unsubscribe() })
	// The recover request stays unanswered until the test ends.
	asked, release := make(chan struct{}, 1), make(chan struct{})
	qsub, err := nc.Subscribe(subj.Recover("coinbase"), func(m *nats.Msg) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release); qsub.Unsubscribe() })

	a.publish(&venue.Event{Snapshot: true, Bids: []venue.Level{rnLevel(99, 1)}, Asks: []venue.Level{rnLevel(101, 1)}})
	e, f, c := rnEdge(t, nc, subj, log, true)
	bookIs := func(what string) {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, what, func() bool {
			got, ok := f.Book(rnL2)
			want, _ := a.feed.Book(rnL2)
			return ok && rnSameBook(got, want)
		})
	}
	bookIs("the edge's first book")

	// Seqs 2 and 3 are lost on the bus: 4 starts a recovery of 2..3.
	for i := range int64(3) {
		a.publish(&venue.Event{Bids: []venue.Level{rnLevel(90+i, 1)}})
	}
	a.send(t, nc, subj, epoch, 4)
	<-asked
	// The bus link comes back up meanwhile: evaluate checks the book.
	v := e.venues["coinbase"]
	v.mu.Lock()
	v.up, v.lastHB = false, time.Now()
	v.mu.Unlock()
	v.evaluate()
	bookIs("the book the link_up fetched")
	for i := range int64(3) {
		a.send(t, nc, subj, epoch, a.publish(&venue.Event{Asks: []venue.Level{rnLevel(110+i, 2)}}))
	}
	bookIs("the updates after the book forwarded")

	ms, _ := c.Drain(nil, math.MaxInt, math.MaxInt)
	gap := false
	for _, m := range ms {
		var x struct {
			Type, Kind string
			Details    map[string]any
		}
		json.Unmarshal(m.Data, &x)
		if x.Type == "notice" && x.Kind == "book_resync" && x.Details["reason"] == "bus_gap" && x.Details["first"] == float64(2) {
			gap = true
		}
	}
	if !gap {
		t.Error("no book_resync (bus_gap) from seq 2: the range given up was not announced")
	}
}
