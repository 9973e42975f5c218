package notice

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Type is the JSON type of a details value.
type Type uint8

// Details value types.
const (
	String  Type = iota + 1
	Int          // an integer (any Go integer type, or a json.Number without fraction)
	Bool         // true or false
	Object       // a JSON object (map[string]any)
	Strings      // an array of strings
)

func (t Type) String() string {
	switch t {
	case String:
		return "string"
	case Int:
		return "integer"
	case Bool:
		return "boolean"
	case Object:
		return "object"
	case Strings:
		return "array of strings"
	}
	return "unknown"
}

// Field is one key of a kind's details.
type Field struct {
	Key      string
	Type     Type
	Required bool   // always present
	Doc      string // what it says, for the docs/protocol.md table
}

// Schema is the details contract of one kind: the keys a notice of the kind
// may carry and which are always present. No other key is allowed, except
// in a kind whose Evidence is set: there further scalar keys carry the
// venue's own evidence (sequence numbers, checksums), which clients may
// show but must not rely on.
type Schema struct {
	Kind     Kind
	Doc      string // what the kind means, for the docs/protocol.md table
	Fields   []Field
	Evidence bool
}

var schemas = map[Kind]Schema{
	LinkUp: {Doc: "a venue link (or one of its connections) is connected and subscribed", Fields: []Field{
		{"url", String, true, "the endpoint connected to (in a replay, the capture's recorded endpoint)"},
		{"capture", String, false, "the capture replayed (replay)"},
		{"line", Int, false, "the capture line of the first frame after the disconnect (replay)"},
		{"connection", Int, false, "which of the venue's connections, from 0 (a venue spread over connections)"},
	}},
	LinkDown: {Doc: "a venue link dropped; its streams are not live (no `coverage_change` per stream)", Fields: []Field{
		{"reason", String, true, "why the link dropped (`stopped` on shutdown; `recorded` in a replay)"},
		{"up_ms", Int, false, "how long the link was up (live links)"},
		{"capture", String, false, "the capture replayed (replay)"},
		{"line", Int, false, "the capture line of the disconnect (replay)"},
		{"connection", Int, false, "which of the venue's connections, from 0 (a venue spread over connections)"},
		{"streams", Strings, false, "the streams that stopped, when other connections of the venue stay up (absent: every stream of the venue)"},
	}},
	LinkReconnecting: {Doc: "a reconnect attempt is scheduled", Fields: []Field{
		{"attempt", Int, true, "attempts since the last stable link, from 1"},
		{"delay_ms", Int, true, "the wait before the attempt"},
		{"connection", Int, false, "which of the venue's connections, from 0 (a venue spread over connections)"},
	}},
	BookResync: {Doc: "a book was found wrong (gap, checksum) and is being rebuilt; a `snapshot:true` event follows", Evidence: true, Fields: []Field{
		{"reason", String, true, "`gap`, `checksum`, `bad_frame`, … what was found wrong; on an edge node `bus_gap` or `epoch_change` (evidence `first`, `last`: the seq range lost, `epoch`: the ingest's new epoch); `failover` when a standby ingest took the venue over (evidence `node`: the new leader, `previous`: the old, `seq`: the seq of the snapshot:true that follows; sent by an edge when the new leader's seqs do not continue the ones it forwarded, evidence `first`: the seq after its last, `node`, `previous`, the snapshot:true following past `first`)"},
		{"claim", Object, false, "claim check of the newest stored snapshot (added by the daemon)"},
	}},
	Dropping: {Doc: "this subscriber's queue is full: newest events are dropped", Fields: []Field{
		{"bound", Int, true, "the queue bound in messages"},
		{"queue_len", Int, true, "messages queued"},
		{"max_queue_bytes", Int, true, "the byte bound (0: none)"},
		{"queue_bytes", Int, true, "bytes queued"},
	}},
	Resumed: {Doc: "delivery resumed", Fields: []Field{
		{"reason", String, true, "`drained` or `reattached`"},
		{"bound", Int, true, "the queue bound in messages"},
		{"queue_len", Int, true, "messages queued"},
		{"max_queue_bytes", Int, true, "the byte bound (0: none)"},
		{"dropped", Int, true, "events lost and not recovered"},
		{"gaps", Object, true, "by stream, `[first, last]` seq lost and not recovered"},
		{"recovered", Object, false, "by stream, `[first, last]` seq lost and sent again: those events follow the notice, in seq order, before anything newer of the stream (no snapshot for a level2 stream recovered); present when the daemon keeps a recovery window and could recover a stream"},
		{"claims", Object, false, "by level2 stream resent, the claim check of its newest stored snapshot"},
	}},
	CoverageChange: {Doc: "a stream started or stopped arriving; the notice's `stream` names it", Fields: []Field{
		{"stream", String, true, "the stream (also the notice's `stream`)"},
		{"live", Bool, true, "true: its events arrive; false: they stopped (unsubscribed, refused). A `link_down` ends every stream's coverage without a notice each"},
	}},
	Refusal: {Doc: "the venue refused a subscription", Fields: []Field{
		{"message", String, true, "the venue's words"},
		{"symbol", String, false, "the symbol refused, where known"},
		{"channel", String, false, "the venue's channel, where known"},
		{"code", String, false, "the venue's error code, where it sends one"},
	}},
	DataQuality: {Doc: "frames that do not parse or make an impossible book: one per burst, a burst ending after 10 s without a bad frame ([venues.md](venues.md))", Fields: []Field{
		{"reason", String, true, "what was wrong with the frame"},
		{"bad_frames", Int, true, "bad frames from this venue connection so far"},
		{"sample", String, true, "the bad frame's first 96 bytes (invalid UTF-8 as `?`)"},
		{"connection", Int, false, "which of the venue's connections, from 0, when the frame concerns no known stream (the notice's `stream` is then empty)"},
	}},
	RateLimited: {Doc: "a request rate was limited", Fields: []Field{
		{"message", String, true, "what was limited"},
		{"status", Int, false, "the HTTP status, for an HTTP request"},
		{"retry_after_s", Int, false, "the wait the venue asked for"},
		{"symbol", String, false, "the symbol concerned, where known"},
		{"channel", String, false, "the venue's channel, where known"},
		{"code", String, false, "the venue's error code, where it sends one"},
		{"attempts", Int, false, "connection attempts in the window (fanoutd's own limit)"},
		{"window_s", Int, false, "the window of that limit"},
		{"connection", Int, false, "which of the venue's connections, from 0 (a venue spread over connections)"},
	}},
	Shutdown:        {Doc: "the daemon is shutting down"},
	ReplayEnd:       {Doc: "a replayed capture ended for this stream", Fields: []Field{{"capture", String, true, "the capture that ended"}}},
	RecordingFailed: {Doc: "recording this venue's frames failed (a write error, a full disk, frames dropped at the recorder's queue); recording resumes by itself"},
	StreamGap: {Doc: "on an edge node: events of a trades or ticker stream were lost between the ingest and this edge (NATS core is at most once); the stream goes on (see [cluster.md](cluster.md#what-an-edge-promises))", Fields: []Field{
		{"reason", String, true, "`bus_gap` (a hole in seq between the ingest and this edge), `epoch_change` (the ingest restarted: seq starts again) or `failover` (a standby ingest took the venue over: seq continues at `after`+1; events the venue sent between `from` and `until` may be lost)"},
		{"first", Int, false, "the first seq lost"},
		{"last", Int, false, "the last seq lost, where known"},
		{"epoch", String, false, "the ingest's new epoch (epoch_change)"},
		{"after", Int, false, "failover: the last seq the old leader published"},
		{"from", String, false, "failover: when the old leader's last event of the stream was seen (RFC 3339)"},
		{"until", String, false, "failover: when the new leader took over (RFC 3339)"},
		{"node", String, false, "failover: the new leader"},
		{"previous", String, false, "failover: the old leader"},
	}},
	TokenExpiring: {Doc: "the connection's JWT expires soon: send `refresh` with a new one, or the connection is closed with 4003 at `expires_at`; `venue` and `stream` are empty", Fields: []Field{
		{"expires_at", String, true, "when the token stops being accepted, its exp plus `auth.jwt.leeway` (RFC 3339); a `refresh` before then keeps the connection, else it is closed with 4003 (`token_expired`)"},
		{"in_ms", Int, true, "milliseconds from the notice to `expires_at`; sent `auth.jwt.expiring_notice` (default 1m) ahead, or at once for a token that expires sooner"},
	}},
}

