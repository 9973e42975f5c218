// Package claimcheck stores large payloads — level2 book snapshots and
// closed capture segments — as claims in packs in object storage, and
// serves them back over HTTP through one Reader that keeps the gateway
// fast while a store throttles or hangs.
//
// # Packs, ids, stores
//
// A pack (BuildPack) is a ZIP of stored entries: a fixed-width index, one
// entry per claim, a JSON manifest. A ClaimID carries the pack's key
// (layout, day, pack id; the tenant is in the URL), the claim's position
// and the pack's claim count, so a claim is located with no database: one
// ranged read of the index prefix, one of the bytes. A pack's home store
// is a rendezvous hash of tenant and pack over the store names
// (HomeStore); the Writer writes it there, and announces its claims only
// after the whole pack is written. Store errors are *StoreError with an
// ErrorKind: throttled, unavailable, forbidden, missing, other.
//
// The index entry of a claim records its stream, so the Gateway checks a
// claim's stream (IndexEntry.Scope) against the request's token
// (Gateway.AuthorizeStream) after reading the index and before writing a
// header or byte of the claim: packs mix streams and claim ids are
// enumerable, so the tenant check alone would not confine a token.
//
// # Reader guarantees
//
// Every gateway read goes through Reader.Fetch (Locate, Bytes and Range
// call it):
//
//   - Coalescing. Concurrent fetches of one Key share one store request;
//     every caller still waiting gets its answer. The request runs on the
//     reader's own context with the store body timeout, never a caller's,
//     so the first caller leaving does not cancel it. A panic in it
//     becomes a *PanicError for every waiter.
//   - Per-caller deadline. A caller gets ErrDeadline at its deadline
//     (its ctx's, or ReaderConfig.Deadline) whatever the fetch is doing;
//     the fetch runs to its end and fills the cache, so a retry finds it.
//   - Per-store AIMD limit. At most limit store requests run per store.
//     The limit starts at MaxInflight, halves (never below 1) when a
//     request is throttled or gets no first byte within
//     FirstByteTimeout — at most once per decrease window, the store's
//     smoothed round trip of successful requests (srtt, clamped to
//     MinHold..DecreaseInterval, 5..100 ms; 100 ms until measured), and
//     never for a request admitted before the last decrease — and grows
//     by one after limit successes, up to MaxInflight. A throttled or
//     unanswered request keeps its slot one srtt (at least MinHold) after
//     its callers have the answer, so a store that refuses at once is not
//     sent the next queued read at once. A missing key is a success; a
//     403 changes nothing; a slow body is not congestion.
//   - Bounded queue. A fetch with no free slot waits in a FIFO of at most
//     QueueMax per store; past it Fetch returns ErrOverloaded at once. A
//     queued fetch whose every caller has left, or whose callers'
//     deadlines have passed when a slot frees, is dropped without a store
//     request. With the cache off, a fetch is not sent with less than
//     one srtt left before its callers' deadline (two for an index: the
//     claim's bytes are still to be read), since its late answer would be
//     thrown away; store answers no caller used are counted as wasted.
//   - Charging. A fetch is charged to the store it is addressed to; the
//     index fetch searches every store, home first, and is charged to the
//     home store.
//   - Cache. Successful results (claim bytes, ranges, indexes) are kept
//     in a byte-bounded LRU (CacheBytes); packs are immutable, so entries
//     never go stale. Errors are not cached.
//   - Gate. Admit bounds the gateway requests in flight node-wide
//     (MaxConcurrentReads, 0 = unlimited), cache hits included, and is
//     checked before any lookup. A slot is released by release or when the
//     request's context ends, whichever is first, so a request that
//     panics or is abandoned cannot leak it.
//   - Accounting. Each Fetch caller is counted once: "store" (its fetch
//     went to the store; counted when the fetch ends, even if the caller
//     left), "coalesced", "cache" or "shed".
//
// # Concurrency
//
// All Reader, Writer and Gateway methods are safe for concurrent use.
// The Reader holds one mutex over its flights and per-store state; no
// store I/O runs under it. Fetch starts one goroutine per store request,
// owned by the Reader: Close fails queued fetches with ErrClosed,
// cancels running requests and waits for their goroutines. The Writer
// owns one goroutine that seals packs by age and writes them one at a
// time; Announce is called from it, in write order, and must not block
// for long. Redeem bypasses the Reader entirely (for `fanoutd claims
// get`): no limit, no cache, bounded only by its context.
//
// A FetchFunc must return when its context is done; the Reader does not
// abandon a store request, it waits for it (and its slot stays taken).
//
// Locks: Writer.writeMu before Writer.mu and before whatever Announce
// takes; the Reader's and the cache's locks are leaves. The whole
// daemon's order is docs/lock-order.md.
package claimcheck
