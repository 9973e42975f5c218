package daemon

// The daemon's side of the claim check (claimcheck/): the claim_check
// configuration section, the node's lifetime, level2 books checked in as
// snapshot claims, claim checks added to notices and snapshot replies, the
// `claims get` command, and captures checked in and played from claims.
//
// Lock order (docs/lock-order.md): a feed's lock (fanout.Feed) before claimWire.mu. The fanout
// core calls claimWire.snapshotClaim with its lock held; claimWire never
// calls into a feed while holding mu.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/claimcheck/s3store"
	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
)

// claimOpeners are the store kinds beyond dir built into this binary.
var claimOpeners = map[string]claimcheck.StoreOpener{"s3": s3store.Open}

// claimWire connects a claimcheck.Node to the daemon: it checks every
// level2 book in periodically and after every resync, remembers the
// newest announced snapshot claim per stream, and hands claim checks to
// the fanout core and the websocket server. Build one with openClaims.
type claimWire struct {
	node     *claimcheck.Node
	log      *slog.Logger
	interval time.Duration
	minReply int64
	kick     chan struct{} // a resync's book is waiting to be checked in
	stop     context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once

	mu      sync.Mutex // protects the fields below
	latest  map[venue.Stream]claimcheck.Claim
	books   map[venue.Stream]*bookClaims
	started bool
	closed  bool
}

// bookClaims is what claimWire knows of one level2 stream. Guarded by
// claimWire.mu.
type bookClaims struct {
	feed    *fanout.Feed
	added   uint64 // seq of the book last checked in; 0: none
	pending bool   // resynced: check in at the next kick
}

// openClaims opens the claim-check node of cfg; the daemon's tokens
// authorize its routes (see Daemon.authorizeTenant) and its metrics go on
// reg (through opts).
func openClaims(ctx context.Context, cfg config.ClaimCheck, opts claimcheck.Options, log *slog.Logger) (*claimWire, error) {
	w := &claimWire{log: log, interval: time.Duration(cfg.SnapshotIntervalMS) * time.Millisecond,
		minReply: cfg.SnapshotClaimMinBytes, kick: make(chan struct{}, 1),
		latest: map[venue.Stream]claimcheck.Claim{}, books: map[venue.Stream]*bookClaims{}}
	opts.Announce = w.announce
	if opts.OnError == nil {
		opts.OnError = func(err error) { log.Warn("claim check: pack not written", "err", err) }
	}
	opts.Openers, opts.Logger = claimOpeners, log
	n, err := claimcheck.Open(ctx, cfg.Config, opts)
	if err != nil {
		return nil, fmt.Errorf("claim_check: %w", err)
	}
	w.node = n
	return w, nil
}

// announce remembers the newest snapshot claim of each stream. It runs on
// the writer's goroutine, once the pack is written.
func (w *claimWire) announce(cs []claimcheck.Claim) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range cs {
		if c.Kind != claimcheck.KindSnapshot || c.Stream == "" {
			continue
		}
		st := venue.Stream(c.Stream)
		if old, ok := w.latest[st]; !ok || c.Seq >= old.Seq {
			w.latest[st] = c
		}
	}
}

// latestClaim returns the newest announced snapshot claim of st.
func (w *claimWire) latestClaim(st venue.Stream) (claimcheck.Claim, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.latest[st]
	return c, ok
}

// claimCheck is the wire form of a claim check.
func claimCheck(c claimcheck.Claim) map[string]any {
	return map[string]any{"url": c.URL, "stream": c.Stream, "seq": c.Seq}
}

// snapshotClaim is fanout.Options.SnapshotClaim. It is called with a
// feed's lock held.
func (w *claimWire) snapshotClaim(st venue.Stream) (map[string]any, bool) {
	c, ok := w.latestClaim(st)
	if !ok {
		return nil, false
	}
	return claimCheck(c), true
}

// replyClaim is wsapi.Options.SnapshotClaim: the claim check of st's
// newest stored snapshot when it is at least minReply bytes.
func (w *claimWire) replyClaim(st venue.Stream) []byte {
	c, ok := w.latestClaim(st)
	if !ok || c.Size < w.minReply {
		return nil
	}
	b, _ := json.Marshal(struct {
		URL    string `json:"url"`
		Stream string `json:"stream"`
		Seq    uint64 `json:"seq"`
	}{c.URL, c.Stream, c.Seq})
	return b
}

// sink wraps a feed as the venue.Sink its adapter writes to: level2
// snapshots after a stream's first mark a resync, whose book is checked in
// at once (off the adapter's goroutine), and book_resync notices get the
// claim check of the stream's newest stored snapshot.
func (w *claimWire) sink(f *fanout.Feed) venue.Sink { return &claimSink{feed: f, w: w} }

type claimSink struct {
	feed *fanout.Feed
	w    *claimWire
}

func (s *claimSink) Event(ev *venue.Event) {
	st := ev.Stream
	snap := ev.Kind == venue.KindBook && ev.Snapshot && st.Channel() == venue.Level2 && st.Venue() == s.feed.Venue()
	s.feed.Event(ev)
	if snap {
		s.w.sawSnapshot(s.feed, st)
	}
}

