package fanout

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanoutd/fanoutd/derive"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// Options configure one venue's Feed.
type Options struct {
	// Venue is the venue's name; every stream of the feed starts with it.
	Venue string
	// MaxQueueLen bounds each subscriber's data queue, in messages.
	// Validate says what is refused; 0 here means
	// DefaultMaxQueueLen.
	MaxQueueLen int
	// MaxQueueBytes bounds each subscriber's data queue in bytes; 0 means
	// no byte bound.
	MaxQueueBytes int
	// Now is the clock for notices and publish times. Defaults to
	// time.Now.
	Now func() time.Time
	// Speed is how many seconds of the events' receive time pass per
	// real second (a paced replay's --speed): a derived stream's interval
	// closes that much sooner. 0 means 1.
	Speed float64
	// SnapshotClaim, if set, returns the claim check of the newest stored
	// snapshot of a level2 stream ({"url":…,"stream":…,"seq":…}); a
	// resumed notice carries one per stream it resends in details.claims.
	// It is called with the feed's lock held: it must not block or call
	// back into the feed.
	SnapshotClaim func(st venue.Stream) (map[string]any, bool)
	// Tap, if set, is handed every event Publish encodes: its stream, the
	// seq Publish assigned and its wire form. It is called with the feed's
	// lock held, in seq order per stream; data is the feed's encoding
	// buffer, valid only during the call (copy it to keep it). It must not
	// block or call back into the feed. An ingest node's bus publisher is
	// one (package cluster).
	Tap func(st venue.Stream, seq uint64, data []byte)
	// OnWanted, if set, is called when a raw stream gains its first
	// subscriber or derived stream (wanted true) and when it loses its last
	// (false); a named subscriber with no connection still holds its
	// streams. A derived stream is never reported: its source is. It is called with the
	// feed's lock held: it must not block or call back into the feed. An
	// edge node subscribes the stream's bus subject with it.
	OnWanted func(st venue.Stream, wanted bool)
	// KeepWindows keeps the recovery window of every raw stream published,
	// with or without subscribers here: an ingest node, whose edges
	// recover their subscribers' ranges from it (Range).
	KeepWindows bool
}

// Counters are a feed's running totals, for metrics. All fields are read
// with atomic loads and only ever grow, except Dropping.
type Counters struct {
	Published atomic.Uint64                  // events published
	Delivered atomic.Uint64                  // event deliveries queued to subscribers
	Dropped   atomic.Uint64                  // deliveries dropped at a subscriber's bound
	Missed    atomic.Uint64                  // deliveries skipped while a named subscriber was detached
	Replaced  atomic.Uint64                  // conflated messages that replaced an unsent older one
	Dropping  atomic.Int64                   // subscribers dropping now
	Notices   [notice.NumKinds]atomic.Uint64 // by notice.Kind

	// DerivedReads counts reads of a source book's top for its derived
	// streams: at most two per source event (closing intervals, applying
	// the event), whatever the number of derived streams (derive.Set).
	DerivedReads atomic.Uint64
}

// Feed delivers one venue's events to the subscribers of their streams.
// Build one with Hub.AddFeed. A Feed is a venue.Sink.
type Feed struct {
	venue    string
	maxLen   int
	maxBytes int
	now      func() time.Time
	speed    float64                                   // Options.Speed
	claim    func(venue.Stream) (map[string]any, bool) // Options.SnapshotClaim
	tap      func(venue.Stream, uint64, []byte)        // Options.Tap
	onWanted func(venue.Stream, bool)                  // Options.OnWanted
	keepAll  bool                                      // Options.KeepWindows
	counters Counters
	rec      *recoveryBudget // the hub's, nil: recovery off
	rc       RecoveryCounters

	mu      sync.Mutex // protects the fields below; see the package doc for lock order
	streams map[venue.Stream]*stream
	entries map[*subscriber.Subscriber]*entry
	scratch []byte // encoding buffer, reused
}

var _ venue.Sink = (*Feed)(nil)

// stream is one stream's state in its feed. Guarded by Feed.mu.
type stream struct {
	id       venue.Stream
	level2   bool
	seq      uint64      // last seq assigned
	book     *venue.Book // level2: the book after bookSeq
	bookSeq  uint64      // seq the book reflects
	hasBook  bool        // a snapshot has been applied
	venueSeq int64       // VenueSeq of the last book event
	recv     time.Time   // RecvTime of the last event
	vtime    time.Time   // VenueTime of the last event
	snap     *subscriber.Message
	subs     []*entry
	win      window // recovery.go

	// A source stream's derived streams that have subscribers, and the
	// Set that computes them (reads: its Reads already counted); the
	// timer closes an interval no source event closes, at timerAt.
	derived []*stream
	set     *derive.Set
	reads   uint64
	timer   *time.Timer
	timerAt time.Time
	// A derived stream's source (nil for a raw stream) and newest message
	// (a conflated stream's current state, for new subscribers); paused:
	// a conflated stream none of whose subscribers has a connection is
	// not computed (see settle).
	source   *stream
	conflate bool
	paused   bool
	emit     func(derive.Out)
	last     *subscriber.Message
}

