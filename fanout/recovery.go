package fanout

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// RecoveryOptions bound the recovery window: the newest events of each
// stream, kept as the messages delivered (the same bytes, encoded once), so
// that a subscriber that lost a range still held gets it back instead of a
// gap. Any bound at 0 turns recovery off.
type RecoveryOptions struct {
	// MaxEventsPerStream bounds each stream's window in events. The
	// daemon's default is DefaultRecoveryEvents.
	MaxEventsPerStream int
	// MaxBytes bounds every window of the node together: each event's
	// encoded bytes plus its message header (RecoveryEventOverhead).
	// The daemon's default is DefaultRecoveryBytes.
	MaxBytes int64
	// MaxAge bounds how old an event held may be (by its publish time):
	// older ones leave the window when the stream's next event arrives
	// and are never sent. The daemon's default is DefaultRecoveryAge.
	MaxAge time.Duration
}

// The daemon's defaults. A range is recovered only if it fits the
// subscriber's queue bound (venues.<v>.max_queue_len, 10000 by default), so
// a window longer than that bound would hold events no resume could send.
const (
	DefaultRecoveryEvents = 10000
	DefaultRecoveryBytes  = 256 << 20
	DefaultRecoveryAge    = 2 * time.Minute
)

// RecoveryEventOverhead is what one held event costs beside its bytes: its
// message header and its ring slot.
const RecoveryEventOverhead = int64(unsafe.Sizeof(subscriber.Message{})) + 8

// On reports whether the options keep a window at all.
func (o RecoveryOptions) On() bool {
	return o.MaxEventsPerStream > 0 && o.MaxBytes > 0 && o.MaxAge > 0
}

// recoveryBudget is the node's byte bound over the windows of every feed.
type recoveryBudget struct {
	o       RecoveryOptions
	bytes   atomic.Int64 // held, node-wide
	windows atomic.Int64 // windows holding at least one event, node-wide
}

// RecoveryCounters are a feed's recovery figures, for metrics. Events and
// Bytes are what its windows hold now; the others only grow.
type RecoveryCounters struct {
	Events        atomic.Int64  // events held
	Bytes         atomic.Int64  // bytes held (RecoveryOptions.MaxBytes' measure)
	Served        atomic.Uint64 // stream ranges sent (on resume, reattach, or a recover op)
	RefusedWindow atomic.Uint64 // ranges not sent: not whole in the window
	RefusedQueue  atomic.Uint64 // ranges not sent: more than the subscriber's queue had room for
}

// RecoveryCounters returns the feed's recovery figures.
func (f *Feed) RecoveryCounters() *RecoveryCounters { return &f.rc }

// window is one stream's newest events, oldest first, with contiguous
// seqs: a ring whose size is a power of two, grown up to the count bound
// and then reused, so keeping an event allocates nothing once the ring
// has its size. Guarded by Feed.mu.
type window struct {
	ring  []*subscriber.Message
	head  int // index of the oldest
	n     int
	bytes int64
}

func (w *window) at(i int) *subscriber.Message { return w.ring[(w.head+i)&(len(w.ring)-1)] }

func cost(m *subscriber.Message) int64 { return int64(len(m.Data)) + RecoveryEventOverhead }

// keep appends m, just published on st at m.Seq, to st's window, evicting
// what the bounds no longer allow. A seq that does not follow the newest
// held (a stream that was not delivered for a while, a bus gap) starts the
// window again: it only ever holds one contiguous range. f.mu must be
// held.
func (f *Feed) keep(st *stream, m *subscriber.Message) {
	b := f.rec
	if b == nil || st.conflate {
		return
	}
	w := &st.win
	if w.n > 0 && w.at(w.n-1).Seq+1 != m.Seq {
		f.unhold(st)
	}
	f.expire(st, m.Published)
	for w.n >= b.o.MaxEventsPerStream {
		f.evict(st)
	}
	if w.n == len(w.ring) {
		f.grow(st)
	}
	w.ring[(w.head+w.n)&(len(w.ring)-1)] = m
	w.n++
	c := cost(m)
	w.bytes += c
	f.rc.Events.Add(1)
	f.rc.Bytes.Add(c)
	if w.n == 1 {
		b.windows.Add(1)
	}
	if b.bytes.Add(c) <= b.o.MaxBytes {
		return
	}
	// Over the node's bound: a window above its fair share gives back a
	// sixteenth of the bound, so that windows below theirs can grow; then
	// this window gives back whatever is still over.
	share := b.o.MaxBytes / max(1, b.windows.Load())
	floor := b.o.MaxBytes - b.o.MaxBytes/16
	for w.n > 0 && w.bytes > share && b.bytes.Load() > floor {
		f.evict(st)
	}
	for w.n > 0 && b.bytes.Load() > b.o.MaxBytes {
		f.evict(st)
	}
}

