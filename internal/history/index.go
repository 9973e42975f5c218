// Package history is the index of what is recorded: one small JSON object
// per capture segment checked in to the claim check, kept in the claim
// check's own stores so every node on the same bucket sees the same
// history, and the time-range queries over it.
//
// One object per segment, never a shared manifest: two writers (two nodes
// recording into one bucket, or an import while a node records) only ever
// create keys of their own, and S3 needs no read-modify-write or
// conditional put for that to be safe. A key names the segment's first
// receive time, connection and claim, so it is unique per claim and a
// listing is in time order per venue.
package history

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/replay"
)

// Prefix is where the index objects live in a store:
// history/tenant=<t>/venue=<v>/<first>-c<conn>-<claim id>.json.
const Prefix = "history/"

// Entry is one recorded segment in the index.
type Entry struct {
	Venue      string `json:"venue"`
	Connection int    `json:"connection"`
	// Symbols are the symbols the connection was subscribed to.
	Symbols []string  `json:"symbols"`
	First   time.Time `json:"first"` // receive time of the first line
	Last    time.Time `json:"last"`  // receive time of the last line
	Frames  int64     `json:"frames"`
	// Claim is the segment's claim reference, "<tenant>/<claim id>".
	Claim string `json:"claim"`
	Size  int64  `json:"size"` // stored (gzip) bytes
}

// timeKey is a fixed-width, lexically ordered form of a time for keys.
const timeKey = "20060102T150405.000000000Z"

// Key returns e's object key in tenant's index.
func Key(tenant string, e Entry) string {
	id := e.Claim
	if _, after, ok := strings.Cut(id, "/"); ok {
		id = after
	}
	return fmt.Sprintf("%stenant=%s/venue=%s/%s-c%d-%s.json", Prefix, tenant, e.Venue, e.First.UTC().Format(timeKey), e.Connection, id)
}

// Index is the history index of one tenant over the claim check's stores.
// Objects are written to every store and read from every store that lists
// (claimcheck.Lister); an object never changes once written, so each is
// read once and kept.
type Index struct {
	stores []claimcheck.Store
	tenant string
	ttl    time.Duration

	mu      sync.Mutex // held through a refresh: concurrent callers share it
	entries map[string]Entry
	listed  time.Time
}

// DefaultTTL is how long a listing of the index is reused before the
// stores are listed again.
const DefaultTTL = time.Second

// NewIndex returns tenant's index in stores.
func NewIndex(stores []claimcheck.Store, tenant string) *Index {
	return &Index{stores: stores, tenant: tenant, ttl: DefaultTTL, entries: map[string]Entry{}}
}

// Add writes e to every store; it fails only if no store took it.
func (x *Index) Add(ctx context.Context, e Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	k := Key(x.tenant, e)
	var errs []error
	for _, s := range x.stores {
		if err := s.Put(ctx, k, b); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == len(x.stores) {
		return fmt.Errorf("history: index %s: %w", k, errors.Join(errs...))
	}
	x.mu.Lock()
	x.entries[k] = e
	x.mu.Unlock()
	return nil
}

// Entries returns every indexed segment, by venue, connection and first
// receive time. The stores are listed again when the last listing is older
// than the index's TTL.
func (x *Index) Entries(ctx context.Context) ([]Entry, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if time.Since(x.listed) >= x.ttl {
		if err := x.refresh(ctx); err != nil {
			return nil, err
		}
		x.listed = time.Now()
	}
	out := make([]Entry, 0, len(x.entries))
	for _, e := range x.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Venue != b.Venue {
			return a.Venue < b.Venue
		}
		if a.Connection != b.Connection {
			return a.Connection < b.Connection
		}
		if !a.First.Equal(b.First) {
			return a.First.Before(b.First)
		}
		return a.Claim < b.Claim
	})
	return out, nil
}

// refresh lists every store and reads the objects not yet known. A store
// that cannot be listed or read fails the refresh only if every store
// failed.
func (x *Index) refresh(ctx context.Context) error {
	prefix := Prefix + "tenant=" + x.tenant + "/"
	var errs []error
	ok := false
	for _, s := range x.stores {
		l, isLister := s.(claimcheck.Lister)
		if !isLister {
			continue
		}
		keys, err := l.List(ctx, prefix)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ok = true
		for _, k := range keys {
			if _, known := x.entries[k]; known || !strings.HasSuffix(k, ".json") {
				continue
			}
			e, err := readEntry(ctx, s, k)
			if err != nil {
				if claimcheck.IsMissing(err) {
					continue
				}
				errs = append(errs, err)
				continue
			}
			x.entries[k] = e
		}
	}
	if !ok && len(errs) > 0 {
		return fmt.Errorf("history: index: %w", errors.Join(errs...))
	}
	return nil
}

// maxEntryBytes bounds an index object read.
const maxEntryBytes = 1 << 20

func readEntry(ctx context.Context, s claimcheck.Store, key string) (Entry, error) {
	rc, err := s.GetRange(ctx, key, 0, maxEntryBytes)
	if err != nil {
		return Entry{}, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("history: index object %s: %w", key, err)
	}
	if e.Venue == "" || e.Claim == "" {
		return Entry{}, fmt.Errorf("history: index object %s: no venue or claim", key)
	}
	return e, nil
}

// Describe reads a capture held in memory (gzip with its metadata in the
// header comment, or plain) and returns its entry without the claim: the
// metadata's venue, connection and subscriptions, the first and last
// receive times and the frame count.
func Describe(name string, data []byte) (Entry, error) {
	f, err := OpenBytes(name, data)
	if err != nil {
		return Entry{}, err
	}
	defer f.Close()
	e := Entry{Venue: f.Meta.Venue, Connection: f.Meta.Connection, Symbols: slices.Clone(f.Meta.Subscriptions), Size: int64(len(data))}
	for {
		rec, err := f.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Entry{}, err
		}
		if rec.Time.IsZero() {
			continue // a bare disconnect line has no time
		}
		if e.First.IsZero() {
			e.First = rec.Time
		}
		if rec.Time.After(e.Last) {
			e.Last = rec.Time
		}
		if !rec.Disconnect {
			e.Frames++
		}
	}
	if e.First.IsZero() {
		return Entry{}, fmt.Errorf("%s: no timestamped line", name)
	}
	return e, nil
}

// OpenBytes reads a capture held in memory as replay.Open reads a file:
// gzip with its metadata in the header comment, or plain (no metadata).
func OpenBytes(name string, data []byte) (*replay.File, error) {
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		return &replay.File{Reader: replay.NewReader(bytes.NewReader(data), name)}, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := &replay.File{Reader: replay.NewReader(zr, name)}
	if zr.Comment != "" {
		if err := json.Unmarshal([]byte(zr.Comment), &f.Meta); err != nil {
			return nil, fmt.Errorf("%s: gzip comment is not capture metadata: %w", name, err)
		}
	}
	return f, nil
}
