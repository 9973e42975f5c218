// Package config is fanoutd's configuration: the YAML document, its
// defaults and its validation. Every bad value is one *Error naming the
// dotted key and what is wrong with the value.
package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// fileConfig is the YAML document as written. Durations are strings so a
// bad one is reported with its key; numbers are kept raw so that a bad one
// is reported as the operator wrote it.
type fileConfig struct {
	Listen          string                 `yaml:"listen"`
	LogLevel        string                 `yaml:"log_level"`
	ShutdownTimeout string                 `yaml:"shutdown_timeout"`
	Origins         []string               `yaml:"origins"`
	Tokens          []tokenConfig          `yaml:"tokens"`
	Auth            authConfig             `yaml:"auth"`
	Websocket       websocketConfig        `yaml:"websocket"`
	Limits          limitsConfig           `yaml:"limits"`
	Venues          map[string]venueConfig `yaml:"venues"`
	HTTP            httpConfig             `yaml:"http"`
	ClaimCheck      *claimCheckFile        `yaml:"claim_check"` // pre-filled with claimcheck's defaults
	Record          recordConfig           `yaml:"record"`
	Cluster         clusterConfig          `yaml:"cluster"`
	Recovery        recoveryConfig         `yaml:"recovery"`
	History         historyConfig          `yaml:"history"`
}

type recoveryConfig struct {
	MaxEventsPerStream any `yaml:"max_events_per_stream"`
	MaxBytes           any `yaml:"max_bytes"`
	MaxAge             any `yaml:"max_age"`
}

// Numbers are kept raw (any) so that 1.5 or 1e20 is refused with its key
// rather than truncated by the YAML decoder.

type httpConfig struct {
	ReadHeaderTimeout       string `yaml:"read_header_timeout"`
	IdleTimeout             string `yaml:"idle_timeout"`
	MaxAnonymousConnections any    `yaml:"max_anonymous_connections"`
}

type tokenConfig struct {
	Name    string   `yaml:"name"`
	SHA256  string   `yaml:"sha256"`
	Token   string   `yaml:"token"`
	Venues  []string `yaml:"venues"`
	Streams []string `yaml:"streams"`
	Tenants []string `yaml:"tenants"`
	Latency string   `yaml:"latency"`
}

type websocketConfig struct {
	WriteTimeout     string `yaml:"write_timeout"`
	PingInterval     string `yaml:"ping_interval"`
	WriteDelay       string `yaml:"write_delay"`
	NamedTTL         string `yaml:"named_ttl"`
	IOUring          *bool  `yaml:"io_uring"`
	SendBufferBytes  any    `yaml:"send_buffer_bytes"`
	MaxBatchBytes    any    `yaml:"max_batch_bytes"`
	MaxBatchMessages any    `yaml:"max_batch_messages"`
}

type limitsConfig struct {
	MaxStreamsPerConnection any `yaml:"max_streams_per_connection"`
	MaxMessageBytes         any `yaml:"max_message_bytes"`
	MaxConnectionsPerToken  any `yaml:"max_connections_per_token"`
	CommandsPerSecond       any `yaml:"commands_per_second"`
	CommandBurst            any `yaml:"command_burst"`
	MaxReplyBytes           any `yaml:"max_reply_bytes"`
	MaxNamedPerToken        any `yaml:"max_named_per_token"`
	MaxNamed                any `yaml:"max_named"`

	MaxDerivedPerToken  any `yaml:"max_derived_per_token"`
	MaxDerivedPerSource any `yaml:"max_derived_per_source"`
	MaxDerivedWeight    any `yaml:"max_derived_weight"`
}

type venueConfig struct {
	Enabled          *bool    `yaml:"enabled"`
	WSURL            string   `yaml:"ws_url"`
	RESTURL          string   `yaml:"rest_url"`
	Symbols          []string `yaml:"symbols"`
	Channels         []string `yaml:"channels"`
	Depth            any      `yaml:"depth"`
	MaxQueueLen      any      `yaml:"max_queue_len"`
	MaxQueueBytes    any      `yaml:"max_queue_bytes"`
	MaxSymbols       any      `yaml:"max_symbols"`
	UnsubscribeAfter string   `yaml:"unsubscribe_after"`
}

// Config is the resolved configuration: every default applied, every
// value validated. It is the document's, in plain values; the daemon maps
// it to the options of the packages it configures.
type Config struct {
	Listen          string
	LogLevel        string
	ShutdownTimeout time.Duration
	HTTP            HTTP
	Origins         []string  // origins
	Websocket       Websocket // websocket.*
	Limits          Limits    // limits.*
	Tokens          []api.Token
	JWT             *api.JWTOptions // auth.jwt; nil: no JWTs (jwt.go)
	// ExpiringNotice is auth.jwt.expiring_notice: how long before a JWT's
	// exp its connection is told. Defaults to 1m.
	ExpiringNotice time.Duration
	Venues         []Venue // enabled venues only, in venueNames order
	ClaimCheck     ClaimCheck
	Record         Record  // record.go
	Cluster        Cluster // cluster.go
	// Recovery bounds the recovery window (recovery.*); any bound 0: off.
	Recovery Recovery
	History  History // history.go
}