// expire evicts st's events published before now minus MaxAge. f.mu must
// be held.
func (f *Feed) expire(st *stream, now time.Time) {
	cut := now.Add(-f.rec.o.MaxAge)
	for st.win.n > 0 && st.win.at(0).Published.Before(cut) {
		f.evict(st)
	}
}

// evict drops the oldest event of st's window. f.mu must be held.
func (f *Feed) evict(st *stream) {
	w := &st.win
	m := w.ring[w.head]
	w.ring[w.head] = nil
	w.head = (w.head + 1) & (len(w.ring) - 1)
	w.n--
	c := cost(m)
	w.bytes -= c
	f.rc.Events.Add(-1)
	f.rc.Bytes.Add(-c)
	f.rec.bytes.Add(-c)
	if w.n == 0 {
		w.head = 0
		f.rec.windows.Add(-1)
	}
}

// unhold empties st's window and frees its ring: for a stream deleted or
// left without subscribers. f.mu must be held.
func (f *Feed) unhold(st *stream) {
	if f.rec == nil {
		return
	}
	for st.win.n > 0 {
		f.evict(st)
	}
	if len(st.subs) == 0 {
		st.win.ring = nil
	}
}

// span reports where seqs from..to sit in st's window, the index of from
// and their count, and whether the window holds every one of them (after
// expiring what is too old). f.mu must be held.
func (f *Feed) span(st *stream, from, to uint64) (i0, n int, ok bool) {
	w := &st.win
	if f.rec == nil || st.conflate || from == 0 || to < from {
		return 0, 0, false
	}
	f.expire(st, f.now())
	if w.n == 0 || w.at(0).Seq > from || w.at(w.n-1).Seq < to {
		return 0, 0, false
	}
	return int(from - w.at(0).Seq), int(to-from) + 1, true
}

// size returns the bytes of n events of st's window from index i0. f.mu
// must be held.
func (st *stream) size(i0, n int) int {
	size := 0
	for i := range n {
		size += len(st.win.at(i0 + i).Data)
	}
	return size
}

// copies returns copies of n messages of st's window from index i0: the
// same bytes, with Published zero, so that a recovered event is not
// measured as a publish-to-write latency. f.mu must be held.
func (st *stream) copies(i0, n int) []*subscriber.Message {
	hdrs := make([]subscriber.Message, n)
	out := make([]*subscriber.Message, n)
	for i := range n {
		hdrs[i] = *st.win.at(i0 + i)
		hdrs[i].Published = time.Time{}
		out[i] = &hdrs[i]
	}
	return out
}

// oldest returns the first seq st's window holds, 0 if none. f.mu must
// be held.
func (st *stream) oldest() uint64 {
	if st.win.n == 0 {
		return 0
	}
	return st.win.at(0).Seq
}

// recovery is one gap of an entry that its stream's window can fill.
type recovery struct {
	gap int // index in entry.gaps
	ms  []*subscriber.Message
}

// plan returns the gaps of e that can be recovered on c: the whole range
// held, not a conflated stream, no more events than c's queue has room
// for (with one more), and for level2 the updates fewer bytes than a
// snapshot. Mailbox.Recover checks the bound again, bytes too, under the
// mailbox's lock. f.mu must be held.
func (f *Feed) plan(e *entry, c *subscriber.Mailbox) []recovery {
	if f.rec == nil {
		return nil
	}
	room := f.maxLen - c.Len() - 1
	var out []recovery
	for i, g := range e.gaps {
		i0, n, ok := f.span(g.st, g.first, g.last)
		switch {
		case !ok:
			if !g.st.conflate {
				f.rc.RefusedWindow.Add(1)
			}
			continue
		case n > room:
			f.rc.RefusedQueue.Add(1)
			continue
		case g.st.level2 && g.st.hasBook && len(f.snapMsg(g.st).Data) < g.st.size(i0, n):
			continue // the snapshot makes the book whole for fewer bytes
		}
		room -= n
		out = append(out, recovery{gap: i, ms: g.st.copies(i0, n)})
	}
	return out
}

