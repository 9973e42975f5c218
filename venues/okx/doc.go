// Package okx is fanoutd's adapter for OKX's v5 public websocket: level2
// books, trades and tickers, with exact books kept by the venue's sequence
// and (where a frame carries one) checksum rules.
//
// # Protocol
//
// Endpoint: wss://ws.okx.com:8443/ws/v5/public (DefaultWSURL; any other
// host through venue.Config.WSURL). For up to 20 symbols (instIds exactly
// as OKX writes them, "BTC-USDT") the adapter sends one request
//
//	{"op":"subscribe","args":[{"channel":"books","instId":"BTC-USDT"},{"channel":"trades",…},{"channel":"tickers",…},…]}
//
// and confirms each arg from its ack ({"event":"subscribe","arg":{…}}), so
// 500 symbols cost 25 of OKX's 480 subscribe operations an hour per
// connection. Requests are paced at 3 a second. link_up is emitted once
// every initial arg is acked or refused (or a push arrives, or 10 s pass).
//
// Rate limits and missing answers: 60014 "Requests too frequent" (and
// 50011, 63999) names no request. It is a rate_limited notice, and every
// unanswered subscription is asked again after one backoff for the
// connection (venue.Retry: 1 s doubling to 30 s); so is an arg left
// unanswered for 10 s. A refusal (60018) makes the other unanswered args
// be asked again at once, since whether OKX serves the rest of a request
// with a refused arg is unverified. Known symbols: OKX's instrument list is
// not fetched; an instId refused with 60018 is reported unknown
// (venue.SymbolChecker) until Subscribe names it again. Streams are okx:level2:<instId>, okx:trades:<instId> and
// okx:ticker:<instId>; the decoder also reads bbo-tbt pushes as tickers and
// books-l2-tbt/books50-l2-tbt as level2 (replayed captures), and ignores
// books5 and unknown channels.
//
// Errors: {"event":"error","code":"60018","msg":"… channel:books,instId:FOO …"}
// carries no arg; the channel and instrument are read from the message. The
// decoder emits a refusal notice naming the stream and code, and the
// adapter drops the symbol from its wanted set: it is not asked for again,
// on this link or after a reconnect. Codes 60014, 50011 and 63999 (request
// rate) are rate_limited notices instead.
//
// Keepalive: OKX closes a link with no traffic for 30 s. The adapter sends
// the text frame "ping" every PingInterval (default 20 s), whatever else
// arrives, and OKX answers "pong". A link with nothing received for
// ReadTimeout (default 30 s) is dead: it is closed and reconnected.
//
// Reconnect: venue.Backoff (at once, then 1 s doubling to 30 s with
// jitter), never sooner than 350 ms after the previous attempt (OKX allows
// 3 connection attempts per second per IP). The backoff restarts after a
// link that came up. {"event":"notice","code":"64008"} (service upgrade;
// OKX closes the link about 60 s later) makes the adapter reconnect at
// once. Every drop emits link_down (with the reason), each retry
// link_reconnecting, and each new subscribed link link_up. Coverage is
// what arrived since link_up, cleared on link_down.
//
// # Books
//
// A books push is {"arg":…,"action":"snapshot"|"update","data":[{"asks":[[px,sz,"0",n],…],"bids":…,"ts":"ms","checksum":int,"prevSeqId":int,"seqId":int}]}.
// A snapshot (prevSeqId -1, up to 400 levels a side) replaces the book;
// update sizes are absolute and "0" removes the level. The websocket read
// limit is 8 MiB (a 400-level snapshot is about 40 KB).
//
// Sequence: each update's prevSeqId must equal the seqId of the frame
// before it, else it is a gap. An update with seqId == prevSeqId is OKX's
// no-change keepalive (about once a minute): not applied, not a gap, no
// event. seqId < prevSeqId (with prevSeqId chained) is OKX's reset after
// maintenance: legal, applied, and the chain continues from the new seqId.
// Frames without seqId (older captures, such as the 2022 recordings) are
// checked by checksum alone.
//
// Checksum: the CRC32 (IEEE) of "bid1px:bid1sz:ask1px:ask1sz:…" over the
// top 25 levels of each side after the frame is applied (the longer side
// continuing alone), compared as a signed int32, over the price and size
// strings exactly as OKX wrote them. A checksum of 0 means none: OKX's
// live frames carry 0 (as the recorded live frames in testdata do). The
// book (a venue.Book) keeps the original strings (KeepText, one arena per
// book, no allocation per level) only while its snapshot carried a
// checksum. The decoder keeps the checksum string and CRC states along it
// beside the book (checksum.go), and rebuilds and rehashes only from the
// first top-25 rank a frame changed (the book reports each change's rank):
// every frame that carries a checksum is still verified, against the same
// CRC.
//
// A gap, a checksum mismatch, or a frame that does not parse or makes an
// impossible book (a bad number, a negative size, a crossed book) marks the
// book invalid: its updates stop, a book_resync notice names the reason and
// the seq ids (last_seq_id, prev_seq_id, seq_id) or checksums (checksum,
// computed), and the adapter unsubscribes and resubscribes the books
// channel for that instId, which makes OKX send a new snapshot, published
// as a snapshot:true event. At most 4 books resync at once; more wait
// their turn. A book still not whole 10 s after its resync (no snapshot —
// say its subscribe was rate-limited after the unsubscribe went through —
// or a snapshot that failed its own checks) is resynced again, the wait
// doubling up to 320 s, whether or not updates arrive: no resubscribe loop
// against OKX's 480 subscribe operations an hour, and no book left dead.
// Bad frames are counted and reported as one data_quality notice per burst
// (venue.BadFrames: a burst ends after venue.BadFrameQuiet without one). One that cannot be tied to an instrument resyncs only the books
// that could not see a loss themselves (no seqId and no checksum, as in
// the 2022 captures): a book with a seqId chain finds a lost frame of its
// own at its next update, so the bad frame costs no other book.
//
// Prices are published in fixed point at the book's scale (the most
// decimals seen for the instrument since its snapshot) and must fit an
// int64 at it, else the frame is bad ("price out of range"). Sizes keep
// OKX's own exponent.
//
// # Cost
//
// Frames are read by the venues' shared scanner (internal/scan) over the
// bytes (no tree, no maps); the book's (venue.Book's) sorted levels hold
// no pointers (values live in slots, in fixed point), so inserts and
// deletes are plain memmoves without GC write barriers. An update is published in one
// event the decoder reuses (venue.Sink), with its levels in fixed point: a
// typical update costs no allocation (TestAllocBudget); a size of more
// than 18 digits is kept as a decimal, and a frame carrying one is
// published with decimal levels. Figures: BenchmarkDecodeBooks, in
// docs/performance.md.
//
// # Replay
//
// NewDecoder is the frame-level half; Adapter feeds the same decoder from
// its socket. A decoder driven from a capture cannot resubscribe: after a
// gap it waits for the next snapshot in the capture (the live adapter's
// resync put one there).
//
// # Verified, and against what
//
//   - Checksum: the OKX docs' two vectors (-1881014294, 831078360), and the
//     real 2022-05-13 BTC-USDT books capture in testdata/venues/okx (a
//     snapshot and 97 updates, every checksum verifies, and the final book
//     equals an independent encoding/json rebuild). The research notes 290
//     frames over three instruments; only the 98 BTC-USDT frames are in
//     the shared frames directory.
//   - The docs' books example's checksum (-855196043) does not match its
//     own levels (they give -2102840145); a test pins that.
//   - Sequence rules: the docs' example chain (-1,10) (10,15) (15,15)
//     (15,3) (3,5), as quoted in the research (OKX docs, 2026 verification
//     record).
//   - Frame shapes: recorded 2022 and 2026 trades, tickers, acks and the
//     60018 error frames.
//
// Unverified: the exact text of errors beyond 60018 (so refusals for other
// codes name no stream when the message names no instId); whether OKX
// answers each bad arg of a multi-arg request with its own error and
// serves the good ones (a user report, burakoner/OKX.Api issue 34,
// suggests so; the mock rejects the whole request, and the adapter's one
// request per symbol is right either way);
// the exact lead time of 64008 before the close; whether instIdCode
// replaces instId for public market data (see research §8).
package okx