// Websocket is the resolved websocket: section.
type Websocket struct {
	WriteTimeout time.Duration
	PingInterval time.Duration
	// WriteDelay 0 has each connection's writer write at once.
	WriteDelay time.Duration
	IOUring    bool
	// NamedTTL is negative for never.
	NamedTTL time.Duration
	// SendBufferBytes 0 leaves the kernel's default.
	SendBufferBytes  int
	MaxBatchBytes    int
	MaxBatchMessages int
}

// Limits is the resolved limits: section.
type Limits struct {
	MaxStreamsPerConnection int
	MaxMessageBytes         int
	MaxConnectionsPerToken  int
	CommandsPerSecond       float64
	CommandBurst            int
	MaxReplyBytes           int
	MaxNamedPerToken        int
	MaxNamed                int
	MaxDerivedPerToken      int
	MaxDerivedPerSource     int
	MaxDerivedWeight        int
}

// Recovery is the resolved recovery: section.
type Recovery struct {
	MaxEventsPerStream int
	MaxBytes           int64
	MaxAge             time.Duration
}

// AuthEnabled reports whether requests need a token: static tokens or
// JWTs are configured.
func (c *Config) AuthEnabled() bool { return len(c.Tokens) > 0 || c.JWT != nil }

// Serves reports whether the venue serves channel ch to subscribers: a raw
// channel in Raw, or a derived one whose source the adapter subscribes and
// that Derived, if set, lists.
func (v *Venue) Serves(ch venue.Channel) bool {
	if ch.Valid() {
		return slices.Contains(v.Raw, ch)
	}
	if !ch.Derived() || !slices.Contains(v.Channels, ch.Source()) {
		return false
	}
	return v.Derived == nil || slices.Contains(v.Derived, ch)
}

// Venue is one enabled venue.
type Venue struct {
	Name    string
	WSURL   string
	RESTURL string
	Symbols []string
	// Channels are the raw channels the adapter subscribes: those listed in
	// venues.<v>.channels and the sources of the derived ones listed (all
	// three when none is listed).
	Channels []venue.Channel
	// Raw are the raw channels served to subscribers: those listed (all
	// three when none is listed). A raw channel only a derived one needs
	// is subscribed at the venue but not served.
	Raw []venue.Channel
	// Derived restricts the derived channels served to those listed; nil
	// serves every derived channel whose source the adapter subscribes.
	Derived       []venue.Channel
	Depth         int
	MaxQueueLen   int
	MaxQueueBytes int
	// MaxSymbols caps the symbols subscribed at the venue, configured ones
	// included; a subscribe for one more is refused (too_many_symbols).
	// Defaults to 500.
	MaxSymbols int
	// UnsubscribeAfter: a symbol asked for by a client (not a configured
	// one) that no subscriber holds for this long is unsubscribed at the
	// venue. Defaults to 5m.
	UnsubscribeAfter time.Duration
}

// HTTP is the resolved http: section, the daemon's HTTP server.
type HTTP struct {
	// ReadHeaderTimeout bounds reading a request's headers. Defaults to 10s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long. Defaults
	// to 2m.
	IdleTimeout time.Duration
	// MaxAnonymousConnections caps the open connections that have not
	// presented a valid token (with tokens configured); past it new
	// connections are closed at once. Defaults to 1024; 0 means no cap.
	MaxAnonymousConnections int
}

// Defaults: the daemon's, one constant a key (docs/configuration.md's
// default column is generated from them: TestConfigReferenceInDocs).
// Where a package has a default of its own for the option a key sets,
// internal/daemon's TestConfigDefaultsArePackageDefaults holds them equal.
const (
	defaultWriteTimeout        = 10 * time.Second
	defaultPingInterval        = 30 * time.Second
	defaultWriteDelay          = 10 * time.Millisecond
	defaultNamedTTL            = 24 * time.Hour
	defaultSendBufferBytes     = 65536
	defaultMaxBatchBytes       = 65536
	defaultMaxBatchMessages    = 1024
	defaultMaxStreams          = 256
	defaultMaxMessageBytes     = 16384
	defaultMaxConnsPerToken    = 64
	defaultCommandsPerSecond   = 20
	defaultCommandBurst        = 40
	defaultMaxReplyBytes       = 1 << 20
	defaultMaxNamedPerToken    = 1000
	defaultMaxNamed            = 10000
	defaultMaxDerivedPerToken  = 64
	defaultMaxDerivedPerSource = 32
	defaultMaxDerivedWeight    = 8192
	defaultMaxQueueLen         = 10000
	defaultRecoveryEvents      = 10000
	defaultRecoveryBytes       = 256 << 20
	defaultRecoveryAge         = 2 * time.Minute

	defaultReadHeaderTimeout       = 10 * time.Second
	defaultIdleTimeout             = 2 * time.Minute
	defaultMaxAnonymousConnections = 1024
	defaultMaxSymbols              = 500
	defaultUnsubscribeAfter        = 5 * time.Minute
	defaultListen                  = "127.0.0.1:8080"
	defaultShutdownTimeout         = 5 * time.Second
	defaultMaxQueueBytes           = 8 << 20
)

