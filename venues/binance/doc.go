// Package binance is the Binance spot adapter: level2 books from the
// diff-depth stream bridged to REST snapshots, trades and best bid/offer.
//
// # Streams
//
// For a symbol as Binance writes it (BTCUSDT), the adapter publishes
// binance:level2:BTCUSDT from <sym>@depth@100ms, binance:trades:BTCUSDT from
// <sym>@trade (taker side: "m" true means the buyer made, so the taker
// sold), and binance:ticker:BTCUSDT from <sym>@bookTicker (bid and ask with
// sizes; the frame has no timestamp and no last price). Stream names on the
// wire are lower case (btcusdt@trade).
//
// # Link
//
//   - Endpoint: Config.WSURL (default wss://stream.binance.com:9443) plus
//     /stream, the combined-stream path, so every payload arrives wrapped as
//     {"stream":…,"data":…}. Subscriptions are live requests,
//     {"method":"SUBSCRIBE","params":[…],"id":N}, each confirmed by
//     {"result":null,"id":N}; an {"error":{"code":…,"msg":…},"id":N} reply
//     is a Refusal notice for the symbols it names, with no retry. link_up
//     is sent on the first reply of a connection (or at once when nothing is
//     wanted).
//   - Binance accepts a well-formed stream of an unknown symbol and then
//     sends nothing, so every symbol is first looked up in REST
//     /api/v3/exchangeInfo (symbols=[…]; Binance fails the whole request
//     with -1121 "Invalid symbol." when one is unknown, and the adapter then
//     asks for each alone). The whole exchangeInfo is fetched once (and
//     hourly) and is the adapter's instrument list (venue.SymbolChecker);
//     a wanted symbol it lacks is still asked about alone (a new listing).
//     An unknown symbol is a Refusal notice and is not subscribed. A -1121
//     on the depth snapshot is a Refusal too.
//   - Keepalive: Binance pings every 20 s and drops a connection that has
//     not answered within a minute; coder/websocket answers pings while the
//     adapter reads. The adapter also pings every Config.PingInterval
//     (default 20 s) as a probe, and a link on which nothing arrived — no
//     frame, ping or pong — for Config.ReadTimeout (default 60 s) is dead:
//     it is closed and reconnected.
//   - Limits: at most one request every 250 ms (Binance disconnects past 5
//     incoming messages a second, pings and pongs included; a request's
//     answer is due ReadTimeout after its turn to be sent, not after it was
//     queued), requests of at most 4 KiB, at most 1024 streams a connection
//     (symbols are spread over connections, venue.Pool: each has its own
//     decoder, requests and 5 messages a second; past 64 connections a
//     symbol is refused up front), and at most 60 connection attempts in 5
//     minutes over all connections (Binance allows 300 per IP). REST calls
//     spend from a bucket of 3000 weight a minute, half of the IP's 6000 (a
//     5000-level snapshot weighs 250), and never take the address past
//     6000 in a minute by X-MBX-USED-WEIGHT-1M (other clients count);
//     snapshots wait their turn first come first served. A 429 or 418 is a
//     RateLimited notice and stops every REST request until Retry-After.
//   - Forced disconnects: a connection lives at most 24 h, and a
//     serverShutdown event ({"stream":"!serverShutdown",…} or raw) announces
//     one. On serverShutdown the adapter closes the link at once; either way
//     it reconnects. After a link that came up, the first retry is
//     immediate; then venue.Backoff (1 s doubling to 30 s, with jitter).
//     Each drop is link_down (with the reason), each attempt
//     link_reconnecting, and the decoder drops every book until a new
//     snapshot.
//
// # Books: the bridge procedure
//
// The decoder follows Binance's "How to manage a local order book
// correctly" (web-socket-streams.md):
//
//  1. Once the depth subscription is acknowledged, events are buffered and
//     a REST snapshot /api/v3/depth?symbol=X&limit=5000 (Config.Depth) is
//     fetched.
//  2. Buffered events with u <= lastUpdateId are discarded. The first one
//     left must straddle: U <= lastUpdateId+1 <= u; if U is beyond it, the
//     snapshot is older than the buffer and another is fetched.
//  3. The book is the snapshot with the remaining events applied (sizes are
//     absolute, a zero size removes the level); it is published as one
//     snapshot:true event whose VenueSeq is the last u applied.
//  4. After that, an event with u <= the last u is stale and ignored; each
//     other must have U == last u + 1 (or, for the first after a snapshot
//     with nothing buffered, straddle it). Anything else is a gap.
//
// A gap, a frame for the book that does not parse, a negative size or a
// book crossed after an update marks the book invalid: nothing more is
// published for it, a book_resync notice names the reason and the sequence
// numbers (last_u, U, u), a snapshot is fetched again, and the rebuilt book
// is published as a snapshot. Bad frames are counted and reported as one
// data_quality notice per burst (venue.BadFrames: a burst ends after
// venue.BadFrameQuiet without one). A
// bad frame that names no book does not resync anything: the U/u chain
// already catches any depth event it may have been.
//
// Levels beyond the snapshot's depth are unknown until they change, as
// Binance documents; the published book holds what the snapshot and the
// events say, nothing more.
//
// # Capture and replay
//
// The adapter hands every websocket frame to Config.Recorder with its
// receive time, and each REST snapshot as the frame
// {"stream":"<sym>@depthSnapshot","generated":true,"data":<the REST body>}
// (the Tardis convention), at the point where the decoder consumed it. The
// Decoder (NewDecoder) accepts that frame as the snapshot and does no I/O:
// live, it asks the adapter for a snapshot through a hook; in replay nobody
// fetches, and a book that needs one waits for the next generated frame in
// the capture. A capture alone therefore rebuilds the same books
// (TestRecordedCaptureReplays).
//
// # Performance
//
// Frames are read into one reused buffer and decoded in place by the
// venues' shared JSON scanner (internal/scan); prices and sizes are parsed
// from the bytes (decimal.go) into fixed point (venue.Fixed), with no
// decimal built, and applied to a venue.Book in fixed point, whose levels
// hold no pointers (no write barriers when levels move, nothing for the GC
// to scan) and compare as integers. A price with more than eight fraction
// digits, or over 92,233,720,368.5 (an int64 of 1e-8 units, the format
// Binance writes), makes the frame bad; no Binance spot price is either.
// A size of more than 18 digits is kept by the book as a decimal, and a
// frame carrying one is published with decimal levels. A depth update
// is published in one event the decoder reuses (venue.Sink), with its
// levels in fixed point: decode, book apply and event cost no allocation
// (TestDepthAllocBudget). Figures: BenchmarkDecodeDepth, in
// docs/performance.md and docs/design.md.
//
// # What was verified, and against what
//
//   - The bridge on real data: the 2021 cryptofeed capture of BLZETH, LRCBTC
//     and RUNEEUR (REST snapshots and the combined depth@100ms stream)
//     bridges with no gap, and the books equal a naive rebuild
//     (TestGoldenBridge, TestGoldenLevels). bookTicker frames from the same
//     capture and the docs' trade example decode (TestGoldenTradeAndTicker).
//   - Endpoints, stream names, the combined wrapper, SUBSCRIBE and its
//     reply, error codes, the 24 h limit, serverShutdown, the 20 s ping and
//     one-minute pong rule, the 5 messages/s and 300 connections/5 min
//     limits and the REST weights are from Binance's spot API docs
//     (web-socket-streams.md, rest-api.md, errors.md) as summarised in
//     shared/research/venues.md §3, with the WSS rules re-read on
//     developers.binance.com.
//   - The mock (package binancetest) speaks the same dialect; the adapter
//     passes venuetest.Run against it, and a capture recorded from it
//     (including gaps and a reconnect) replays into the same book.
//   - FuzzDecoder (seeded with every recorded frame, truncated too) checks
//     that no input panics or breaks venuetest.Sink's invariants.
//
// Not verified (no access to the live venue from here):
//   - that /stream with no streams= query is accepted: the docs say a
//     /stream connection has the combined property set, so live SUBSCRIBE
//     payloads arrive wrapped, and public client libraries connect that
//     way, but the docs only show /stream?streams=…;
//   - the exact close code and reason at the 24 h mark, and whether
//     serverShutdown is sent on a connection with no stream subscribed;
//   - a byte or parameter limit per SUBSCRIBE request (none documented;
//     the adapter keeps to 4 KiB);
//   - lower-casing of non-ASCII symbols in stream names (strings.ToLower
//     is used);
//   - whether exchangeInfo's symbols=[…] form still fails as a whole on one
//     unknown symbol (the per-symbol fallback covers either answer).
package binance
