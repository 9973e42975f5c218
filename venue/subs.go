package venue

import (
	"maps"
	"slices"
	"time"
)

// SubState is where one subscription key stands with the venue on the
// current connection.
type SubState uint8

// Subscription states. The zero SubState is SubNone.
const (
	SubNone    SubState = iota // not asked on this connection (or taken back to be asked again)
	SubAsked                   // a request for it is out, unanswered
	SubAcked                   // the venue confirmed it
	SubRefused                 // the venue refused it: not asked again until wanted anew
)

// Subs is the subscription ledger and request planner of one venue
// connection: which keys (one venue subscription each, such as
// "book|BTC/USD", in the adapter's own spelling) are wanted and, for each,
// whether it was asked, acknowledged or refused. A key the venue
// rate-limited, or whose request went unanswered for Deadline (expired),
// goes back to be asked again after its backoff (Retry); a book that needs
// a fresh snapshot is resubscribed (Resync) a few at a time. Flush produces
// the request plan, batched within the venue's Limits; the adapter encodes
// each request in the venue's form and reports each answer back (Ack,
// Refuse, Limit, Whole).
//
// The zero value is ready to use. Not safe for concurrent use: the
// adapter's lock guards it.
type Subs struct {
	// Deadline: a key asked this long ago and not answered has expired:
	// Flush asks it again after its backoff (unless KeepExpired), and a
	// request recorded this long ago (Track) is forgotten, an unsubscribe
	// sent again. 0 means never.
	Deadline time.Duration
	// KeepExpired leaves expired keys asked, for a venue whose adapter
	// drops the connection instead (Overdue names them).
	KeepExpired bool
	// Limits bound each request Flush plans.
	Limits SubLimits
	// Track records each request Flush plans (Request), for a venue that
	// answers by request id (SubRequest.ID).
	Track bool
	// Resyncs schedules the resubscriptions that give a book a fresh
	// snapshot (Resync, Whole).
	Resyncs Resyncs
	// Retry is the backoff of keys limited or expired; its zero value
	// starts at 1 s and doubles to 30 s.
	Retry Retry
	// Shared makes one backoff for every key, for a venue that limits the
	// connection rather than a subscription: a limit or an expiry delays
	// every key, and the backoff is over once nothing waits for it.
	Shared bool

	want   map[string]bool
	order  []string // the wanted keys, in the order Want first named them
	keys   map[string]*subKey
	reqs   map[int64]SubRequest // by id, until answered
	nextID int64
	nextAt time.Time // when the pacer sends the next request (Limits.Interval)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

type subKey struct {
	state SubState
	asked time.Time // when it was last asked (SubAsked)
	req   int64     // the request that asked it, 0 if none was recorded
}

func (s *Subs) key(k string) *subKey {
	if s.keys == nil {
		s.keys = map[string]*subKey{}
	}
	sk := s.keys[k]
	if sk == nil {
		sk = &subKey{}
		s.keys[k] = sk
	}
	return sk
}

// Want adds keys to the wanted set. A key the venue refused is asked again.
func (s *Subs) Want(keys ...string) {
	if s.want == nil {
		s.want = map[string]bool{}
	}
	for _, k := range keys {
		if !s.want[k] {
			s.order = append(s.order, k)
		}
		s.want[k] = true
		if sk := s.keys[k]; sk != nil && sk.state == SubRefused {
			sk.state = SubNone
		}
	}
}

// Unwant removes keys from the wanted set; Plan drops those the venue was
// asked for.
func (s *Subs) Unwant(keys ...string) {
	for _, k := range keys {
		if s.want[k] {
			s.order = slices.DeleteFunc(s.order, func(o string) bool { return o == k })
		}
		delete(s.want, k)
		s.Retry.Done(k)
		s.Resyncs.Whole(k)
		if sk := s.keys[k]; sk != nil && (sk.state == SubNone || sk.state == SubRefused) {
			delete(s.keys, k)
		}
	}
}

// Forget removes keys from the wanted set and forgets them at once, with
// no drop planned: the adapter unsubscribed them itself, or the venue
// refused them for good.
func (s *Subs) Forget(keys ...string) {
	s.Unwant(keys...)
	for _, k := range keys {
		delete(s.keys, k)
	}
}

// Wanted reports whether key is wanted.
func (s *Subs) Wanted(key string) bool { return s.want[key] }

// WantedKeys returns the wanted keys in the order Want first named them.
func (s *Subs) WantedKeys() []string { return slices.Clone(s.order) }

// retryKey is the key s's backoff is kept under.
func (s *Subs) retryKey(k string) string {
	if s.Shared {
		return "\x00connection"
	}
	return k
}

// waiting reports whether key's backoff still runs.
func (s *Subs) waiting(k string, now time.Time) bool { return s.Retry.Waiting(s.retryKey(k), now) }

// State returns where key stands on this connection.
func (s *Subs) State(key string) SubState {
	if sk := s.keys[key]; sk != nil {
		return sk.state
	}
	return SubNone
}

// Plan returns the wanted keys to ask for now (not asked on this
// connection, not refused, not waiting out a backoff, not held back by
// hold when it is set), in the order Want named them, which become
// SubAsked at now; and, sorted, the keys asked or acknowledged that are no
// longer wanted, which are forgotten.
func (s *Subs) Plan(now time.Time, hold func(key string) bool) (ask, drop []string) {
	for _, k := range s.order {
		if s.State(k) == SubNone && !s.waiting(k, now) && (hold == nil || !hold(k)) {
			ask = append(ask, k)
		}
	}
	for k, sk := range s.keys {
		if !s.want[k] {
			if sk.state == SubAsked || sk.state == SubAcked {
				drop = append(drop, k)
			}
			delete(s.keys, k)
		}
	}
	slices.Sort(drop)
	s.Asked(now, ask...)
	return ask, drop
}

// WantOnly makes keys the wanted set: those wanted and not among them are
// unwanted (Plan drops them), and keys are wanted in their order.
func (s *Subs) WantOnly(keys ...string) {
	keep := make(map[string]bool, len(keys))
	for _, k := range keys {
		keep[k] = true
	}
	for _, k := range s.WantedKeys() {
		if !keep[k] {
			s.Unwant(k)
		}
	}
	s.Want(keys...)
}

// Again takes wanted keys back to be asked at the next Flush, with no
// backoff (the venue's answer left them in doubt).
func (s *Subs) Again(keys ...string) {
	for _, k := range keys {
		if sk := s.keys[k]; sk != nil && s.want[k] && sk.state == SubAsked {
			sk.state = SubNone
		}
	}
}

// Asked marks keys asked at now, outside a Plan (a resync asks a key
// again).
func (s *Subs) Asked(now time.Time, keys ...string) {
	for _, k := range keys {
		sk := s.key(k)
		sk.state, sk.asked, sk.req = SubAsked, now, 0
	}
}

// SubRequest is one request an adapter sent for keys, as it recorded it.
type SubRequest struct {
	Op     string    // OpSubscribe or OpUnsubscribe (an adapter's own spelling outside Flush)
	Keys   []string  // the keys it names
	At     time.Time // when it was sent (or is due to be, behind a pacer)
	ID     int64     // its id on the ledger (Track), 0 if not recorded
	Resync bool      // half of a book's resync (an unsubscribe and a subscribe of one key)
}

// The operations of the requests Flush plans; an adapter spells them as
// its venue does.
const (
	OpSubscribe   = "subscribe"
	OpUnsubscribe = "unsubscribe"
)

// Request records r, sent (subscribe requests name keys asked) and returns
// its id, 1, 2, 3… on this ledger, for a venue that answers by id
// (Answer). A key asked in it is answered by it (AskedIn) until a later
// request asks it again.
func (s *Subs) Request(r SubRequest) int64 {
	s.nextID++
	if s.reqs == nil {
		s.reqs = map[int64]SubRequest{}
	}
	r.Keys = slices.Clone(r.Keys)
	r.ID = s.nextID
	s.reqs[s.nextID] = r
	for _, k := range r.Keys {
		if sk := s.keys[k]; sk != nil && sk.state == SubAsked {
			sk.req = s.nextID
		}
	}
	return s.nextID
}

// NextID returns the next id on this ledger without recording a request,
// for a message that shares the venue's request ids but answers nothing
// the ledger keeps (a ping).
func (s *Subs) NextID() int64 {
	s.nextID++
	return s.nextID
}

// Answer returns request id and forgets it; ok is false if no such
// request is out. The keys' states are unchanged: the adapter acks or
// refuses them.
func (s *Subs) Answer(id int64) (r SubRequest, ok bool) {
	r, ok = s.reqs[id]
	delete(s.reqs, id)
	return r, ok
}

// Out returns the ids of the requests not yet answered, in the order they
// were sent.
func (s *Subs) Out() []int64 { return slices.Sorted(maps.Keys(s.reqs)) }

// Sent returns request id, not yet answered, and leaves it so.
func (s *Subs) Sent(id int64) (SubRequest, bool) {
	r, ok := s.reqs[id]
	return r, ok
}

// Unanswered returns the ids of the requests sent before now-d and not
// answered, in the order they were sent.
func (s *Subs) Unanswered(now time.Time, d time.Duration) []int64 {
	var out []int64
	for id, r := range s.reqs {
		if now.Sub(r.At) >= d {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// AskedIn returns the request that last asked key, if key is still asked
// (a later request supersedes an earlier one), or 0.
func (s *Subs) AskedIn(key string) int64 {
	if sk := s.keys[key]; sk != nil && sk.state == SubAsked {
		return sk.req
	}
	return 0
}

// Ack marks key acknowledged; its backoff is forgotten (a shared one once
// no key waits to be asked again).
func (s *Subs) Ack(key string) {
	if !s.want[key] {
		return
	}
	s.key(key).state = SubAcked
	s.done(key)
}

func (s *Subs) done(key string) {
	if !s.Shared {
		s.Retry.Done(key)
		return
	}
	for k := range s.want {
		if s.State(k) == SubNone {
			return
		}
	}
	s.Retry.Done(s.retryKey(key))
}

// Refuse marks key refused: it is not asked again until Want names it anew.
func (s *Subs) Refuse(key string) {
	if !s.want[key] {
		return
	}
	s.key(key).state = SubRefused
	s.done(key)
}

// Limit takes key back after the venue rate-limited it: it is asked again
// after its backoff. It returns the delay.
func (s *Subs) Limit(key string, now time.Time) time.Duration {
	return s.limit(now, key)
}

// limit takes keys back and fails their backoff once (a shared one once
// for all).
func (s *Subs) limit(now time.Time, keys ...string) time.Duration {
	var d time.Duration
	for i, k := range keys {
		if sk := s.keys[k]; sk != nil {
			sk.state = SubNone
		}
		if !s.Shared || i == 0 {
			d = s.Retry.Fail(s.retryKey(k), now)
		}
	}
	return d
}

// LimitAsked takes back every key still asked (a rate limit that names no
// request), as Limit, and returns them sorted.
func (s *Subs) LimitAsked(now time.Time) []string {
	keys := s.Pending()
	s.limit(now, keys...)
	return keys
}

// Expire takes back, as Limit, the keys asked more than Deadline before
// now and returns them sorted.
func (s *Subs) Expire(now time.Time) []string {
	if s.Deadline <= 0 {
		return nil
	}
	var out []string
	for k, sk := range s.keys {
		if sk.state == SubAsked && now.Sub(sk.asked) > s.Deadline {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	s.limit(now, out...)
	return out
}

// Overdue returns, sorted, the keys asked more than Deadline before now,
// leaving them asked (an adapter that drops the connection instead).
func (s *Subs) Overdue(now time.Time) []string {
	var out []string
	for k, sk := range s.keys {
		if sk.state == SubAsked && s.Deadline > 0 && now.Sub(sk.asked) > s.Deadline {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Pending returns the keys asked and not answered, sorted.
func (s *Subs) Pending() []string {
	var out []string
	for k, sk := range s.keys {
		if sk.state == SubAsked {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Answered reports whether the venue answered every wanted key: each is
// acknowledged or refused.
func (s *Subs) Answered() bool {
	for k := range s.want {
		if st := s.State(k); st != SubAcked && st != SubRefused {
			return false
		}
	}
	return true
}

// Reset starts a new connection: nothing is asked or acknowledged on it,
// no request is out, no resync runs and no backoff runs. What is wanted,
// and what the venue refused, stay.
func (s *Subs) Reset() {
	for k, sk := range s.keys {
		if sk.state == SubRefused && s.want[k] {
			continue
		}
		delete(s.keys, k)
	}
	clear(s.reqs)
	s.Retry.Reset()
	s.Resyncs.Reset()
}

// Resync asks for key's book to be resubscribed, for a fresh snapshot: an
// unsubscribe and a subscribe of key alone, planned by Flush once fewer
// than Resyncs.Max run, and again after each backoff until Whole. A key
// not subscribed on this connection is left alone (its subscribe brings a
// snapshot anyway). It reports whether a resync is now pending.
func (s *Subs) Resync(key string) bool {
	if st := s.State(key); !s.want[key] || (st != SubAsked && st != SubAcked) {
		return false
	}
	s.Resyncs.Queue(key)
	return true
}

// Whole ends key's resync: its book is whole again.
func (s *Subs) Whole(key string) { s.Resyncs.Whole(key) }

// Flush returns the request plan due at now, in the order to send it:
// unsubscribes of the keys no longer wanted, the resyncs due, then
// subscribes of the keys to ask (Plan, with hold), each batched within
// Limits and, with Track, recorded under its ID. Expired keys are taken
// back first (see Deadline), so they are asked again once their backoff
// is over.
func (s *Subs) Flush(now time.Time, hold func(key string) bool) []SubRequest {
	var out []SubRequest
	add := func(op string, keys []string, resync bool) {
		for _, b := range s.Limits.Batch(keys) {
			at := now
			if s.Limits.Interval > 0 {
				at = maxTime(now, s.nextAt)
				s.nextAt = at.Add(s.Limits.Interval)
			}
			r := SubRequest{Op: op, Keys: b, At: at, Resync: resync}
			if s.Track {
				r.ID = s.Request(r)
			}
			out = append(out, r)
		}
	}
	var resend []string
	if s.Deadline > 0 {
		if !s.KeepExpired {
			s.Expire(now)
		}
		for _, id := range s.Unanswered(now, s.Deadline) {
			if r, _ := s.Answer(id); r.Op == OpUnsubscribe && !r.Resync {
				resend = append(resend, r.Keys...)
			}
		}
	}
	resyncs := s.Resyncs.Due(now, func(k string) bool {
		st := s.State(k)
		return s.want[k] && (st == SubAsked || st == SubAcked)
	})
	s.Asked(now, resyncs...)
	ask, drop := s.Plan(now, hold)
	add(OpUnsubscribe, append(resend, drop...), false)
	for _, k := range resyncs {
		add(OpUnsubscribe, []string{k}, true)
		add(OpSubscribe, []string{k}, true)
	}
	add(OpSubscribe, ask, false)
	return out
}

// SubLimits are a venue's limits on one subscription request, within which
// Flush batches its plan. The zero value puts all keys in one request.
type SubLimits struct {
	// MaxKeys caps the keys one request names; 0 means no cap.
	MaxKeys int
	// MaxBytes caps a request's size, counted as Overhead plus, for each
	// key, its length and KeyOverhead; 0 means no cap. A key over it
	// alone still goes, alone.
	MaxBytes, Overhead, KeyOverhead int
	// Group names the request a key may travel in, for a venue that takes
	// one channel a request: keys of different groups never share one.
	// Nil: all keys are one group.
	Group func(key string) string
	// Interval is the link's spacing of requests (LinkConfig's
	// MaxSendsPerSecond): a request planned while others wait for the
	// pacer is recorded At when the pacer sends it, so its answer is due
	// from then.
	Interval time.Duration
}

// Batch splits keys into requests within l: groups in the order they first
// appear, keys in their order within each.
func (l SubLimits) Batch(keys []string) [][]string {
	if len(keys) == 0 {
		return nil
	}
	groups := [][]string{keys}
	if l.Group != nil {
		groups = nil
		at := map[string]int{}
		for _, k := range keys {
			g := l.Group(k)
			i, ok := at[g]
			if !ok {
				i = len(groups)
				at[g] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], k)
		}
	}
	var out [][]string
	for _, g := range groups {
		for len(g) > 0 {
			n, size := 0, l.Overhead
			for n < len(g) && (l.MaxKeys <= 0 || n < l.MaxKeys) {
				c := len(g[n]) + l.KeyOverhead
				if l.MaxBytes > 0 && n > 0 && size+c > l.MaxBytes {
					break
				}
				size += c
				n++
			}
			out = append(out, slices.Clone(g[:n]))
			g = g[n:]
		}
	}
	return out
}

// Resyncs schedules the resubscriptions that give books a fresh snapshot:
// a queue of keys (a book each), at most Max in flight, and each key in
// flight asked again after its backoff (Retry) until Whole says its book is
// whole again. The zero value is ready to use (Max 0: no cap). Not safe
// for concurrent use.
type Resyncs struct {
	// Max caps the resyncs in flight; 0 means no cap.
	Max int
	// Retry is each key's backoff between resync requests.
	Retry Retry

	queue    []string
	inFlight map[string]bool
}

// Queue asks for a resync of key, unless one is queued or in flight.
func (r *Resyncs) Queue(key string) {
	if r.inFlight[key] || slices.Contains(r.queue, key) {
		return
	}
	r.queue = append(r.queue, key)
}

// Whole ends key's resync: its book is whole again (or it is no longer
// wanted).
func (r *Resyncs) Whole(key string) {
	delete(r.inFlight, key)
	r.Retry.Done(key)
	r.queue = slices.DeleteFunc(r.queue, func(k string) bool { return k == key })
}

// Pending reports whether key is queued or in flight.
func (r *Resyncs) Pending(key string) bool { return r.inFlight[key] || slices.Contains(r.queue, key) }

// InFlight returns how many resyncs are in flight.
func (r *Resyncs) InFlight() int { return len(r.inFlight) }

// Due returns the keys to resubscribe now: those in flight whose backoff
// ran out (sorted), then queued ones, oldest first, while fewer than Max
// are in flight; ok filters the queue (a key it rejects is dropped). Each
// key returned is in flight, its next request due after its backoff.
func (r *Resyncs) Due(now time.Time, ok func(key string) bool) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(r.inFlight)) {
		if !r.Retry.Waiting(k, now) {
			out = append(out, k)
		}
	}
	for len(r.queue) > 0 && (r.Max <= 0 || len(r.inFlight) < r.Max) {
		k := r.queue[0]
		r.queue = r.queue[1:]
		if ok != nil && !ok(k) {
			continue
		}
		if r.inFlight == nil {
			r.inFlight = map[string]bool{}
		}
		r.inFlight[k] = true
		out = append(out, k)
	}
	for _, k := range out {
		r.Retry.Fail(k, now)
	}
	return out
}

// Reset forgets every resync (a new connection subscribes afresh).
func (r *Resyncs) Reset() {
	r.queue = r.queue[:0]
	clear(r.inFlight)
	r.Retry.Reset()
}