// Error is a configuration value that is not accepted: the key (a
// dotted path) and what is wrong with its value, on one line.
type Error struct {
	Key string
	Msg string
}

func (e *Error) Error() string { return "config: " + e.Key + ": " + e.Msg }

func cfgErr(key, format string, args ...any) error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Load reads and resolves the configuration file path; "" means no
// file (built-in defaults). getenv supplies the environment overrides
// (FANOUTD_LISTEN, FANOUTD_TOKENS).
func Load(path string, getenv func(string) string) (*Config, error) {
	var data []byte
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, &Error{Key: "(file)", Msg: err.Error()}
		}
		data = b
	}
	return Parse(data, getenv)
}

// Parse resolves the YAML document data (empty: defaults only).
// Unknown keys are an error.
func Parse(data []byte, getenv func(string) string) (*Config, error) {
	fc := fileConfig{ClaimCheck: newClaimCheckFile()}
	if len(bytes.TrimSpace(data)) > 0 {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&fc); err != nil {
			return nil, yamlError(data, err)
		}
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return resolve(&fc, getenv)
}

var lineRE = regexp.MustCompile(`line (\d+): (.*)`)

// yamlError turns a YAML decoding error into one line naming the key.
func yamlError(data []byte, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, "yaml: "), "\n", " ")
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return &Error{Key: "(document)", Msg: msg}
	}
	line, _ := strconv.Atoi(m[1])
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	key := keyAtLine(&root, "", line)
	if t := tagRE.FindStringSubmatch(m[2]); t != nil {
		// Several keys can share a line ({a: 1, b: [x]}): name the one
		// whose value has the type the error names.
		if k := valueAtLine(&root, "", line, t[1]); k != "" {
			key = k
		}
	}
	detail := m[2]
	if f := regexp.MustCompile(`field (\S+) not found`).FindStringSubmatch(detail); f != nil {
		detail = "unknown key"
		if key == "" || !strings.HasSuffix(key, f[1]) {
			key = strings.TrimPrefix(key+"."+f[1], ".")
		}
	}
	if key == "" {
		key = "(line " + m[1] + ")"
	}
	msg = detail + " (line " + m[1] + ")"
	if s := suggest(key); detail == "unknown key" && s != "" {
		msg += "; did you mean " + s + "?"
	}
	return &Error{Key: key, Msg: msg}
}

var tagRE = regexp.MustCompile(`cannot unmarshal (!!\w+)`)

// valueAtLine returns the dotted path of the deepest value on line whose
// YAML tag is tag, or "".
func valueAtLine(n *yaml.Node, path string, line int, tag string) string {
	var kids []*yaml.Node
	var paths []string
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			kids, paths = append(kids, c), append(paths, path)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			kids, paths = append(kids, n.Content[i+1]), append(paths, strings.TrimPrefix(path+"."+n.Content[i].Value, "."))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			kids, paths = append(kids, c), append(paths, path+"["+strconv.Itoa(i)+"]")
		}
	}
	for i, c := range kids {
		if k := valueAtLine(c, paths[i], line, tag); k != "" {
			return k
		}
		if c.Line == line && c.Tag == tag && n.Kind != yaml.DocumentNode {
			return paths[i]
		}
	}
	return ""
}

// keyAtLine returns the dotted path of the key or value on line, or "".
func keyAtLine(n *yaml.Node, path string, line int) string {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if k := keyAtLine(c, path, line); k != "" {
				return k
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := strings.TrimPrefix(path+"."+k.Value, ".")
			if k.Line == line || v.Line == line && v.Kind == yaml.ScalarNode {
				return p
			}
			if r := keyAtLine(v, p, line); r != "" {
				return r
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			if c.Line == line && c.Kind == yaml.ScalarNode {
				return p
			}
			if r := keyAtLine(c, p, line); r != "" {
				return r
			}
		}
	}
	return ""
}

// maxDuration bounds every duration key: longer is a typo, not a setting.
const maxDuration = 24 * time.Hour

func duration(key, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > maxDuration {
		return 0, cfgErr(key, "%q is not a duration between 0 and 24h (e.g. \"10s\")", s)
	}
	return d, nil
}

// intIn validates a raw YAML number: absent or null gives def; an integer
// in [lo, hi] is the value; anything else (1.5, "10", true, past the
// range) is an error naming the key, the value and the range.
func intIn(key string, v any, def, lo, hi int64) (int64, error) {
	var n int64
	switch x := v.(type) {
	case nil:
		return def, nil
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > math.MaxInt64 {
			return 0, cfgErr(key, "%d is not an integer from %d to %d", x, lo, hi)
		}
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || x < math.MinInt64 || x > math.MaxInt64 {
			return 0, cfgErr(key, "%v is not an integer from %d to %d", x, lo, hi)
		}
		n = int64(x)
	default:
		return 0, cfgErr(key, "%#v is not an integer from %d to %d", v, lo, hi)
	}
	if n < lo || n > hi {
		return 0, cfgErr(key, "%d is not an integer from %d to %d", n, lo, hi)
	}
	return n, nil
}

