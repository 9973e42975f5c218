package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrWriterClosed is returned by a Writer after Close.
var ErrWriterClosed = errors.New("claimcheck: writer closed")

// Snapshot is one book to check in.
type Snapshot struct {
	Tenant      string // defaults to the writer's tenant
	Stream      string // venue:level2:symbol; at most MaxStream bytes
	Seq         uint64 // the stream's seq the book is current at
	Time        time.Time
	Recorded    time.Time
	ContentType string // at most 48 bytes; defaults to application/octet-stream
	Data        []byte
}

// Claim is a claim check: what the stream carries in place of the bytes.
type Claim struct {
	Tenant      string    `json:"tenant"`
	ID          string    `json:"id"`
	URL         string    `json:"url"` // the gateway path, /v1/claims/<tenant>/<id>
	Kind        string    `json:"kind"`
	Stream      string    `json:"stream,omitempty"`
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	Recorded    time.Time `json:"recorded"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	ContentType string    `json:"content_type"`
}

// WriterConfig configures a Writer.
type WriterConfig struct {
	Tenant string // default tenant of snapshots; defaults to "default"
	Layout Layout
	// PackMaxBytes seals a pack once its claims reach this many bytes.
	// Defaults to 8 MiB. A single larger claim makes a pack of its own.
	PackMaxBytes int64
	// PackMaxAge seals a pack this long after its first claim. Defaults
	// to 5s.
	PackMaxAge time.Duration
	// RecentPerStream is how many snapshot claims per stream Recent and
	// Latest remember. Defaults to 1000.
	RecentPerStream int
	// Announce is called with a pack's claims once the pack is fully
	// written to its home store, never before; from the writer's
	// goroutine, one pack at a time, in write order.
	Announce func([]Claim)
	// OnError is told of packs that could not be written after retries;
	// their claims are never announced. Defaults to doing nothing.
	OnError func(error)
}

// Writer batches snapshot claims into packs per tenant and writes each
// pack to its home store. The zero Writer is not usable; use NewWriter.
type Writer struct {
	cfg    WriterConfig
	stores []Store
	names  []string
	base   context.Context
	cancel context.CancelFunc
	kick   chan struct{}
	wg     sync.WaitGroup

	writeMu sync.Mutex // serializes pack writes, so Announce sees write order

	mu      sync.Mutex // protects the fields below
	closed  bool
	pending map[string]*pendingPack // by tenant
	sealed  []*pendingPack
	recent  map[string][]Claim // by stream, oldest first
}

type pendingPack struct {
	tenant string
	claims []PackClaim
	bytes  int64
	opened time.Time
}

// NewWriter starts a writer over stores (packs go to their home store).
// Close it to flush and stop its goroutine.
func NewWriter(cfg WriterConfig, stores []Store) (*Writer, error) {
	if len(stores) == 0 {
		return nil, errors.New("claimcheck: writer needs at least one store")
	}
	if cfg.Tenant == "" {
		cfg.Tenant = "default"
	}
	if err := CheckTenant(cfg.Tenant); err != nil {
		return nil, err
	}
	if cfg.PackMaxBytes <= 0 {
		cfg.PackMaxBytes = 8 << 20
	}
	if cfg.PackMaxAge <= 0 {
		cfg.PackMaxAge = 5 * time.Second
	}
	if cfg.RecentPerStream <= 0 {
		cfg.RecentPerStream = 1000
	}
	w := &Writer{cfg: cfg, stores: stores, kick: make(chan struct{}, 1),
		pending: make(map[string]*pendingPack), recent: make(map[string][]Claim)}
	for _, s := range stores {
		w.names = append(w.names, s.Name())
	}
	w.base, w.cancel = context.WithCancel(context.Background())
	w.wg.Add(1)
	go w.loop()
	return w, nil
}

// Add queues a snapshot claim; it does not block on the store. The claim
// is announced once its pack is written.
func (w *Writer) Add(s Snapshot) error {
	if s.Tenant == "" {
		s.Tenant = w.cfg.Tenant
	}
	if err := CheckTenant(s.Tenant); err != nil {
		return err
	}
	if s.ContentType != "" && !validContentType(s.ContentType) {
		return fmt.Errorf("claimcheck: content type %q: want printable ASCII, at most %d bytes", s.ContentType, MaxContentType)
	}
	if !validStream(s.Stream) {
		return fmt.Errorf("claimcheck: stream %q: want printable ASCII, at most %d bytes", s.Stream, MaxStream)
	}
	pc := PackClaim{Kind: KindSnapshot, Stream: s.Stream, Seq: s.Seq, Time: s.Time, Recorded: s.Recorded, ContentType: s.ContentType, Data: s.Data}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrWriterClosed
	}
	p := w.pending[s.Tenant]
	if p != nil && (p.bytes+int64(len(s.Data)) > w.cfg.PackMaxBytes || len(p.claims) >= MaxClaimsPerPack) {
		w.seal(p)
		p = nil
	}
	if p == nil {
		p = &pendingPack{tenant: s.Tenant, opened: time.Now()}
		w.pending[s.Tenant] = p
		w.signal() // the loop arms the age timer
	}
	p.claims = append(p.claims, pc)
	p.bytes += int64(len(s.Data))
	if p.bytes >= w.cfg.PackMaxBytes {
		w.seal(p)
	}
	return nil
}

// seal moves p to the write queue. w.mu must be held.
func (w *Writer) seal(p *pendingPack) {
	delete(w.pending, p.tenant)
	w.sealed = append(w.sealed, p)
	w.signal()
}

func (w *Writer) signal() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *Writer) loop() {
	defer w.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		w.mu.Lock()
		now := time.Now()
		next := now.Add(time.Hour)
		for _, p := range w.pending {
			if due := p.opened.Add(w.cfg.PackMaxAge); !now.Before(due) {
				w.seal(p)
			} else if due.Before(next) {
				next = due
			}
		}
		w.mu.Unlock()
		w.writeSealed(w.base)
		t.Reset(time.Until(next))
		select {
		case <-w.kick:
		case <-t.C:
		case <-w.base.Done():
			return
		}
	}
}

// writeSealed writes every sealed pack, returning the first error.
func (w *Writer) writeSealed(ctx context.Context) error {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	var first error
	for {
		w.mu.Lock()
		if len(w.sealed) == 0 {
			w.mu.Unlock()
			return first
		}
		p := w.sealed[0]
		w.sealed = w.sealed[1:]
		w.mu.Unlock()
		claims, err := w.writePack(ctx, p.tenant, p.claims)
		if err != nil {
			if first == nil {
				first = err
			}
			if w.cfg.OnError != nil {
				w.cfg.OnError(err)
			}
			continue
		}
		w.remember(claims)
		if w.cfg.Announce != nil {
			w.cfg.Announce(claims)
		}
	}
}

// writePack builds a pack and writes it to its home store, retrying a
// throttled or unavailable store three times with backoff.
func (w *Writer) writePack(ctx context.Context, tenant string, pcs []PackClaim) ([]Claim, error) {
	p, err := BuildPack(tenant, w.cfg.Layout, pcs)
	if err != nil {
		return nil, err
	}
	home := w.stores[HomeStore(w.names, tenant, p.ID)]
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = home.Put(pctx, p.Key(), p.Data)
		cancel()
		k := Classify(err)
		if err == nil || attempt == 4 || (k != ErrThrottled && k != ErrUnavailable) || ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff *= 2
	}
	if err != nil {
		return nil, err
	}
	claims := make([]Claim, len(pcs))
	for i := range pcs {
		m := p.Manifest.Claims[i]
		claims[i] = Claim{Tenant: tenant, ID: m.ID, URL: Ref{tenant, p.ClaimID(i)}.Path(), Kind: m.Kind, Stream: m.Stream,
			Seq: m.Seq, Time: m.Time, Recorded: m.Recorded, Size: m.Length, SHA256: m.SHA256, ContentType: m.ContentType}
	}
	return claims, nil
}

func (w *Writer) remember(cs []Claim) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range cs {
		if c.Kind != KindSnapshot || c.Stream == "" {
			continue
		}
		r := append(w.recent[c.Stream], c)
		if len(r) > w.cfg.RecentPerStream {
			r = append(r[:0:0], r[len(r)-w.cfg.RecentPerStream:]...)
		}
		w.recent[c.Stream] = r
	}
}

// CheckIn writes one claim — a closed capture segment, say — as a pack of
// its own, synchronously, and returns its claim check once the pack is
// written. Kind defaults to "capture". It is not announced.
func (w *Writer) CheckIn(ctx context.Context, tenant string, c PackClaim) (Claim, error) {
	if tenant == "" {
		tenant = w.cfg.Tenant
	}
	if c.Kind == "" {
		c.Kind = KindCapture
	}
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return Claim{}, ErrWriterClosed
	}
	cs, err := w.writePack(ctx, tenant, []PackClaim{c})
	if err != nil {
		return Claim{}, err
	}
	return cs[0], nil
}

// Flush seals every pending pack and writes it now, returning the first
// write error. Claims added during Flush may wait for the next one.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	for _, p := range w.pending {
		w.seal(p)
	}
	w.mu.Unlock()
	return w.writeSealed(ctx)
}

// Recent returns the remembered snapshot claims of stream with Time in
// [from, to] (a zero bound is open), oldest first.
func (w *Writer) Recent(stream string, from, to time.Time) []Claim {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Claim
	for _, c := range w.recent[stream] {
		if (!from.IsZero() && c.Time.Before(from)) || (!to.IsZero() && c.Time.After(to)) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// Latest returns the newest (highest seq) snapshot claim of stream.
func (w *Writer) Latest(stream string) (Claim, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var best Claim
	ok := false
	for _, c := range w.recent[stream] {
		if !ok || c.Seq >= best.Seq {
			best, ok = c, true
		}
	}
	return best, ok
}

// Close stops accepting claims, writes every pending pack (until ctx is
// done), then stops the writer's goroutine. Packs not written when ctx
// ends are lost and reported to OnError.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	err := w.Flush(ctx)
	w.cancel()
	w.wg.Wait()
	return err
}
