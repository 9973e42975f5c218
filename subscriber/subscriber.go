package subscriber

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
	id    string
	kind  Kind
	owner string                  // who created it (a token's name; "" without authentication)
	conn  atomic.Pointer[Mailbox] // the attached connection; nil while detached

	attachMu sync.Mutex // serialises Attach, Detach and Expire for one name; guards detached and gone
	detached time.Time  // when the last connection was detached
	gone     bool       // forgotten: an Attach that finds it looks the name up again

	mu      sync.Mutex // protects streams
	streams map[venue.Stream]struct{}

	// from is what the attaching connection stated it had read: per
	// stream, the last seq (AttachFrom). Set before the connection is
	// stored, cleared once every feed has observed the connection.
	from atomic.Pointer[map[venue.Stream]uint64]
}

// ResumeFrom returns what the connection attaching now stated it had read
// (per stream, the last seq), or nil if it stated nothing. A feed reads it
// when it observes a new connection, to start the gaps it reports there.
func (s *Subscriber) ResumeFrom() map[venue.Stream]uint64 {
	if p := s.from.Load(); p != nil {
		return *p
	}
	return nil
}

// ClearResumeFrom forgets the statement from, unless a later attach has
// replaced it.
func (s *Subscriber) ClearResumeFrom(from map[venue.Stream]uint64) {
	if p := s.from.Load(); p != nil && reflect.ValueOf(*p).UnsafePointer() == reflect.ValueOf(from).UnsafePointer() {
		s.from.CompareAndSwap(p, nil)
	}
}

// ID returns the subscriber's id: its name if named, "e<N>" if ephemeral.
func (s *Subscriber) ID() string { return s.id }

// Kind returns the subscriber's kind.
func (s *Subscriber) Kind() Kind { return s.kind }

// Owner returns who created the subscriber: the name of the token it was
// created under, or "" without authentication. Only its owner may attach
// to a named subscriber.
func (s *Subscriber) Owner() string { return s.owner }

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

// Registry holds every subscriber: named ones by name until Forget or
// Expire, ephemeral ones while their connection lives. The zero Registry is not usable; call NewRegistry.
type Registry struct {
	nextID atomic.Uint64

	mu        sync.Mutex // protects the fields below
	named     map[string]*Subscriber
	ephemeral map[string]*Subscriber
	namedBy   map[string]int // named subscribers per owner
	maxNamed  int            // LimitNamed's total; 0: none
	maxOwned  int            // LimitNamed's per owner; 0: none
}

// NewRegistry returns an empty registry, with no limit on names.
func NewRegistry() *Registry {
	return &Registry{named: map[string]*Subscriber{}, ephemeral: map[string]*Subscriber{}, namedBy: map[string]int{}}
}

// NamedLimitError is AttachFrom's refusal of a new name past LimitNamed.
type NamedLimitError struct {
	PerOwner bool // the owner's limit, not the registry's
	Limit    int
}

func (e *NamedLimitError) Error() string {
	if e.PerOwner {
		return fmt.Sprintf("subscriber: the owner already has %d named subscribers", e.Limit)
	}
	return fmt.Sprintf("subscriber: the registry already has %d named subscribers", e.Limit)
}

// LimitNamed bounds the named subscribers AttachFrom creates: total in
// all and perOwner for each owner (0: no bound). A name that exists is
// unaffected, whatever the bounds: it can always be reattached.
func (r *Registry) LimitNamed(total, perOwner int) {
	r.mu.Lock()
	r.maxNamed, r.maxOwned = total, perOwner
	r.mu.Unlock()
}

// NamedRoom returns the *NamedLimitError AttachFrom would return for a new
// name of owner now, or nil.
func (r *Registry) NamedRoom(owner string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.room(owner)
}

// room is NamedRoom. r.mu must be held.
func (r *Registry) room(owner string) error {
	switch {
	case r.maxOwned > 0 && r.namedBy[owner] >= r.maxOwned:
		return &NamedLimitError{PerOwner: true, Limit: r.maxOwned}
	case r.maxNamed > 0 && len(r.named) >= r.maxNamed:
		return &NamedLimitError{Limit: r.maxNamed}
	}
	return nil
}

// NewEphemeral registers an ephemeral subscriber for c, owned by owner.
func (r *Registry) NewEphemeral(c *Mailbox, owner string) *Subscriber {
	s := &Subscriber{id: "e" + strconv.FormatUint(r.nextID.Add(1), 10), kind: Ephemeral, owner: owner, streams: map[venue.Stream]struct{}{}}
	s.conn.Store(c)
	r.mu.Lock()
	r.ephemeral[s.id] = s
	r.mu.Unlock()
	return s
}

// ErrNameTaken is returned by Attach for a name another owner created.
var ErrNameTaken = errors.New("subscriber: name belongs to another owner")