// resumedRecovering is resumed for an entry with recoverable gaps: the
// resumed notice, then the events of each range that fits the queue bound
// (whole, leaving room for the next event: Mailbox.Recover), queued
// together on c, then a snapshot of each level2 stream resent rather than
// recovered. A range that does not fit is a gap, as without recovery.
// f.mu must be held.
func (f *Feed) resumedRecovering(e *entry, c *subscriber.Mailbox, reason string, plan []recovery, resend []*stream) {
	batches := make([][]*subscriber.Message, len(plan))
	planned := make(map[int]int, len(plan)) // gap index → plan index
	for i, r := range plan {
		batches[i] = r.ms
		planned[r.gap] = i
	}
	claims := f.claims(resend)
	sent := map[*stream]bool{}
	ok := c.Recover(batches, f.maxLen, f.maxBytes, func(ok []bool, queued int) *subscriber.Message {
		gaps := make(map[string]any, len(e.gaps))
		recovered := map[string]any{}
		dropped := e.dropped
		for i, g := range e.gaps {
			if j, in := planned[i]; in && ok[j] {
				recovered[string(g.st.id)] = []uint64{g.first, g.last}
				sent[g.st] = true
				dropped -= min(dropped, g.last-g.first+1)
				delete(claims, string(g.st.id))
				continue
			}
			gaps[string(g.st.id)] = []uint64{g.first, g.last}
		}
		details := map[string]any{
			"reason": reason, "bound": f.maxLen, "queue_len": queued, "max_queue_bytes": f.maxBytes,
			"dropped": dropped, "gaps": gaps, "recovered": recovered,
		}
		if len(claims) > 0 {
			details["claims"] = claims
		}
		n := notice.Must(notice.Resumed, f.venue, "", f.now(), "delivery resumed; recovered streams continue with the events lost, gaps name the seqs lost on the others", details)
		f.countNotice(notice.Resumed)
		return &subscriber.Message{Data: n.AppendJSON(nil)}
	})
	for i := range plan {
		switch {
		case ok == nil: // closed
		case ok[i]:
			f.rc.Served.Add(1)
		default:
			f.rc.RefusedQueue.Add(1)
		}
	}
	for _, st := range resend {
		if !sent[st] {
			f.sendSnapshot(c, st)
		}
	}
	e.dropping, e.dropped = false, 0
	clear(e.gaps)
	e.gaps = e.gaps[:0]
}

// snapMsg returns the cached snapshot message of st's book, making it if
// needed. st must be level2 with a book. f.mu must be held.
func (f *Feed) snapMsg(st *stream) *subscriber.Message {
	if st.snap == nil {
		ev := st.snapshotEvent()
		st.snap = &subscriber.Message{Stream: string(st.id), Seq: st.bookSeq, Snapshot: true, Data: ev.AppendJSON(nil), Published: f.now()}
	}
	return st.snap
}

// ErrNotRecoverable is returned by Hub.Recover for a range the window
// does not hold whole (or a conflated stream, which holds only its state).
var ErrNotRecoverable = errors.New("fanout: not in the recovery window")

// ErrNoRoom is returned by Hub.Recover for a range larger than the
// subscriber's queue has room for now (with one more event).
var ErrNoRoom = errors.New("fanout: range larger than the queue has room for")

// ErrNotSubscribed is returned by Hub.Recover for a stream the subscriber
// does not hold.
var ErrNotSubscribed = errors.New("fanout: not subscribed")

// Recovered is what Hub.Recover answered: the range asked for, From to To
// (To < From: nothing to send), and the range the window holds, Oldest to
// Newest (Oldest 0: none).
type Recovered struct {
	From, To       uint64
	Oldest, Newest uint64
}

