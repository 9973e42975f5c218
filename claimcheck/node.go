package claimcheck

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/prometheus/client_golang/prometheus"
)

// Options are what the daemon passes Open besides the configuration.
type Options struct {
	// Registerer receives the reader's metrics. nil registers none.
	Registerer prometheus.Registerer
	// Authorize checks a request's token against a tenant (the daemon
	// owns tokens). nil allows every request.
	Authorize AuthorizeFunc
	// AuthorizeStream checks a request's token against the stream of the
	// claim it reads (Gateway.AuthorizeStream). nil allows every stream.
	AuthorizeStream AuthorizeStreamFunc
	// Announce receives the claim checks of every written pack.
	Announce func([]Claim)
	// OnError receives pack write failures.
	OnError func(error)
	// Openers opens store kinds other than dir: {"s3": s3store.Open}.
	Openers map[string]StoreOpener
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Node is a claim-check node: stores, writer, reader and the HTTP routes.
type Node struct {
	Config  Config
	Stores  []Store
	Reader  *Reader
	Writer  *Writer
	Gateway *Gateway
}

// Open validates cfg, opens its stores and starts a writer and a reader.
// Close it to flush the writer and release everything.
func Open(ctx context.Context, cfg Config, opts Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	stores, err := OpenStores(ctx, &cfg, opts.Openers)
	if err != nil {
		return nil, err
	}
	closeStores := func() {
		for _, s := range stores {
			s.Close()
		}
	}
	rc := cfg.ReaderConfig()
	rc.Registerer = opts.Registerer
	r, err := NewReader(rc, stores)
	if err != nil {
		closeStores()
		return nil, err
	}
	wc := cfg.WriterConfig()
	wc.Announce, wc.OnError = opts.Announce, opts.OnError
	w, err := NewWriter(wc, stores)
	if err != nil {
		r.Close()
		closeStores()
		return nil, err
	}
	return &Node{Config: cfg, Stores: stores, Reader: r, Writer: w,
		Gateway: &Gateway{Reader: r, Deadline: ms(cfg.ReadDeadlineMS), Authorize: opts.Authorize,
			AuthorizeStream: opts.AuthorizeStream, Logger: opts.Logger}}, nil
}

// Register mounts the node's routes on mux:
//
//	GET|HEAD /v1/claims/{tenant}/{claim_id}
//	GET      /v1/claimcheck/stats
//	GET      /v1/snapshots/{venue}/{symbol}         ?from=&to=&limit=
//	GET|HEAD /v1/snapshots/{venue}/{symbol}/latest
func (n *Node) Register(mux *http.ServeMux) {
	mux.Handle("GET /v1/claims/{tenant}/{claim_id}", n.Gateway)
	mux.Handle("GET /v1/claimcheck/stats", n.Reader.StatsHandler())
	sh := &SnapshotHandler{Gateway: n.Gateway, Writer: n.Writer, Tenant: n.Config.Tenant}
	mux.HandleFunc("GET /v1/snapshots/{venue}/{symbol}", sh.List)
	mux.HandleFunc("GET /v1/snapshots/{venue}/{symbol}/latest", sh.Latest)
}

// Close flushes the writer (until ctx is done), stops the reader and
// closes the stores, in that order.
func (n *Node) Close(ctx context.Context) error {
	err := n.Writer.Close(ctx)
	n.Reader.Close()
	for _, s := range n.Stores {
		err = errors.Join(err, s.Close())
	}
	return err
}

// SnapshotHandler serves the /v1/snapshots routes from a Writer's recent
// claims, reading bytes through the Gateway's reader.
type SnapshotHandler struct {
	Gateway *Gateway
	Writer  *Writer
	Tenant  string
}

func (h *SnapshotHandler) stream(w http.ResponseWriter, r *http.Request) (string, bool) {
	if h.Gateway.Authorize != nil {
		if status, ok := h.Gateway.Authorize(r, h.Tenant); !ok {
			authError(w, status)
			return "", false
		}
	}
	v, sym := r.PathValue("venue"), r.PathValue("symbol")
	s, err := venue.ParseStream(string(venue.NewStream(v, venue.Level2, sym)))
	if err != nil {
		WriteError(w, http.StatusBadRequest, api.CodeInvalidStream, "not a level2 stream of a venue", 0)
		return "", false
	}
	if !h.Gateway.authorizeStream(w, r, string(s)) {
		return "", false
	}
	return string(s), true
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(n).UTC(), nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// List answers the stream's recent snapshot claims with Time in
// [from, to] (RFC 3339 or Unix milliseconds; open when absent), newest
// last, at most limit (default 100, newest kept):
//
//	{"stream":"coinbase:level2:BTC-USD","claims":[Claim…]}
func (h *SnapshotHandler) List(w http.ResponseWriter, r *http.Request) {
	s, ok := h.stream(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	from, err1 := parseTime(q.Get("from"))
	to, err2 := parseTime(q.Get("to"))
	limit := 100
	var err3 error
	if l := q.Get("limit"); l != "" {
		limit, err3 = strconv.Atoi(l)
		if err3 == nil && limit < 1 {
			err3 = errors.New("limit < 1")
		}
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		WriteError(w, http.StatusBadRequest, api.CodeInvalidQuery, "from and to must be RFC 3339 times, limit a positive integer", 0)
		return
	}
	cs := h.Writer.Recent(s, from, to)
	if len(cs) > limit {
		cs = cs[len(cs)-limit:]
	}
	if cs == nil {
		cs = []Claim{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(struct {
		Stream string  `json:"stream"`
		Claims []Claim `json:"claims"`
	}{s, cs})
}

// Latest answers the newest snapshot's bytes as the claim gateway would,
// with X-Claim-Id, X-Claim-Url, X-Claim-Stream and X-Claim-Seq headers;
// 404 not_found when the stream has none yet.
func (h *SnapshotHandler) Latest(w http.ResponseWriter, r *http.Request) {
	s, ok := h.stream(w, r)
	if !ok {
		return
	}
	c, ok := h.Writer.Latest(s)
	if !ok {
		WriteError(w, http.StatusNotFound, api.CodeNotFound, "no such claim", 0)
		return
	}
	ref, err := ParseRef(c.URL)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, api.CodeInternal, "internal error", 0)
		return
	}
	g := h.Gateway
	release, ok := g.Reader.Admit(r.Context())
	if !ok {
		WriteError(w, http.StatusServiceUnavailable, api.CodeOverloaded, "too many reads in flight; retry", 1)
		return
	}
	defer release()
	d := g.Deadline
	if d <= 0 {
		d = g.Reader.cfg.Deadline
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	defer cancel()
	loc, err := g.Reader.Locate(ctx, ref)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	w.Header().Set("X-Claim-Id", c.ID)
	w.Header().Set("X-Claim-Url", c.URL)
	w.Header().Set("X-Claim-Stream", c.Stream)
	w.Header().Set("X-Claim-Seq", strconv.FormatUint(c.Seq, 10))
	w.Header().Set("Content-Location", c.URL)
	serveClaim(w, r, loc.Entry, "private, no-cache", func(first, length int64, whole bool) ([]byte, error) {
		if whole {
			return g.Reader.Bytes(ctx, loc)
		}
		return g.Reader.Range(ctx, loc, first, length)
	}, g.fail)
}
