package fanout

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// Hub routes subscriptions to the Feed of each stream's venue and ties the
// subscriber lifecycle (attach, detach, takeover) to the feeds. The zero
// Hub is not usable; call NewHub.
type Hub struct {
	reg     *subscriber.Registry
	expired atomic.Uint64 // named subscribers forgotten by ExpireAfter
	budget  *budget       // derived streams against DerivedLimits

	mu    sync.RWMutex // protects feeds and rec
	feeds map[string]*Feed
	rec   *recoveryBudget // SetRecovery; nil: off

	timerMu sync.Mutex // protects timers
	timers  map[*subscriber.Subscriber]*time.Timer
}

// NewHub returns a hub with no feeds over reg.
func NewHub(reg *subscriber.Registry) *Hub {
	return &Hub{reg: reg, budget: newBudget(), feeds: map[string]*Feed{}, timers: map[*subscriber.Subscriber]*time.Timer{}}
}

// SetDerivedLimits sets the caps on derived streams (zero fields take
// their defaults). Streams already held are kept, past a lowered cap too;
// new subscriptions meet the new caps.
func (h *Hub) SetDerivedLimits(l DerivedLimits) { h.budget.set(l) }

// DerivedUsage returns what the node's derived streams use of its caps.
func (h *Hub) DerivedUsage() DerivedUsage { return h.budget.usage() }

// DerivedRefused returns how many subscriptions cap c has refused.
func (h *Hub) DerivedRefused(c Cap) uint64 {
	if c == 0 || c >= numCaps {
		return 0
	}
	return h.budget.refused[c].Load()
}

// Admit reserves for s the derived streams among sts it does not hold
// yet, all or none: past a cap of DerivedLimits it reserves none and
// returns a *BudgetError. Subscribe admits a derived stream itself; Admit
// lets a caller refuse a whole command before answering it. A reserved
// stream is released by Unsubscribe, or when s leaves the hub.
func (h *Hub) Admit(s *subscriber.Subscriber, sts []venue.Stream) error {
	return h.budget.admit(s, sts)
}

// Registry returns the hub's subscriber registry.
func (h *Hub) Registry() *subscriber.Registry { return h.reg }

// AddFeed creates the feed of o.Venue. It is an error to add a venue twice.
func (h *Hub) AddFeed(o Options) (*Feed, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.feeds[o.Venue]; ok {
		return nil, fmt.Errorf("fanout: feed %q added twice", o.Venue)
	}
	f := newFeed(o)
	f.rec = h.rec
	h.feeds[o.Venue] = f
	return f, nil
}

// Feed returns the feed of venueName, or nil.
func (h *Hub) Feed(venueName string) *Feed {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.feeds[venueName]
}

// Feeds returns every feed, sorted by venue.
func (h *Hub) Feeds() []*Feed {
	h.mu.RLock()
	out := make([]*Feed, 0, len(h.feeds))
	for _, f := range h.feeds {
		out = append(out, f)
	}
	h.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Feed) int { return cmp.Compare(a.venue, b.venue) })
	return out
}

// ErrUnknownVenue is returned for a stream whose venue has no feed.
var ErrUnknownVenue = errors.New("fanout: unknown venue")

func (h *Hub) feedOf(st venue.Stream) (*Feed, error) {
	f := h.Feed(st.Venue())
	if f == nil {
		return nil, fmt.Errorf("%w %q in stream %q", ErrUnknownVenue, st.Venue(), st)
	}
	return f, nil
}

// Release gives back what Admit reserved for s among sts and s has not
// subscribed to (a command refused after its Admit).
func (h *Hub) Release(s *subscriber.Subscriber, sts []venue.Stream) {
	have := s.Streams()
	for _, st := range sts {
		if _, ok := slices.BinarySearch(have, st); !ok {
			h.budget.release(s, st)
		}
	}
}

// Subscribe subscribes s to st. A level2 stream with a book starts with a
// snapshot at the stream's current seq. Subscribing twice is a no-op. A
// derived stream is named in its canonical form (venue.Stream.Canonical),
// and refused with a *BudgetError past a cap of DerivedLimits (see Admit).
func (h *Hub) Subscribe(s *subscriber.Subscriber, st venue.Stream) error {
	st = st.Canonical()
	f, err := h.feedOf(st)
	if err != nil {
		return err
	}
	if err := h.budget.admit(s, []venue.Stream{st}); err != nil {
		return err
	}
	s.AddStream(st)
	f.subscribe(s, st)
	return nil
}

// Unsubscribe removes s from st.
func (h *Hub) Unsubscribe(s *subscriber.Subscriber, st venue.Stream) error {
	st = st.Canonical()
	f, err := h.feedOf(st)
	if err != nil {
		return err
	}
	s.RemoveStream(st)
	f.unsubscribe(s, st)
	h.budget.release(s, st)
	return nil
}

// Snapshot queues a fresh snapshot of the level2 stream st for s now (the
// websocket "snapshot" op). It reports whether one was queued: false if s
// is not subscribed to st, st is not level2, or its book has not arrived.
func (h *Hub) Snapshot(s *subscriber.Subscriber, st venue.Stream) bool {
	f, err := h.feedOf(st)
	if err != nil {
		return false
	}
	return f.snapshot(s, st)
}

// NewEphemeral registers an ephemeral subscriber on c with no owner.
func (h *Hub) NewEphemeral(c *subscriber.Mailbox) *subscriber.Subscriber {
	return h.reg.NewEphemeral(c, "")
}

