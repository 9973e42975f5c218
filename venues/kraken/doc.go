// Package kraken is fanoutd's adapter for Kraken's Spot WebSocket v2
// public market data: level2 books from the book channel, trades from
// trade, best bid and offer from ticker.
//
// # Protocol rules implemented
//
// Endpoint: wss://ws.kraken.com/v2 (Config.WSURL overrides it). Symbols are
// the v2 form, "BTC/USD"; streams carry them as written
// ("kraken:level2:BTC/USD"). The legacy "XBT/USD" form is refused by the
// venue and reported as a refusal notice.
//
// Subscribe: on every connection the adapter first subscribes the
// instrument channel, whose snapshot gives each pair's price_precision and
// qty_precision (the checksum needs them), then trade (snapshot:false, so
// a reconnect does not replay history) and ticker (event_trigger:"bbo", so
// it updates on every best bid/offer change) for the configured symbols,
// and the book (depth Config.Depth: 10, 25, 100, 500 or 1000; default 10,
// Kraken's own) once the instrument snapshot is in. Each request carries a
// req_id; Kraken answers one ack per symbol. Requests are paced at 10 a
// second (Kraken publishes no rate; past it, "Exceeded msg rate"). A
// success:false ack is a refusal notice and the pair is not asked for
// again on this adapter (Subscribe asks again); "Already subscribed" is
// success. A rate limit is never a refusal: "Exceeded msg rate", as a
// failed ack or as the bare {"Error":"Exceeded msg rate"} that names no
// request, is a rate_limited notice, and every subscription it may have
// refused (the named one, or all unanswered ones) is asked again after a
// backoff (venue.Retry: 1 s doubling to 30 s, per channel|symbol). A
// subscription with no ack within the read timeout drops the link. The read
// limit is 32 MiB: the instrument snapshot lists every pair.
//
// Known symbols: the instrument snapshot's pairs are the venue's list
// (venue.SymbolChecker, kept by venue.Instruments); a pair Kraken refused
// as "not supported" is reported unknown until Subscribe names it again.
//
// Keepalive: Kraken sends {"channel":"heartbeat"} about once a second on a
// subscribed link; the adapter also sends {"method":"ping","req_id":n}
// every PingInterval (default 10 s) and treats any frame, pong included,
// as life. A link that delivers nothing for ReadTimeout (default 15 s) is
// dead: it is closed and reconnected with venue.Backoff (first retry at
// once, then 1 s doubling to 30 s, jittered), emitting link_down,
// link_reconnecting and link_up. The backoff starts over only after a link
// that delivered market data, so a venue that accepts and drops at once is
// not hammered.
//
// Book: a snapshot replaces the book; update sizes are absolute; qty 0
// removes a level; several changes to one price in a message apply in
// order; after every message each side is truncated to the subscribed
// depth, and because Kraken never says qty 0 for a level that leaves
// scope, our update carries each such level as an explicit removal (size
// 0), so a consumer applying our events holds exactly our book. Prices and
// sizes are JSON numbers written at full precision (or strings, in the
// docs' checksum guide); they are read from their text, never through
// float64, and rescaled to the instrument's precision, so every price in a
// book shares one exponent (Cmp does not allocate) and the checksum can
// read coefficients directly. A value with non-zero digits finer than the
// instrument's precision, or beyond 18 significant digits, is a bad frame.
//
// Checksum: after each book message (snapshot or update), CRC32-IEEE over
// the top 10 asks (best first) then the top 10 bids (best first), each
// price then qty written with the instrument's precision, point removed,
// leading zeros stripped — always 10 levels whatever the subscribed depth.
// Kraken has no sequence numbers, so the checksum is the only integrity
// signal: a dropped update shows as a mismatch on the next message. When
// no instrument precision is known for a pair (a capture without the
// instrument frame), the finest precision in its snapshot is used.
//
// Resync: on a checksum mismatch, a crossed book, or a bad book frame, the
// book is marked invalid and nothing more is published for it; a
// book_resync notice names the stream, the reason and — Kraken having no
// sequence numbers — the venue's and our computed checksums; the adapter
// unsubscribes and resubscribes that symbol's book, and the new snapshot is
// published as a snapshot:true event. Updates that arrive meanwhile are
// dropped. At most 8 resyncs are in flight (until a
// snapshot makes the book whole); more wait their turn. A
// snapshot that cannot make a book (crossed, or finer than the
// instrument's precision) is asked for again, after a backoff that doubles
// until a snapshot makes the book whole; a resync whose subscribe is
// rate-limited is asked again the same way, on the same link. A frame that cannot be attributed to a symbol resyncs every
// book: the checksum covers only the top 10 levels, so a lost update deeper
// in the book would otherwise go unnoticed. Bad frames are counted
// (Decoder.BadFrames) and reported as one data_quality notice per burst
// (venue.BadFrames: a burst ends after venue.BadFrameQuiet without one).
//
// # Live and replay share the decoder
//
// Decoder holds everything frame-level (parsing, books, checksums, acks,
// notices about them); Adapter owns the socket and drives a Decoder with
// every frame after handing it to Config.Recorder. Replay drives a Decoder
// from a capture: the capture's instrument, ack and book frames produce the
// same events and notices (resubscription is the one thing replay cannot
// do; its books wait for the capture's next snapshot). Parsing is the
// venues' shared scanner over the frame's bytes (internal/scan): no maps,
// no copies, and the raw number text the checksum needs (number.go).
//
// # Cost
//
// Every price and size of a book is held in fixed point at the
// instrument's precisions (venue.Fixed, scale pp and qp), so the book
// compares integer keys and the checksum writes the coefficients
// directly; an update is published in one event the decoder reuses
// (venue.Sink). Decode, book apply, truncation, checksum and event cost no
// allocation (TestUpdateAllocBudget). A precision finer than 1e-18 (none
// exists) makes the snapshot bad. What limits the rate is scanning, then
// the checksum (40 numbers written and a CRC over ~300 bytes per message;
// a direct-mapped cache of the digits of recent values halves the
// writing). Figures: BenchmarkDecodeLevel2, in docs/performance.md.
//
// # Verified, and against what
//
//   - The checksum guide's BTC/USD example (3310070434, string levels), the
//     book page's MATIC/USD snapshot/update pair (2439117997, 2114181697;
//     verifies only with precision formatting, 0.566 being 0.5660) and a
//     float-parsed 25-level BTC/USD snapshot (4273381060): golden tests on
//     the frames in testdata/venues/kraken.
//   - Depth truncation without qty 0, the checksum's fixed 10 levels, and
//     the snapshot's checksum: Kraken's v2 book checksum guide.
//   - Subscribe/ack/refusal shapes: the docs' ack examples and the recorded
//     "Currency pair not supported XBT/USD" refusal.
//   - The mock (krakentest) and this adapter pass venuetest.Run at depth
//     10 and 25.
//
// # Unverified
//
//   - Connection and message rate limits (not published); the rate-limit
//     text "Exceeded msg rate" is from other clients' reports, and we also
//     match "rate limit".
//   - The idle timeout (about a minute, third-party): we ping every 10 s.
//   - Whether Kraken accepts more than 50 symbols per request (we send at
//     most 50).
//   - The "Already subscribed" error wording.
//   - That live frames always carry values at the instrument's precision
//     (the research saw 0.12290 and 9705.60000000); the fallback that
//     infers precision from a snapshot relies on it.
package kraken