// Recover queues on s's connection the events of st from seq from to the
// newest, in seq order, behind what is already queued, counted against
// the queue bound: all of them, leaving room for one more, or none
// (ErrNoRoom). The window must hold the whole range. reply builds the message that goes
// ahead of them on the notice queue (the client reads it first); it is
// called with the feed's and the mailbox's locks held and must only build
// it. Errors: ErrNotSubscribed, ErrNotRecoverable (with the window's
// range), ErrNoRoom, ErrUnknownVenue.
func (h *Hub) Recover(s *subscriber.Subscriber, st venue.Stream, from uint64, reply func(Recovered) *subscriber.Message) (Recovered, error) {
	f, err := h.feedOf(st)
	if err != nil {
		return Recovered{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, x := f.entries[s], f.streams[st]
	c := s.Resolve()
	if e == nil || x == nil || c == nil || !containsStream(e.streams, x) {
		return Recovered{}, ErrNotSubscribed
	}
	r := Recovered{From: from, To: x.seq}
	if from == x.seq+1 {
		return recoverQueue(c, nil, f, r, reply)
	}
	i0, n, ok := f.span(x, from, x.seq)
	if r.Oldest = x.oldest(); r.Oldest != 0 {
		r.Newest = x.win.at(x.win.n - 1).Seq
	}
	if !ok {
		f.rc.RefusedWindow.Add(1)
		return r, fmt.Errorf("%w: %s from %d", ErrNotRecoverable, st, from)
	}
	if n >= f.maxLen-c.Len() {
		f.rc.RefusedQueue.Add(1)
		return r, fmt.Errorf("%w: %d events", ErrNoRoom, n)
	}
	r, err = recoverQueue(c, x.copies(i0, n), f, r, reply)
	if err != nil {
		f.rc.RefusedQueue.Add(1)
		return r, err
	}
	f.rc.Served.Add(1)
	return r, nil
}

// recoverQueue queues reply(r) and then ms on c, if they fit the queue
// bound whole (Mailbox.Recover); else ErrNoRoom, and nothing is queued.
func recoverQueue(c *subscriber.Mailbox, ms []*subscriber.Message, f *Feed, r Recovered, reply func(Recovered) *subscriber.Message) (Recovered, error) {
	ok := c.Recover([][]*subscriber.Message{ms}, f.maxLen, f.maxBytes, func(ok []bool, _ int) *subscriber.Message {
		if !ok[0] {
			return nil
		}
		return reply(r)
	})
	switch {
	case ok == nil:
		return r, ErrNotSubscribed
	case !ok[0]:
		return r, fmt.Errorf("%w: %d events", ErrNoRoom, len(ms))
	}
	return r, nil
}

func containsStream(sts []*stream, st *stream) bool {
	for _, x := range sts {
		if x == st {
			return true
		}
	}
	return false
}

// SetRecovery gives the feeds added after it a recovery window within o's
// bounds, the byte bound shared by all of them. Options that are not On
// keep recovery off.
func (h *Hub) SetRecovery(o RecoveryOptions) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !o.On() {
		h.rec = nil
		return
	}
	h.rec = &recoveryBudget{o: o}
}

// Recovery returns the hub's recovery bounds; not On if recovery is off.
func (h *Hub) Recovery() RecoveryOptions {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.rec == nil {
		return RecoveryOptions{}
	}
	return h.rec.o
}

var (
	descRecoveryEvents  = prometheus.NewDesc("fanoutd_recovery_events", "Events held in the recovery windows, by venue.", []string{"venue"}, nil)
	descRecoveryBytes   = prometheus.NewDesc("fanoutd_recovery_bytes", "Bytes held in the recovery windows (encoded events and their headers), by venue; recovery.max_bytes bounds their sum.", []string{"venue"}, nil)
	descRecoveries      = prometheus.NewDesc("fanoutd_recoveries_total", "Stream ranges a subscriber lost that were sent again from the recovery window (resume, reattach, recover op), by venue.", []string{"venue"}, nil)
	descRecoveryRefused = prometheus.NewDesc("fanoutd_recoveries_refused_total", "Stream ranges lost that were not sent again, by venue and reason: window (not whole in the recovery window) or queue (more than the subscriber's queue had room for).", []string{"venue", "reason"}, nil)
)

// NewRecoveryCollector returns a Prometheus collector of h's feeds'
// recovery figures, read at scrape time.
func NewRecoveryCollector(h *Hub) prometheus.Collector { return &recoveryCollector{hub: h} }

type recoveryCollector struct{ hub *Hub }

func (c *recoveryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecoveryEvents, descRecoveryBytes, descRecoveries, descRecoveryRefused} {
		ch <- d
	}
}

func (c *recoveryCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c.hub.Feeds() {
		k, v := f.RecoveryCounters(), f.Venue()
		ch <- prometheus.MustNewConstMetric(descRecoveryEvents, prometheus.GaugeValue, float64(k.Events.Load()), v)
		ch <- prometheus.MustNewConstMetric(descRecoveryBytes, prometheus.GaugeValue, float64(k.Bytes.Load()), v)
		ch <- prometheus.MustNewConstMetric(descRecoveries, prometheus.CounterValue, float64(k.Served.Load()), v)
		ch <- prometheus.MustNewConstMetric(descRecoveryRefused, prometheus.CounterValue, float64(k.RefusedWindow.Load()), v, "window")
		ch <- prometheus.MustNewConstMetric(descRecoveryRefused, prometheus.CounterValue, float64(k.RefusedQueue.Load()), v, "queue")
	}
}
