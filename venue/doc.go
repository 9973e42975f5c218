// Package venue is the contract between exchanges and the rest of fanoutd.
//
// It holds the normalized event types (a level2 book update or snapshot, a
// trade, a ticker) with exact decimal prices and sizes (book levels may
// travel in exact fixed point instead, Fixed, which the book and the wire
// encoder read without building a decimal), the stream naming
// scheme (venue:channel:symbol), the order book every level2 consumer keeps,
// the Adapter interface each exchange implements under venues/<name>, and
// what every adapter shares: the one link lifecycle (Link: dial, backoff,
// watchdog, keepalive, write queue, the link notices; the transport behind
// the Conn interface, venue/wsconn for websockets; Pool, the link over
// several connections where a venue caps one), coverage (CoverageSink,
// which decoders emit through, so live and replay agree), the bad-frame
// rule (BadFrames: one data_quality notice per burst), the subscription
// ledger and request planner (Subs: what is wanted, asked, acknowledged,
// refused or expired, resyncs, retries with backoff, batched within each
// venue's SubLimits; the adapter only encodes its plan), the instrument
// list behind KnownSymbol (Instruments), the symbol check of Subscribe
// (CheckSymbols) and config validation and defaults (Config.Validate,
// Config.SetDefaults).
//
// Import rules, among fanoutd's packages (deps_test.go at the module root
// enforces them and checks that this list states them):
//
//   - venue: notice, internal/jsonw
//   - venue/wsconn: venue, internal/rawio
//   - venue/venuetest: venue, notice
//   - venues/*: venue, venue/wsconn, notice, internal/scan
//   - venues/*/*test: venue, venue/venuetest, venues/* (its own adapter only)
//
// None of them imports fanout or subscriber.
//
// A Link's decode lock (shared by a Pool's connections) is taken before the
// Link's connection lock, the Pool's run lock, the coverage tracker's lock
// and whatever the decoder's sink takes (the venue's feed); the daemon's
// lock order is docs/lock-order.md.
//
// # Sequence numbers
//
// Two sequence numbers travel on a book event and they mean different
// things. VenueSeq is the venue's own (Coinbase sequence_num, OKX seqId,
// Bybit u, Binance u); 0 means the venue sent none. Seq is fanoutd's
// per-stream sequence: 1, 2, 3… assigned by the daemon when the event is
// published, with no holes for as long as the process runs whatever the
// venue does. Adapters leave Seq at 0.
package venue
