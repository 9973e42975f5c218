package client

import (
	"errors"
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/shopspring/decimal"
)

// Level is one price level: an exact price and size.
type Level struct {
	Price decimal.Decimal
	Size  decimal.Decimal
}

// RawLevel is a level as the wire carries it: the daemon's canonical
// decimal strings (plain notation, no trailing fractional zeros), so equal
// prices are equal strings.
type RawLevel struct {
	Price string
	Size  string
}

// Decimal returns l with decimals. It allocates.
func (l RawLevel) Decimal() Level {
	p, _ := decimal.NewFromString(l.Price)
	s, _ := decimal.NewFromString(l.Size)
	return Level{Price: p, Size: s}
}

// priceKey is a price times 10^18 as a 128-bit integer: comparing keys
// compares prices exactly, whatever their numbers of fraction digits.
type priceKey struct{ hi, lo uint64 }

func (k priceKey) cmp(o priceKey) int {
	switch {
	case k.hi < o.hi:
		return -1
	case k.hi > o.hi:
		return 1
	case k.lo < o.lo:
		return -1
	case k.lo > o.lo:
		return 1
	}
	return 0
}

var pow10 = func() (p [19]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return
}()

// errBadNumber is a price or size the book cannot key: not a plain
// non-negative decimal of at most 19 digits and 18 fraction digits.
var errBadNumber = errors.New("client: price or size is not a plain decimal of at most 19 digits")

// parseKey returns the key of the decimal string s.
func parseKey(s string) (priceKey, error) {
	var m uint64
	frac, digits, dot := 0, 0, false
	if s == "" {
		return priceKey{}, errBadNumber
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if digits == 0 && c == '0' && !dot {
				continue // leading zeros
			}
			digits++
			if digits > 19 {
				return priceKey{}, errBadNumber
			}
			m = m*10 + uint64(c-'0')
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return priceKey{}, errBadNumber
		}
	}
	if frac > 18 {
		return priceKey{}, errBadNumber
	}
	hi, lo := bits.Mul64(m, pow10[18-frac])
	return priceKey{hi, lo}, nil
}

// isZero reports whether the decimal string s is zero ("0", or "0.00" from
// a producer that does not trim).
func isZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' && s[i] != '.' {
			return false
		}
	}
	return true
}

type level struct {
	k     priceKey
	price string
	size  string
}

// side is one side of a book, best first.
type side struct {
	levels []level
	bids   bool // best is the highest price
}

// search returns where k is, or would be inserted, in best-first order.
func (s *side) search(k priceKey) (int, bool) {
	if s.bids {
		return slices.BinarySearchFunc(s.levels, k, func(l level, k priceKey) int { return k.cmp(l.k) })
	}
	return slices.BinarySearchFunc(s.levels, k, func(l level, k priceKey) int { return l.k.cmp(k) })
}

func (s *side) set(price, size string) error {
	k, err := parseKey(price)
	if err != nil {
		return err
	}
	i, found := s.search(k)
	switch {
	case isZero(size):
		if found {
			s.levels = slices.Delete(s.levels, i, i+1)
		}
	case found:
		s.levels[i].size = size
	default:
		s.levels = slices.Insert(s.levels, i, level{k: k, price: price, size: size})
	}
	return nil
}

// State is a book's validity.
type State uint8

// Book states.
const (
	// Invalid: the book is not (or no longer) known to equal the daemon's;
	// Reason says why.
	Invalid State = iota
	// Valid: the book equals the daemon's book at Seq.
	Valid
)

func (s State) String() string {
	if s == Valid {
		return "valid"
	}
	return "invalid"
}

// Reason says why a book is invalid.
type Reason string

// Reasons a book is invalid.
const (
	ReasonNone         Reason = ""             // valid
	ReasonSubscribing  Reason = "subscribing"  // no snapshot yet on this connection
	ReasonGap          Reason = "gap"          // seqs were lost (GapFirst..GapLast): a snapshot is coming or was asked for
	ReasonResync       Reason = "resync"       // book_resync: the daemon is rebuilding its book from the venue
	ReasonDropping     Reason = "dropping"     // the daemon is dropping this subscriber's newest events
	ReasonReconnecting Reason = "reconnecting" // the connection is down; the client reconnects
	ReasonLinkDown     Reason = "link_down"    // the venue link dropped: the book is stale until the venue's next snapshot
	ReasonBadLevel     Reason = "bad_level"    // an event held a price this client cannot key; a snapshot was asked for
)