// entry is one subscriber's state in one feed. Guarded by Feed.mu.
type entry struct {
	sub      *subscriber.Subscriber
	conn     *subscriber.Mailbox // the connection this state was observed on
	streams  []*stream
	dropping bool
	dropped  uint64 // events lost since the last resumed notice
	total    uint64 // events lost, ever (for operators)
	replaced uint64 // conflated messages replaced unsent, ever (for operators)
	gaps     []gap  // per stream, the seqs lost since the last resumed notice
	away     bool   // a named subscriber found detached: its loss is in marks (away.go)
	marks    []mark // while away, each stream's last seq before it left
}

type gap struct {
	st          *stream
	first, last uint64
}

func newFeed(o Options) *Feed {
	if o.MaxQueueLen <= 0 {
		o.MaxQueueLen = DefaultMaxQueueLen
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Speed <= 0 {
		o.Speed = 1
	}
	return &Feed{venue: o.Venue, maxLen: o.MaxQueueLen, maxBytes: o.MaxQueueBytes, now: o.Now, speed: o.Speed, claim: o.SnapshotClaim,
		tap: o.Tap, onWanted: o.OnWanted, keepAll: o.KeepWindows,
		streams: map[venue.Stream]*stream{}, entries: map[*subscriber.Subscriber]*entry{}}
}

// Venue returns the feed's venue.
func (f *Feed) Venue() string { return f.venue }

// Bounds returns the queue bounds the feed enforces.
func (f *Feed) Bounds() (maxLen, maxBytes int) { return f.maxLen, f.maxBytes }

// Counters returns the feed's running totals.
func (f *Feed) Counters() *Counters { return &f.counters }

// stream returns the state of id, creating it. f.mu must be held.
func (f *Feed) stream(id venue.Stream) *stream {
	st := f.streams[id]
	if st == nil {
		st = &stream{id: id, level2: id.Channel() == venue.Level2}
		if st.level2 {
			st.book = &venue.Book{}
		}
		f.streams[id] = st
	}
	return st
}

// Wanted reports whether any subscriber, attached or not, is subscribed
// to a stream of symbol (on any channel).
func (f *Feed) Wanted(symbol string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, st := range f.streams {
		if len(st.subs) > 0 && id.Symbol() == symbol {
			return true
		}
	}
	return false
}

// Forget deletes the state (seq, book) of the streams of symbol that no
// subscriber holds, once the venue no longer sends it: a stream subscribed
// again afterwards starts again at seq 1.
func (f *Feed) Forget(symbol string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, st := range f.streams {
		if !st.wanted() && id.Symbol() == symbol {
			f.unhold(st)
			delete(f.streams, id)
		}
	}
}

// Event publishes ev: it is the venue.Sink method. See Publish.
func (f *Feed) Event(ev *venue.Event) { f.Publish(ev) }

// Publish assigns ev the next seq of its stream (overwriting ev.Seq),
// encodes it once and delivers it to every subscriber of the stream. It reads
// ev only during the call (venue.Sink): the book keeps its levels, not ev. Events of another venue are ignored and
// reported as false.
func (f *Feed) Publish(ev *venue.Event) bool {
	if ev.Stream.Venue() != f.venue {
		return false
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stream(ev.Stream)
	if st.set != nil {
		st.set.Advance(ev.RecvTime, st.book)
	}
	st.seq++
	ev.Seq = st.seq
	f.scratch = ev.AppendJSON(f.scratch[:0])
	if f.tap != nil {
		f.tap(st.id, st.seq, f.scratch)
	}
	f.counters.Published.Add(1)
	if len(st.subs) > 0 {
		f.deliver(st, &subscriber.Message{Stream: string(ev.Stream), Seq: ev.Seq, Data: slices.Clone(f.scratch), Published: now})
	} else if f.keepAll && f.rec != nil {
		f.keep(st, &subscriber.Message{Stream: string(ev.Stream), Seq: ev.Seq, Data: slices.Clone(f.scratch), Published: now,
			Snapshot: ev.Kind == venue.KindBook && ev.Snapshot})
	}
	f.applyBook(st, ev)
	return true
}

// applyBook records ev, just delivered at st.seq, in st: its times and,
// for a level2 book event, its levels. f.mu must be held.
func (f *Feed) applyBook(st *stream, ev *venue.Event) {
	st.recv, st.vtime = ev.RecvTime, ev.VenueTime
	if st.level2 && ev.Kind == venue.KindBook {
		// The book is applied after delivery: a snapshot sent during
		// delivery (to a resuming subscriber) is then at seq-1, and this
		// event, queued right after it, takes the book to seq.
		st.book.Apply(ev)
		st.hasBook = st.hasBook || ev.Snapshot
		st.bookSeq, st.venueSeq, st.snap = st.seq, ev.VenueSeq, nil
	}
	if st.set != nil {
		st.set.Apply(ev, st.book)
		f.arm(st)
	}
}

// wanted reports whether st has subscribers or derived streams fed from
// it. f.mu must be held.
func (st *stream) wanted() bool { return len(st.subs) > 0 || len(st.derived) > 0 }

// noteWanted tells Options.OnWanted that the raw stream st became wanted
// or stopped being wanted (was is what wanted answered before the change).
// A derived stream is computed here, never fetched: its source is what is
// wanted. f.mu must be held.
func (f *Feed) noteWanted(st *stream, was bool) {
	if f.onWanted == nil || st.source != nil {
		return
	}
	if now := st.wanted(); now != was {
		f.onWanted(st.id, now)
	}
}

// startDerived makes st, a derived stream getting its first subscriber, a
// consumer of its source: a member of the source's Set, seeded from its
// book, then fed every source event. f.mu must be held.
func (f *Feed) startDerived(st *stream) bool {
	d, err := st.id.Channel().Derivation()
	if err != nil {
		return false
	}
	src := f.stream(venue.NewStream(st.id.Venue(), st.id.Channel().Source(), st.id.Symbol()))
	if src.set == nil {
		src.set = derive.NewSet(src.id)
	}
	st.emit = func(o derive.Out) { f.publishDerived(st, o) }
	if src.set.Add(st.id, st.emit) != nil {
		return false
	}
	st.source, st.conflate = src, d.Kind != venue.KindBar
	was := src.wanted()
	src.derived = append(src.derived, st)
	f.noteWanted(src, was)
	if src.level2 && src.hasBook {
		src.set.Seed(st.id, src.book, src.recv)
	}
	f.countReads(src)
	f.arm(src)
	return true
}

// stopDerived ends st, a derived stream left without subscribers: it
// leaves its source and the feed (subscribed again, it starts at seq 1).
// f.mu must be held.
func (f *Feed) stopDerived(st *stream) {
	if st.source == nil || len(st.subs) > 0 {
		return
	}
	src := st.source
	was := src.wanted()
	src.derived = slices.DeleteFunc(src.derived, func(x *stream) bool { return x == st })
	src.set.Remove(st.id)
	if src.set.Len() == 0 {
		src.set = nil
		if src.timer != nil {
			src.timer.Stop()
			src.timer, src.timerAt = nil, time.Time{}
		}
	}
	f.noteWanted(src, was)
	f.unhold(st)
	delete(f.streams, st.id)
}

// settle pauses the conflated derived stream st when none of its
// subscribers has a connection (named subscribers, detached), so that
// nothing is computed for them, and resumes it, emitting its current
// state at once, when one has a connection again. f.mu must be held.
func (f *Feed) settle(st *stream) {
	if st.source == nil || !st.conflate || len(st.subs) == 0 {
		return
	}
	attached := slices.ContainsFunc(st.subs, func(e *entry) bool { return e.sub.Resolve() != nil })
	src := st.source
	switch {
	case !attached && !st.paused:
		st.paused, st.last = true, nil
		src.set.Pause(st.id)
	case attached && st.paused:
		st.paused = false
		var book *venue.Book
		if src.level2 && src.hasBook {
			book = src.book
		}
		src.set.Resume(st.id, book, src.recv)
		f.countReads(src)
	}
}

// countReads adds the book reads of src's Set since the last count to the
// feed's counters. f.mu must be held.
func (f *Feed) countReads(src *stream) {
	if src.set == nil {
		return
	}
	if r := src.set.Reads(); r != src.reads {
		f.counters.DerivedReads.Add(r - src.reads)
		src.reads = r
	}
}

// arm sets the timer of src, a source with derived streams, for the close
// of its Set's earliest open interval, if it has one the timer is not
// already set for. The delay is measured from the receive time of the
// source's last event (the capture's clock in a replay), and divided by
// the feed's Speed. f.mu must be held.
func (f *Feed) arm(src *stream) {
	f.countReads(src)
	due := src.set.Due()
	if due.IsZero() || due.Equal(src.timerAt) {
		return
	}
	ref := src.recv
	if ref.IsZero() {
		ref = f.now()
	}
	if src.timer != nil {
		src.timer.Stop()
	}
	src.timerAt = due
	set := src.set
	src.timer = time.AfterFunc(max(time.Duration(float64(due.Sub(ref))/f.speed), 0), func() { f.fire(src, set, due) })
}

// fire closes src's intervals that end at due, if no source event has.
func (f *Feed) fire(src *stream, set *derive.Set, due time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if src.set != set || !src.timerAt.Equal(due) {
		return // stopped, or superseded by a later timer
	}
	src.timerAt = time.Time{}
	set.Advance(due, src.book)
	f.arm(src)
}

// publishDerived assigns o the next seq of the derived stream st, encodes
// it once and delivers it. f.mu must be held.
func (f *Feed) publishDerived(st *stream, o derive.Out) {
	st.seq++
	if o.Bar != nil {
		o.Bar.Seq = st.seq
	} else {
		o.Event.Seq = st.seq
	}
	f.scratch = o.AppendJSON(f.scratch[:0])
	m := &subscriber.Message{Stream: string(st.id), Seq: st.seq, Data: slices.Clone(f.scratch), Published: f.now(), Conflate: st.conflate}
	f.counters.Published.Add(1)
	if st.conflate {
		f.deliverConflated(st, m)
		st.last = m
		return
	}
	f.deliver(st, m)
}

// deliverConflated offers m, the newest state of the conflated stream st,
// to each subscriber: it replaces the subscriber's unsent older one, past
// the queue bound, so it is never dropped nor a cause of dropping.
// f.mu must be held.
func (f *Feed) deliverConflated(st *stream, m *subscriber.Message) {
	var delivered, replaced, missed uint64
	for _, e := range st.subs {
		c := e.sub.Resolve()
		if c != e.conn {
			if c == nil {
				missed++ // a detached subscriber gets the newest state on reattach
				continue
			}
			f.reattached(e, c, st)
		}
		switch c.Conflate(m) {
		case subscriber.Enqueued:
			delivered++
		case subscriber.Replaced:
			delivered++
			replaced++
			e.replaced++
		case subscriber.Closed:
			missed++
		}
	}
	f.counters.Delivered.Add(delivered)
	f.counters.Replaced.Add(replaced)
	f.counters.Missed.Add(missed)
}

// Forward delivers an event another node encoded and numbered: data is
// its wire form at seq, delivered as is (not decoded, not re-encoded) to
// every subscriber of id, and seq becomes the stream's seq. ev is the
// decoded event for a level2 stream (nil otherwise): a snapshot replaces
// the book, an update is applied to it only if the book is whole (after a
// snapshot, and not invalidated since). The feed takes ownership of data
// and ev. Seq order and gaps are the caller's to check: Forward trusts
// seq. It reports false for a stream of another venue.
func (f *Feed) Forward(id venue.Stream, seq uint64, data []byte, ev *venue.Event) bool {
	if id.Venue() != f.venue {
		return false
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stream(id)
	if st.set != nil && ev != nil {
		st.set.Advance(ev.RecvTime, st.book)
	}
	st.seq = seq
	f.counters.Published.Add(1)
	snapshot := ev != nil && ev.Kind == venue.KindBook && ev.Snapshot
	if len(st.subs) > 0 {
		f.deliver(st, &subscriber.Message{Stream: string(id), Seq: seq, Data: data, Snapshot: snapshot, Published: now})
	}
	if ev == nil {
		return true
	}
	if st.level2 && ev.Kind == venue.KindBook && !snapshot && !st.hasBook {
		return true // never apply an update to a book known wrong
	}
	f.applyBook(st, ev)
	return true
}

// Invalidate marks the book of the level2 stream id as wrong (a gap was
// found upstream): until the next snapshot is forwarded, no update is
// applied to it, and no subscriber is sent it (new subscribers wait for
// the snapshot; GET /v1/books answers no book).
func (f *Feed) Invalidate(id venue.Stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.streams[id]; st != nil && st.level2 {
		st.book, st.hasBook, st.snap = &venue.Book{}, false, nil
	}
}

// Reset deletes the state (seq, book) of stream id if no subscriber holds
// it: an edge that stopped following the stream on the bus must not
// serve its stale book.
func (f *Feed) Reset(id venue.Stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.streams[id]; st != nil && len(st.subs) == 0 {
		f.unhold(st)
		delete(f.streams, id)
	}
}

// Continue makes the feed continue another node's numbering: an ingest
// standby taking a venue over from its leader. Under the feed's lock, so
// that no event of the feed interleaves: before is called (the caller
// starts publishing through Tap from here); every raw stream seqs names
// takes that seq (this node's own numbering, never published while it
// followed, is replaced: seqs holds the last the bus carried, so seq never
// goes back for the subscribers); then each is passed to each (its seq, and whether it is
// level2 with a book), and a level2 stream with a book is published whole
// as a snapshot:true event at the next seq (through Tap and to its
// subscribers), so that the other node's subscribers continue from this
// node's book. each may be nil.
func (f *Feed) Continue(seqs map[venue.Stream]uint64, before func(), each func(id venue.Stream, seq uint64, book bool)) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if before != nil {
		before()
	}
	for id := range seqs {
		if id.Venue() == f.venue && !id.Channel().Derived() {
			f.stream(id)
		}
	}
	ids := make([]venue.Stream, 0, len(f.streams))
	for id, st := range f.streams {
		if st.source == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		st := f.streams[id]
		if s, ok := seqs[id]; ok {
			st.seq = s
		}
		book := st.level2 && st.hasBook
		if each != nil {
			each(id, st.seq, book)
		}
		if !book {
			continue
		}
		ev := st.snapshotEvent()
		st.seq++
		ev.Seq = st.seq
		f.scratch = ev.AppendJSON(f.scratch[:0])
		if f.tap != nil {
			f.tap(st.id, st.seq, f.scratch)
		}
		f.counters.Published.Add(1)
		st.bookSeq, st.snap = st.seq, nil
		m := &subscriber.Message{Stream: string(id), Seq: st.seq, Data: slices.Clone(f.scratch), Snapshot: true, Published: now}
		if len(st.subs) > 0 {
			f.deliver(st, m)
		} else if f.keepAll && f.rec != nil {
			f.keep(st, m)
		}
	}
}

// Seq returns the last seq of stream id on this node, 0 if it has none
// yet.
func (f *Feed) Seq(id venue.Stream) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.streams[id]; st != nil {
		return st.seq
	}
	return 0
}

// Baseline sets the seq of stream id, if it has none yet, to seq: the
// last seq of a stream whose events another node numbers, known before
// its next event arrives (an edge learns it from a heartbeat), so that a
// subscriber's gap on this node can end there.
func (f *Feed) Baseline(id venue.Stream, seq uint64) {
	if id.Venue() != f.venue {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.stream(id); st.seq == 0 {
		st.seq = seq
	}
}

// Seqs appends each stream's last seq to dst and returns it (an ingest's
// heartbeat).
func (f *Feed) Seqs(dst map[venue.Stream]uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, st := range f.streams {
		dst[id] = st.seq
	}
}

// deliver offers m to every subscriber of st, after keeping it in st's
// recovery window. f.mu must be held.
func (f *Feed) deliver(st *stream, m *subscriber.Message) {
	if f.rec != nil {
		f.keep(st, m)
	}
	resume := ResumeBelow(f.maxLen)
	var delivered, dropped, missed uint64
	for _, e := range st.subs {
		c := e.sub.Resolve()
		if c != e.conn {
			if c == nil { // detached, or its connection just closed
				if !e.away {
					e.leave(st)
				}
				missed++
				continue
			}
			f.reattached(e, c, st)
		}
		if e.dropping {
			if c.Len() >= resume || f.maxBytes > 0 && c.Bytes() >= f.maxBytes/2 {
				e.lose(st, m.Seq)
				dropped++
				continue
			}
			f.resumed(e, c, "drained")
		}
		n, res := c.Offer(m, f.maxLen, f.maxBytes)
		switch res {
		case subscriber.Enqueued:
			delivered++
		case subscriber.Full:
			e.dropping = true
			f.counters.Dropping.Add(1)
			f.notify(c, notice.Dropping, "", "subscriber queue is full: newest events are dropped until it drains below half", map[string]any{
				"bound": f.maxLen, "queue_len": n, "max_queue_bytes": f.maxBytes, "queue_bytes": c.Bytes(),
			})
			e.lose(st, m.Seq)
			dropped++
		case subscriber.Closed:
			e.lose(st, m.Seq)
			missed++
		}
	}
	if delivered > 0 {
		f.counters.Delivered.Add(delivered)
	}
	if dropped > 0 {
		f.counters.Dropped.Add(dropped)
	}
	if missed > 0 {
		f.counters.Missed.Add(missed)
	}
}

// lose records that the event seq of st was not delivered to e.
func (e *entry) lose(st *stream, seq uint64) {
	e.dropped++
	e.total++
	for i := range e.gaps {
		g := &e.gaps[i]
		if g.st == st {
			g.first, g.last = min(g.first, seq), max(g.last, seq)
			return
		}
	}
	e.gaps = append(e.gaps, gap{st: st, first: seq, last: seq})
}

// resumed tells e's connection c that delivery resumed, with what it lost,
// then queues a fresh snapshot of every level2 stream that lost events.
// f.mu must be held.
func (f *Feed) resumed(e *entry, c *subscriber.Mailbox, reason string) {
	gaps := make(map[string]any, len(e.gaps))
	for _, g := range e.gaps {
		gaps[string(g.st.id)] = []uint64{g.first, g.last}
	}
	if e.dropping {
		f.counters.Dropping.Add(-1)
	}
	resend := e.streams
	if reason != "reattached" {
		resend = make([]*stream, len(e.gaps))
		for i, g := range e.gaps {
			resend[i] = g.st
		}
	}
	if plan := f.plan(e, c); len(plan) > 0 {
		f.resumedRecovering(e, c, reason, plan, resend)
		return
	}
	details := map[string]any{
		"reason": reason, "bound": f.maxLen, "queue_len": c.Len(), "max_queue_bytes": f.maxBytes,
		"dropped": e.dropped, "gaps": gaps,
	}
	if claims := f.claims(resend); claims != nil {
		details["claims"] = claims
	}
	f.notify(c, notice.Resumed, "", "delivery resumed; gaps name the seqs lost per stream", details)
	for _, st := range resend {
		f.sendSnapshot(c, st)
	}
	e.dropping, e.dropped = false, 0
	clear(e.gaps)
	e.gaps = e.gaps[:0]
}

// claims returns the claim checks of the newest stored snapshots of the
// level2 streams in sts, by stream, or nil if there are none (or no
// Options.SnapshotClaim). f.mu must be held.
func (f *Feed) claims(sts []*stream) map[string]any {
	if f.claim == nil {
		return nil
	}
	var out map[string]any
	for _, st := range sts {
		if !st.level2 {
			continue
		}
		if c, ok := f.claim(st.id); ok {
			if out == nil {
				out = map[string]any{}
			}
			out[string(st.id)] = c
		}
	}
	return out
}

// reattached handles a connection e has not been delivered to before: a
// named subscriber's new connection after a detach or a takeover. cur is
// the stream whose event is being delivered (its seq already counts that
// event, which goes to c), or nil. f.mu must be held.
func (f *Feed) reattached(e *entry, c *subscriber.Mailbox, cur *stream) {
	e.back(cur)
	if e.conn == nil { // the first connection this entry sees
		e.conn = c
		return
	}
	e.conn = c
	if from := e.sub.ResumeFrom(); from != nil {
		e.stated(from, cur)
	}
	f.resumed(e, c, "reattached")
	for _, st := range e.streams {
		f.settle(st) // a paused derived stream sends its state now
	}
}

// detachedConn is the connection of an entry created while its named
// subscriber had none (it was adopted from another node): the first
// connection it sees is then a reattach, told what it missed.
var detachedConn = subscriber.NewMailbox()

// stated replaces e's gap of each stream the reattaching connection named
// in from with the seqs after the one it read, up to the last the stream
// had for e before the new connection (cur's event goes to the new one).
// A stream whose seq is still unknown here (0) keeps its gap. e.mu
// (f.mu) must be held.
func (e *entry) stated(from map[venue.Stream]uint64, cur *stream) {
	for _, st := range e.streams {
		read, ok := from[st.id]
		if !ok || st.conflate || st.seq == 0 {
			continue
		}
		b := st.seq
		if st == cur {
			b--
		}
		var old uint64
		i := slices.IndexFunc(e.gaps, func(g gap) bool { return g.st == st })
		if i >= 0 {
			old = e.gaps[i].last - e.gaps[i].first + 1
		}
		var now uint64
		switch {
		case read >= b:
			if i >= 0 {
				e.gaps = slices.Delete(e.gaps, i, i+1)
			}
		case i >= 0:
			e.gaps[i].first, e.gaps[i].last = read+1, b
			now = b - read
		default:
			e.gaps = append(e.gaps, gap{st: st, first: read + 1, last: b})
			now = b - read
		}
		if now > old {
			e.dropped += now - old
			e.total += now - old
		} else {
			e.dropped -= min(e.dropped, old-now)
		}
	}
}

// sendSnapshot queues a snapshot of st's book on c, past the queue bound:
// without it the subscriber's book would not be whole. Nothing is sent for
// a stream that is not level2 or has no book yet (its first event will be
// the venue's snapshot). f.mu must be held.
func (f *Feed) sendSnapshot(c *subscriber.Mailbox, st *stream) {
	if st.conflate {
		if st.last != nil && c.Conflate(st.last) == subscriber.Replaced {
			f.counters.Replaced.Add(1)
		}
		return
	}
	if !st.level2 || !st.hasBook {
		return
	}
	c.Force(f.snapMsg(st))
}

// notify sends a notice raised by the feed itself to c. f.mu must be held.
func (f *Feed) notify(c *subscriber.Mailbox, kind notice.Kind, streamID, msg string, details map[string]any) {
	n := notice.Must(kind, f.venue, streamID, f.now(), msg, details)
	f.countNotice(kind)
	c.Notify(&subscriber.Message{Data: n.AppendJSON(nil)})
}

// countNotice counts a notice of kind k; a kind outside the enum (the zero
// Kind) is not counted rather than indexing out of range.
func (f *Feed) countNotice(k notice.Kind) {
	if k.Valid() {
		f.counters.Notices[k].Add(1)
	}
}

// Notice delivers a venue's notice: to the subscribers of n.Stream if it
// names one, else to every subscriber of the feed, each once. It is the
// venue.Sink method. Subscribers with no live connection are skipped.
func (f *Feed) Notice(n notice.Notice) {
	m := &subscriber.Message{Data: n.AppendJSON(nil)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.countNotice(n.Kind)
	if n.Stream != "" {
		if st := f.streams[venue.Stream(n.Stream)]; st != nil {
			for _, e := range st.subs {
				if c := e.sub.Resolve(); c != nil {
					c.Notify(m)
				}
			}
			if n.Kind == notice.BookResync {
				f.resyncDerived(st, n)
			}
		}
		return
	}
	if n.Kind == notice.LinkDown {
		// One connection of several names the streams that stopped.
		only, partial := n.Details["streams"].([]string)
		for _, st := range f.streams {
			if st.set != nil && (!partial || slices.Contains(only, string(st.id))) {
				st.set.Break(st.recv)
			}
		}
	}
	for _, e := range f.entries {
		if c := e.sub.Resolve(); c != nil {
			c.Notify(m)
		}
	}
}

// resyncDerived tells the subscribers of src's derived streams that its
// book resyncs: the same notice, naming each derived stream. They continue
// from the rebuilt book. f.mu must be held.
func (f *Feed) resyncDerived(src *stream, n notice.Notice) {
	for _, d := range src.derived {
		if len(d.subs) == 0 {
			continue
		}
		dn := n
		dn.Stream = string(d.id)
		m := &subscriber.Message{Data: dn.AppendJSON(nil)}
		f.countNotice(n.Kind)
		for _, e := range d.subs {
			if c := e.sub.Resolve(); c != nil {
				c.Notify(m)
			}
		}
	}
}

// subscribe adds s to stream id and, for a level2 stream with a book,
// queues the current snapshot on s's connection, at the stream's current
// seq, so the updates that follow continue it.
func (f *Feed) subscribe(s *subscriber.Subscriber, id venue.Stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stream(id)
	if st.source == nil && id.Channel().Derived() && !f.startDerived(st) {
		delete(f.streams, id)
		return
	}
	e := f.entries[s]
	if e == nil {
		e = &entry{sub: s, conn: s.Resolve()}
		if e.conn == nil && s.Kind() == subscriber.Named {
			e.conn = detachedConn
		}
		f.entries[s] = e
	}
	if slices.Contains(st.subs, e) {
		return
	}
	c := s.Resolve()
	if c != nil && c != e.conn {
		f.reattached(e, c, nil)
	}
	was := st.wanted()
	st.subs = append(st.subs, e)
	e.streams = append(e.streams, st)
	e.markNew(st)
	f.noteWanted(st, was)
	if c != nil {
		f.sendSnapshot(c, st)
	}
	f.settle(st)
}

// unsubscribe removes s from stream id; a subscriber left with no stream
// in the feed leaves it, dropping state and all.
func (f *Feed) unsubscribe(s *subscriber.Subscriber, id venue.Stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, st := f.entries[s], f.streams[id]
	if e == nil || st == nil {
		return
	}
	was := st.wanted()
	st.subs = slices.DeleteFunc(st.subs, func(x *entry) bool { return x == e })
	f.noteWanted(st, was)
	e.streams = slices.DeleteFunc(e.streams, func(x *stream) bool { return x == st })
	e.gaps = slices.DeleteFunc(e.gaps, func(g gap) bool { return g.st == st })
	e.unmark(st)
	if len(st.subs) == 0 && !f.keepAll {
		f.unhold(st) // a new subscriber starts from a snapshot, not a range
	}
	f.stopDerived(st)
	f.settle(st)
	if len(e.streams) == 0 {
		f.forget(e)
	}
}

// remove takes s out of every stream of the feed.
func (f *Feed) remove(s *subscriber.Subscriber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entries[s]
	if e == nil {
		return
	}
	for _, st := range e.streams {
		was := st.wanted()
		st.subs = slices.DeleteFunc(st.subs, func(x *entry) bool { return x == e })
		f.noteWanted(st, was)
		if len(st.subs) == 0 && !f.keepAll {
			f.unhold(st)
		}
		f.stopDerived(st)
		f.settle(st)
	}
	f.forget(e)
}

// detached makes s's entry observe that its named subscriber has no
// connection now: its conflated derived streams that no other subscriber
// reads stop being computed (settle).
func (f *Feed) detached(s *subscriber.Subscriber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.entries[s]; e != nil {
		for _, st := range e.streams {
			f.settle(st)
		}
	}
}

// forget deletes e. f.mu must be held.
func (f *Feed) forget(e *entry) {
	if e.dropping {
		f.counters.Dropping.Add(-1)
	}
	delete(f.entries, e.sub)
}

// missed records that s did not receive seq of stream id (it was queued on
// a connection that closed before writing it).
func (f *Feed) missed(s *subscriber.Subscriber, id venue.Stream, seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, st := f.entries[s], f.streams[id]
	if e == nil || st == nil || !slices.Contains(e.streams, st) {
		return
	}
	e.lose(st, seq)
	f.counters.Missed.Add(1)
}

// sync makes s's entry observe its current connection now: a reattached
// named subscriber is told what it missed at once, not at the next event.
func (f *Feed) sync(s *subscriber.Subscriber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entries[s]
	if e == nil {
		return
	}
	if c := s.Resolve(); c != nil && c != e.conn {
		f.reattached(e, c, nil)
	}
}

// snapshot queues a fresh snapshot of stream id on s's connection, if s is
// subscribed to it and it is a level2 stream with a book. It reports
// whether one was queued.
func (f *Feed) snapshot(s *subscriber.Subscriber, id venue.Stream) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, st := f.entries[s], f.streams[id]
	c := s.Resolve()
	if e == nil || st == nil || c == nil || !slices.Contains(e.streams, st) {
		return false
	}
	if st.conflate {
		if st.last == nil {
			return false
		}
		f.sendSnapshot(c, st)
		return true
	}
	if !st.level2 || !st.hasBook {
		return false
	}
	if c != e.conn {
		f.reattached(e, c, nil) // sends every snapshot, this one included
		return true
	}
	f.sendSnapshot(c, st)
	return true
}

// Book returns a snapshot event of the current book of the level2 stream
// id, at the seq it reflects, or false if the feed has no book for it yet.
// The event is a copy: it stays valid while the book changes. It is a read
// for operators (GET /v1/books), not for the delivery path.
func (f *Feed) Book(id venue.Stream) (*venue.Event, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.streams[id]
	if st == nil || !st.level2 || !st.hasBook {
		return nil, false
	}
	ev := st.book.Snapshot(st.id) // decimals: what the API hands out
	ev.Seq, ev.VenueSeq, ev.RecvTime, ev.VenueTime = st.bookSeq, st.venueSeq, st.recv, st.vtime
	return ev, true
}

// snapshotEvent is a snapshot event of st's book at the seq it reflects,
// with copies of the levels. Feed.mu must be held.
func (st *stream) snapshotEvent() *venue.Event {
	ev := st.book.SnapshotFixed(st.id)
	ev.Seq, ev.VenueSeq, ev.RecvTime, ev.VenueTime = st.bookSeq, st.venueSeq, st.recv, st.vtime
	return ev
}

// SubscriberState is what a feed knows of one subscriber, for operators.
type SubscriberState struct {
	Dropping     bool   // over its bound now
	Dropped      uint64 // events lost since the last resumed notice
	DroppedTotal uint64 // events lost on this feed, ever (dropped and missed)
	// ReplacedTotal counts the conflated messages (book_snapshot_*, quote)
	// a newer one replaced before they were written, ever.
	ReplacedTotal uint64
}

// State returns s's state in the feed, or false if s holds no stream of it.
func (f *Feed) State(s *subscriber.Subscriber) (SubscriberState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entries[s]
	if e == nil {
		return SubscriberState{}, false
	}
	away := e.pending()
	return SubscriberState{Dropping: e.dropping, Dropped: e.dropped + away, DroppedTotal: e.total + away, ReplacedTotal: e.replaced}, true
}
