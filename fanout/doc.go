// Package fanout delivers each venue's events to the subscribers of the
// event's stream, and refuses to grow any subscriber's queue without a
// bound.
//
// # Delivery guarantees
//
// A Feed holds one venue's streams. Publish assigns the event its
// per-stream seq (1, 2, 3… with no holes for as long as the process runs),
// encodes it once, and offers the same bytes to every subscriber of the
// stream. For each subscriber, on every message, with no sampling:
//
//   - its queue length is read before the send (O(1)); a queue holding
//     max_queue_len messages (or max_queue_bytes bytes) is full: the bound
//     is inclusive;
//   - past the bound the NEWEST event is not queued. The first time a
//     subscriber is found over its bound it gets a dropping notice (details:
//     bound, queue_len, max_queue_bytes, queue_bytes); while dropping it loses
//     every event of the feed's streams it is subscribed to;
//   - the first time a dropping subscriber has drained below half the bound
//     (at least 1) — and below half the byte bound — it gets one resumed
//     notice (details: bound, queue_len, dropped, gaps: per stream the first
//     and last seq lost, reason "drained"), then a fresh snapshot of every
//     level2 stream that lost events, then the event of that call. Resuming
//     only at half the bound means a subscriber hovering at the bound does
//     not flip on every message;
//   - a subscriber that is gone is skipped, never an error, and costs
//     nothing on later calls once Hub.Detach removed it.
//
// # Recovery
//
// With Hub.SetRecovery, each stream with subscribers keeps a window of its
// newest events: the very messages delivered (the bytes encoded once),
// bounded by count per stream, by bytes over every feed of the hub, and by
// age. Keeping an event allocates nothing once the stream's ring has its
// size. When a subscriber resumes (drained or reattached), each stream
// whose whole lost range the window holds is recovered: those events are
// queued right after the resumed notice, in seq order, before anything
// newer, and the notice names the stream under recovered, not gaps; a
// level2 stream is recovered only when its lost updates are fewer bytes
// than its book (otherwise gap and snapshot). Never part of a range: a
// range is queued whole, and only if the queue, with it, still takes one
// more message under its bound (subscriber.Mailbox.Recover); one that
// does not fit is a gap as without recovery. Recovered events count
// against the bound like any other, so a subscriber too slow for its
// recovery drops again, with a dropping notice. Hub.Recover serves the
// recover op the same way.
//
// Notices never go through the bounded queue: they travel on the
// subscriber's own unbounded notice queue (subscriber.Mailbox.Notify), which
// its writer drains ahead of data. One notice per transition, never one per
// dropped message.
//
// A level2 subscription starts with a snapshot of the current book at the
// stream's current seq; updates follow from seq+1. The Feed keeps its own
// copy of every level2 book, built from the events it publishes, so it
// needs nothing from the event's source but the events: a venue adapter, a
// replayed capture or a relay from another node are alike.
//
// Named subscribers: while no connection is attached, deliveries to them
// are skipped and recorded as missed, together with whatever the last
// connection still had queued; the loss is marked once per stream when the
// subscriber is found detached, not per event (away.go). When a connection attaches again, the first
// call that observes it (or Hub.Attach itself) sends a resumed notice with
// reason "reattached" and the gaps, then a snapshot of every level2 stream
// the subscriber holds. Hub.ExpireAfter forgets a named subscriber left
// without a connection for a time to live; a name belongs to the owner
// that created it.
//
// # Derived streams
//
// A derived stream (book_snapshot_<depth>_<interval>, quote,
// trade_bar_<interval>) is computed in the feed of its source, once
// whatever its subscribers, and only while subscribed. All derived
// streams of one source are one derive.Set: each source event reads the
// book's top at most twice (closing intervals, applying the event), at the
// deepest depth asked, encodes it once and hands each stream its prefix;
// Counters.DerivedReads counts the reads. What still grows with the
// streams is the messages they send, so the Hub caps them (DerivedLimits:
// distinct streams per token and per source, summed depth per node) and
// Subscribe and Admit refuse past the caps with a *BudgetError. A
// conflated derived stream none of whose subscribers has a connection
// (detached named subscribers) is not computed; when one reattaches it
// gets the stream's current state at once. Trade bars are computed while
// held, attached or not: every bar counts, and a reattach is told its
// gaps.
//
// # Concurrency
//
// A Feed has one mutex. Publish, Notice, Hub.Subscribe, Hub.Unsubscribe
// and Hub.Detach take it; delivery holds it while it offers to each subscriber's queue,
// which never blocks (subscriber.Mailbox's lock is held for a few pointer
// moves). Lock order: Feed.mu, then subscriber.Mailbox.mu; the Hub's
// budget of derived streams has a lock of its own, taken with no other
// held. Feeds of different venues run in parallel; a Mailbox may be
// offered to by several feeds at once.
//
// The dropping state lives in the feed's entry for the subscriber and is
// re-derived on every call from what that call observed (the connection
// Resolve answers, the queue length Offer measured), so a subscriber that
// leaves while dropping leaves the state with it, without pruning.
package fanout
