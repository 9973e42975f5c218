package subscriber

import (
	"sync"
	"sync/atomic"
	"time"
)

// Message is one encoded item for a subscriber: the bytes of one JSON
// object of the wire protocol. One Message is shared by every subscriber it
// is delivered to and must not be modified after it is first queued.
type Message struct {
	// Stream and Seq identify a data event ("" and 0 for notices and
	// replies); they let a detached subscriber's unsent queue be reported
	// as missed.
	Stream string
	Seq    uint64
	// Snapshot marks a book snapshot the feed made for a subscriber (on
	// subscribe, resume or request): it stands for the book at Seq, not for
	// the event Seq, so it is never reported as a missed event.
	Snapshot bool
	// Conflate marks a whole-state message of a conflated derived stream
	// (book_snapshot_*, quote): queued with Mailbox.Conflate, it is
	// replaced in place by a newer one of its stream while unsent, and is
	// never reported as missed.
	Conflate bool
	// Reply marks a reply to a client's command (Mailbox.Reply), which
	// counts against the reply bound.
	Reply bool
	// Data is the encoded JSON object, without a trailing newline.
	Data []byte
	// Published is when the event was published, for the publish-to-write
	// latency; zero if not measured.
	Published time.Time
}

// Result is what Offer did with a message.
type Result uint8

// Offer results.
const (
	Enqueued Result = iota + 1 // queued
	Full                       // not queued: the queue is at its bound
	Closed                     // not queued: the Mailbox is closed
	Replaced                   // queued in place of the unsent older message of its stream
)

// Mailbox is one attached connection's queues: a bounded data queue and an
// unbounded notice queue. The zero Mailbox is not usable; call NewMailbox.
type Mailbox struct {
	ready   chan struct{} // capacity 1: a token means "the queues went from empty to not"
	onReady func()        // called after each Ready token is offered; set before first use
	done    atomic.Bool   // mirror of closed, for the lock-free IsClosed

	mu      sync.Mutex // protects the fields below
	ring    []*Message // data queue, a ring of len(ring) slots, a power of two
	head    int        // index of the oldest data message
	n       int        // data messages queued
	bytes   int        // sum of len(Data) over the data queue
	notices []*Message // notice queue, oldest first
	replies int        // bytes of the replies on the notice queue
	held    int        // Hold calls not yet released: Drain takes nothing
	closed  bool
	// popped counts the data messages ever drained; a message pushed when
	// popped+n was p sits at ring index head+(p-popped) while p >= popped.
	popped uint64
	// pending maps a conflated stream to the position (see popped) of its
	// message on the queue; an entry below popped is stale.
	pending map[string]uint64

	replaced atomic.Uint64 // conflated messages replaced before being sent
}

// NewMailbox returns an open Mailbox with empty queues.
func NewMailbox() *Mailbox {
	return &Mailbox{ready: make(chan struct{}, 1)}
}

// Len returns the number of data messages queued, in O(1). It takes the
// lock: delivery uses Offer, which measures the length under the lock it
// holds anyway, so no atomic mirror is kept.
func (c *Mailbox) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Bytes returns the number of data bytes queued, in O(1).
func (c *Mailbox) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Ready returns a channel that receives a value when the queues go from
// empty to not empty. The writer's loop is: wait on Ready, then Drain until
// it returns nothing, then wait again. Signalling only on that transition
// keeps a channel operation off every push.
func (c *Mailbox) Ready() <-chan struct{} { return c.ready }

// OnReady sets f to be called at each transition Ready signals, after the
// token is offered, on the goroutine that queued the message (a feed's
// delivery: f must not block or take a lock held around delivery). A
// write pool uses it to learn when a connection has something to write
// without polling its channel. It must be set before the Mailbox is
// shared.
func (c *Mailbox) OnReady(f func()) { c.onReady = f }

func (c *Mailbox) signal() {
	select {
	case c.ready <- struct{}{}:
	default:
	}
	if c.onReady != nil {
		c.onReady()
	}
}

// Offer queues m on the data queue unless the queue already holds maxLen
// messages, or maxBytes bytes (0 means no byte bound), or the Mailbox is
// closed. The bound is inclusive: a queue holding maxLen is full. It
// returns the queue length it measured before queuing, and what it did.
// The check and the push happen under one lock, so concurrent offers from
// several feeds never overfill the queue.
func (c *Mailbox) Offer(m *Message, maxLen, maxBytes int) (int, Result) {
	c.mu.Lock()
	n := c.n
	switch {
	case c.closed:
		c.mu.Unlock()
		return n, Closed
	case n >= maxLen || maxBytes > 0 && c.bytes >= maxBytes:
		c.mu.Unlock()
		return n, Full
	}
	wake := c.n == 0 && len(c.notices) == 0
	c.push(m)
	c.mu.Unlock()
	if wake {
		c.signal()
	}
	return n, Enqueued
}

