package subscriber

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/fanoutd/fanoutd/venue"
)

// Kind says whether a subscriber is one connection or a durable name.
// The zero Kind is not valid.
type Kind uint8

// Subscriber kinds.
const (
	Ephemeral Kind = iota + 1
	Named
)

// String returns "ephemeral" or "named".
func (k Kind) String() string {
	switch k {
	case Ephemeral:
		return "ephemeral"
	case Named:
		return "named"
	}
	return ""
}

// Subscriber is a receiver of events: its identity, its subscriptions and
// the connection currently attached to it, if any.
type Subscriber struct {
	id   string
	kind Kind
	conn atomic.Pointer[Mailbox] // the attached connection; nil while detached

	attachMu sync.Mutex // serialises Attach for one name

	mu      sync.Mutex // protects streams
	streams map[venue.Stream]struct{}
}

// ID returns the subscriber's id: its name if named, "e<N>" if ephemeral.
func (s *Subscriber) ID() string { return s.id }

// Kind returns the subscriber's kind.
func (s *Subscriber) Kind() Kind { return s.kind }

// Resolve returns the live connection, or nil if none is attached (a named
// subscriber between connections) or it has been closed. Data and notices
// are both delivered through Resolve.
func (s *Subscriber) Resolve() *Mailbox {
	c := s.conn.Load()
	if c == nil || c.IsClosed() {
		return nil
	}
	return c
}

// Mailbox returns the mailbox last attached, open or closed, or nil.
func (s *Subscriber) Mailbox() *Mailbox { return s.conn.Load() }

// AddStream records a subscription; it reports false if it was already
// there.
func (s *Subscriber) AddStream(st venue.Stream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.streams[st]; ok {
		return false
	}
	s.streams[st] = struct{}{}
	return true
}

// RemoveStream forgets a subscription; it reports false if there was none.
func (s *Subscriber) RemoveStream(st venue.Stream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.streams[st]; !ok {
		return false
	}
	delete(s.streams, st)
	return true
}

// Streams returns the subscriptions, sorted.
func (s *Subscriber) Streams() []venue.Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]venue.Stream, 0, len(s.streams))
	for st := range s.streams {
		out = append(out, st)
	}
	slices.Sort(out)
	return out
}

// NumStreams returns how many streams the subscriber is subscribed to.
func (s *Subscriber) NumStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ErrBadName is returned for a name outside [A-Za-z0-9_.-]{1,64}.
var ErrBadName = errors.New("subscriber: name must match [A-Za-z0-9_.-]{1,64}")

// ValidName reports whether name may name a subscriber.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Registry holds every subscriber: named ones by name for as long as the
// process runs (or until Forget), ephemeral ones while their connection
// lives. The zero Registry is not usable; call NewRegistry.
type Registry struct {
	nextID atomic.Uint64

	mu        sync.Mutex // protects the maps
	named     map[string]*Subscriber
	ephemeral map[string]*Subscriber
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{named: map[string]*Subscriber{}, ephemeral: map[string]*Subscriber{}}
}

// NewEphemeral registers an ephemeral subscriber for c.
func (r *Registry) NewEphemeral(c *Mailbox) *Subscriber {
	s := &Subscriber{id: "e" + strconv.FormatUint(r.nextID.Add(1), 10), kind: Ephemeral, streams: map[venue.Stream]struct{}{}}
	s.conn.Store(c)
	r.mu.Lock()
	r.ephemeral[s.id] = s
	r.mu.Unlock()
	return s
}

// Attach attaches c to the named subscriber name, creating it if new, and
// reports whether the name existed before (a reattach, which must be told
// what it missed). If another connection holds the name, it is a takeover:
// takeover is called with that connection before c is attached, so the
// caller can tell it, close it and account for what it had queued while
// nothing else can be delivered to either. Concurrent attaches of one name
// are serialised.
func (r *Registry) Attach(name string, c *Mailbox, takeover func(s *Subscriber, previous *Mailbox)) (s *Subscriber, existed bool, err error) {
	if !ValidName(name) {
		return nil, false, fmt.Errorf("%w: %q", ErrBadName, name)
	}
	r.mu.Lock()
	s, existed = r.named[name]
	if !existed {
		s = &Subscriber{id: name, kind: Named, streams: map[venue.Stream]struct{}{}}
		r.named[name] = s
	}
	r.mu.Unlock()
	s.attachMu.Lock()
	defer s.attachMu.Unlock()
	if prev := s.conn.Load(); prev != nil && takeover != nil {
		takeover(s, prev)
	}
	s.conn.Store(c)
	return s, existed, nil
}

// Detach detaches c from s if it is still the attached connection, and
// reports whether it was. An ephemeral subscriber is removed from the
// registry as well; removing it from feeds is the caller's (fanout.Hub).
func (r *Registry) Detach(s *Subscriber, c *Mailbox) bool {
	ok := s.conn.CompareAndSwap(c, nil)
	if s.kind == Ephemeral {
		r.mu.Lock()
		delete(r.ephemeral, s.id)
		r.mu.Unlock()
	}
	return ok
}

// Forget removes a named subscriber for good. Its subscriptions must have
// been removed from the feeds by the caller.
func (r *Registry) Forget(name string) {
	r.mu.Lock()
	delete(r.named, name)
	r.mu.Unlock()
}

// Named returns the named subscriber name, or nil.
func (r *Registry) Named(name string) *Subscriber {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.named[name]
}

// All returns every subscriber, named first, each group sorted by id.
func (r *Registry) All() []*Subscriber {
	r.mu.Lock()
	named := make([]*Subscriber, 0, len(r.named))
	for _, s := range r.named {
		named = append(named, s)
	}
	eph := make([]*Subscriber, 0, len(r.ephemeral))
	for _, s := range r.ephemeral {
		eph = append(eph, s)
	}
	r.mu.Unlock()
	byID := func(a, b *Subscriber) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	}
	slices.SortFunc(named, byID)
	slices.SortFunc(eph, byID)
	return append(named, eph...)
}

// Count returns the number of ephemeral and named subscribers.
func (r *Registry) Count() (ephemeral, named int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ephemeral), len(r.named)
}