func (s *claimSink) Notice(n notice.Notice) {
	if n.Kind == notice.BookResync && n.Stream != "" {
		if c, ok := s.w.snapshotClaim(venue.Stream(n.Stream)); ok {
			d := maps.Clone(n.Details)
			if d == nil {
				d = map[string]any{}
			}
			d["claim"] = c
			n.Details = d
		}
	}
	s.feed.Notice(n)
}

// sawSnapshot records a snapshot:true event of st; every one after the
// first is a resync, and its book is checked in at the next kick.
func (w *claimWire) sawSnapshot(f *fanout.Feed, st venue.Stream) {
	w.mu.Lock()
	b := w.books[st]
	if b == nil {
		w.books[st] = &bookClaims{feed: f}
		w.mu.Unlock()
		return
	}
	b.pending = true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// start starts the goroutine that checks books in: every interval each
// book whose seq moved since its last claim, and on a kick the resynced
// ones. close stops it.
func (w *claimWire) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.closed {
		return
	}
	w.started = true
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(w.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.checkIn(false)
			case <-w.kick:
				w.checkIn(true)
			}
		}
	}()
}

// checkIn queues the books to check in with the writer: the resynced
// ones, or (periodic) every one whose seq moved since its last claim.
func (w *claimWire) checkIn(resyncedOnly bool) {
	type job struct {
		st venue.Stream
		f  *fanout.Feed
	}
	var jobs []job
	w.mu.Lock()
	for st, b := range w.books {
		if b.pending || !resyncedOnly {
			b.pending = false
			jobs = append(jobs, job{st, b.feed})
		}
	}
	w.mu.Unlock()
	for _, j := range jobs {
		ev, ok := j.f.Book(j.st) // a copy, taken under the feed's lock
		if !ok {
			continue
		}
		w.mu.Lock()
		b := w.books[j.st]
		dup := b.added == ev.Seq
		b.added = ev.Seq
		w.mu.Unlock()
		if dup {
			continue // unchanged since its last claim
		}
		at := ev.VenueTime
		if at.IsZero() {
			at = ev.RecvTime
		}
		err := w.node.Writer.Add(claimcheck.Snapshot{Stream: string(j.st), Seq: ev.Seq, Time: at, Recorded: time.Now(),
			ContentType: "application/json", Data: ev.AppendJSON(nil)})
		if err != nil && !errors.Is(err, claimcheck.ErrWriterClosed) {
			w.log.Warn("claim check: snapshot not queued", "stream", j.st, "err", err)
		}
	}
}

// close stops checking books in, then flushes the writer (until ctx is
// done), stops the reader and closes the stores. Only the first call does
// anything.
func (w *claimWire) close(ctx context.Context) error {
	var err error
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		stop := w.stop
		w.mu.Unlock()
		if stop != nil {
			stop()
		}
		w.wg.Wait()
		err = w.node.Close(ctx)
	})
	return err
}

// register mounts the node's routes on mux: the claim gateway (authorized
// per tenant by the daemon's tokens), /v1/claimcheck/stats (a valid token
// without scopes when tokens are configured) and /v1/snapshots (the token's stream scopes
// apply as for /v1/books).
func (w *claimWire) register(mux *http.ServeMux, d *Daemon) {
	inner := http.NewServeMux()
	w.node.Register(inner)
	mux.Handle("GET /v1/claims/{tenant}/{claim_id}", inner)
	mux.HandleFunc("GET /v1/claimcheck/stats", func(rw http.ResponseWriter, r *http.Request) {
		tok, ok := d.auth.Authenticate(r)
		if !ok {
			rw.Header().Set("WWW-Authenticate", `Bearer realm="fanoutd"`)
			api.WriteError(rw, http.StatusUnauthorized, api.CodeUnauthenticated, "a valid bearer token is required")
			return
		}
		if tok.Scoped() {
			// The statistics are the node's, every tenant's and venue's
			// reads together: nothing in them is one scope's alone.
			api.WriteError(rw, http.StatusForbidden, api.CodeUnauthorized, "the claim-check statistics are node-wide: they need a token without venues, streams or tenants")
			return
		}
		inner.ServeHTTP(rw, r)
	})
	scoped := func(rw http.ResponseWriter, r *http.Request) {
		st, err := venue.ParseStream(string(venue.NewStream(r.PathValue("venue"), venue.Level2, r.PathValue("symbol"))))
		if err == nil {
			if tok, ok := d.auth.Authenticate(r); ok && !tok.Allows(st) {
				api.WriteError(rw, http.StatusForbidden, api.CodeUnauthorized, string(st)+": outside this token's scopes")
				return
			}
		}
		inner.ServeHTTP(rw, r) // authenticates, and answers a bad stream
	}
	mux.HandleFunc("GET /v1/snapshots/{venue}/{symbol}", scoped)
	mux.HandleFunc("GET /v1/snapshots/{venue}/{symbol}/latest", scoped)
}