// Force queues m on the data queue whatever its length: for the book
// snapshot that follows a subscribe or a resumed notice, which a
// subscriber must get for its data to be whole. It reports false if the
// Mailbox is closed.
func (c *Mailbox) Force(m *Message) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	wake := c.n == 0 && len(c.notices) == 0
	c.push(m)
	c.mu.Unlock()
	if wake {
		c.signal()
	}
	return true
}

// Conflate queues m, a whole-state message of a conflated stream
// (m.Stream set), whatever the queue's length: if a message of m.Stream is
// still queued unsent, m takes its place (and its position) and Replaced
// is returned; else m is appended and Enqueued returned. The queue thus
// holds at most one message per conflated stream beyond its bound, so a
// conflated stream never drops and its memory stays bounded. It returns
// Closed if the Mailbox is closed.
func (c *Mailbox) Conflate(m *Message) Result {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return Closed
	}
	if p, ok := c.pending[m.Stream]; ok && p >= c.popped {
		i := (c.head + int(p-c.popped)) & (len(c.ring) - 1)
		c.bytes += len(m.Data) - len(c.ring[i].Data)
		c.ring[i] = m
		c.mu.Unlock()
		c.replaced.Add(1)
		return Replaced
	}
	if c.pending == nil {
		c.pending = map[string]uint64{}
	}
	c.pending[m.Stream] = c.popped + uint64(c.n)
	wake := c.n == 0 && len(c.notices) == 0
	c.push(m)
	c.mu.Unlock()
	if wake {
		c.signal()
	}
	return Enqueued
}

// Replaced returns how many conflated messages a newer one replaced
// before they were written.
func (c *Mailbox) Replaced() uint64 { return c.replaced.Load() }

// push appends m to the ring. c.mu must be held.
func (c *Mailbox) push(m *Message) {
	if c.n == len(c.ring) {
		c.grow()
	}
	c.ring[(c.head+c.n)&(len(c.ring)-1)] = m
	c.n++
	c.bytes += len(m.Data)
}

// grow doubles the ring. Rings start at two slots (an idle subscriber's
// queue rarely holds more) and grow to what the bound lets them hold, so
// an idle subscriber costs a few slots, not its bound. c.mu must be held.
func (c *Mailbox) grow() {
	size := max(2, 2*len(c.ring))
	ring := make([]*Message, size)
	for i := 0; i < c.n; i++ {
		ring[i] = c.ring[(c.head+i)&(len(c.ring)-1)]
	}
	c.ring, c.head = ring, 0
}

// Notify queues m on the notice queue, which has no bound: notices are
// never dropped. It reports false if the Mailbox is closed.
func (c *Mailbox) Notify(m *Message) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	wake := c.n == 0 && len(c.notices) == 0
	c.notices = append(c.notices, m)
	c.mu.Unlock()
	if wake {
		c.signal()
	}
	return true
}

// Reply marks m as a reply to the client and queues it on the notice queue (so it keeps
// its order with the notices and goes ahead of data) unless the replies
// already queued there hold maxBytes bytes or more. It returns Full then,
// and Closed if the Mailbox is closed. Replies echo what a client sends,
// so unlike notices they are bounded.
func (c *Mailbox) Reply(m *Message, maxBytes int) Result {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return Closed
	case c.replies >= maxBytes:
		c.mu.Unlock()
		return Full
	}
	wake := c.n == 0 && len(c.notices) == 0
	m.Reply = true
	c.notices = append(c.notices, m)
	c.replies += len(m.Data)
	c.mu.Unlock()
	if wake {
		c.signal()
	}
	return Enqueued
}

// Hold has Drain take nothing until the matching Release, so that what a
// command queues on both queues (a subscribe's ack, then the snapshot and
// events that follow its subscription) reaches the writer together, in
// queue order. Release signals Ready if anything is queued.
func (c *Mailbox) Hold() {
	c.mu.Lock()
	c.held++
	c.mu.Unlock()
}