// Attach attaches c to the named subscriber name, creating it for owner
// if new, and reports whether the name existed before (a reattach, which
// must be told what it missed). A name that exists under another owner is
// refused with ErrNameTaken. If another connection holds the name, it is
// a takeover: takeover is called with that connection before c is
// attached, so the caller can tell it, close it and account for what it
// had queued while nothing else can be delivered to either. Concurrent
// attaches of one name are serialised.
func (r *Registry) Attach(name, owner string, c *Mailbox, takeover func(s *Subscriber, previous *Mailbox)) (s *Subscriber, existed bool, err error) {
	return r.AttachFrom(name, owner, c, nil, takeover)
}

// AttachFrom is Attach for a connection that states, per stream, the last
// seq it read before its previous connection closed (from, nil if it
// states nothing): the statement is set on the subscriber (ResumeFrom)
// before c is attached, so the gaps the feeds report start after it. c
// may be nil: the subscriber is then created (or kept) detached. A new
// name past LimitNamed is refused with a *NamedLimitError.
func (r *Registry) AttachFrom(name, owner string, c *Mailbox, from map[venue.Stream]uint64, takeover func(s *Subscriber, previous *Mailbox)) (s *Subscriber, existed bool, err error) {
	if !ValidName(name) {
		return nil, false, fmt.Errorf("%w: %q", ErrBadName, name)
	}
	for {
		r.mu.Lock()
		s, existed = r.named[name]
		if !existed {
			if err := r.room(owner); err != nil {
				r.mu.Unlock()
				return nil, false, err
			}
			s = &Subscriber{id: name, kind: Named, owner: owner, streams: map[venue.Stream]struct{}{}}
			r.named[name] = s
			r.namedBy[owner]++
		}
		r.mu.Unlock()
		if s.owner != owner {
			return nil, false, fmt.Errorf("%w: %q", ErrNameTaken, name)
		}
		s.attachMu.Lock()
		if s.gone { // expired or forgotten since the lookup: look again
			s.attachMu.Unlock()
			continue
		}
		if prev := s.conn.Load(); prev != nil && takeover != nil {
			takeover(s, prev)
		}
		if from != nil {
			s.from.Store(&from)
		}
		s.conn.Store(c)
		s.attachMu.Unlock()
		return s, existed, nil
	}
}

// Detach detaches c from s if it is still the attached connection, and
// reports whether it was. An ephemeral subscriber is removed from the
// registry as well; removing it from feeds is the caller's (fanout.Hub).
func (r *Registry) Detach(s *Subscriber, c *Mailbox) bool {
	if s.kind == Ephemeral {
		ok := s.conn.CompareAndSwap(c, nil)
		r.mu.Lock()
		delete(r.ephemeral, s.id)
		r.mu.Unlock()
		return ok
	}
	s.attachMu.Lock()
	defer s.attachMu.Unlock()
	if !s.conn.CompareAndSwap(c, nil) {
		return false
	}
	s.detached = time.Now()
	return true
}

// Expire forgets the named subscriber s if no connection has been
// attached to it for at least ttl, and reports whether it did. Its
// subscriptions must then be removed from the feeds by the caller.
func (r *Registry) Expire(s *Subscriber, ttl time.Duration) bool {
	if s.kind != Named {
		return false
	}
	s.attachMu.Lock()
	defer s.attachMu.Unlock()
	if s.gone || s.conn.Load() != nil || time.Since(s.detached) < ttl {
		return false
	}
	r.forget(s)
	return true
}

// Forget removes a named subscriber for good and returns it, or nil if
// there is none. Its subscriptions must be removed from the feeds by the
// caller.
func (r *Registry) Forget(name string) *Subscriber {
	s := r.Named(name)
	if s == nil {
		return nil
	}
	s.attachMu.Lock()
	defer s.attachMu.Unlock()
	if s.gone {
		return nil
	}
	r.forget(s)
	return s
}

// forget marks s gone and deletes it. s.attachMu must be held.
func (r *Registry) forget(s *Subscriber) {
	s.gone = true
	r.mu.Lock()
	if r.named[s.id] == s {
		delete(r.named, s.id)
		if r.namedBy[s.owner]--; r.namedBy[s.owner] <= 0 {
			delete(r.namedBy, s.owner)
		}
	}
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
	byID := func(a, b *Subscriber) int { return cmp.Compare(a.id, b.id) }
	slices.SortFunc(named, byID)
	slices.SortFunc(eph, byID)
	return append(named, eph...)
}

// OwnedBy returns the subscribers owner created, in the order of All.
// Without authentication every subscriber's owner is "", so OwnedBy("")
// returns them all.
func (r *Registry) OwnedBy(owner string) []*Subscriber {
	return slices.DeleteFunc(r.All(), func(s *Subscriber) bool { return s.owner != owner })
}

// Count returns the number of ephemeral and named subscribers.
func (r *Registry) Count() (ephemeral, named int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ephemeral), len(r.named)
}