// numberIn validates a raw YAML number: absent or null gives def; a number
// in (lo, hi] is the value.
func numberIn(key string, v any, def, lo, hi float64) (float64, error) {
	var f float64
	switch x := v.(type) {
	case nil:
		return def, nil
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case float64:
		f = x
	default:
		return 0, cfgErr(key, "%#v is not a number", v)
	}
	if !(f > lo && f <= hi) {
		return 0, cfgErr(key, "%v is not a number above %v and at most %v", f, lo, hi)
	}
	return f, nil
}

func resolve(fc *fileConfig, getenv func(string) string) (*Config, error) {
	c := &Config{Listen: defaultListen, LogLevel: "info"}
	if fc.Listen != "" {
		c.Listen = fc.Listen
	}
	if v := getenv("FANOUTD_LISTEN"); v != "" {
		c.Listen = v
	}
	if err := checkListen(c.Listen); err != nil {
		return nil, err
	}
	switch fc.LogLevel {
	case "":
	case "debug", "info", "warn", "error":
		c.LogLevel = fc.LogLevel
	default:
		return nil, cfgErr("log_level", "%q is not debug, info, warn or error", fc.LogLevel)
	}
	var err error
	if c.ShutdownTimeout, err = duration("shutdown_timeout", fc.ShutdownTimeout, defaultShutdownTimeout); err != nil {
		return nil, err
	}
	h := &c.HTTP
	if h.ReadHeaderTimeout, err = duration("http.read_header_timeout", fc.HTTP.ReadHeaderTimeout, defaultReadHeaderTimeout); err != nil {
		return nil, err
	}
	if h.IdleTimeout, err = duration("http.idle_timeout", fc.HTTP.IdleTimeout, defaultIdleTimeout); err != nil {
		return nil, err
	}
	n, err := intIn("http.max_anonymous_connections", fc.HTTP.MaxAnonymousConnections, defaultMaxAnonymousConnections, 0, 1<<20)
	if err != nil {
		return nil, err
	}
	h.MaxAnonymousConnections = int(n)
	w := &c.Websocket
	if w.WriteTimeout, err = duration("websocket.write_timeout", fc.Websocket.WriteTimeout, defaultWriteTimeout); err != nil {
		return nil, err
	}
	if w.PingInterval, err = duration("websocket.ping_interval", fc.Websocket.PingInterval, defaultPingInterval); err != nil {
		return nil, err
	}
	w.WriteDelay = defaultWriteDelay
	if fc.Websocket.WriteDelay != "" {
		if w.WriteDelay, err = time.ParseDuration(fc.Websocket.WriteDelay); err != nil || w.WriteDelay < 0 || w.WriteDelay > time.Second {
			return nil, cfgErr("websocket.write_delay", "%q is not a duration between 0 and 1s", fc.Websocket.WriteDelay)
		}
	}
	w.IOUring = fc.Websocket.IOUring == nil || *fc.Websocket.IOUring
	switch v := fc.Websocket.NamedTTL; v {
	case "":
		w.NamedTTL = defaultNamedTTL
	case "never":
		w.NamedTTL = -1
	default:
		if w.NamedTTL, err = time.ParseDuration(v); err != nil || w.NamedTTL < time.Second || w.NamedTTL > 8760*time.Hour {
			return nil, cfgErr("websocket.named_ttl", "%q is not a duration from 1s to 8760h, or never", v)
		}
	}
	l := &c.Limits
	// Ranges: each bound keeps a value the daemon can run (memory per
	// connection, counts that fit an int on every platform).
	for _, p := range []struct {
		key         string
		v           any
		def, lo, hi int64
		dst         *int
	}{
		{"websocket.send_buffer_bytes", fc.Websocket.SendBufferBytes, defaultSendBufferBytes, 0, 64 << 20, &w.SendBufferBytes},
		{"websocket.max_batch_bytes", fc.Websocket.MaxBatchBytes, defaultMaxBatchBytes, 512, 16 << 20, &w.MaxBatchBytes},
		{"websocket.max_batch_messages", fc.Websocket.MaxBatchMessages, defaultMaxBatchMessages, 1, 1 << 20, &w.MaxBatchMessages},
		{"limits.max_streams_per_connection", fc.Limits.MaxStreamsPerConnection, defaultMaxStreams, 1, 1 << 20, &l.MaxStreamsPerConnection},
		{"limits.max_message_bytes", fc.Limits.MaxMessageBytes, defaultMaxMessageBytes, 64, 1 << 20, &l.MaxMessageBytes},
		{"limits.max_connections_per_token", fc.Limits.MaxConnectionsPerToken, defaultMaxConnsPerToken, 1, 1 << 24, &l.MaxConnectionsPerToken},
		{"limits.command_burst", fc.Limits.CommandBurst, defaultCommandBurst, 1, 1 << 20, &l.CommandBurst},
		{"limits.max_reply_bytes", fc.Limits.MaxReplyBytes, defaultMaxReplyBytes, 1 << 10, 1 << 30, &l.MaxReplyBytes},
		{"limits.max_named_per_token", fc.Limits.MaxNamedPerToken, defaultMaxNamedPerToken, 1, 1 << 24, &l.MaxNamedPerToken},
		{"limits.max_named", fc.Limits.MaxNamed, defaultMaxNamed, 1, 1 << 24, &l.MaxNamed},
		{"limits.max_derived_per_token", fc.Limits.MaxDerivedPerToken, defaultMaxDerivedPerToken, 1, 1 << 20, &l.MaxDerivedPerToken},
		{"limits.max_derived_per_source", fc.Limits.MaxDerivedPerSource, defaultMaxDerivedPerSource, 1, 1 << 20, &l.MaxDerivedPerSource},
		{"limits.max_derived_weight", fc.Limits.MaxDerivedWeight, defaultMaxDerivedWeight, 1, 1 << 30, &l.MaxDerivedWeight},
	} {
		n, err := intIn(p.key, p.v, p.def, p.lo, p.hi)
		if err != nil {
			return nil, err
		}
		*p.dst = int(n)
	}
	if l.CommandsPerSecond, err = numberIn("limits.commands_per_second", fc.Limits.CommandsPerSecond, defaultCommandsPerSecond, 0, 1e6); err != nil {
		return nil, err
	}
	for i, o := range fc.Origins {
		if o == "" {
			return nil, cfgErr(fmt.Sprintf("origins[%d]", i), "empty origin")
		}
	}
	c.Origins = fc.Origins
	if c.Tokens, err = resolveTokens(fc.Tokens, getenv("FANOUTD_TOKENS")); err != nil {
		return nil, err
	}
	if c.JWT, c.ExpiringNotice, err = resolveJWT(fc.Auth.JWT); err != nil {
		return nil, err
	}
	if c.Venues, err = resolveVenues(fc.Venues); err != nil {
		return nil, err
	}
	if c.ClaimCheck, err = resolveClaimCheck(fc.ClaimCheck); err != nil {
		return nil, err
	}
	if c.Record, err = resolveRecord(&fc.Record); err != nil {
		return nil, err
	}
	if c.Recovery, err = resolveRecovery(&fc.Recovery); err != nil {
		return nil, err
	}
	if c.History, err = resolveHistory(&fc.History); err != nil {
		return nil, err
	}
	if c.Cluster, err = resolveCluster(&fc.Cluster, getenv); err != nil {
		return nil, err
	}
	if err := c.CheckCluster(); err != nil {
		return nil, err
	}
	return c, nil
}

