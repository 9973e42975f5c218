// Package replay records what venues sent and plays it back through the
// same adapters' decoders that handle live data.
//
// # Capture format
//
// A capture is the raw line format Tardis.dev uses, so its tools read our
// captures and we replay theirs: one raw venue frame per line, prefixed by
// its receive time as a 28-character UTC timestamp with 100 ns precision
// and a space:
//
//	2026-11-29T12:00:00.1234567Z {"channel":"l2_data",…}
//
// An empty line marks a disconnect. Frames are written exactly as
// received, except that a CR or LF inside a frame (which JSON allows only
// as whitespace between tokens) is written as a space so the line
// structure holds. REST responses a book depends on (Binance depth
// snapshots) are recorded inline as the generated frame the venue's
// decoder accepts ({"stream":"<sym>@depthSnapshot","generated":true,
// "data":{…}}), so a capture alone rebuilds the same books.
//
// Files are gzip-compressed (.jsonl.gz) or plain (.jsonl). Metadata (venue,
// endpoint, subscriptions, start time, fanoutd version) travels as JSON in
// the gzip header's comment field, or for plain files in a sidecar
// <file>.meta.json; neither touches the line format.
//
// A capture holds one venue connection. A venue spread over several
// connections (venue.Pool) records each into segments of its own,
// <venue>-c<N>-<start>.jsonl.gz for connection N ≥ 1 (connection 0, and a
// venue on one connection, keep <venue>-<start>.jsonl.gz), whose metadata
// adds "connection": N and lists that connection's symbols. Play gives
// each capture its own decoder, as each connection had live, so a
// disconnect line resets only its own capture's books.
//
// Locks: the player calls the sinks without its trackingSink's lock; the
// Recorder's and the ExportSink's locks are leaves (docs/lock-order.md).
package replay
