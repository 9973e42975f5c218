package cluster

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/internal/jsonw"
	"github.com/fanoutd/fanoutd/venue"
)

// Why a message from the bus was not forwarded (the reason label of
// fanoutd_cluster_bus_invalid_total).
const (
	badNewline  = "newline"   // a raw CR or LF: the websocket writer frames events by lines
	badJSON     = "not_json"  // not exactly one JSON object
	badStream   = "stream"    // its type or stream is not the subject's
	badSeq      = "seq"       // no seq header, or the body's seq is not the header's
	badKey      = "duplicate" // a second type, stream or seq key
	badSnapshot = "snapshot"  // a book answer that is not snapshot:true
	badVenue    = "venue"     // a notice of another venue than its subject's
	badSize     = "size"      // a recover reply longer than MaxRecoverReply
)

// eventCheck validates the bytes of one stream's messages before an edge
// forwards them: an ingest writes every event as {"type":…,"stream":…,
// "seq":N,…} (venue.Event.AppendJSON), so a message is accepted only if it
// starts with exactly that head for the subject's stream, its seq is the
// header's, the rest makes it one valid JSON object, it carries no raw
// newline, and no later key repeats type, stream or seq (a client's
// parser would take the last). It does not allocate.
type eventCheck struct {
	kind   []byte // `{"type":"book` ...; empty for a channel whose type is not fixed
	stream []byte // `","stream":"coinbase:level2:BTC-USD","seq":`
}

func newEventCheck(st venue.Stream) eventCheck {
	var kind string
	switch st.Channel() {
	case venue.Level2:
		kind = venue.KindBook.String()
	case venue.Trades:
		kind = venue.KindTrade.String()
	case venue.Ticker:
		kind = venue.KindTicker.String()
	}
	c := eventCheck{kind: []byte(`{"type":"` + kind)}
	c.stream = append([]byte(`","stream":`), jsonw.AppendString(nil, string(st))...)
	c.stream = append(c.stream, `,"seq":`...)
	return c
}

// check returns why data, which arrived with header seq, may not be
// forwarded, or "" if it may. snapshot requires a snapshot:true book.
func (c *eventCheck) check(data []byte, seq uint64, snapshot bool) string {
	if bytes.IndexByte(data, '\n') >= 0 || bytes.IndexByte(data, '\r') >= 0 {
		return badNewline
	}
	rest, ok := bytes.CutPrefix(data, c.kind)
	if !ok {
		return badStream
	}
	if len(c.kind) == len(`{"type":"`) { // any type: a run of a-z and _
		i := 0
		for i < len(rest) && (rest[i] >= 'a' && rest[i] <= 'z' || rest[i] == '_') {
			i++
		}
		if i == 0 {
			return badStream
		}
		rest = rest[i:]
	}
	if rest, ok = bytes.CutPrefix(rest, c.stream); !ok {
		return badStream
	}
	var n uint64
	i := 0
	for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9' && i < 20; i++ {
		n = n*10 + uint64(rest[i]-'0')
	}
	if i == 0 || i >= 20 || n != seq || i > 1 && rest[0] == '0' {
		return badSeq
	}
	rest = rest[i:]
	if len(rest) == 0 || rest[0] != ',' && rest[0] != '}' {
		return badJSON
	}
	if snapshot && !bytes.HasPrefix(rest, []byte(`,"snapshot":true`)) {
		return badSnapshot
	}
	if !json.Valid(data) || data[len(data)-1] != '}' {
		return badJSON
	}
	if hasKey(rest, `"type"`) || hasKey(rest, `"stream"`) || hasKey(rest, `"seq"`) {
		return badKey
	}
	return ""
}

// hasKey reports whether key (quoted) appears in b followed by a colon,
// spaces allowed: as a key, at any depth (an event nests no objects). In
// valid JSON a quoted run followed by a colon is always a key.
func hasKey(b []byte, key string) bool {
	for {
		i := bytes.Index(b, []byte(key))
		if i < 0 {
			return false
		}
		b = b[i+len(key):]
		j := 0
		for j < len(b) && (b[j] == ' ' || b[j] == '\t') {
			j++
		}
		if j < len(b) && b[j] == ':' {
			return true
		}
	}
}

// burstQuiet is how long no invalid message must arrive for the next one
// to be logged again: a flood is one log line, and a count.
const burstQuiet = 10 * time.Second

// burstCounter counts refusals by venue and reason and logs the first of
// each burst (msg, with what it was given).
type burstCounter struct {
	log *slog.Logger
	msg string

	mu         sync.Mutex // protects the fields below
	n          map[[2]string]uint64
	last       time.Time // the last rejected message
	suppressed uint64    // rejected since the last one logged
}

// reject counts one refusal of venueName's for why; args say what was
// refused, for the log.
func (r *burstCounter) reject(venueName, why string, args ...any) {
	now := time.Now()
	r.mu.Lock()
	if r.n == nil {
		r.n = map[[2]string]uint64{}
	}
	r.n[[2]string{venueName, why}]++
	quiet := now.Sub(r.last) >= burstQuiet
	r.last = now
	prev := r.suppressed
	if quiet {
		r.suppressed = 0
	} else {
		r.suppressed++
	}
	r.mu.Unlock()
	if quiet {
		r.log.Warn(r.msg, append([]any{"venue", venueName, "reason", why, "previous_burst_unlogged", prev}, args...)...)
	}
}

// each calls f for every venue and reason counted, in order.
func (r *burstCounter) each(f func(venueName, reason string, n uint64)) {
	r.mu.Lock()
	keys := make([][2]string, 0, len(r.n))
	for k := range r.n {
		keys = append(keys, k)
	}
	counts := make([]uint64, len(keys))
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	for i, k := range keys {
		counts[i] = r.n[k]
	}
	r.mu.Unlock()
	for i, k := range keys {
		f(k[0], k[1], counts[i])
	}
}
