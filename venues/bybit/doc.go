// Package bybit is fanoutd's adapter for Bybit's v5 public spot websocket.
//
// Adapter is the live link (dial, subscribe, keepalive, reconnect); Decoder
// is the frame-level half that turns frames into venue events and keeps
// the books, shared by the live link and replay. The mock venue for tests
// is in bybittest.
//
// # Endpoint and streams
//
// The default endpoint is wss://stream.bybit.com/v5/public/spot
// (Config.WSURL overrides it). Per symbol, as Bybit writes it ("BTCUSDT"):
//
//	bybit:level2:SYM   orderbook.{Depth}.SYM  (Depth 1, 50, 200 or 1000; default 50)
//	bybit:trades:SYM   publicTrade.SYM
//	bybit:ticker:SYM   orderbook.1.SYM, as best bid/ask (spot "tickers" has
//	                   no bid or ask); Last is never set
//
// With Depth 1 the one orderbook.1 topic feeds both level2 and ticker.
// Events carry VenueTime from "cts" (the matching engine's time) when
// present, else "ts", and VenueSeq from the book's "u".
//
// # Subscribe and acknowledgement
//
// Each symbol is one request, {"req_id":"N","op":"subscribe","args":[…]},
// with at most 10 args per request (Bybit spot's limit; one symbol needs
// three), planned by the connection's venue.Subs; a request left
// unanswered for 10 s is asked again (its topics after a backoff). A connection subscribes at most 21,000 characters of args
// (Bybit's limit; a topic counts its length plus 3 for quotes and comma):
// symbols are spread over connections (venue.Pool), each with its own
// decoder, requests and resync backoff; past 64 connections a symbol is
// refused up front with a Refusal notice. The answer {"success":true|false,"ret_msg":…,"req_id":…,
// "op":"subscribe"} is matched by req_id. A failure is a Refusal notice
// naming the symbol and Bybit's ret_msg, and the symbol is dropped: it is
// not retried on this link or the next. Bybit has been seen answering a
// failure with an empty req_id ("Invalid symbol :[tickers.NOPEUSDT]");
// then the topics named in ret_msg find the request. link_up is emitted
// once every first subscription of a link is answered (at once if there
// is none).
//
// # Keepalive and dead links
//
// {"req_id":"ping-N","op":"ping"} every Config.PingInterval (default 20 s,
// Bybit's recommendation; Bybit drops a link after 10 minutes without
// one). Any frame, pong or data, counts as life: a link that delivers
// nothing for Config.ReadTimeout (default 45 s: two missed pongs and some
// slack) is closed and reconnected. A PingInterval above half the
// ReadTimeout is lowered to a third of it, so a quiet link survives on
// pongs. Pongs come as {"success":true,
// "ret_msg":"pong",…,"op":"ping"} on spot and {"op":"pong",…} elsewhere;
// both are accepted.
//
// # Reconnect
//
// venue.Backoff: the first retry at once, then 1 s doubling to 30 s with
// jitter; the sequence restarts after a link that stayed up 30 s. That
// stays far below Bybit's 500 connections per 5 minutes. A handshake
// answered 429 or 403 also gives a rate_limited notice (how Bybit answers
// an IP over its connection limit is unverified). Each drop emits
// link_down, then link_reconnecting (attempt, delay); every book is
// invalid until the new link's snapshots.
//
// # Books and update ids
//
// A "snapshot" frame replaces the book; a "delta" sets absolute sizes,
// "0" removing the level. Each frame's "u" must be the previous frame's u
// plus one, per topic. u == 1 means Bybit restarted the topic: the frame
// overwrites the book (as a snapshot) and is not a gap. A delta before the
// first snapshot, or while a book awaits its resync snapshot, is dropped
// and counted. Bybit keeps each book at the topic's depth and sends the
// removals itself; should a book ever exceed the depth, the adapter drops
// the worst levels and sends them as explicit removals in the same update,
// so a consumer's book stays equal to ours. Bybit sends no checksum.
//
// # Gaps and resync
//
// On a gap (u ≠ last_u+1), a frame that does not parse or holds an
// impossible level (price not positive, size negative) or makes the book
// cross: the book is marked invalid and nothing more is published for it;
// a book_resync notice names the reason, the topic and the update ids
// (last_u, got_u, want_u); the adapter unsubscribes and subscribes the
// orderbook topic again, and Bybit answers with a fresh snapshot, which is
// published as a snapshot:true event. A topic whose resync has not
// made it whole (a crossed snapshot) is resynced again after a backoff
// (1 s doubling to 30 s), so a venue sending bad snapshots gets no
// resubscribe loop. If deltas still come 10 s after the
// request with no snapshot, it asks again; if Bybit refuses the
// resubscription, the link is dropped and reconnected (a new link starts
// with snapshots). In replay (no link) the decoder waits for the capture's
// next snapshot.
//
// # Bad frames
//
// A frame that does not parse, is neither data nor a control answer, or
// holds an impossible value is counted (Decoder.Stats) and reported as one
// data_quality notice per burst (venue.BadFrames: a burst ends after
// venue.BadFrameQuiet without one); a book it concerns is resynced. Unparseable frames that name no
// topic need no resync of their own: if one was a lost delta, the next
// delta's u shows the gap. Frames on topics the decoder does not decode
// (spot "tickers") are counted as unhandled, not bad.
//
// # Coverage and recording
//
// Coverage is what was observed: a stream enters it with its first event
// on the current link (with a coverage_change notice, state "live"),
// leaves it on link down, and on a confirmed unsubscribe or a refusal
// (state "gone"). Every frame read goes to Config.Recorder with its
// receive time before it is decoded, and every link drop as a disconnect.
//
// # Decoding cost
//
// Frames are read with the venues' shared scanner (internal/scan) over
// the bytes (no encoding/json, no maps); book levels are parsed into fixed
// point (venue.Fixed) without allocating, applied to a venue.Book with
// SetFixed (integer keys, no decimal built) and published in one event the
// decoder reuses (venue.Sink): a delta costs no allocation
// (TestDecodeAllocs). A value too long for fixed point (more than 18
// digits, or an exponent) takes the decimal path, as before. Trades and
// tickers get their decimals through a small direct-mapped cache. Figures:
// BenchmarkDecodeLevel2, in docs/performance.md.
//
// # What was verified, and against what
//
//   - Frame shapes, field names, u continuity across snapshot→delta, the
//     spot ack and the ticker without bid/ask: the recorded frames in
//     testdata/venues/bybit (ccxt 2026 spot captures, a tardis-node spot
//     fixture, the docs' examples), decoded by the golden tests and
//     checked against an independent encoding/json reading.
//   - Snapshot resets the book, "0" deletes, u == 1 overwrites, level 1
//     re-sent with the same u: Bybit's docs (v5 websocket/public/orderbook,
//     "Process snapshot/delta"; full-orderbook's u=1 table).
//   - Ping/pong shapes, 20 s interval, 10-minute cut, 10 args per spot
//     request, connection limits: Bybit's docs (v5 ws connect, rate limit),
//     via the research summary.
//
// # Unverified
//
//   - The failure ack's req_id: the one failure frame at hand is a test
//     fixture with an empty req_id; both forms are handled.
//   - The exact ret_msg of failures other than an invalid symbol.
//   - That unsubscribe + subscribe of one topic on a live link yields a
//     fresh snapshot (the docs say a subscription starts with one; the
//     mock behaves so; not seen on a live capture).
//   - Whether Bybit ever lets a level fall out of depth without a removal
//     (never seen; handled by truncation anyway).
//   - The orderbook.1 "delta" frames in the 2023 tardis fixture: today's
//     docs say level 1 is snapshot-only; deltas are applied by the same
//     rules if they come.
package bybit