func resolveTokens(tcs []tokenConfig, env string) ([]api.Token, error) {
	var out []api.Token
	seen := map[string]bool{}
	secrets := map[[32]byte]string{} // digest → the key of the token that has it
	for i, tc := range tcs {
		key := fmt.Sprintf("tokens[%d]", i)
		if tc.Name == "" {
			return nil, cfgErr(key+".name", "missing")
		}
		if seen[tc.Name] {
			return nil, cfgErr(key+".name", "%q used twice", tc.Name)
		}
		if strings.HasPrefix(tc.Name, api.JWTOwnerPrefix) {
			return nil, cfgErr(key+".name", "%q starts with %q, which names a JWT's subject", tc.Name, api.JWTOwnerPrefix)
		}
		seen[tc.Name] = true
		t := api.Token{Name: tc.Name, Venues: tc.Venues, Streams: tc.Streams, Tenants: tc.Tenants}
		switch tc.Latency {
		case "", api.LatencyBatched:
		case api.LatencyLow:
			t.LowLatency = true
		default:
			return nil, cfgErr(key+".latency", "%q: want %s or %s", tc.Latency, api.LatencyLow, api.LatencyBatched)
		}
		switch {
		case tc.SHA256 != "" && tc.Token != "":
			return nil, cfgErr(key, "set sha256 or token, not both")
		case tc.SHA256 != "":
			b, err := hex.DecodeString(tc.SHA256)
			if err != nil || len(b) != 32 {
				// The digest is not a secret, but do not echo it either.
				return nil, cfgErr(key+".sha256", "not 64 hex digits")
			}
			copy(t.Digest[:], b)
		case tc.Token != "":
			t.Digest = sha256.Sum256([]byte(tc.Token)) // the plaintext is not kept
		default:
			return nil, cfgErr(key, "set sha256 (preferred) or token")
		}
		if other, dup := secrets[t.Digest]; dup {
			return nil, cfgErr(key, "has the same secret as %s (each token needs its own)", other)
		}
		secrets[t.Digest] = key
		for j, v := range tc.Venues {
			if !slices.Contains(venues.Names(), v) {
				return nil, cfgErr(fmt.Sprintf("%s.venues[%d]", key, j), "%q is not a venue", v)
			}
		}
		for j, p := range tc.Streams {
			if err := checkPattern(p); err != nil {
				return nil, cfgErr(fmt.Sprintf("%s.streams[%d]", key, j), "%q %v", p, err)
			}
		}
		if err := checkTenants(key, tc.Tenants); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if env != "" {
		for i, e := range strings.Split(env, ",") {
			e = strings.TrimSpace(e)
			t := api.Token{Name: "env-" + strconv.Itoa(i+1)}
			if h, ok := strings.CutPrefix(e, "sha256:"); ok {
				b, err := hex.DecodeString(h)
				if err != nil || len(b) != 32 {
					return nil, cfgErr(fmt.Sprintf("FANOUTD_TOKENS[%d]", i), "sha256: wants 64 hex digits")
				}
				copy(t.Digest[:], b)
			} else if e != "" {
				t.Digest = sha256.Sum256([]byte(e))
			} else {
				return nil, cfgErr(fmt.Sprintf("FANOUTD_TOKENS[%d]", i), "empty token")
			}
			if other, dup := secrets[t.Digest]; dup {
				return nil, cfgErr(fmt.Sprintf("FANOUTD_TOKENS[%d]", i), "has the same secret as %s (each token needs its own)", other)
			}
			secrets[t.Digest] = fmt.Sprintf("FANOUTD_TOKENS[%d]", i)
			out = append(out, t)
		}
	}
	return out, nil
}

func resolveVenues(in map[string]venueConfig) ([]Venue, error) {
	if in == nil { // no venues section: the five, on their defaults
		in = map[string]venueConfig{}
		for _, n := range venues.Names() {
			in[n] = venueConfig{}
		}
	}
	for name := range in {
		if _, ok := venues.Lookup(name); !ok {
			return nil, cfgErr("venues."+name, "unknown venue (want %s)", strings.Join(venues.Names(), ", "))
		}
	}
	var out []Venue
	for _, reg := range venues.All {
		name := reg.Name
		vc, ok := in[name]
		if !ok {
			continue
		}
		key := "venues." + name
		n, err := maxQueueLen(key+".max_queue_len", vc.MaxQueueLen)
		if err != nil {
			return nil, err
		}
		mb, err := maxQueueBytes(key+".max_queue_bytes", vc.MaxQueueBytes)
		if err != nil {
			return nil, err
		}
		if vc.Enabled != nil && !*vc.Enabled {
			continue
		}
		v := Venue{Name: name, WSURL: vc.WSURL, RESTURL: vc.RESTURL, Symbols: vc.Symbols, MaxQueueLen: n, MaxQueueBytes: mb}
		if v.Symbols == nil {
			v.Symbols = reg.Symbols
		}
		ms, err := intIn(key+".max_symbols", vc.MaxSymbols, defaultMaxSymbols, 1, 100000)
		if err != nil {
			return nil, err
		}
		v.MaxSymbols = int(ms)
		if len(v.Symbols) > v.MaxSymbols {
			return nil, cfgErr(key+".symbols", "%d symbols, more than max_symbols (%d)", len(v.Symbols), v.MaxSymbols)
		}
		if v.UnsubscribeAfter, err = duration(key+".unsubscribe_after", vc.UnsubscribeAfter, defaultUnsubscribeAfter); err != nil {
			return nil, err
		}
		for i, s := range v.Symbols {
			if _, err := venue.ParseStream(name + ":trades:" + s); err != nil {
				return nil, cfgErr(fmt.Sprintf("%s.symbols[%d]", key, i), "%q is not a symbol", s)
			}
		}
		for i, ch := range vc.Channels {
			c, err := venue.ParseChannel(ch)
			if err != nil {
				return nil, cfgErr(fmt.Sprintf("%s.channels[%d]", key, i), "%q is not level2, trades, ticker, quote, book_snapshot_<depth>_<interval> or trade_bar_<interval>", ch)
			}
			if c.Derived() {
				v.Derived = append(v.Derived, c)
			} else {
				v.Raw = append(v.Raw, c)
			}
			if src := c.Source(); !slices.Contains(v.Channels, src) {
				v.Channels = append(v.Channels, src)
			}
		}
		if len(v.Channels) == 0 {
			v.Channels = []venue.Channel{venue.Level2, venue.Trades, venue.Ticker}
			v.Raw = v.Channels
		}
		depth, err := intIn(key+".depth", vc.Depth, 0, 0, 10000)
		if err != nil {
			return nil, err
		}
		v.Depth = int(depth)
		for _, u := range []struct{ k, v string }{{"ws_url", v.WSURL}, {"rest_url", v.RESTURL}} {
			if u.v != "" && !strings.Contains(u.v, "://") {
				return nil, cfgErr(key+"."+u.k, "%q is not a URL", u.v)
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// ForCaptures sets c.Venues to the venues of a replay or a recording:
// each venue in found, with its configured settings (queue bounds,
// channels, depth) if the configuration has it, else the defaults; found
// gives its symbols.
func (c *Config) ForCaptures(found map[string][]string) error {
	configured := c.Venues
	var out []Venue
	for _, name := range venues.Names() {
		syms, ok := found[name]
		if !ok {
			continue
		}
		i := slices.IndexFunc(configured, func(v Venue) bool { return v.Name == name })
		var vc Venue
		if i >= 0 {
			vc = configured[i]
		} else {
			def, err := resolveVenues(map[string]venueConfig{name: {}})
			if err != nil {
				return err
			}
			vc = def[0]
		}
		vc.Symbols = syms
		out = append(out, vc)
	}
	c.Venues = out
	return nil
}

// maxQueueLen validates a venue's max_queue_len as written. Absent or
// null gives the default (10000). Any positive integer is accepted, 1
// included; a number arrives as float64 from 1e4 and is
// accepted when integral. Anything else — the string "10000", 0, -5, 1.5,
// "infinity", true — is an error naming the value as written: a bound that
// silently fell back to the default would be back-pressure an operator
// believes is configured and is not.
func maxQueueLen(key string, v any) (int, error) {
	switch x := v.(type) {
	case nil:
		return defaultMaxQueueLen, nil
	case int:
		if x > 0 {
			return x, nil
		}
	case uint64:
		if x > 0 && x <= math.MaxInt32 {
			return int(x), nil
		}
	case float64:
		if x >= 1 && x <= math.MaxInt32 && x == math.Trunc(x) {
			return int(x), nil
		}
	}
	return 0, cfgErr(key, "%#v is not a positive integer", v)
}

// maxQueueBytes validates a byte bound: absent or null gives the default
// (8 MiB); 0 means no byte bound; a positive integer is the bound;
// anything else is an error naming the key and the value.
func maxQueueBytes(key string, v any) (int, error) {
	n, err := intIn(key, v, defaultMaxQueueBytes, 0, 1<<40)
	return int(n), err
}

// defaultSnapshotClaimMinBytes: a snapshot reply carries the claim check
// when the newest stored snapshot is at least this large — the size of
// one batched websocket message (websocket.max_batch_bytes' default), past
// which the inline book no longer fits one write.
const defaultSnapshotClaimMinBytes = 64 << 10

// ClaimCheck is the resolved claim_check section: claimcheck's own
// keys, validated, and the daemon's.
type ClaimCheck struct {
	claimcheck.Config
	// SnapshotClaimMinBytes: the reply to a websocket snapshot op carries
	// the claim check of the stream's newest stored snapshot when that
	// snapshot is at least this many bytes; 0 means always. Defaults to
	// 65536.
	SnapshotClaimMinBytes int64
}

// claimCheckFile is claim_check as written: claimcheck.Config's keys
// (inline, pre-filled with claimcheck.Defaults so absent keys keep their
// defaults) plus the daemon's.
type claimCheckFile struct {
	claimcheck.Config     `yaml:",inline"`
	SnapshotClaimMinBytes *int64 `yaml:"snapshot_claim_min_bytes"`
}

func newClaimCheckFile() *claimCheckFile {
	return &claimCheckFile{Config: claimcheck.Defaults()}
}

// resolveClaimCheck validates the section; f nil (claim_check: null) means
// the defaults.
func resolveClaimCheck(f *claimCheckFile) (ClaimCheck, error) {
	if f == nil {
		f = newClaimCheckFile()
	}
	c := ClaimCheck{Config: f.Config, SnapshotClaimMinBytes: defaultSnapshotClaimMinBytes}
	if st := c.Stores; len(st) == 1 && st[0].Kind == "dir" && st[0].Path == claimcheck.DefaultDirRoot {
		st[0].Path = DefaultClaimDir
	}
	if err := c.Config.Validate(); err != nil {
		var ce *claimcheck.ConfigError
		if errors.As(err, &ce) {
			return c, cfgErr(ce.Key, "%#v: %s", ce.Value, ce.Why)
		}
		return c, cfgErr("claim_check", "%v", err)
	}
	if v := f.SnapshotClaimMinBytes; v != nil {
		if *v < 0 {
			return c, cfgErr("claim_check.snapshot_claim_min_bytes", "%d is negative", *v)
		}
		c.SnapshotClaimMinBytes = *v
	}
	return c, nil
}

// DefaultClaimDir is where the embedded default dir store lives:
// claimcheck.DefaultDirRoot, relative to the working directory. Tests point
// it at a temporary directory so no test writes into the source tree.
var DefaultClaimDir = claimcheck.DefaultDirRoot

// checkTenants validates a token's tenants scope list.
func checkTenants(key string, tenants []string) error {
	for i, t := range tenants {
		if !claimcheck.ValidTenant(t) {
			return cfgErr(fmt.Sprintf("%s.tenants[%d]", key, i), "%q is not a tenant ([A-Za-z0-9_-]{1,64})", t)
		}
	}
	return nil
}

// recordConfig is the record: section as written. Sizes are kept raw so a
// bad value is reported with its key and the value.
type recordConfig struct {
	Enabled  *bool  `yaml:"enabled"`
	Dir      string `yaml:"dir"`
	MaxBytes any    `yaml:"max_bytes"`
	MaxAge   string `yaml:"max_age"`
	Queue    any    `yaml:"queue"`
	CheckIn  *bool  `yaml:"check_in"`
}

// Record is the resolved record: section.
type Record struct {
	// Enabled makes serve record every venue's raw frames. Defaults to
	// false.
	Enabled bool
	// Dir is where segments go, one sub-directory per venue. Defaults to
	// ./data/captures.
	Dir string
	// MaxBytes rotates a segment after this many uncompressed bytes.
	// Defaults to 256 MiB.
	MaxBytes int64
	// MaxAge rotates a segment this long after it was opened. Defaults to
	// 1h.
	MaxAge time.Duration
	// Queue is how many frames may wait for the disk before frames are
	// dropped (and reported). Defaults to 65536.
	Queue int
	// CheckIn checks every closed segment in to the claim check (a claim
	// of its own, replayable with `fanoutd replay claim:<tenant>/<id>`).
	// Defaults to false.
	CheckIn bool
}

// Record defaults.
const (
	defaultRecordDir      = "./data/captures"
	defaultRecordMaxBytes = 256 << 20
	defaultRecordMaxAge   = time.Hour
	defaultRecordQueue    = 65536
)

func resolveRecord(rc *recordConfig) (Record, error) {
	c := Record{Dir: defaultRecordDir, MaxBytes: defaultRecordMaxBytes, MaxAge: defaultRecordMaxAge, Queue: defaultRecordQueue}
	if rc.Enabled != nil {
		c.Enabled = *rc.Enabled
	}
	if rc.Dir != "" {
		c.Dir = rc.Dir
	}
	if rc.CheckIn != nil {
		c.CheckIn = *rc.CheckIn
	}
	var err error
	if c.MaxAge, err = duration("record.max_age", rc.MaxAge, defaultRecordMaxAge); err != nil {
		return c, err
	}
	n, err := positiveInt("record.max_bytes", rc.MaxBytes, defaultRecordMaxBytes)
	if err != nil {
		return c, err
	}
	c.MaxBytes = n
	if n, err = positiveInt("record.queue", rc.Queue, defaultRecordQueue); err != nil {
		return c, err
	}
	if n > 1<<24 {
		return c, cfgErr("record.queue", "%d is more than 16777216 frames", n)
	}
	c.Queue = int(n)
	return c, nil
}

// positiveInt validates a raw YAML integer: absent or null gives def, a
// positive integer is the value, anything else names the key and value.
func positiveInt(key string, v any, def int64) (int64, error) {
	switch x := v.(type) {
	case nil:
		return def, nil
	case int:
		if x > 0 {
			return int64(x), nil
		}
	case uint64:
		if x <= 1<<62 {
			return int64(x), nil
		}
	}
	return 0, cfgErr(key, "%#v is not a positive integer", v)
}

// checkPattern validates a token's stream pattern: venue:channel:symbol
// where '*' matches any run of characters within its part
// (api.MatchStream). A part without '*' must be a
// venue, a channel or a symbol as streams write them, so that a typo is
// not a scope that silently matches nothing.
func checkPattern(p string) error {
	if p == "" || len(p) > 256 {
		return errors.New("is not a stream pattern (venue:channel:symbol, '*' matches any run)")
	}
	if !strings.Contains(p, "*") {
		if _, err := venue.ParseStream(p); err != nil {
			return errors.New("is not a stream, and has no '*'")
		}
		return nil
	}
	for _, r := range p {
		if r < 0x21 || r == 0x7f {
			return errors.New("has a space or control character")
		}
	}
	parts := strings.SplitN(p, ":", 3)
	if v := parts[0]; !strings.Contains(v, "*") && len(parts) > 1 && !slices.Contains(venues.Names(), v) {
		return fmt.Errorf("names venue %q, which is not a venue", v)
	}
	if v := parts[0]; !slices.ContainsFunc(venues.Names(), func(n string) bool { return api.MatchGlob(v, n) }) {
		return fmt.Errorf("venue part %q matches no venue (parts are venue:channel:symbol, matched each on its own)", v)
	}
	if len(parts) > 1 {
		if ch := parts[1]; !strings.Contains(ch, "*") && len(parts) > 2 {
			if _, err := venue.ParseChannel(ch); err != nil {
				return fmt.Errorf("names channel %q, which is not a channel", ch)
			}
		}
	}
	return nil
}

// checkListen validates a listen address: host:port with a port from 0
// to 65535 (0 picks a free one).
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return cfgErr("listen", "%q is not host:port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return cfgErr("listen", "%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

// Loopback reports whether addr (host:port) listens on loopback only.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// resolveRecovery validates the recovery section: each bound absent or
// null takes its default, 0 turns recovery off.
func resolveRecovery(rc *recoveryConfig) (Recovery, error) {
	var o Recovery
	n, err := intIn("recovery.max_events_per_stream", rc.MaxEventsPerStream, defaultRecoveryEvents, 0, 1<<24)
	if err != nil {
		return o, err
	}
	o.MaxEventsPerStream = int(n)
	if o.MaxBytes, err = intIn("recovery.max_bytes", rc.MaxBytes, defaultRecoveryBytes, 0, 1<<40); err != nil {
		return o, err
	}
	switch v := rc.MaxAge.(type) {
	case nil:
		o.MaxAge = defaultRecoveryAge
	case int:
		if v != 0 {
			return o, cfgErr("recovery.max_age", "%d is not a duration (e.g. \"2m\"; 0 turns recovery off)", v)
		}
	case string:
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxDuration {
			return o, cfgErr("recovery.max_age", "%q is not a duration from 0 to 24h (e.g. \"2m\"; 0 turns recovery off)", v)
		}
		o.MaxAge = d
	default:
		return o, cfgErr("recovery.max_age", "%#v is not a duration (e.g. \"2m\"; 0 turns recovery off)", v)
	}
	return o, nil
}
