package claimcheck

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reader errors. ErrOverloaded and ErrDeadline are the two "unavailable"
// answers a caller gets without the fetch's answer.
var (
	ErrOverloaded       = errors.New("claimcheck: unavailable: overloaded")
	ErrDeadline         = errors.New("claimcheck: unavailable: deadline")
	ErrClosed           = errors.New("claimcheck: reader closed")
	ErrFirstByteTimeout = errors.New("claimcheck: no first byte before the store timeout")
	ErrNotFound         = errors.New("claimcheck: claim not found")
	errGoexit           = errors.New("claimcheck: fetch called runtime.Goexit")
)

// PanicError is the error every waiter of a fetch gets when the fetch
// panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("claimcheck: fetch panicked: %v", e.Value) }

// DecreaseInterval is the longest decrease window: the least time between
// two decreases of a store's limit is the store's smoothed round trip
// (srtt), at least MinHold and at most DecreaseInterval, and
// DecreaseInterval until a round trip has been measured. With the epoch
// rule (a request admitted before the last decrease never decreases it
// again) a wave of requests failing together halves the limit once.
const DecreaseInterval = 100 * time.Millisecond

// MinHold is the shortest time a throttled or unanswered request keeps
// its slot after its callers have the answer (it keeps it one srtt), and
// the shortest decrease window. Without the hold, a throttle that comes
// back at once frees its slot for the next queued read at once, and the
// reader spins against the store.
const MinHold = 5 * time.Millisecond

// KeyKind is what a fetch reads.
type KeyKind uint8

// The key kinds.
const (
	KeyIndex    KeyKind = iota + 1 // a pack's index prefix
	KeyManifest                    // a pack's manifest.json
	KeyBytes                       // one claim's bytes
	KeyRange                       // one range of one claim's bytes
)

// Key is what a fetch reads; coalescing and the cache are by Key.
type Key struct {
	Kind   KeyKind
	Tenant string
	Layout Layout
	Day    uint16
	Pack   PackID
	Count  uint32 // KeyIndex: the claim count the id names
	Index  uint32 // KeyBytes, KeyRange
	First  int64  // KeyRange
	Length int64  // KeyRange
}

// FetchFunc is one read of a key from a store. It runs on the reader's
// own context (never a caller's) bounded by the store body timeout.
// size is the value's weight in the cache.
type FetchFunc func(ctx context.Context) (val any, size int64, err error)

// Outcome is how one caller of Fetch was answered.
type Outcome uint8

// The outcomes; every caller is counted once.
const (
	OutcomeStore     Outcome = iota + 1 // its fetch went to the store
	OutcomeCoalesced                    // it joined another caller's fetch and got its answer
	OutcomeCache                        // the cache answered
	OutcomeShed                         // no answer: queue full, deadline, closed, or dropped
)

var outcomeNames = [...]string{"", "store", "coalesced", "cache", "shed"}

func (o Outcome) String() string { return outcomeNames[o] }