// Release ends a Hold.
func (c *Mailbox) Release() {
	c.mu.Lock()
	c.held--
	wake := c.held == 0 && (c.n > 0 || len(c.notices) > 0)
	c.mu.Unlock()
	if wake {
		c.signal()
	}
}

// Queued returns the number of messages queued, notices and data.
func (c *Mailbox) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n + len(c.notices)
}

// Drain appends queued messages to dst and removes them from the queues:
// notices first, then data, while fewer than max messages have been
// taken and their bytes, with a separator byte between two messages, stay
// within maxBytes (at least one message is taken if any is queued). Data
// is taken only once every notice is: a notice goes out before the data
// queued after it. Drain returns the extended slice and how many of the
// appended messages are notices.
func (c *Mailbox) Drain(dst []*Message, max, maxBytes int) ([]*Message, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held > 0 {
		return dst, 0
	}
	taken, size := 0, -1 // size: the frame's bytes so far, separators included
	nn := 0
	for nn < len(c.notices) && (taken == 0 || taken < max && size+1+len(c.notices[nn].Data) <= maxBytes) {
		m := c.notices[nn]
		if m.Reply {
			c.replies -= len(m.Data)
		}
		size += 1 + len(m.Data)
		taken++
		nn++
		dst = append(dst, m)
	}
	if nn > 0 {
		rest := copy(c.notices, c.notices[nn:])
		clear(c.notices[rest:])
		c.notices = c.notices[:rest]
	}
	for len(c.notices) == 0 && c.n > 0 && (taken == 0 || taken < max && size+1+len(c.ring[c.head].Data) <= maxBytes) {
		m := c.ring[c.head]
		c.ring[c.head] = nil
		c.head = (c.head + 1) & (len(c.ring) - 1)
		if m.Conflate && c.pending[m.Stream] == c.popped {
			delete(c.pending, m.Stream)
		}
		c.popped++
		c.n--
		c.bytes -= len(m.Data)
		size += 1 + len(m.Data)
		taken++
		dst = append(dst, m)
	}
	if c.n == 0 {
		c.head = 0
	}
	return dst, nn
}

// Close marks the Mailbox closed: later Offer, Force and Notify calls queue
// nothing. It returns the data messages that were still queued (oldest
// first) so the caller can report them as missed, and drops the notices.
// Close is idempotent; later calls return nil.
func (c *Mailbox) Close() []*Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.done.Store(true)
	out := make([]*Message, 0, c.n)
	for i := 0; i < c.n; i++ {
		out = append(out, c.ring[(c.head+i)&(len(c.ring)-1)])
	}
	c.ring, c.notices, c.n, c.bytes, c.head, c.replies, c.pending = nil, nil, 0, 0, 0, 0, nil
	c.signal()
	return out
}

// IsClosed reports whether Close was called.
func (c *Mailbox) IsClosed() bool { return c.done.Load() }

// Recover queues batches of data messages under one lock, each batch
// whole or not at all: a batch is queued only if, with it and the batches
// before it that were, the queue would still take one more message under
// Offer's bound (fewer than maxLen messages, and fewer than maxBytes
// bytes; maxBytes 0 means no byte bound). The message that follows a
// recovery thus always fits, and a subscriber that resumes never drops at
// once. head, if not nil, is called with which batches fit and the data
// queue's length before them (still under the lock: it must only build a
// message); its message goes on the notice queue, so the client reads it
// before the messages it announces. Recover returns which batches it
// queued, or nil if the Mailbox is closed.
func (c *Mailbox) Recover(batches [][]*Message, maxLen, maxBytes int, head func(ok []bool, queued int) *Message) []bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	ok := make([]bool, len(batches))
	n, bytes := c.n, c.bytes
	for i, b := range batches {
		nb, bb := n+len(b), bytes
		for _, m := range b {
			bb += len(m.Data)
		}
		if nb < maxLen && (maxBytes <= 0 || bb < maxBytes) {
			ok[i], n, bytes = true, nb, bb
		}
	}
	wake := c.n == 0 && len(c.notices) == 0
	if head != nil {
		if m := head(ok, c.n); m != nil {
			if m.Reply {
				c.replies += len(m.Data)
			}
			c.notices = append(c.notices, m)
		}
	}
	for i, b := range batches {
		if ok[i] {
			for _, m := range b {
				c.push(m)
			}
		}
	}
	empty := c.n == 0 && len(c.notices) == 0
	c.mu.Unlock()
	if wake && !empty {
		c.signal()
	}
	return ok
}
