package claimcheck

import (
	"context"
	"fmt"
	"time"
)

// Config is the claim_check section of fanoutd's configuration. Start
// from Defaults, unmarshal the file over it (so absent keys keep their
// defaults), then Validate.
type Config struct {
	// Tenant is the tenant of the daemon's own snapshot and capture
	// claims. Defaults to "default".
	Tenant string `yaml:"tenant" json:"tenant"`
	// KeyLayout is "flat" or "sharded". Defaults to "flat".
	KeyLayout string `yaml:"key_layout" json:"key_layout"`
	// PackMaxBytes seals a pack once its claims reach it. Defaults to
	// 8388608 (8 MiB).
	PackMaxBytes int64 `yaml:"pack_max_bytes" json:"pack_max_bytes"`
	// PackMaxAgeMS seals a pack this long after its first claim.
	// Defaults to 5000.
	PackMaxAgeMS int `yaml:"pack_max_age_ms" json:"pack_max_age_ms"`
	// SnapshotIntervalMS is how often the daemon checks in every level2
	// book (and always after a resync). Defaults to 60000.
	SnapshotIntervalMS int `yaml:"snapshot_interval_ms" json:"snapshot_interval_ms"`
	// RecentSnapshots is how many snapshot claims per stream the
	// /v1/snapshots routes remember. Defaults to 1000.
	RecentSnapshots int `yaml:"recent_snapshots" json:"recent_snapshots"`
	// ReadMaxInflight is each store's starting and highest concurrency
	// limit (AIMD ceiling); it also sizes each S3 connection pool.
	// Defaults to 64.
	ReadMaxInflight int `yaml:"read_max_inflight" json:"read_max_inflight"`
	// ReadQueueMax is how many reads may wait per store for a slot; past
	// it a read is shed (503 overloaded). 0: no queue. Defaults to 1024.
	ReadQueueMax int `yaml:"read_queue_max" json:"read_queue_max"`
	// ReadDeadlineMS is each gateway request's deadline from its start
	// (503 deadline past it). Defaults to 2000.
	ReadDeadlineMS int `yaml:"read_deadline_ms" json:"read_deadline_ms"`
	// StoreFirstByteTimeoutMS: a store request with no first byte within
	// it counts as "no answer" (unavailable; halves the limit). Defaults
	// to 5000.
	StoreFirstByteTimeoutMS int `yaml:"store_first_byte_timeout_ms" json:"store_first_byte_timeout_ms"`
	// StoreBodyTimeoutMS bounds a whole store request, body included; it
	// is not a congestion signal. Defaults to 60000.
	StoreBodyTimeoutMS int `yaml:"store_body_timeout_ms" json:"store_body_timeout_ms"`
	// CacheBytes bounds the reader's cache of claim bytes, ranges,
	// indexes and manifests. 0 disables it. Defaults to 268435456
	// (256 MiB).
	CacheBytes int64 `yaml:"cache_bytes" json:"cache_bytes"`
	// MaxConcurrentReads bounds the gateway requests the node serves at
	// once, cache hits included; past it: 503 overloaded. 0: unlimited.
	// Defaults to 0.
	MaxConcurrentReads int `yaml:"max_concurrent_reads" json:"max_concurrent_reads"`
	// Stores lists the object stores; a pack's home is a stable hash of
	// tenant and pack over their names. Defaults to one dir store at
	// ./data/claims.
	Stores []StoreConfig `yaml:"stores" json:"stores"`
}

// StoreConfig is one entry of claim_check.stores.
type StoreConfig struct {
	// Name identifies the store (metrics, home hashing). Defaults to the
	// kind, or "<kind>-<position>" when several stores share a kind.
	// Renaming a store moves packs' homes.
	Name string `yaml:"name" json:"name"`
	// Kind is "dir" or "s3".
	Kind string `yaml:"kind" json:"kind"`
	// Path is a dir store's root. Defaults to ./data/claims.
	Path string `yaml:"path" json:"path,omitempty"`
	// Endpoint is an S3-compatible endpoint URL; empty means AWS.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
	// Region defaults to $AWS_REGION, else us-east-1.
	Region string `yaml:"region" json:"region,omitempty"`
	// Bucket is required for s3.
	Bucket string `yaml:"bucket" json:"bucket,omitempty"`
	// PathStyle addresses the bucket in the path (most non-AWS servers).
	PathStyle bool `yaml:"path_style" json:"path_style,omitempty"`
	// AccessKeyID and SecretAccessKey (and SessionToken) are static
	// credentials; empty means the usual AWS environment and files.
	AccessKeyID     string `yaml:"access_key_id" json:"access_key_id,omitempty"`
	SecretAccessKey string `yaml:"secret_access_key" json:"-"`
	SessionToken    string `yaml:"session_token" json:"-"`
	// MaxConns sizes the S3 connection pool; set from read_max_inflight
	// (plus room for the writer) by OpenStores.
	MaxConns int `yaml:"-" json:"-"`
	// FirstByteTimeout is the S3 transport's response-header timeout;
	// set from store_first_byte_timeout_ms by OpenStores.
	FirstByteTimeout time.Duration `yaml:"-" json:"-"`
}

// Defaults returns the configuration every key defaults to.
func Defaults() Config {
	return Config{
		Tenant: "default", KeyLayout: "flat", PackMaxBytes: 8 << 20, PackMaxAgeMS: 5000,
		SnapshotIntervalMS: 60000, RecentSnapshots: 1000, ReadMaxInflight: 64, ReadQueueMax: 1024,
		ReadDeadlineMS: 2000, StoreFirstByteTimeoutMS: 5000, StoreBodyTimeoutMS: 60000,
		CacheBytes: 256 << 20, MaxConcurrentReads: 0,
		Stores: []StoreConfig{{Name: "dir", Kind: "dir", Path: DefaultDirRoot}},
	}
}