// ReaderConfig sizes a Reader. Config.ReaderConfig derives it from the
// daemon's configuration.
type ReaderConfig struct {
	// MaxInflight is read_max_inflight: each store's starting and highest
	// limit. Defaults to 64.
	MaxInflight int
	// QueueMax is read_queue_max: reads that may wait per store for a
	// slot; past it a read is shed. 0 means no queue. Defaults to 0 here;
	// Config defaults it to 1024.
	QueueMax int
	// Deadline is read_deadline_ms, used when a caller's context has no
	// deadline. Defaults to 2s.
	Deadline time.Duration
	// FirstByteTimeout bounds the time to a store's first byte; past it
	// the request counts as "no answer". Defaults to 5s.
	FirstByteTimeout time.Duration
	// BodyTimeout bounds a whole store request, body included. It is not
	// a congestion signal. Defaults to 60s.
	BodyTimeout time.Duration
	// CacheBytes bounds the cache; 0 disables it.
	CacheBytes int64
	// MaxConcurrentReads is max_concurrent_reads, the gate's bound; 0 is
	// unlimited.
	MaxConcurrentReads int
	// Registerer receives the reader's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Reader is the one path every store read of the gateway takes. See the
// package documentation for its guarantees.
type Reader struct {
	cfg    ReaderConfig
	stores []Store
	names  []string
	cache  *cache
	m      *metrics
	base   context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // running fetches

	counts    [5]atomic.Int64 // by Outcome
	gateN     atomic.Int64
	gateShed  atomic.Int64
	storeReqs atomic.Int64

	mu      sync.Mutex // protects the fields below and every storeState
	closed  bool
	flights map[Key]*flight
	st      []*storeState
}

type storeState struct {
	name         string
	limit        int
	inflight     int
	queue        list.List // of *flight, oldest first
	successes    int       // since the last change of limit
	lastDecrease time.Time
	epoch        uint64        // bumped by every decrease
	srtt         time.Duration // smoothed duration of successful requests; 0 until one ends
	throttled    int64         // store requests answered throttled/unavailable
	requests     int64
	wasted       int64 // store answers no caller used; see StoreStats.Wasted
}

// flight is one store request and its waiters.
type flight struct {
	key      Key
	st       *storeState
	fn       FetchFunc
	done     chan struct{} // closed when val/err are set
	val      any
	err      error
	dropped  bool // completed without a store request
	waiters  int  // callers still waiting; guarded by Reader.mu
	deadline time.Time
	epoch    uint64
	started  time.Time     // when it was sent to the store
	elem     *list.Element // in st.queue while queued
}

// NewReader returns a Reader over stores, in configuration order (the
// order of the index search after the home store).
func NewReader(cfg ReaderConfig, stores []Store) (*Reader, error) {
	if len(stores) == 0 {
		return nil, errors.New("claimcheck: reader needs at least one store")
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = 64
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = 2 * time.Second
	}
	if cfg.FirstByteTimeout <= 0 {
		cfg.FirstByteTimeout = 5 * time.Second
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 60 * time.Second
	}
	r := &Reader{cfg: cfg, stores: stores, cache: newCache(cfg.CacheBytes), flights: make(map[Key]*flight)}
	m, err := newMetrics(cfg.Registerer, r.cache)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: registering metrics: %w", err)
	}
	r.m = m
	r.base, r.cancel = context.WithCancel(context.Background())
	seen := map[string]bool{}
	for _, s := range stores {
		n := s.Name()
		if seen[n] {
			return nil, fmt.Errorf("claimcheck: two stores named %q", n)
		}
		seen[n] = true
		r.names = append(r.names, n)
		st := &storeState{name: n, limit: cfg.MaxInflight}
		r.st = append(r.st, st)
		r.gauges(st)
		// Every series exists from the start at 0, so alerts on increase()
		// see the first throttled or forbidden answer.
		for _, res := range []string{"ok", "missing", "throttled", "unavailable", "forbidden", "other"} {
			m.storeReqs.WithLabelValues(n, res)
		}
		m.limitChanges.WithLabelValues(n, "up")
		m.limitChanges.WithLabelValues(n, "down")
		m.wasted.WithLabelValues(n)
	}
	return r, nil
}

// Stores returns the reader's stores.
func (r *Reader) Stores() []Store { return r.stores }

// Close fails every queued read with ErrClosed, cancels running store
// requests and waits for their goroutines to end. Fetch after Close
// returns ErrClosed. It does not close the stores.
func (r *Reader) Close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		for _, st := range r.st {
			for st.queue.Len() > 0 {
				f := st.queue.Front().Value.(*flight)
				r.drop(f, ErrClosed)
			}
		}
	}
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

func (r *Reader) count(o Outcome) {
	r.counts[o].Add(1)
	r.m.reads.WithLabelValues(o.String()).Inc()
}