// SchemaOf returns the details contract of kind k.
func SchemaOf(k Kind) Schema {
	s := schemas[k]
	s.Kind = k
	return s
}

// CheckDetails reports whether n's details follow its kind's schema. The
// error names the kind and the key.
func CheckDetails(n Notice) error {
	if !n.Kind.Valid() {
		return fmt.Errorf("%w: %d", ErrUnknownKind, n.Kind)
	}
	s, ok := schemas[n.Kind]
	if !ok {
		return fmt.Errorf("notice: %s: no details schema", n.Kind)
	}
	for _, f := range s.Fields {
		v, ok := n.Details[f.Key]
		if !ok {
			if f.Required {
				return fmt.Errorf("notice: %s: details key %q is required", n.Kind, f.Key)
			}
			continue
		}
		if !hasType(v, f.Type) {
			return fmt.Errorf("notice: %s: details key %q is %T, want %s", n.Kind, f.Key, v, f.Type)
		}
	}
	for k, v := range n.Details {
		if slices.ContainsFunc(s.Fields, func(f Field) bool { return f.Key == k }) {
			continue
		}
		if !s.Evidence {
			return fmt.Errorf("notice: %s: details key %q is not in the schema", n.Kind, k)
		}
		if !hasType(v, String) && !hasType(v, Int) && !hasType(v, Bool) {
			return fmt.Errorf("notice: %s: evidence key %q is %T, want a string, integer or boolean", n.Kind, k, v)
		}
	}
	return nil
}

func hasType(v any, t Type) bool {
	switch t {
	case String:
		_, ok := v.(string)
		return ok
	case Bool:
		_, ok := v.(bool)
		return ok
	case Object:
		_, ok := v.(map[string]any)
		return ok
	case Strings:
		switch x := v.(type) {
		case []string:
			return true
		case []any:
			for _, e := range x {
				if _, ok := e.(string); !ok {
					return false
				}
			}
			return true
		}
		return false
	case Int:
		switch x := v.(type) {
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
			return true
		case json.Number:
			_, err := x.Int64()
			return err == nil
		case float64: // encoding/json without UseNumber
			return x == float64(int64(x))
		}
	}
	return false
}
