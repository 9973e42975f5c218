// Package cluster runs fanoutd as several nodes over NATS: an ingest node
// publishes every event of its venues, in its wire form and with its seq,
// and edge nodes forward those bytes to their subscribers. NATS is the
// distributed engine; this package is only the two ends of it.
//
// # Subjects
//
// With prefix P (cluster.subject_prefix, default "fanoutd"):
//
//	P.ev.<venue>.<channel>.<symbol>  one event per message: its wire form (the bytes subscribers receive)
//	P.notice.<venue>                 the venue's notices, wire form
//	P.hb.<venue>                     every second: {"node","epoch","streams":{stream: last seq}}
//	P.book.<venue>.<symbol>          request/reply: the level2 book as the snapshot:true event at its seq
//
// The symbol is one subject token, escaped (EscapeToken): every byte
// outside A-Z a-z 0-9 _ - is written %XX (two upper-case hex digits), so
// '.', '*', '>', spaces and '%' itself cannot change the subject:
// "XBT/USD" is "XBT%2FUSD", "1000.PEPE" is "1000%2EPEPE".
//
// # Headers
//
// Every event, notice, heartbeat and book reply carries Fanoutd-Epoch (the
// ingest process's epoch, random, chosen at start); events and book
// replies carry Fanoutd-Seq (decimal). A book request that finds no book
// is answered with Fanoutd-Error and no body.
//
// # Delivery guarantees
//
// NATS core delivers at most once. An edge follows each stream's seq: a
// hole, or a new epoch, is a gap. For a level2 stream the edge marks the
// book invalid, sends book_resync (reason bus_gap or epoch_change, with
// the range) to the stream's subscribers, holds what arrives meanwhile,
// fetches the book from the responder, forwards it as snapshot:true and
// then what it held past the snapshot's seq: an update is never applied to
// a book known wrong. For trades and ticker the edge announces the range
// lost (a stream_gap notice) and goes on. Heartbeats catch a loss at the
// tail: a stream whose last seq a heartbeat named is still not reached by
// the next heartbeat has lost its tail.
package cluster