// gauges publishes st's state. r.mu must be held.
func (r *Reader) gauges(st *storeState) {
	r.m.limit.WithLabelValues(st.name).Set(float64(st.limit))
	r.m.inflight.WithLabelValues(st.name).Set(float64(st.inflight))
	r.m.queued.WithLabelValues(st.name).Set(float64(st.queue.Len()))
}

// Fetch runs fn — one read of key from store number store — under that
// store's limit, or joins a fetch of key already running, or answers from
// the cache.
//
// The caller's deadline is ctx's, or Deadline from now if ctx has none.
// Past it Fetch returns ErrDeadline whatever the fetch is doing; the fetch
// it started or joined still runs to the end and fills the cache. If ctx
// is cancelled first, Fetch returns ctx.Err(). If the store's queue is
// full, Fetch returns ErrOverloaded at once. A panic in fn becomes a
// *PanicError for every waiter.
//
// Every caller is counted once by outcome: the caller whose fetch went to
// the store is counted "store" when the fetch ends, whether or not it
// still waits; every other caller counts itself "coalesced", "cache" or
// "shed".
func (r *Reader) Fetch(ctx context.Context, store int, key Key, fn FetchFunc) (any, error) {
	if v, ok := r.cache.get(key); ok {
		r.count(OutcomeCache)
		return v, nil
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(r.cfg.Deadline)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.count(OutcomeShed)
		return nil, ErrClosed
	}
	if f := r.flights[key]; f != nil {
		f.waiters++
		if deadline.After(f.deadline) {
			f.deadline = deadline
		}
		r.mu.Unlock()
		return r.wait(ctx, f, deadline, false)
	}
	// A fetch of key may have ended between the cache miss and the lock;
	// it fills the cache before it leaves r.flights.
	if v, ok := r.cache.get(key); ok {
		r.mu.Unlock()
		r.count(OutcomeCache)
		return v, nil
	}
	st := r.st[store]
	f := &flight{key: key, st: st, fn: fn, done: make(chan struct{}), waiters: 1, deadline: deadline}
	switch {
	case r.hopeless(f, time.Now()):
		r.mu.Unlock()
		r.count(OutcomeShed)
		return nil, ErrDeadline
	case st.inflight < st.limit:
		r.start(f)
	case st.queue.Len() < r.cfg.QueueMax:
		f.elem = st.queue.PushBack(f)
		r.gauges(st)
	default:
		r.mu.Unlock()
		r.count(OutcomeShed)
		return nil, ErrOverloaded
	}
	r.flights[key] = f
	r.mu.Unlock()
	return r.wait(ctx, f, deadline, true)
}

func (r *Reader) wait(ctx context.Context, f *flight, deadline time.Time, leader bool) (any, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	var err error
	select {
	case <-f.done:
		if f.dropped {
			if !leader { // the flight counted its leader
				r.count(OutcomeShed)
			}
			return nil, f.err
		}
		if !leader {
			r.count(OutcomeCoalesced)
		}
		return f.val, f.err
	case <-t.C:
		err = ErrDeadline
	case <-ctx.Done():
		err = ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = ErrDeadline
		}
	}
	r.mu.Lock()
	f.waiters--
	if f.waiters == 0 && f.elem != nil {
		// Nobody waits for a read still queued: drop it now rather than
		// when a slot frees.
		r.drop(f, ErrDeadline)
	}
	r.mu.Unlock()
	if !leader {
		r.count(OutcomeShed)
	}
	return nil, err
}

// start sends f to the store. r.mu must be held.
func (r *Reader) start(f *flight) {
	st := f.st
	st.inflight++
	f.epoch = st.epoch
	f.started = time.Now()
	r.gauges(st)
	r.wg.Add(1)
	go r.run(f)
}

// drop completes a queued flight without a store request; it counts the
// flight's leader as shed. r.mu must be held.
func (r *Reader) drop(f *flight, err error) {
	if f.elem != nil {
		f.st.queue.Remove(f.elem)
		f.elem = nil
		r.gauges(f.st)
	}
	delete(r.flights, f.key)
	f.dropped, f.err = true, err
	close(f.done)
	r.count(OutcomeShed)
}