// ConfigError names the key and the value that failed validation.
type ConfigError struct {
	Key   string // e.g. "claim_check.read_max_inflight", "claim_check.stores[1].bucket"
	Value any
	Why   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("claimcheck: config: %s: %#v: %s", e.Key, e.Value, e.Why)
}

// Validate checks every key, returning a *ConfigError for the first bad
// one. It fills store names that were left empty.
func (c *Config) Validate() error {
	bad := func(key string, v any, why string) error {
		return &ConfigError{Key: "claim_check." + key, Value: v, Why: why}
	}
	if !ValidTenant(c.Tenant) {
		return bad("tenant", c.Tenant, "want [A-Za-z0-9_-]{1,64}")
	}
	if _, err := ParseLayout(c.KeyLayout); err != nil {
		return bad("key_layout", c.KeyLayout, "want flat or sharded")
	}
	pos := []struct {
		key string
		v   int64
		min int64
	}{
		{"pack_max_bytes", c.PackMaxBytes, 1},
		{"pack_max_age_ms", int64(c.PackMaxAgeMS), 1},
		{"snapshot_interval_ms", int64(c.SnapshotIntervalMS), 1},
		{"recent_snapshots", int64(c.RecentSnapshots), 1},
		{"read_max_inflight", int64(c.ReadMaxInflight), 1},
		{"read_queue_max", int64(c.ReadQueueMax), 0},
		{"read_deadline_ms", int64(c.ReadDeadlineMS), 1},
		{"store_first_byte_timeout_ms", int64(c.StoreFirstByteTimeoutMS), 1},
		{"store_body_timeout_ms", int64(c.StoreBodyTimeoutMS), 1},
		{"cache_bytes", c.CacheBytes, 0},
		{"max_concurrent_reads", int64(c.MaxConcurrentReads), 0},
	}
	for _, p := range pos {
		if p.v < p.min {
			return bad(p.key, p.v, fmt.Sprintf("must be at least %d", p.min))
		}
	}
	if c.ReadMaxInflight > 100000 {
		return bad("read_max_inflight", c.ReadMaxInflight, "must be at most 100000")
	}
	if len(c.Stores) == 0 {
		return bad("stores", c.Stores, "at least one store is required")
	}
	kinds := map[string]int{}
	for _, s := range c.Stores {
		kinds[s.Kind]++
	}
	names := map[string]bool{}
	for i := range c.Stores {
		s := &c.Stores[i]
		key := fmt.Sprintf("stores[%d].", i)
		switch s.Kind {
		case "dir":
			if s.Path == "" {
				s.Path = DefaultDirRoot
			}
		case "s3":
			if s.Bucket == "" {
				return bad(key+"bucket", s.Bucket, "required for an s3 store")
			}
		default:
			return bad(key+"kind", s.Kind, "want dir or s3")
		}
		if s.Name == "" {
			s.Name = s.Kind
			if kinds[s.Kind] > 1 {
				s.Name = fmt.Sprintf("%s-%d", s.Kind, i)
			}
		}
		if names[s.Name] {
			return bad(key+"name", s.Name, "two stores have this name")
		}
		names[s.Name] = true
	}
	return nil
}

// Layout returns the parsed key layout.
func (c *Config) Layout() Layout {
	l, _ := ParseLayout(c.KeyLayout)
	return l
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// ReaderConfig returns the Reader's configuration.
func (c *Config) ReaderConfig() ReaderConfig {
	return ReaderConfig{
		MaxInflight: c.ReadMaxInflight, QueueMax: c.ReadQueueMax, Deadline: ms(c.ReadDeadlineMS),
		FirstByteTimeout: ms(c.StoreFirstByteTimeoutMS), BodyTimeout: ms(c.StoreBodyTimeoutMS),
		CacheBytes: c.CacheBytes, MaxConcurrentReads: c.MaxConcurrentReads,
	}
}

// WriterConfig returns the Writer's configuration.
func (c *Config) WriterConfig() WriterConfig {
	return WriterConfig{Tenant: c.Tenant, Layout: c.Layout(), PackMaxBytes: c.PackMaxBytes,
		PackMaxAge: ms(c.PackMaxAgeMS), RecentPerStream: c.RecentSnapshots}
}

// StoreOpener opens one store from its configuration; s3store.Open is
// the opener for kind s3.
type StoreOpener func(ctx context.Context, sc StoreConfig) (Store, error)

// OpenStores opens the configured stores, in order. Kind dir is built in;
// every other kind needs an opener in openers (the daemon passes
// {"s3": s3store.Open}). On error it closes the stores already open.
func OpenStores(ctx context.Context, c *Config, openers map[string]StoreOpener) ([]Store, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var out []Store
	fail := func(err error) ([]Store, error) {
		for _, s := range out {
			s.Close()
		}
		return nil, err
	}
	for i, sc := range c.Stores {
		sc.MaxConns = c.ReadMaxInflight + 8 // the writer's puts share the pool
		sc.FirstByteTimeout = ms(c.StoreFirstByteTimeoutMS)
		var (
			s   Store
			err error
		)
		if op := openers[sc.Kind]; op != nil {
			s, err = op(ctx, sc)
		} else if sc.Kind == "dir" {
			s, err = NewDirStore(sc.Name, sc.Path)
		} else {
			err = fmt.Errorf("claimcheck: no opener for store kind %q", sc.Kind)
		}
		if err != nil {
			return fail(fmt.Errorf("claimcheck: opening claim_check.stores[%d] (%s): %w", i, sc.Name, err))
		}
		out = append(out, s)
	}
	return out, nil
}
