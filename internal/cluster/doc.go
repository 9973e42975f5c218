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
//	P.want.<venue>                   edge → ingest: {"node","streams"}; a request asks for one stream
//	                                 (reply: Fanoutd-Error and a message if refused), a renewal (no
//	                                 reply subject, every WantRenew) names every stream the edge holds
//	P.recover.<venue>                edge → ingest, request/reply: {"stream","from","to"}; reply: the
//	                                 events from "from" in the leader's recovery window, one a line, at
//	                                 most MaxRecoverReply bytes (Fanoutd-Seq: the first's), or Fanoutd-Error
//	P.names.takeover                 an edge claimed a name: {"name","conn","by"} (Names)
//
// and two JetStream key-value buckets, P_names (named subscribers: owner,
// holder, subscriptions, last seq written; Names) and P_leases (per venue,
// the ingest leading it; lease.go), with P's dots written '_'.
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
// lost (a stream_gap notice) and goes on. With RecoverGaps, before either, the edge
// asks the ingest for the range (recover.go), holding what arrives, and
// forwards it in order if the ingest's window holds it whole. Heartbeats catch a loss at the
// tail: a stream whose last seq a heartbeat named is still not reached by
// the next heartbeat has lost its tail.
//
// # Leaders and standbys
//
// Several ingests may serve one venue; the one holding the venue's lease
// publishes it, renewing the lease every LeaseRenew by compare-and-set on
// the key's revision. The others follow its events and heartbeats to know
// each stream's last seq and its epoch; one that sees the lease's revision
// unchanged for LeaseLapse takes it, and its feed continues the numbering
// (fanout.Feed.Continue) in the same epoch: a book_resync (reason
// failover) and a snapshot:true per level2 stream at the next seq, a
// stream_gap (reason failover) per other stream. A leader that could not
// renew for LeaseLapse stops publishing.
//
// # Named subscribers
//
// Names keeps every edge's named subscribers in one bucket: a connection
// claims its name by compare-and-set (one holder cluster-wide; the
// previous holder's edge is told to close it as taken over), a name keeps
// the owner that created it, and the subscriptions and the last seq
// written per stream are written on change (at most every NamesSyncEvery)
// so that another edge can adopt the name with exact gaps.
//
// Locks: an edgeStream's lock is taken before its feed's; Edge.mu after a
// feed's, never before; the whole daemon's order is docs/lock-order.md.
package cluster