// dispatch starts queued flights while st has free slots, dropping those
// whose every waiter's deadline has passed. r.mu must be held.
func (r *Reader) dispatch(st *storeState) {
	now := time.Now()
	for st.inflight < st.limit && st.queue.Len() > 0 {
		f := st.queue.Front().Value.(*flight)
		st.queue.Remove(f.elem)
		f.elem = nil
		if !now.Before(f.deadline) || r.hopeless(f, now) {
			r.drop(f, ErrDeadline)
			continue
		}
		r.start(f)
	}
	r.gauges(st)
}

func (r *Reader) run(f *flight) {
	defer r.wg.Done()
	var (
		val  any
		size int64
		err  = errGoexit // if fn calls runtime.Goexit, the deferred finish still runs
	)
	defer func() {
		if hold := r.finish(f, val, size, err); hold > 0 {
			r.hold(f.st, hold)
		}
	}()
	ctx, cancel := context.WithTimeout(r.base, r.cfg.BodyTimeout)
	defer cancel()
	val, size, err = call(ctx, f.fn)
}

func call(ctx context.Context, fn FetchFunc) (val any, size int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			val, size, err = nil, 0, &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}

// finish answers f's waiters and applies AIMD. A throttled or unanswered
// request keeps its slot: finish returns how long, and run releases it
// after (hold); any other request's slot is released here.
func (r *Reader) finish(f *flight, val any, size int64, err error) (hold time.Duration) {
	kind := Classify(err)
	var pe *PanicError
	if errors.As(err, &pe) || errors.Is(err, errGoexit) {
		kind = ErrOther
	}
	kept := err == nil && r.cache.put(f.key, val, size)
	// Count before any waiter is woken, so a caller that has its answer
	// sees itself counted.
	res := "ok"
	if kind != 0 {
		res = kind.String()
	}
	r.storeReqs.Add(1)
	r.m.storeReqs.WithLabelValues(f.st.name, res).Inc()
	r.count(OutcomeStore)
	r.mu.Lock()
	delete(r.flights, f.key)
	f.val, f.err = val, err
	close(f.done)
	st := f.st
	st.requests++
	if err == nil && f.waiters == 0 && !kept {
		r.waste(st)
	}
	congested := kind == ErrThrottled || kind == ErrUnavailable
	if congested {
		st.throttled++
		hold = max(st.srtt, MinHold)
	} else {
		st.inflight--
	}
	if kind == 0 || kind == ErrMissing {
		// srtt += (sample - srtt)/8, as TCP smooths its round trip.
		if d := time.Since(f.started); st.srtt == 0 {
			st.srtt = d
		} else {
			st.srtt += (d - st.srtt) / 8
		}
	}
	r.adjust(st, f.epoch, kind)
	r.dispatch(st)
	r.mu.Unlock()
	return hold
}

// waste counts a store answer no caller used. r.mu must be held.
func (r *Reader) waste(st *storeState) {
	st.wasted++
	r.m.wasted.WithLabelValues(st.name).Inc()
}

// hopeless reports whether f, about to be sent, cannot be of use before
// its callers' deadline: with the cache off (a late answer is thrown
// away) and less than one srtt left, or two for an index (the claim's
// bytes still have to be read after it). r.mu must be held.
func (r *Reader) hopeless(f *flight, now time.Time) bool {
	if r.cfg.CacheBytes > 0 || f.st.srtt == 0 {
		return false
	}
	need := f.st.srtt
	if f.key.Kind == KeyIndex {
		need *= 2
	}
	return f.deadline.Sub(now) < need
}

// hold keeps a throttled request's slot for d (less if the reader
// closes), then frees it.
func (r *Reader) hold(st *storeState, d time.Duration) {
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-r.base.Done():
		t.Stop()
	}
	r.mu.Lock()
	st.inflight--
	r.dispatch(st)
	r.mu.Unlock()
}

