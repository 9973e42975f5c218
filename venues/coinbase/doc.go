// Package coinbase is fanoutd's adapter for Coinbase Advanced Trade's
// public market-data websocket.
//
// The Adapter owns the connection (dial, subscribe, keepalive, reconnect);
// the Decoder turns frames into events and notices and is what replay
// drives from a capture, so live and replay share every line of book and
// sequence logic. Streams are coinbase:level2:<product>,
// coinbase:trades:<product> and coinbase:ticker:<product>, the product id
// as Coinbase writes it ("BTC-USD").
//
// # Protocol
//
// Endpoint: wss://advanced-trade-ws.coinbase.com (DefaultWSURL; Config.WSURL
// overrides it). No authentication: level2, market_trades, ticker and
// heartbeats are public.
//
// Subscribe: one channel per message,
// {"type":"subscribe","product_ids":[...],"channel":"level2"}; our channels
// map to level2, market_trades and ticker. The adapter subscribes as soon as
// the socket is up (the Exchange feed drops a client that has not
// subscribed within 5 s; Advanced Trade is assumed to do the same), and
// always subscribes heartbeats too.
//
// Ack: a {"channel":"subscriptions",...} frame listing the whole current
// subscription set. Acks answer requests in order; a product the request
// named and the ack lacks was refused. An error frame
// {"type":"error","message":...,"reason":...} naming a requested product
// refuses that product; one naming none answers (and refuses) the oldest
// pending request, and its own ack, if one follows, is not read for
// refusals. The exception is "too many L2 streams requested in a single
// session", which names none either: it refuses level2 alone for the
// oldest pending level2 request's products (their trades and ticker go on,
// and they stay wanted).
//
// Level2 per session: Coinbase serves about 16 level2 products a session
// (another client saw 16 work and 32 fail). The adapter spreads products
// over connections of 16 (venue.Pool; a product's trades and ticker go
// with its level2), each with its own decoder (sequence_num counts per
// connection); dials and requests are paced per address over all of them.
// The venue's "too many L2 streams" lowers that connection's limit to what
// it serves and moves the others. Past 64 connections a product gets a
// refusal for level2 up front.
//
// Known symbols: the product list is not fetched; a product refused as
// "not a valid product" is reported unknown (venue.SymbolChecker) until
// Subscribe names it again. A refusal is one refusal notice per product; the product leaves
// the adapter's wanted set and is not asked for again after a reconnect
// (no retry loop) until Subscribe names it again. An error frame that
// answers nothing the adapter sent (or any error frame in replay) is still
// reported, as a refusal notice with no stream, so an operator sees it.
//
// Keepalive: the heartbeats channel (one frame a second) keeps every
// subscription open ("most channels close within 60-90 seconds if no
// updates are sent"). A link that delivers nothing for ReadTimeout
// (default 10 s; Config.ReadTimeout overrides) is dead and is reconnected.
// Coinbase has no ping message; Config.PingInterval > 0 adds websocket
// pings, whose pongs also count as life.
//
// Sequence: every frame of a connection carries sequence_num, from 0, +1
// per frame whatever its channel (acks and heartbeats included). A frame
// whose sequence_num is not the last +1 is a gap: every valid level2 book
// gets a book_resync notice (reason sequence_gap, with the expected and
// received numbers and the last good one) and is invalid, and the link is
// dropped and rebuilt: Coinbase has no way to repair a gap on a live
// connection, and a new connection brings new snapshots. A new link starts
// a new numbering.
//
// Book: l2_data frames carry events {type: snapshot|update, product_id,
// updates: [{side: bid|offer, price_level, new_quantity}]}. A snapshot is
// the whole book, unsorted and with the sides interleaved; it replaces
// ours and is published as a snapshot event. new_quantity is absolute;
// "0" removes the level. One frame may carry events for several products.
// Updates to a book that is not valid (before its snapshot, after a gap or
// a bad frame) are dropped. There is no checksum.
//
// Book levels are parsed into fixed point (venue.Fixed) as Coinbase writes
// them ("79944" and "79944.1" in one book: venue.Book keys both at 1e-18),
// applied with Book.SetFixed and published in one event the decoder reuses
// (venue.Sink): an update costs no allocation (TestUpdateAllocs). A value
// too long for fixed point takes the decimal path, where prices are
// rescaled to 12 decimal places when they fit; the wire form prints
// without trailing zeros either way.
//
// Bad frames: a frame that is not JSON, lacks its envelope, carries a
// malformed level, a negative size, or leaves a book crossed is counted
// (Decoder.BadFrames), reported as one data_quality notice per burst
// (venue.BadFrames: a burst ends after venue.BadFrameQuiet without one) and costs only the book it
// concerns: that book is marked invalid (book_resync, "resync":"resubscribe")
// and its level2 is unsubscribed and subscribed again on the same link for a
// new snapshot, and again after a backoff (1 s doubling) until a snapshot
// makes it whole. A frame that names no book (a bad ticker or trade, a frame
// that is not JSON) costs none: its sequence_num was read, or the next
// frame's shows the gap. Only a level2 frame whose product cannot be read
// resyncs every book and drops the link. It never panics (FuzzDecoder).
//
// market_trades: the snapshot sent on subscribe is recent history. On the
// first subscription it only sets the last trade id; after a reconnect its
// trades newer than the last one published fill the gap. Trades are
// published oldest first (Coinbase sends them newest first). Coinbase's side
// is the maker's (research; see below), so a "BUY" is published as a taker
// sell.
//
// ticker: best bid, best ask, their quantities, and price as Last, from
// snapshot and update events alike.
//
// Limits: 8 connections and 8 unauthenticated messages per second per IP.
// Dials are at least 125 ms apart (and the backoff of venue.Backoff spaces
// reconnects further); subscribe/unsubscribe messages go out one every
// 125 ms at most. The read limit is 32 MiB, for full-book snapshots.
//
// Links: link_up when the socket is open and the subscriptions are queued;
// link_down (with the reason) when it drops; link_reconnecting with the
// delay before each new attempt. Coinbase sends no forced-disconnect
// notice: a close from the server is handled as any drop. Coverage
// (Adapter.Coverage) is what arrived, per stream, cleared when the link
// drops, with a coverage_change notice the first time a stream is seen on
// a link.
//
// # Replay
//
// Decoder.LinkDown emits nothing (the adapter emits link_down); it
// invalidates every book and restarts the sequence. The decoder's resync
// request is read only by the adapter: a capture already holds what the live
// adapter did next (a disconnect, then a new connection's snapshots).
// coinbasetest.Mock streams frames through a real socket (Mock.Stream,
// renumbering sequence_num per connection).
//
// # Verified, and against what
//
//   - Envelope, l2_data snapshot shape (unsorted, interleaved sides, mixed
//     price formatting, side "offer"), the subscriptions ack, the numeric
//     heartbeat_counter and the per-connection sequence across channels:
//     the 2026 live capture in testdata (TestGoldenLiveLevel2).
//   - market_trades and ticker shapes and their numbering (snapshot 0, ack 1,
//     update 2): the 2026 recordings (TestGoldenMarketTrades, TestGoldenTicker).
//   - The documentation's example frames, with the string heartbeat_counter
//     (TestGoldenDocExamples).
//   - Book maintenance on real data: the 2021 SKL-BTC level2 stream (one
//     snapshot and 1,539 changes) carried in Advanced Trade frames replays
//     into the book an independent model holds (TestGoldenLegacyStreamBook).
//   - Subscribe one channel per message, heartbeats every second, the
//     8 connections/s and 8 messages/s limits: Coinbase's documentation, as
//     summarised in shared/research/venues.md §1.1.
//
// # Unverified
//
//   - What Advanced Trade sends for an unknown product. The adapter handles
//     both an error frame naming it (what the Exchange feed sends:
//     "XRP-USD is not a valid product") and an ack that lacks it; the mock
//     sends both. The live capture shows an unknown channel answered with
//     {"type":"error","message":"authentication failure"}.
//   - Whether the 5-second subscribe deadline applies; whether a level2
//     snapshot can span frames (none observed); the maximum products per
//     subscribe (all wanted products go in one message per channel).
//   - That market_trades side is the maker's: the research reads the docs so
//     and it is the Exchange feed's documented rule; one third-party schema
//     calls it the taker's.
package coinbase
