package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Edge timings.
const (
	// IngestSilence: a venue whose heartbeats stopped this long is down.
	IngestSilence = 3 * HeartbeatEvery
	// A book request is asked again if unanswered after firstBookTimeout,
	// then after twice as long each time up to bookTimeout: a request lost
	// while the responder moves between NATS servers (lame-duck mode, a
	// server's death) costs a quarter second, not two, and a slow answer
	// still arrives.
	firstBookTimeout = 250 * time.Millisecond
	bookTimeout      = 2 * time.Second
	minBookRetry     = 50 * time.Millisecond
	maxBookRetry     = 2 * time.Second
	behindBookRetry  = 200 * time.Millisecond // the retry of a book not yet past the seq forwarded (renumber)
	// A responder moving to another server after its server died has no
	// subscription for a moment (no responders): for the first
	// quickBookRetries of a resync the book is asked every quickBookRetry,
	// then with a backoff to maxBookRetry.
	quickBookRetries = 2 * time.Second
	quickBookRetry   = 100 * time.Millisecond
	maxHeldMessages  = 100000  // held during a resync; past it the resync starts over
	inboxLen         = 1 << 16 // messages received but not yet handled; past it NATS drops (a gap)
)

// Edge is an edge node's side of the bus: it subscribes a stream's subject
// while the stream has subscribers (its feed's Options.OnWanted is
// Edge.Wanted), forwards each event's bytes at the ingest's seq, keeps
// level2 books whole across gaps (see the package doc), relays the
// venues' notices, and reports each venue's link as up while NATS is
// connected and the ingest's heartbeats arrive. Build one with NewEdge,
// add venues with Venue, then Start it.
type Edge struct {
	subj Subjects
	node string
	log  *slog.Logger
	nc   *nats.Conn // set by Start

	mu       sync.Mutex // protects the fields below; taken after a feed's lock, never before (docs/lock-order.md)
	streams  map[venue.Stream]*edgeStream
	queue    []wanted
	venues   map[string]*edgeVenue
	started  bool
	handlers map[string]func(*nats.Msg) // by subject: what the inbox's messages go to

	// inbox receives every subscription's messages in the order the
	// connection read them, so a stream's notice published before its
	// event (a failover's book_resync before the snapshot) is handled
	// before it: one goroutine per subscription would not keep that order.
	inbox chan *nats.Msg

	rejects burstCounter // messages from the bus not forwarded
	fences  burstCounter // messages dropped by fencing (fence.go)

	// RecoverGaps asks the ingest for a range lost on the bus before
	// announcing it (recover.go): set it before Start when the recovery
	// window is on.
	RecoverGaps  bool
	busRecovered outcomes // bus gaps recovered, or announced
	backfills    outcomes // adopted names' ranges filled, or not

	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

type wanted struct {
	st venue.Stream
	on bool
}

// NewEdge returns an edge reading under subj as node.
func NewEdge(subj Subjects, node string, log *slog.Logger) *Edge {
	return &Edge{subj: subj, node: node, log: log, streams: map[venue.Stream]*edgeStream{}, venues: map[string]*edgeVenue{},
		handlers: map[string]func(*nats.Msg){}, inbox: make(chan *nats.Msg, inboxLen), rejects: burstCounter{log: log,
			msg: "nats: a message from the bus was not forwarded (counted in fanoutd_cluster_bus_invalid_total; the rest of this burst is not logged)"},
		fences: burstCounter{log: log,
			msg: "nats: a message from an ingest not holding the venue's lease was dropped (counted in fanoutd_cluster_fenced_total; the rest of this burst is not logged)"},
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Rejected calls f, per venue and reason, with the number of messages
// from the bus the edge did not forward because they were not what their
// subject carries (see eventCheck): each was treated as lost.
func (e *Edge) Rejected(f func(venueName, reason string, n uint64)) { e.rejects.each(f) }

// Wanted is the fanout.Options.OnWanted of every feed of the edge. It
// queues the change for the edge's goroutine: it does not block.
func (e *Edge) Wanted(st venue.Stream, on bool) {
	e.mu.Lock()
	e.queue = append(e.queue, wanted{st, on})
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Venue registers feed's venue with the edge and returns its venue.Adapter:
// it connects to no venue; its Coverage reports the bus link.
func (e *Edge) Venue(f *fanout.Feed) venue.Adapter {
	v := &edgeVenue{e: e, name: f.Venue(), feed: f, since: time.Now()}
	e.mu.Lock()
	e.venues[v.name] = v
	e.mu.Unlock()
	return v
}

// Start follows the bus on nc: the venues' notices and heartbeats, and
// the streams wanted.
func (e *Edge) Start(nc *nats.Conn) error {
	e.mu.Lock()
	e.nc, e.started = nc, true
	vs := make([]*edgeVenue, 0, len(e.venues))
	for _, v := range e.venues {
		vs = append(vs, v)
	}
	e.mu.Unlock()
	e.wg.Add(4)
	go e.dispatch()
	go e.run()
	go e.watch()
	go e.watchLeases()
	for _, v := range vs {
		if _, err := e.subscribe(e.subj.Notice(v.name), v.onNotice); err != nil {
			return err
		}
		if _, err := e.subscribe(e.subj.Heartbeat(v.name), v.onHeartbeat); err != nil {
			return err
		}
	}
	return nil
}

// subscribe routes subject's messages to h through the inbox.
func (e *Edge) subscribe(subject string, h func(*nats.Msg)) (*nats.Subscription, error) {
	e.mu.Lock()
	e.handlers[subject] = h
	e.mu.Unlock()
	sub, err := e.nc.ChanSubscribe(subject, e.inbox)
	if err != nil {
		e.forget(subject)
	}
	return sub, err
}

// forget stops routing subject's messages (its subscription is gone).
func (e *Edge) forget(subject string) {
	e.mu.Lock()
	delete(e.handlers, subject)
	e.mu.Unlock()
}

// dispatch hands each received message to its subject's handler, in the
// order received.
func (e *Edge) dispatch() {
	defer e.wg.Done()
	for {
		select {
		case <-e.stop:
			return
		case m := <-e.inbox:
			e.mu.Lock()
			h := e.handlers[m.Subject]
			e.mu.Unlock()
			if h != nil {
				h(m)
			}
		}
	}
}

// Stop ends the edge's goroutines; the caller closes the connection.
func (e *Edge) Stop() {
	select {
	case <-e.stop:
		return
	default:
	}
	close(e.stop)
	e.wg.Wait()
	e.mu.Lock()
	streams := make([]*edgeStream, 0, len(e.streams))
	for _, es := range e.streams {
		streams = append(streams, es)
	}
	e.mu.Unlock()
	for _, es := range streams {
		es.mu.Lock() // a book fetch may still hold it
		es.close()
		es.mu.Unlock()
	}
}

// Disconnected and Reconnected are the connection's handlers (Handlers).
func (e *Edge) Disconnected() { e.evaluate() }

// Reconnected re-evaluates the venues' links: each comes up again with the
// ingest's next heartbeat.
func (e *Edge) Reconnected() { e.evaluate() }

// run applies the wanted changes in order.
func (e *Edge) run() {
	defer e.wg.Done()
	for {
		select {
		case <-e.stop:
			return
		case <-e.wake:
		}
		e.mu.Lock()
		q := e.queue
		e.queue = nil
		e.mu.Unlock()
		for _, w := range q {
			if w.on {
				e.follow(w.st)
			} else {
				e.unfollow(w.st)
			}
		}
	}
}

func (e *Edge) follow(st venue.Stream) {
	e.mu.Lock()
	v := e.venues[st.Venue()]
	if v == nil || e.streams[st] != nil {
		e.mu.Unlock()
		return
	}
	es := &edgeStream{e: e, v: v, id: st, level2: st.Channel() == venue.Level2, check: newEventCheck(st)}
	e.streams[st] = es
	e.mu.Unlock()
	es.mu.Lock()
	defer es.mu.Unlock()
	sub, err := e.subscribe(e.subj.Event(st), es.onMsg)
	if err != nil {
		e.log.Warn("nats: subscribe failed", "stream", st, "err", err)
		return
	}
	es.sub = sub
	if es.level2 {
		es.resync() // the first book
	}
}

func (e *Edge) unfollow(st venue.Stream) {
	e.mu.Lock()
	es := e.streams[st]
	delete(e.streams, st)
	e.mu.Unlock()
	if es == nil {
		return
	}
	es.mu.Lock()
	es.close()
	es.mu.Unlock()
	es.v.feed.Reset(st)
}

// watch re-evaluates the venues' links every half heartbeat interval, so
// that a silent ingest takes its venues down, and renews the streams the
// edge follows every WantRenew.
func (e *Edge) watch() {
	defer e.wg.Done()
	t := time.NewTicker(HeartbeatEvery / 2)
	defer t.Stop()
	r := time.NewTicker(WantRenew)
	defer r.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.evaluate()
		case <-r.C:
			e.renew()
		}
	}
}

func (e *Edge) evaluate() {
	e.mu.Lock()
	vs := make([]*edgeVenue, 0, len(e.venues))
	for _, v := range e.venues {
		vs = append(vs, v)
	}
	e.mu.Unlock()
	for _, v := range vs {
		v.evaluate()
	}
}

// streamsOf returns the streams of venueName the edge follows.
func (e *Edge) streamsOf(venueName string) []*edgeStream {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*edgeStream
	for st, es := range e.streams {
		if st.Venue() == venueName {
			out = append(out, es)
		}
	}
	return out
}

// edgeVenue is one venue as the edge sees it: a venue.Adapter whose link
// is the bus.
type edgeVenue struct {
	e    *Edge
	name string
	feed *fanout.Feed

	mu     sync.Mutex // protects the fields below
	up     bool
	since  time.Time
	lastHB time.Time
	leader string // the node of the last heartbeat: the ingest leading the venue
	// venueLink is the leader's link to the venue, as its last heartbeat
	// said ("" if it did not), since venueSince.
	venueLink  string
	venueSince time.Time

	holder      atomic.Pointer[string] // Lease.Instance of the venue's lease as last seen; nil: none known
	lastRecheck time.Time              // the last read of the lease on a message of another instance (fence.go)
}

var _ venue.Adapter = (*edgeVenue)(nil)

func (v *edgeVenue) Venue() string               { return v.name }
func (v *edgeVenue) Start(context.Context) error { return nil }
func (v *edgeVenue) Stop(context.Context) error  { return nil }
func (v *edgeVenue) Subscribe(...string) error   { return nil } // streams follow their subscribers (Edge.Wanted)
func (v *edgeVenue) Unsubscribe(...string) error { return nil }
func (v *edgeVenue) Coverage() venue.Coverage {
	v.mu.Lock()
	defer v.mu.Unlock()
	link, since := venue.LinkDown.String(), v.since
	if v.up {
		link = venue.LinkUp.String()
		if v.venueLink != "" && v.venueLink != link {
			link = v.venueLink // the bus is up; the ingest's venue link is not
		}
		if v.venueSince.After(since) {
			since = v.venueSince
		}
	}
	return venue.Coverage{Venue: v.name, Link: link, Since: since, Streams: []venue.StreamCoverage{}, Leader: v.leader}
}

// evaluate sets the link from the connection and the heartbeats, and
// tells the venue's subscribers when it changes: link_down, or link_up
// followed by a fresh book for every level2 stream.
func (v *edgeVenue) evaluate() {
	v.e.mu.Lock()
	nc := v.e.nc
	v.e.mu.Unlock()
	now := time.Now()
	v.mu.Lock()
	connected := nc != nil && nc.IsConnected()
	up := connected && !v.lastHB.IsZero() && now.Sub(v.lastHB) < IngestSilence
	if up == v.up {
		v.mu.Unlock()
		return
	}
	upFor := now.Sub(v.since)
	v.up, v.since = up, now
	v.mu.Unlock()
	if !up {
		reason := "bus_disconnected"
		if connected {
			reason = "ingest_silent"
		}
		v.feed.Notice(notice.Must(notice.LinkDown, v.name, "", now, "the bus link to the ingest dropped", map[string]any{
			"reason": reason, "up_ms": upFor.Milliseconds()}))
		return
	}
	v.feed.Notice(notice.Must(notice.LinkUp, v.name, "", now, "the bus link to the ingest is up", map[string]any{
		"url": nc.ConnectedUrlRedacted()}))
	for _, es := range v.e.streamsOf(v.name) {
		es.mu.Lock()
		if es.level2 && es.started && !es.resyncing && !es.closed {
			es.verify = true
			es.resync()
		}
		es.mu.Unlock()
	}
}

func (v *edgeVenue) onNotice(m *nats.Msg) {
	if !v.admits(m) {
		return
	}
	var n notice.Notice
	if err := n.UnmarshalJSON(m.Data); err != nil {
		v.e.rejects.reject(v.name, badJSON, "subject", m.Subject)
		return
	}
	if n.Venue != v.name {
		v.e.rejects.reject(v.name, badVenue, "subject", m.Subject, "notice_venue", n.Venue)
		return
	}
	v.feed.Notice(n)
}

func (v *edgeVenue) onHeartbeat(m *nats.Msg) {
	if !v.admits(m) {
		return
	}
	var hb Heartbeat
	if err := json.Unmarshal(m.Data, &hb); err != nil {
		v.e.log.Warn("nats: bad heartbeat", "venue", v.name, "err", err)
		return
	}
	now := time.Now()
	v.mu.Lock()
	v.lastHB, v.leader = now, hb.Node
	if hb.Link != v.venueLink {
		v.venueLink, v.venueSince = hb.Link, now
	}
	v.mu.Unlock()
	v.evaluate()
	for _, es := range v.e.streamsOf(v.name) {
		es.heartbeat(hb.Epoch, hb.Streams[string(es.id)])
	}
}

// edgeStream is one stream the edge follows.
type edgeStream struct {
	e      *Edge
	v      *edgeVenue
	id     venue.Stream
	level2 bool
	check  eventCheck // what its messages must be

	mu         sync.Mutex // protects the fields below; taken before the feed's lock
	sub        *nats.Subscription
	closed     bool
	started    bool   // an event (or a book) was forwarded: epoch and last are known
	epoch      string // of the last event forwarded
	last       uint64 // seq of the last event forwarded
	resyncing  bool   // waiting for a book: what arrives is held
	recovering bool   // waiting for the range a bus gap lost (recover.go): what arrives is held
	recFirst   uint64 // the range being recovered
	recLast    uint64
	verify     bool // the resync checks the book after a link loss (no gap known)
	gen        int  // the resync in progress (a fetch of another gen gives up)
	held       []heldMsg
	hbSeq      uint64 // the last seq the previous heartbeat named (same epoch), 0 if none
	from       string // the instance (HeaderLeader) that published the last event forwarded, "" if not known
	after      uint64 // level2: the resync's book must be past this seq (0: any), see renumbered
}

type heldMsg struct {
	epoch  string
	seq    uint64
	data   []byte
	leader string // its HeaderLeader: the instance that published it
}

// onMsg takes a message of the stream's subject. One that is not an event
// of the stream at its header's seq (eventCheck) is counted and dropped:
// to the stream it is lost, as an event NATS did not deliver.
func (es *edgeStream) onMsg(m *nats.Msg) {
	if !es.v.admits(m) {
		return
	}
	seq, err := strconv.ParseUint(m.Header.Get(HeaderSeq), 10, 64)
	why := badSeq
	if err == nil {
		why = es.check.check(m.Data, seq, false)
	}
	if why != "" {
		es.e.rejects.reject(es.id.Venue(), why, "subject", m.Subject, "seq", seq)
		return
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if !es.closed && m.Sub == es.sub { // not one of a previous subscription's, still in the inbox
		es.handle(heldMsg{m.Header.Get(HeaderEpoch), seq, m.Data, m.Header.Get(HeaderLeader)})
	}
}

// handle takes one event from the bus. es.mu must be held.
func (es *edgeStream) handle(h heldMsg) {
	if es.recovering && len(es.held) >= maxHeldMessages {
		es.gen++ // the fetch gives up: the range and what was held are a gap
		es.endRecovery(es.recFirst, es.recLast, nil, false)
	}
	if es.resyncing || es.recovering {
		if len(es.held) >= maxHeldMessages {
			es.held = es.held[:0]
			es.resync() // the book will be newer than anything dropped
		}
		es.held = append(es.held, h)
		return
	}
	if !es.started {
		if es.level2 {
			es.held = append(es.held, h)
			es.resync()
			return
		}
		es.started, es.epoch = true, h.epoch
		es.forward(h)
		return
	}
	if es.level2 && es.renumbered(h) {
		es.renumber(h)
		es.held = append(es.held, h)
		return
	}
	if h.epoch != es.epoch {
		es.gap("epoch_change", es.last+1, 0, h.epoch)
		if es.level2 {
			es.held = append(es.held, h)
			return
		}
		es.epoch = h.epoch
		es.forward(h)
		return
	}
	if h.seq <= es.last {
		return // already forwarded (or in the book)
	}
	if h.seq > es.last+1 {
		if es.recover(es.last+1, h.seq-1, &h) {
			return
		}
		es.gap("bus_gap", es.last+1, h.seq-1, "")
		if es.level2 {
			es.held = append(es.held, h)
			return
		}
	}
	es.forward(h)
}

// forward delivers h through the feed; a level2 event that is not a book
// event is dropped as lost instead (the next one is a gap). es.mu must be
// held.
func (es *edgeStream) forward(h heldMsg) {
	var ev *venue.Event
	if es.level2 {
		ev = new(venue.Event)
		if err := ev.UnmarshalJSON(h.data); err != nil {
			es.e.rejects.reject(es.id.Venue(), badJSON, "stream", es.id, "seq", h.seq)
			return
		}
	}
	es.v.feed.Forward(es.id, h.seq, h.data, ev)
	es.last = h.seq
	if h.leader != "" {
		es.from = h.leader
	}
}

// renumbered reports whether h, of a level2 stream, is numbered by another
// publisher than the events forwarded so far, in the same epoch: a standby
// that took the venue over continues the seqs it saw, which may be behind
// what the old leader published meanwhile (across a partition, or while
// the standby's view lagged), so the same seq can carry two publishers'
// updates. That is an event of another instance than the last forwarded,
// except its failover snapshot at the next seq, which replaces the book.
// (The same instance's snapshot at or below the last seq is no sign: a
// book answer overtakes the events still in the inbox.) es.mu must be
// held.
func (es *edgeStream) renumbered(h heldMsg) bool {
	if h.epoch != es.epoch || h.leader == "" || es.from == "" || h.leader == es.from {
		return false
	}
	return h.seq != es.last+1 || !isSnapshot(h.data)
}

// isSnapshot reports whether data, a level2 event's wire form, is a
// snapshot:true book.
func isSnapshot(data []byte) bool { return bytes.Contains(data, []byte(`,"snapshot":true`)) }

// renumber invalidates the book and fetches the new publisher's, which is
// forwarded only once its seq is past the last forwarded (seq never goes
// back): no update of one publisher is applied to the other's book. es.mu
// must be held.
func (es *edgeStream) renumber(h heldMsg) {
	node, _, _ := strings.Cut(h.leader, "~")
	prev, _, _ := strings.Cut(es.from, "~")
	es.v.feed.Notice(notice.Must(notice.BookResync, es.id.Venue(), string(es.id), time.Now(),
		"the ingest publishing the stream changed and its seq does not continue this edge's: the book is rebuilt from the new publisher's",
		map[string]any{"reason": "failover", "first": es.last + 1, "node": node, "previous": prev}))
	es.v.feed.Invalidate(es.id)
	es.after = es.last
	es.resync()
}

// gap announces a loss, from first to last (0: unknown), and for a level2
// stream invalidates the book and starts a resync. es.mu must be held.
func (es *edgeStream) gap(reason string, first, last uint64, epoch string) {
	d := map[string]any{"reason": reason, "first": first}
	if last > 0 {
		d["last"] = last
	}
	if epoch != "" {
		d["epoch"] = epoch
	}
	now := time.Now()
	if !es.level2 {
		es.v.feed.Notice(notice.Must(notice.StreamGap, es.id.Venue(), string(es.id), now,
			"events were lost between the ingest and this edge", d))
		return
	}
	es.v.feed.Notice(notice.Must(notice.BookResync, es.id.Venue(), string(es.id), now,
		"events were lost between the ingest and this edge: the book is rebuilt from the ingest's", d))
	es.v.feed.Invalidate(es.id)
	es.resync()
}

// resync holds what arrives from now on and fetches the book. A range
// being recovered is given up (its fetch is of an older gen): the book
// replaces it, and checks what was lost (verify). es.mu must be held.
func (es *edgeStream) resync() {
	if es.recovering {
		es.recovering, es.verify = false, true
		es.e.busRecovered.add(es.id.Venue(), 0)
	}
	es.resyncing = true
	es.gen++
	go es.fetch(es.gen)
}

// fetch asks the ingest's responder for the book until it answers, then
// forwards it and what was held.
func (es *edgeStream) fetch(gen int) {
	subj := es.e.subj.Book(es.id.Venue(), es.id.Symbol())
	wait, timeout := minBookRetry, firstBookTimeout
	began := time.Now()
	for {
		es.mu.Lock()
		stale := es.closed || es.gen != gen
		es.mu.Unlock()
		if stale {
			return
		}
		r, err := es.e.nc.RequestMsg(&nats.Msg{Subject: subj}, timeout)
		if errors.Is(err, nats.ErrTimeout) {
			timeout = min(2*timeout, bookTimeout)
			continue // asked again at once: the request, or its answer, was lost
		}
		if err == nil && r.Header.Get(HeaderError) == "" && es.v.admits(r) {
			seq, perr := strconv.ParseUint(r.Header.Get(HeaderSeq), 10, 64)
			why := badSeq
			if perr == nil {
				why = es.check.check(r.Data, seq, true)
			}
			if why == "" {
				es.mu.Lock()
				done := es.closed || es.gen != gen || es.book(heldMsg{r.Header.Get(HeaderEpoch), seq, r.Data, r.Header.Get(HeaderLeader)})
				es.mu.Unlock()
				if done {
					return
				}
				// A new publisher's book behind the seq forwarded: it
				// passes it at the stream's rate, so it is asked again
				// soon rather than after a backoff.
				wait = min(wait, behindBookRetry)
			} else {
				es.e.rejects.reject(es.id.Venue(), why, "subject", subj, "seq", seq) // asked again, as if unanswered
			}
		}
		select {
		case <-es.e.stop:
			return
		case <-time.After(wait):
		}
		if time.Since(began) < quickBookRetries {
			wait = quickBookRetry
		} else {
			wait = min(2*wait, maxBookRetry)
		}
	}
}

// book forwards the book h (a snapshot:true event) and then what was held
// past its seq, from its publisher, and reports true; a book not past
// es.after (renumber) is not forwarded: false, it is asked again. es.mu
// must be held.
func (es *edgeStream) book(h heldMsg) bool {
	if es.after > 0 && h.epoch == es.epoch && h.seq <= es.after {
		return false
	}
	if es.verify && es.started {
		switch {
		case h.epoch != es.epoch:
			es.gap("epoch_change", es.last+1, 0, h.epoch)
		case h.seq > es.last && !es.heldFrom(es.last+1, h.seq):
			es.gap("bus_gap", es.last+1, h.seq, "")
		}
		// gap restarted the resync only if the book was wrong; this book
		// is the answer either way.
	}
	es.verify, es.resyncing, es.after = false, false, 0
	es.gen++ // any fetch still running gives up
	es.epoch, es.started = h.epoch, true
	es.forward(h)
	held := es.held
	es.held = nil
	es.hbSeq = 0
	for _, m := range held {
		if m.epoch != es.epoch || m.seq <= es.last || m.leader != "" && h.leader != "" && m.leader != h.leader {
			continue // in the book, older than its epoch, or another publisher's numbering
		}
		es.handle(m)
	}
	return true
}

// heldFrom reports whether the events held during the resync carry every
// seq from first to last of the current epoch: the book moved on while it
// was fetched, but nothing was lost. es.mu must be held.
func (es *edgeStream) heldFrom(first, last uint64) bool {
	next := first
	for _, m := range es.held {
		if m.epoch == es.epoch && m.seq == next {
			next++
		}
	}
	return next > last
}

// heartbeat checks the tail: the seq the previous heartbeat named must
// have arrived by now. es.mu must not be held.
func (es *edgeStream) heartbeat(epoch string, seq uint64) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if !es.started && !es.level2 && !es.closed && es.sub != nil && seq > 0 {
		// A quiet stream's seq is known before its next event: the
		// subscribers' gaps on this edge can end there.
		es.started, es.epoch, es.last, es.hbSeq = true, epoch, seq, seq
		es.v.feed.Baseline(es.id, seq)
		return
	}
	if es.closed || !es.started || es.resyncing || es.recovering || epoch != es.epoch {
		es.hbSeq = 0
		return
	}
	if es.hbSeq > es.last {
		first, last := es.last+1, es.hbSeq
		es.hbSeq = seq
		if es.recover(first, last, nil) {
			return
		}
		es.gap("bus_gap", first, last, "")
		if !es.level2 {
			es.last = last // the stream goes on after the loss
		}
	}
	es.hbSeq = seq
}

// close stops following the stream. es.mu must be held.
func (es *edgeStream) close() {
	if es.closed {
		return
	}
	es.closed = true
	es.gen++
	if es.sub != nil {
		es.sub.Unsubscribe()
		es.e.forget(es.sub.Subject)
	}
}
