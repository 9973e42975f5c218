// Package client is fanoutd's Go client: it keeps a connection to the
// daemon (reconnecting with backoff and jitter, to the next of its URLs),
// keeps an exact order book per level2 stream, and reports every loss.
//
// # States
//
// A Book is Valid when it equals the daemon's book at Book.Seq, and
// Invalid otherwise, with a Reason: subscribing (no snapshot yet),
// gap (seqs lost: a snapshot is coming, or was asked for), resync (the
// daemon's book_resync: it rebuilds from the venue), dropping (the daemon
// drops this subscriber's newest events), reconnecting, link_down (the
// venue link dropped: stale until the venue's next snapshot), bad_level.
// A Book is never Valid between a detected loss and the snapshot that
// repairs it. An update whose seq is not the previous plus one makes the
// book invalid and sends the snapshot op; after a dropping/resumed or a
// resync the daemon sends the snapshot itself, and the client waits for it.
//
// # Guarantees
//
// Every event is handed out at most once, in seq order per stream. Every
// loss on a stream is handed out as a Gap: from resumed's gaps (exact),
// stream_gap, or a hole the client saw; a stream the daemon re-sends
// (resumed's "recovered") has no gap. A named client states last=<seq>
// for every stream when it reattaches, so the daemon's gaps name exactly
// the seqs it did not read. A refusal that reconnecting cannot cure
// (Error.Fatal: a refused token, a name another token holds, a takeover)
// ends Run instead of looping.
//
// # Concurrency
//
// The Handler runs on the reader goroutine, in order; a Handler that
// blocks stops the reading. Book methods may be called from any goroutine.
package client
