package notice

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fanoutd/fanoutd/internal/jsonw"
)

// Kind is what a notice is about. The zero Kind is "none" and is never a
// valid notice.
type Kind uint8

// The closed set of notice kinds.
const (
	LinkUp           Kind = iota + 1 // a venue link is connected and subscribed
	LinkDown                         // a venue link dropped; its streams are not live
	LinkReconnecting                 // a reconnect attempt is scheduled
	BookResync                       // a book was found wrong (gap, checksum) and is being rebuilt
	Dropping                         // a subscriber is over its queue bound: newest events are dropped
	Resumed                          // delivery to a dropping or detached subscriber resumed; details say what was lost
	CoverageChange                   // the set of streams observed live changed
	Refusal                          // the venue refused a subscription
	DataQuality                      // frames that do not parse or make an impossible book
	RateLimited                      // the venue or fanoutd limited a request rate
	Shutdown                         // the daemon is shutting down
	ReplayEnd                        // a replayed capture reached its end for this stream
	RecordingFailed                  // recording a venue's frames failed (write error, frames dropped); recording resumes by itself
	StreamGap                        // events of a trades or ticker stream were lost between nodes (an edge's bus gap)
	TokenExpiring                    // the connection's token (a JWT) expires soon: refresh it or the connection closes

	numKinds = iota + 1 // one past the last kind
)

// NumKinds is one past the last kind: an array indexed by Kind has room for
// every kind when it has NumKinds entries.
const NumKinds = int(numKinds)

var kindNames = [numKinds]string{
	"", "link_up", "link_down", "link_reconnecting", "book_resync", "dropping", "resumed",
	"coverage_change", "refusal", "data_quality", "rate_limited", "shutdown", "replay_end",
	"recording_failed", "stream_gap", "token_expiring",
}

// String returns the wire name of k, or "" for the zero or an unknown Kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return ""
}

// Valid reports whether k is one of the defined kinds.
func (k Kind) Valid() bool { return k > 0 && int(k) < numKinds }

// ParseKind returns the kind whose wire name is s.
func ParseKind(s string) (Kind, error) {
	for k := Kind(1); k < numKinds; k++ {
		if kindNames[k] == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("notice: unknown kind %q", s)
}

// Kinds returns every defined kind in order.
func Kinds() []Kind {
	ks := make([]Kind, 0, numKinds-1)
	for k := Kind(1); k < numKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

// Severity is how much a notice matters to the subscriber.
type Severity uint8

// Severities. The zero Severity means "the kind's default" when passed to New.
const (
	Info Severity = iota + 1
	Warning
	Error
)

// String returns "info", "warning", "error", or "" for the zero Severity.
func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return ""
}

// ParseSeverity returns the severity named s.
func ParseSeverity(s string) (Severity, error) {
	switch s {
	case "info":
		return Info, nil
	case "warning":
		return Warning, nil
	case "error":
		return Error, nil
	}
	return 0, fmt.Errorf("notice: unknown severity %q", s)
}

// DefaultSeverity returns the severity a notice of kind k gets unless its
// creator says otherwise.
func (k Kind) DefaultSeverity() Severity {
	switch k {
	case LinkDown, BookResync, Dropping, Refusal, DataQuality, RateLimited, LinkReconnecting, RecordingFailed, StreamGap, TokenExpiring:
		return Warning
	}
	return Info
}

// Notice is one out-of-band message to subscribers. Build one with New so
// it is valid; the fields are exported for reading.
type Notice struct {
	Kind     Kind
	Severity Severity
	Venue    string
	Stream   string // optional: "" when the notice concerns the whole venue or the subscriber
	At       time.Time
	Message  string
	Details  map[string]any
}

// Errors New returns, wrapped with the offending kind or key.
var (
	ErrUnknownKind = errors.New("notice: unknown kind")
	ErrCredential  = errors.New("notice: credential-shaped key in details")
)

// credentialWords are the key fragments New refuses. A key is refused when,
// lower-cased and with '-' and ' ' read as '_', it equals one of these or
// contains one of them; "tokens" and "x-api-key" are refused, "token_bucket"
// too: a false refusal is a bug found in a test, a leaked secret is not.
var credentialWords = []string{
	"api_key", "apikey", "secret", "password", "passwd", "passphrase", "token",
	"signature", "authorization", "bearer", "private_key", "privatekey", "credential",
	"cookie", "jwt",
}

// IsCredentialKey reports whether a details key looks like it names a
// secret.
func IsCredentialKey(key string) bool {
	k := strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return '_'
		}
		return r
	}, strings.ToLower(key))
	for _, w := range credentialWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// New builds a notice stamped at at. sev 0 means the kind's default. It
