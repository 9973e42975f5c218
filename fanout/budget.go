package fanout

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// DerivedLimits cap the derived streams a node computes. A derived stream
// counts once however many subscribers hold it, from the subscription
// that creates it until the last subscriber holding it lets it go (a
// detached named subscriber still holds its streams). A zero field takes
// its default.
type DerivedLimits struct {
	// PerToken caps the distinct derived streams held by the subscribers
	// of one token (their owner; without tokens, every subscriber has the
	// same one). Defaults to DefaultMaxDerivedPerToken.
	PerToken int
	// PerSource caps the distinct derived streams computed from one
	// source stream. Defaults to DefaultMaxDerivedPerSource.
	PerSource int
	// Weight caps the sum, over the node's distinct derived streams, of
	// their depth (a book_snapshot_<depth>_<interval> weighs depth, a
	// quote or trade_bar_<interval> 1): the levels the node may have to
	// encode for one change of its books. Defaults to
	// DefaultMaxDerivedWeight.
	Weight int
}

// Defaults of DerivedLimits.
const (
	DefaultMaxDerivedPerToken  = 64
	DefaultMaxDerivedPerSource = 32
	DefaultMaxDerivedWeight    = 8192
)

// Cap names one of DerivedLimits' caps.
type Cap uint8

// The caps, in the order Admit checks them.
const (
	CapPerToken Cap = iota + 1
	CapPerSource
	CapWeight
	numCaps
)

// String returns the cap's label in fanoutd_derived_refused_total:
// "token", "source" or "node".
func (c Cap) String() string {
	switch c {
	case CapPerToken:
		return "token"
	case CapPerSource:
		return "source"
	case CapWeight:
		return "node"
	}
	return ""
}

// BudgetError is a subscription to derived streams refused at a cap of
// DerivedLimits; nothing of it was admitted.
type BudgetError struct {
	Cap    Cap
	Limit  int          // the cap's value
	Stream venue.Stream // the first stream that would have passed it
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("fanout: %s would pass the derived streams' %s cap (%d)", e.Stream, e.Cap, e.Limit)
}

// budget is the hub's account of derived streams against its limits.
// Its lock is taken with no Feed.mu held, and no other lock is taken
// under it.
type budget struct {
	mu      sync.Mutex // protects the fields below
	lim     DerivedLimits
	streams map[venue.Stream]*held
	bySub   map[*subscriber.Subscriber]map[venue.Stream]struct{}
	tokens  map[string]int       // distinct derived streams per owner
	sources map[venue.Stream]int // distinct derived streams per source
	weight  int

	refused [numCaps]atomic.Uint64 // by Cap
}

// held is one derived stream in the budget.
type held struct {
	subs   int
	owners map[string]int // subscribers holding it, per owner
}

func newBudget() *budget {
	b := &budget{streams: map[venue.Stream]*held{}, bySub: map[*subscriber.Subscriber]map[venue.Stream]struct{}{},
		tokens: map[string]int{}, sources: map[venue.Stream]int{}}
	b.set(DerivedLimits{})
	return b
}

func (b *budget) set(l DerivedLimits) {
	if l.PerToken <= 0 {
		l.PerToken = DefaultMaxDerivedPerToken
	}
	if l.PerSource <= 0 {
		l.PerSource = DefaultMaxDerivedPerSource
	}
	if l.Weight <= 0 {
		l.Weight = DefaultMaxDerivedWeight
	}
	b.mu.Lock()
	b.lim = l
	b.mu.Unlock()
}

// weightOf is st's weight: its depth, or 1.
func weightOf(st venue.Stream) int {
	if d, err := st.Channel().Derivation(); err == nil && d.Depth > 0 {
		return d.Depth
	}
	return 1
}

func sourceOf(st venue.Stream) venue.Stream {
	return venue.NewStream(st.Venue(), st.Channel().Source(), st.Symbol())
}

// admit records that s holds the derived streams of sts (others are
// ignored), all or none: past a cap it records none and returns a
// *BudgetError.
func (b *budget) admit(s *subscriber.Subscriber, sts []venue.Stream) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	mine, owner := b.bySub[s], s.Owner()
	var fresh []venue.Stream
	tok, weight := b.tokens[owner], b.weight
	var srcs map[venue.Stream]int
	for _, st := range sts {
		if !st.Channel().Derived() || slices.Contains(fresh, st) {
			continue
		}
		if _, ok := mine[st]; ok {
			continue
		}
		h := b.streams[st]
		var refuse Cap
		var limit int
		if h == nil || h.owners[owner] == 0 {
			if tok++; tok > b.lim.PerToken {
				refuse, limit = CapPerToken, b.lim.PerToken
			}
		}
		if h == nil && refuse == 0 {
			if srcs == nil {
				srcs = map[venue.Stream]int{}
			}
			src := sourceOf(st)
			if srcs[src]++; b.sources[src]+srcs[src] > b.lim.PerSource {
				refuse, limit = CapPerSource, b.lim.PerSource
			} else if weight += weightOf(st); weight > b.lim.Weight {
				refuse, limit = CapWeight, b.lim.Weight
			}
		}
		if refuse != 0 {
			b.refused[refuse].Add(1)
			return &BudgetError{Cap: refuse, Limit: limit, Stream: st}
		}
		fresh = append(fresh, st)
	}
	if len(fresh) == 0 {
		return nil
	}
	if mine == nil {
		mine = map[venue.Stream]struct{}{}
		b.bySub[s] = mine
	}
	for _, st := range fresh {
		mine[st] = struct{}{}
		h := b.streams[st]
		if h == nil {
			h = &held{owners: map[string]int{}}
			b.streams[st] = h
			b.sources[sourceOf(st)]++
			b.weight += weightOf(st)
		}
		if h.owners[owner] == 0 {
			b.tokens[owner]++
		}
		h.owners[owner]++
		h.subs++
	}
	return nil
}

// release records that s no longer holds st.
func (b *budget) release(s *subscriber.Subscriber, st venue.Stream) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseLocked(s, st)
}

// releaseAll records that s holds no derived stream any more.
func (b *budget) releaseAll(s *subscriber.Subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for st := range b.bySub[s] {
		b.releaseLocked(s, st)
	}
}

func (b *budget) releaseLocked(s *subscriber.Subscriber, st venue.Stream) {
	mine := b.bySub[s]
	if _, ok := mine[st]; !ok {
		return
	}
	delete(mine, st)
	if len(mine) == 0 {
		delete(b.bySub, s)
	}
	owner, h := s.Owner(), b.streams[st]
	if h.owners[owner]--; h.owners[owner] == 0 {
		delete(h.owners, owner)
		if b.tokens[owner]--; b.tokens[owner] == 0 {
			delete(b.tokens, owner)
		}
	}
	if h.subs--; h.subs > 0 {
		return
	}
	delete(b.streams, st)
	src := sourceOf(st)
	if b.sources[src]--; b.sources[src] == 0 {
		delete(b.sources, src)
	}
	b.weight -= weightOf(st)
}

// DerivedUsage is what the node's derived streams use of its
// DerivedLimits, for metrics and operators.
type DerivedUsage struct {
	Streams int           // distinct derived streams held
	Weight  int           // their summed weight
	Limits  DerivedLimits // the caps in force
}

func (b *budget) usage() DerivedUsage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return DerivedUsage{Streams: len(b.streams), Weight: b.weight, Limits: b.lim}
}