// authorizeTenant is claimcheck.Options.Authorize: 401 without a valid
// token (when tokens are configured), 403 outside the token's tenants.
func (d *Daemon) authorizeTenant(r *http.Request, tenant string) (int, bool) {
	tok, ok := d.auth.Authenticate(r)
	if !ok {
		return http.StatusUnauthorized, false
	}
	if !tok.AllowsTenant(tenant) {
		return http.StatusForbidden, false
	}
	return http.StatusOK, true
}

// authorizeStream is claimcheck.Options.AuthorizeStream: a claim's stream
// (its scope, read from the pack index) must be within the token's
// scopes, as for /v1/books.
func (d *Daemon) authorizeStream(r *http.Request, stream string) (int, bool) {
	tok, ok := d.auth.Authenticate(r)
	if !ok {
		return http.StatusUnauthorized, false
	}
	if !tok.Allows(venue.Stream(stream)) {
		return http.StatusForbidden, false
	}
	return http.StatusOK, true
}

// CheckInSegment checks a closed capture segment in as a claim of the
// daemon's tenant (for the recorder's OnSegment).
// The segment then goes into the history index.
func (d *Daemon) CheckInSegment(ctx context.Context, seg replay.Segment) (claimcheck.Claim, error) {
	c, data, err := checkIn(ctx, d.claims.node.Writer, seg)
	if err != nil {
		return c, err
	}
	if _, err := indexSegment(ctx, d.hist, c, data, seg.Venue); err != nil {
		return c, err
	}
	return c, nil
}

// captureContentType is the content type of capture claims: a gzip
// capture file, its metadata in the gzip header's comment.
const captureContentType = "application/gzip"

// CheckIn writes the capture segment seg as one claim (a pack of
// its own) and returns its claim check once written. A gzip segment is
// stored as it is; a plain one is gzipped with its sidecar metadata in the
// header comment, so the claim alone is a capture replay.Open would read.
func CheckIn(ctx context.Context, w *claimcheck.Writer, seg replay.Segment) (claimcheck.Claim, error) {
	c, _, err := checkIn(ctx, w, seg)
	return c, err
}

// checkIn is CheckIn, also returning the bytes stored.
func checkIn(ctx context.Context, w *claimcheck.Writer, seg replay.Segment) (claimcheck.Claim, []byte, error) {
	data, err := os.ReadFile(seg.Path)
	if err != nil {
		return claimcheck.Claim{}, nil, fmt.Errorf("claim check: segment: %w", err)
	}
	if !isGzip(data) {
		var meta replay.Meta
		if b, err := os.ReadFile(seg.Path + ".meta.json"); err == nil {
			if err := json.Unmarshal(b, &meta); err != nil {
				return claimcheck.Claim{}, nil, fmt.Errorf("claim check: segment: %s.meta.json: %w", seg.Path, err)
			}
		}
		if meta.Venue == "" {
			meta.Venue = seg.Venue
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Comment = replay.MetaComment(meta)
		zw.Write(data)
		if err := zw.Close(); err != nil {
			return claimcheck.Claim{}, nil, err
		}
		data = buf.Bytes()
	}
	c, err := w.CheckIn(ctx, "", claimcheck.PackClaim{Kind: claimcheck.KindCapture, Stream: seg.Venue,
		Time: seg.Start, Recorded: seg.End, ContentType: captureContentType, Data: data})
	if err != nil {
		return claimcheck.Claim{}, nil, fmt.Errorf("claim check: segment %s: %w", seg.Path, err)
	}
	return c, data, nil
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// Redeem reads the claim ref names straight from cfg's stores (no reader)
// and verifies its sha256.
func Redeem(ctx context.Context, cfg config.ClaimCheck, ref string) ([]byte, error) {
	r, err := claimcheck.ParseRef(ref)
	if err != nil {
		return nil, err
	}
	stores, err := claimcheck.OpenStores(ctx, &cfg.Config, claimOpeners)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range stores {
			s.Close()
		}
	}()
	data, _, err := claimcheck.Redeem(ctx, stores, r)
	if err != nil {
		if claimcheck.IsMissing(err) {
			return nil, fmt.Errorf("%s: not found in any configured store: %w", r, err)
		}
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	return data, nil
}

// ClaimSource is a replay source over the capture claim ref (a segment
// checked in with checkInSegment): the claim is read from cfg's stores
// once, sha256-verified, and each Open (every loop) reads it from memory.
func ClaimSource(ctx context.Context, cfg config.ClaimCheck, ref string) (replay.Source, error) {
	data, err := Redeem(ctx, cfg, ref)
	if err != nil {
		return replay.Source{}, fmt.Errorf("replay: claim %w", err)
	}
	name := "claim:" + ref
	return replay.Source{Name: name, Open: func() (*replay.File, error) { return openCaptureBytes(name, data) }}, nil
}

// openCaptureBytes reads a capture held in memory, as replay.Open reads a
// file: gzip with its metadata in the header comment, or plain (no
// metadata).
func openCaptureBytes(name string, data []byte) (*replay.File, error) {
	if !isGzip(data) {
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

// LatestClaim returns the newest snapshot claim announced for st.
func (d *Daemon) LatestClaim(st venue.Stream) (claimcheck.Claim, bool) {
	return d.claims.latestClaim(st)
}
