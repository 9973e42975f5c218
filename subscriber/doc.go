// Package subscriber is who receives: the queues of one attached
// connection (Mailbox), the durable identity behind it (Subscriber, ephemeral
// or named), and the Registry that resolves a name to its live connection.
//
// # What a subscriber is promised
//
//   - Data arrives in publish order per stream, each event exactly once or
//     not at all; every event carries its stream's seq, so a hole is
//     visible. Loss happens only when the subscriber's data queue is at its
//     bound (package fanout drops the newest event and says so with a
//     dropping notice, then a resumed notice naming the lost seqs) or while
//     a named subscriber has no connection attached (it is told on
//     reattach).
//   - Notices are never dropped: they go on a separate unbounded queue that
//     the connection's writer drains ahead of data. Replies to a client's
//     commands share that queue but are bounded (Mailbox.Reply): they echo
//     what the client sends.
//
// # Kinds
//
// An ephemeral subscriber is one connection: when the connection ends, the
// subscriber is removed from every feed (fanout.Hub.Detach) and no entry
// for it remains anywhere, so delivery cost never grows with past
// disconnects. A named subscriber is a durable name: its subscriptions
// outlive its connections; while nothing is attached, delivery to it is
// skipped (and recorded as missed); a connection that attaches under the
// name continues where the last one stopped and is told what it missed. A
// connection that attaches while another holds the name takes it over. A
// name belongs to the owner that created it (Registry.Attach refuses
// others with ErrNameTaken); one left without a connection can be
// forgotten (Registry.Expire).
//
// # Resolve
//
// Subscriber.Resolve answers the live Mailbox or nil. The data path and the
// notice path both deliver through Resolve, so they never disagree about
// whether a subscriber is reachable.
//
// # Concurrency
//
// All types are safe for concurrent use. A Mailbox has one mutex guarding its
// queues; Offer, Force, Notify, Reply and Drain hold it for a few pointer
// moves and never block, and Len is O(1) under it. Several feeds (one per
// venue) may offer to one Mailbox concurrently; one writer at a time drains
// it. A Subscriber's attachMu is taken before the Registry's lock; the
// daemon's lock order is docs/lock-order.md.
package subscriber