// Book is the order book of one level2 stream, kept by the client from the
// daemon's snapshots and updates. Its methods are safe for concurrent use;
// the client's reader updates it.
type Book struct {
	stream string

	mu        sync.Mutex // protects everything below
	bids      side
	asks      side
	seq       uint64 // the seq the levels reflect
	venueSeq  uint64
	venueTime time.Time
	recvTime  time.Time
	state     State
	reason    Reason
	gapFirst  uint64
	gapLast   uint64
	changed   chan struct{} // closed at the next change; nil while nobody waits
}

func newBook(stream string) *Book {
	return &Book{stream: stream, bids: side{bids: true}, reason: ReasonSubscribing}
}

// Stream returns the book's stream name.
func (b *Book) Stream() string { return b.stream }

// State returns the book's state and, when invalid, why.
func (b *Book) State() (State, Reason) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state, b.reason
}

// Gap returns the seq range of the loss that made the book invalid
// (reason gap), or 0, 0.
func (b *Book) Gap() (first, last uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gapFirst, b.gapLast
}

// Seq returns the stream's seq that the levels reflect.
func (b *Book) Seq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// Times returns the venue time (zero when the venue gives none) and the
// daemon's receive time of the last event applied.
func (b *Book) Times() (venue, recv time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.venueTime, b.recvTime
}

// Top returns up to n levels of each side, best first (n <= 0: all).
func (b *Book) Top(n int) (bids, asks []Level) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return top(b.bids.levels, n), top(b.asks.levels, n)
}

// TopRaw is Top with the wire's canonical strings.
func (b *Book) TopRaw(n int) (bids, asks []RawLevel) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return topRaw(b.bids.levels, n), topRaw(b.asks.levels, n)
}

// BBO returns the best bid and ask; ok is false for an empty side.
func (b *Book) BBO() (bid, ask Level, bidOK, askOK bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.bids.levels) > 0 {
		bid, bidOK = RawLevel{b.bids.levels[0].price, b.bids.levels[0].size}.Decimal(), true
	}
	if len(b.asks.levels) > 0 {
		ask, askOK = RawLevel{b.asks.levels[0].price, b.asks.levels[0].size}.Decimal(), true
	}
	return
}

// Snapshot returns a consistent copy of the book: seq, state, reason and
// every level, read under one lock.
func (b *Book) Snapshot() BookSnapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BookSnapshot{Stream: b.stream, Seq: b.seq, VenueSeq: b.venueSeq, VenueTime: b.venueTime, RecvTime: b.recvTime,
		State: b.state, Reason: b.reason, Bids: topRaw(b.bids.levels, 0), Asks: topRaw(b.asks.levels, 0)}
}

// Changed returns a channel closed at the book's next change (levels or
// state).
func (b *Book) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// BookSnapshot is a copy of a Book at one instant.
type BookSnapshot struct {
	Stream    string
	Seq       uint64
	VenueSeq  uint64
	VenueTime time.Time
	RecvTime  time.Time
	State     State
	Reason    Reason
	Bids      []RawLevel
	Asks      []RawLevel
}

func top(ls []level, n int) []Level {
	if n <= 0 || n > len(ls) {
		n = len(ls)
	}
	out := make([]Level, n)
	for i := range out {
		out[i] = RawLevel{ls[i].price, ls[i].size}.Decimal()
	}
	return out
}

func topRaw(ls []level, n int) []RawLevel {
	if n <= 0 || n > len(ls) {
		n = len(ls)
	}
	out := make([]RawLevel, n)
	for i := range out {
		out[i] = RawLevel{ls[i].price, ls[i].size}
	}
	return out
}

// apply applies one book event's levels: a snapshot replaces both sides.
// It returns an error, leaving the book partly applied, on a price it
// cannot key. b.mu must be held.
func (b *Book) apply(ev *BookEvent) error {
	if ev.Snapshot {
		b.bids.levels = b.bids.levels[:0]
		b.asks.levels = b.asks.levels[:0]
	}
	for _, l := range ev.Bids {
		if err := b.bids.set(l.Price, l.Size); err != nil {
			return err
		}
	}
	for _, l := range ev.Asks {
		if err := b.asks.set(l.Price, l.Size); err != nil {
			return err
		}
	}
	b.seq, b.venueSeq, b.venueTime, b.recvTime = ev.Seq, ev.VenueSeq, ev.VenueTime, ev.RecvTime
	return nil
}

// setState records the state and reason; it reports whether they changed.
// b.mu must be held.
func (b *Book) setState(s State, r Reason) bool {
	if b.state == s && b.reason == r {
		return false
	}
	b.state, b.reason = s, r
	if r != ReasonGap {
		b.gapFirst, b.gapLast = 0, 0
	}
	return true
}

// notify wakes Changed waiters. b.mu must be held.
func (b *Book) notify() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}