// decreaseWindow is the least time between two decreases of st's limit.
// r.mu must be held.
func (st *storeState) decreaseWindow() time.Duration {
	if st.srtt == 0 {
		return DecreaseInterval
	}
	return min(max(st.srtt, MinHold), DecreaseInterval)
}

// adjust applies AIMD to st after a store request admitted at epoch ended
// with kind. r.mu must be held.
func (r *Reader) adjust(st *storeState, epoch uint64, kind ErrorKind) {
	switch kind {
	case 0, ErrMissing:
		st.successes++
		if st.successes >= st.limit {
			st.successes = 0
			if st.limit < r.cfg.MaxInflight {
				st.limit++
				r.m.limitChanges.WithLabelValues(st.name, "up").Inc()
			}
		}
	case ErrThrottled, ErrUnavailable:
		now := time.Now()
		if epoch != st.epoch {
			return // admitted before the last decrease, which already counted this congestion
		}
		if !st.lastDecrease.IsZero() && now.Sub(st.lastDecrease) < st.decreaseWindow() {
			return
		}
		st.epoch++
		st.lastDecrease = now
		st.successes = 0
		if n := max(1, st.limit/2); n != st.limit {
			st.limit = n
			r.m.limitChanges.WithLabelValues(st.name, "down").Inc()
		}
	}
	r.gauges(st)
}