// returns ErrUnknownKind for a kind outside the set and ErrCredential when
// details, at any depth of nested maps, has a credential-shaped key.
func New(kind Kind, sev Severity, venueName, stream string, at time.Time, msg string, details map[string]any) (Notice, error) {
	if !kind.Valid() {
		return Notice{}, fmt.Errorf("%w: %d", ErrUnknownKind, kind)
	}
	if sev == 0 {
		sev = kind.DefaultSeverity()
	}
	if sev.String() == "" {
		return Notice{}, fmt.Errorf("notice: unknown severity %d", sev)
	}
	if err := checkDetails(details); err != nil {
		return Notice{}, err
	}
	return Notice{Kind: kind, Severity: sev, Venue: venueName, Stream: stream, At: at, Message: msg, Details: details}, nil
}

// Must is New for notices built from constants in code: it panics on an
// error, which is a programming mistake, never a runtime condition.
func Must(kind Kind, venueName, stream string, at time.Time, msg string, details map[string]any) Notice {
	n, err := New(kind, 0, venueName, stream, at, msg, details)
	if err != nil {
		panic(err)
	}
	return n
}

func checkDetails(d map[string]any) error {
	for k, v := range d {
		if IsCredentialKey(k) {
			return fmt.Errorf("%w: %q", ErrCredential, k)
		}
		if m, ok := v.(map[string]any); ok {
			if err := checkDetails(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// AppendJSON appends the wire form of n (see the package doc) to dst.
func (n *Notice) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"type":"notice","kind":"`...)
	dst = append(dst, n.Kind.String()...)
	dst = append(dst, `","severity":"`...)
	dst = append(dst, n.Severity.String()...)
	dst = append(dst, `","venue":`...)
	dst = jsonw.AppendString(dst, n.Venue)
	dst = append(dst, `,"stream":`...)
	dst = jsonw.AppendString(dst, n.Stream)
	dst = append(dst, `,"at":"`...)
	dst = jsonw.AppendTime(dst, n.At)
	dst = append(dst, `","message":`...)
	dst = jsonw.AppendString(dst, n.Message)
	dst = append(dst, `,"details":`...)
	dst = appendValue(dst, n.Details)
	return append(dst, '}')
}

// MarshalJSON returns the wire form of n.
func (n Notice) MarshalJSON() ([]byte, error) { return n.AppendJSON(nil), nil }

// UnmarshalJSON parses the wire form. Numbers in details come back as
// json.Number so integers keep their exact value.
func (n *Notice) UnmarshalJSON(b []byte) error {
	var w struct {
		Type     string         `json:"type"`
		Kind     string         `json:"kind"`
		Severity string         `json:"severity"`
		Venue    string         `json:"venue"`
		Stream   string         `json:"stream"`
		At       time.Time      `json:"at"`
		Message  string         `json:"message"`
		Details  map[string]any `json:"details"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("notice: %w", err)
	}
	if w.Type != "notice" {
		return fmt.Errorf("notice: type %q is not notice", w.Type)
	}
	k, err := ParseKind(w.Kind)
	if err != nil {
		return err
	}
	s, err := ParseSeverity(w.Severity)
	if err != nil {
		return err
	}
	out, err := New(k, s, w.Venue, w.Stream, w.At, w.Message, w.Details)
	if err != nil {
		return err
	}
	*n = out
	return nil
}

// appendValue writes the JSON values a notice's details may hold: nil,
// bool, strings, integers, floats, json.Number, []any, slices of integers
// and strings, map[string]any (keys sorted), and anything else through
// encoding/json.
func appendValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return jsonw.AppendString(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case uint64:
		return strconv.AppendUint(dst, x, 10)
	case int32:
		return strconv.AppendInt(dst, int64(x), 10)
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return append(dst, "null"...)
		}
		return strconv.AppendFloat(dst, x, 'g', -1, 64)
	case json.Number:
		return append(dst, x...)
	case []uint64:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendUint(dst, e, 10)
		}
		return append(dst, ']')
	case []string:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonw.AppendString(dst, e)
		}
		return append(dst, ']')
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		if x == nil {
			return append(dst, "{}"...)
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonw.AppendString(dst, k)
			dst = append(dst, ':')
			dst = appendValue(dst, x[k])
		}
		return append(dst, '}')
	}
	b, err := json.Marshal(v)
	if err != nil {
		return jsonw.AppendString(dst, fmt.Sprint(v))
	}
	return append(dst, b...)
}