// NewOwnedEphemeral registers an ephemeral subscriber on c, owned by owner.
func (h *Hub) NewOwnedEphemeral(c *subscriber.Mailbox, owner string) *subscriber.Subscriber {
	return h.reg.NewEphemeral(c, owner)
}

// Attach attaches c to the named subscriber name, creating it for owner if
// new; a name another owner created is refused with
// subscriber.ErrNameTaken. If another connection held the name,
// onTakeover is called with it first (to tell it why before it is closed),
// then it is closed and what it still had queued is recorded as missed.
// If the name existed, each of its feeds tells c at once what it missed (a
// resumed notice, reason "reattached") and sends fresh snapshots.
func (h *Hub) Attach(name, owner string, c *subscriber.Mailbox, onTakeover func(previous *subscriber.Mailbox)) (*subscriber.Subscriber, bool, error) {
	return h.AttachFrom(name, owner, c, nil, onTakeover)
}

// AttachFrom is Attach for a connection that states what it read before
// its previous connection closed: from holds, per stream, the last seq it
// read. The gaps of the resumed notice then start right after it, for
// each stream it names: events written to the old connection but never
// read are named too. A stream it does not name keeps the gaps the feed
// recorded (what was lost or left unwritten). A seq at or past what the
// stream had sent the subscriber means nothing was lost there.
func (h *Hub) AttachFrom(name, owner string, c *subscriber.Mailbox, from map[venue.Stream]uint64, onTakeover func(previous *subscriber.Mailbox)) (*subscriber.Subscriber, bool, error) {
	s, existed, err := h.reg.AttachFrom(name, owner, c, from, func(s *subscriber.Subscriber, prev *subscriber.Mailbox) {
		if onTakeover != nil {
			onTakeover(prev)
		}
		h.closeConn(s, prev)
	})
	if err != nil {
		return nil, false, err
	}
	h.stopTimer(s)
	if existed && c != nil {
		for _, f := range h.Feeds() {
			f.sync(s)
		}
	}
	if from != nil {
		s.ClearResumeFrom(from)
	}
	return s, existed, nil
}

// Detach ends connection c of s: c is closed. An ephemeral subscriber is
// removed from every feed and the registry, leaving nothing behind. A named
// subscriber keeps its subscriptions; what c still had queued is recorded
// as missed and reported when a connection attaches again. Detach reports
// whether c was s's connection (false after a takeover); it is idempotent.
func (h *Hub) Detach(s *subscriber.Subscriber, c *subscriber.Mailbox) bool {
	if s.Kind() == subscriber.Ephemeral {
		c.Close()
		ok := h.reg.Detach(s, c)
		for _, f := range h.Feeds() {
			f.remove(s)
		}
		h.budget.releaseAll(s)
		return ok
	}
	h.closeConn(s, c)
	ok := h.reg.Detach(s, c)
	for _, f := range h.Feeds() {
		f.detached(s)
	}
	return ok
}

// ExpireAfter forgets the named subscriber s, as Forget does, once no
// connection has been attached to it for ttl; an Attach before then
// cancels it. Call it when s's connection detaches.
func (h *Hub) ExpireAfter(s *subscriber.Subscriber, ttl time.Duration) {
	if s.Kind() != subscriber.Named {
		return
	}
	h.timerMu.Lock()
	defer h.timerMu.Unlock()
	if t := h.timers[s]; t != nil {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(ttl, func() {
		h.timerMu.Lock()
		if h.timers[s] == t {
			delete(h.timers, s)
		}
		h.timerMu.Unlock()
		if h.reg.Expire(s, ttl) {
			for _, f := range h.Feeds() {
				f.remove(s)
			}
			h.budget.releaseAll(s)
			h.expired.Add(1)
		}
	})
	h.timers[s] = t
}

// Expired returns how many named subscribers ExpireAfter has forgotten.
func (h *Hub) Expired() uint64 { return h.expired.Load() }

// stopTimer cancels s's expiry, if one is armed.
func (h *Hub) stopTimer(s *subscriber.Subscriber) {
	h.timerMu.Lock()
	defer h.timerMu.Unlock()
	if t := h.timers[s]; t != nil {
		t.Stop()
		delete(h.timers, s)
	}
}

// closeConn closes c and records its unsent data as missed by s.
func (h *Hub) closeConn(s *subscriber.Subscriber, c *subscriber.Mailbox) {
	for _, m := range c.Close() {
		if m.Stream == "" || m.Snapshot || m.Conflate {
			continue
		}
		st := venue.Stream(m.Stream)
		if f := h.Feed(st.Venue()); f != nil {
			f.missed(s, st, m.Seq)
		}
	}
}

// Forget removes the named subscriber name for good: from every feed and
// the registry, closing its connection if one is attached.
func (h *Hub) Forget(name string) {
	s := h.reg.Forget(name)
	if s == nil {
		return
	}
	h.stopTimer(s)
	if c := s.Mailbox(); c != nil {
		c.Close()
	}
	for _, f := range h.Feeds() {
		f.remove(s)
	}
	h.budget.releaseAll(s)
}

// Broadcast sends n to every subscriber with a live connection, once each
// (the shutdown notice).
func (h *Hub) Broadcast(n notice.Notice) {
	m := &subscriber.Message{Data: n.AppendJSON(nil)}
	for _, s := range h.reg.All() {
		if c := s.Resolve(); c != nil {
			c.Notify(m)
		}
	}
}