// get reads n bytes of key at off from store s (everything from off if
// n < 0). The store must answer within FirstByteTimeout or the read fails
// as ErrUnavailable; the body then has the rest of ctx's time, and a body
// cut short by that bound is ErrOther, not congestion.
func (r *Reader) get(ctx context.Context, s int, key string, off, n int64) ([]byte, error) {
	st := r.stores[s]
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var late atomic.Bool
	t := time.AfterFunc(r.cfg.FirstByteTimeout, func() { late.Store(true); cancel() })
	rc, err := st.GetRange(fctx, key, off, n)
	if !t.Stop() && late.Load() {
		if rc != nil {
			rc.Close()
		}
		return nil, &StoreError{Op: "get", Store: st.Name(), Key: key, Kind: ErrUnavailable, Err: ErrFirstByteTimeout}
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if n > 0 && n < 1<<30 {
		buf.Grow(int(n))
	}
	if _, err := io.Copy(&buf, rc); err != nil {
		k := ErrUnavailable
		if ctx.Err() != nil {
			k = ErrOther
		}
		return nil, &StoreError{Op: "read", Store: st.Name(), Key: key, Kind: k, Err: err}
	}
	return buf.Bytes(), nil
}

// Location is where a claim's bytes are: the store that holds its pack,
// the pack's key and the claim's index entry.
type Location struct {
	Ref   Ref
	Store int
	Key   string
	Entry IndexEntry
	Index *PackIndex
}

type storedIndex struct {
	store int
	pi    *PackIndex
}

// Locate reads (or finds cached) the index of ref's pack and returns the
// claim's location. The index fetch searches every store, home first, and
// is charged to the home store. A pack found nowhere, or whose index does
// not match the id, is ErrMissing (wrapping ErrNotFound or ErrBadPack).
func (r *Reader) Locate(ctx context.Context, ref Ref) (*Location, error) {
	id := ref.ID
	objKey := PackKey(id.Layout, ref.Tenant, id.Day, id.Pack)
	home := HomeStore(r.names, ref.Tenant, id.Pack)
	key := Key{Kind: KeyIndex, Tenant: ref.Tenant, Layout: id.Layout, Day: id.Day, Pack: id.Pack, Count: id.Count}
	v, err := r.Fetch(ctx, home, key, func(ctx context.Context) (any, int64, error) {
		var firstErr error
		for _, s := range searchOrder(len(r.stores), home) {
			b, err := r.get(ctx, s, objKey, 0, IndexPrefixLen(id.Count))
			if err != nil {
				if firstErr == nil && !IsMissing(err) {
					firstErr = err
				}
				continue
			}
			pi, err := ParseIndexPrefix(b, id.Count)
			if err != nil {
				return nil, 0, &StoreError{Op: "index", Store: r.names[s], Key: objKey, Kind: ErrMissing, Err: err}
			}
			return &storedIndex{s, pi}, int64(len(pi.Entries)) * (IndexEntrySize + 32), nil
		}
		if firstErr != nil {
			return nil, 0, firstErr
		}
		return nil, 0, &StoreError{Op: "index", Store: r.names[home], Key: objKey, Kind: ErrMissing, Err: ErrNotFound}
	})
	if err != nil {
		return nil, err
	}
	si := v.(*storedIndex)
	return &Location{Ref: ref, Store: si.store, Key: objKey, Entry: si.pi.Entries[id.Index], Index: si.pi}, nil
}

func (l *Location) key(kind KeyKind) Key {
	id := l.Ref.ID
	return Key{Kind: kind, Tenant: l.Ref.Tenant, Layout: id.Layout, Day: id.Day, Pack: id.Pack, Index: id.Index}
}

// missedAfterIndex counts the index read for loc as wasted when the read
// of its claim then missed its deadline and the cache could not keep the
// index for a retry.
func (r *Reader) missedAfterIndex(loc *Location, err error) {
	if r.cfg.CacheBytes > 0 || !errors.Is(err, ErrDeadline) {
		return
	}
	r.mu.Lock()
	r.waste(r.st[HomeStore(r.names, loc.Ref.Tenant, loc.Ref.ID.Pack)])
	r.mu.Unlock()
}

// Bytes returns the claim's bytes, verified against its sha256, charged to
// the store that holds the pack.
func (r *Reader) Bytes(ctx context.Context, loc *Location) ([]byte, error) {
	e := loc.Entry
	v, err := r.Fetch(ctx, loc.Store, loc.key(KeyBytes), func(ctx context.Context) (any, int64, error) {
		b, err := r.get(ctx, loc.Store, loc.Key, e.Offset, e.Length)
		if err != nil {
			return nil, 0, err
		}
		if int64(len(b)) != e.Length || sha256.Sum256(b) != e.SHA256 {
			return nil, 0, &StoreError{Op: "get", Store: r.names[loc.Store], Key: loc.Key, Kind: ErrOther,
				Err: fmt.Errorf("%w: claim %d: sha256 mismatch", ErrBadPack, loc.Ref.ID.Index)}
		}
		return b, int64(len(b)), nil
	})
	if err != nil {
		r.missedAfterIndex(loc, err)
		return nil, err
	}
	return v.([]byte), nil
}

// Range returns length bytes of the claim from first, which the caller
// has checked lie within it. It slices the claim's cached bytes if the
// cache holds them, and otherwise reads only the range.
func (r *Reader) Range(ctx context.Context, loc *Location, first, length int64) ([]byte, error) {
	if v, ok := r.cache.get(loc.key(KeyBytes)); ok {
		r.count(OutcomeCache)
		return v.([]byte)[first : first+length], nil
	}
	k := loc.key(KeyRange)
	k.First, k.Length = first, length
	e := loc.Entry
	v, err := r.Fetch(ctx, loc.Store, k, func(ctx context.Context) (any, int64, error) {
		b, err := r.get(ctx, loc.Store, loc.Key, e.Offset+first, length)
		if err == nil && int64(len(b)) != length {
			err = &StoreError{Op: "get", Store: r.names[loc.Store], Key: loc.Key, Kind: ErrOther,
				Err: fmt.Errorf("%w: short range read, %d of %d bytes", ErrBadPack, len(b), length)}
		}
		return b, int64(len(b)), err
	})
	if err != nil {
		r.missedAfterIndex(loc, err)
		return nil, err
	}
	return v.([]byte), nil
}

// StoreStats is one store's state in Stats.
type StoreStats struct {
	Name      string `json:"name"`
	Limit     int    `json:"limit"`
	Ceiling   int    `json:"ceiling"`
	InFlight  int    `json:"inflight"`
	Queued    int    `json:"queued"`
	Requests  int64  `json:"requests"`
	Throttled int64  `json:"throttled"` // requests answered throttled or unavailable
	// Wasted counts store answers no caller used: a success nobody still
	// waited for that the cache did not keep (it is off, or the value is
	// too big), and, with the cache off, the index read for a claim
	// whose bytes then missed the deadline (charged to the pack's home).
	Wasted int64 `json:"wasted"`
	// SRTT is the smoothed duration of successful requests, in ms.
	SRTTms float64 `json:"srtt_ms"`
}

// Stats is a snapshot of the reader, served at GET /v1/claimcheck/stats.
type Stats struct {
	Stores []StoreStats `json:"stores"`
	Reads  struct {
		Store     int64 `json:"store"`
		Coalesced int64 `json:"coalesced"`
		Cache     int64 `json:"cache"`
		Shed      int64 `json:"shed"`
	} `json:"reads"`
	Gate struct {
		InFlight int64 `json:"inflight"`
		Max      int   `json:"max"` // 0: unlimited
		Rejected int64 `json:"rejected"`
	} `json:"gate"`
	Cache struct {
		Bytes    int64 `json:"bytes"`
		MaxBytes int64 `json:"max_bytes"`
		Entries  int   `json:"entries"`
	} `json:"cache"`
}

// Stats returns each store's limit, store requests running and reads
// queued, with the outcome, gate and cache counters.
func (r *Reader) Stats() Stats {
	var s Stats
	r.mu.Lock()
	for _, st := range r.st {
		s.Stores = append(s.Stores, StoreStats{Name: st.name, Limit: st.limit, Ceiling: r.cfg.MaxInflight,
			InFlight: st.inflight, Queued: st.queue.Len(), Requests: st.requests, Throttled: st.throttled,
			Wasted: st.wasted, SRTTms: float64(st.srtt) / float64(time.Millisecond)})
	}
	r.mu.Unlock()
	s.Reads.Store = r.counts[OutcomeStore].Load()
	s.Reads.Coalesced = r.counts[OutcomeCoalesced].Load()
	s.Reads.Cache = r.counts[OutcomeCache].Load()
	s.Reads.Shed = r.counts[OutcomeShed].Load()
	s.Gate.InFlight = r.gateN.Load()
	s.Gate.Max = r.cfg.MaxConcurrentReads
	s.Gate.Rejected = r.gateShed.Load()
	s.Cache.Bytes, s.Cache.Entries = r.cache.stats()
	s.Cache.MaxBytes = r.cfg.CacheBytes
	return s
}

// Admit counts one gateway request against max_concurrent_reads. If the
// gate is full it returns ok false: the caller answers 503 and must not
// call release. Otherwise the caller calls release when done (release is
// idempotent).
//
// The slot is also released when ctx is done, so a request that dies — a
// panicking handler, a client that disconnects, a goroutine that exits
// without its deferred release — cannot leak it: net/http cancels a
// request's context when its handler returns, however it returns.
func (r *Reader) Admit(ctx context.Context) (release func(), ok bool) {
	max := int64(r.cfg.MaxConcurrentReads)
	for {
		n := r.gateN.Load()
		if max > 0 && n >= max {
			r.gateShed.Add(1)
			r.m.gateRejected.Inc()
			return func() {}, false
		}
		if r.gateN.CompareAndSwap(n, n+1) {
			break
		}
	}
	r.m.gateInflight.Inc()
	var once sync.Once
	rel := func() {
		once.Do(func() {
			r.gateN.Add(-1)
			r.m.gateInflight.Dec()
		})
	}
	stop := context.AfterFunc(ctx, rel)
	return func() { stop(); rel() }, true
}
