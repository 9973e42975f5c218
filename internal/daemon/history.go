package daemon

// The history routes: what is recorded (GET /v1/history), a time range of
// it as the daemon's wire form (GET /v1/history/stream) and a book at an
// instant (GET /v1/books/{venue}/{symbol}?at=), all played from the
// segments checked in to the claim check and read through its reader.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/history"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
)

// SegmentDeadline bounds one segment read of a history query: the claim
// check's queue, AIMD limit and retries all happen within it, so a
// throttling store slows a query rather than failing it.
const SegmentDeadline = 30 * time.Second

// HistoryHeader says of a history answer that no recorded segment
// overlaps its range ("empty"): a 200 with an empty body.
const HistoryHeader = "Fanoutd-History"

// indexSegment describes the stored capture data (claim c) and adds it to
// idx. venueName, if set, is the segment's venue whatever its metadata
// says. A capture whose metadata lists no symbols is decoded to find them.
func indexSegment(ctx context.Context, idx *history.Index, c claimcheck.Claim, data []byte, venueName string) (history.Entry, error) {
	ref := c.Tenant + "/" + c.ID
	e, err := history.Describe(ref, data)
	if err != nil {
		return e, fmt.Errorf("history: segment %s: %w", ref, err)
	}
	if venueName != "" {
		e.Venue = venueName
	}
	if e.Venue == "" {
		return e, fmt.Errorf("history: segment %s: no venue (pass --venue)", ref)
	}
	if len(e.Symbols) == 0 {
		if e.Symbols, err = symbolsOf(ctx, e.Venue, ref, data); err != nil {
			return e, fmt.Errorf("history: segment %s: %w", ref, err)
		}
	}
	e.Claim = ref
	if err := idx.Add(ctx, e); err != nil {
		return e, err
	}
	return e, nil
}

// symbolsOf plays a capture through its venue's decoder and returns the
// symbols of the streams it produced.
func symbolsOf(ctx context.Context, venueName, name string, data []byte) ([]string, error) {
	cfg := &config.Config{}
	if err := cfg.ForCaptures(map[string][]string{venueName: nil}); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	sink := symbolSink{mu: &mu, seen: seen}
	_, err := replay.Play(ctx, replay.PlayerOptions{
		NewDecoder: decoderFor(cfg, slog.New(slog.DiscardHandler)),
		Sink:       func(string) (venue.Sink, error) { return sink, nil },
		OnBadLine:  func(error) {},
	}, []replay.Source{{Name: name, Venue: venueName, Open: func() (*replay.File, error) { return history.OpenBytes(name, data) }}})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

type symbolSink struct {
	mu   *sync.Mutex
	seen map[string]bool
}

func (s symbolSink) Event(ev *venue.Event) {
	s.mu.Lock()
	s.seen[ev.Stream.Symbol()] = true
	s.mu.Unlock()
}

func (symbolSink) Notice(notice.Notice) {}

// IndexCapture checks the capture file at path in to the claim check of
// node and adds it to its history index (fanoutd history import).
// venueName, if set, overrides the capture's metadata.
func IndexCapture(ctx context.Context, node *claimcheck.Node, path, venueName string) (history.Entry, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return history.Entry{}, err
	}
	e, err := history.Describe(path, raw)
	if err != nil {
		return history.Entry{}, err
	}
	seg := replay.Segment{Venue: venueName, Path: path, Start: e.First, End: e.Last}
	if seg.Venue == "" {
		if seg.Venue = e.Venue; seg.Venue == "" {
			return history.Entry{}, fmt.Errorf("%s: the capture names no venue (pass --venue)", path)
		}
	}
	c, data, err := checkIn(ctx, node.Writer, seg)
	if err != nil {
		return history.Entry{}, err
	}
	return indexSegment(ctx, history.NewIndex(node.Stores, node.Config.Tenant), c, data, venueName)
}

// fetchSegment reads a segment's stored bytes through the claim check's
// reader: coalesced with every other read of it, cached, under the
// store's AIMD limit. A throttled, unanswered or shed read is tried again
// after a backoff (the reader's limit has meanwhile come down) until
// SegmentDeadline, so a throttling store slows a query instead of failing
// it.
func (d *Daemon) fetchSegment(ctx context.Context, claim string) ([]byte, error) {
	ref, err := claimcheck.ParseRef(claim)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, SegmentDeadline)
	defer cancel()
	r := d.claims.node.Reader
	backoff := 10 * time.Millisecond
	for {
		b, err := readClaim(ctx, r, ref)
		if err == nil {
			d.histm.segments.Inc()
			return b, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		d.histm.retries.Inc()
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff + time.Duration(rand.Int64N(int64(backoff)))):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func readClaim(ctx context.Context, r *claimcheck.Reader, ref claimcheck.Ref) ([]byte, error) {
	loc, err := r.Locate(ctx, ref)
	if err != nil {
		return nil, err
	}
	return r.Bytes(ctx, loc)
}

// retryable: the store throttled or did not answer, or the reader shed
// the read (its queue was full).
func retryable(err error) bool {
	if errors.Is(err, claimcheck.ErrOverloaded) {
		return true
	}
	if errors.Is(err, claimcheck.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, claimcheck.ErrDeadline) {
		return false
	}
	k := claimcheck.Classify(err)
	return k == claimcheck.ErrThrottled || k == claimcheck.ErrUnavailable
}

// historyMetrics are the history routes' metrics.
type historyMetrics struct {
	active   atomic.Int64
	queries  *prometheus.CounterVec
	refused  prometheus.Counter
	retries  prometheus.Counter
	segments prometheus.Counter
}

func newHistoryMetrics(reg prometheus.Registerer) *historyMetrics {
	m := &historyMetrics{
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fanoutd_history_queries_total",
			Help: "History queries answered, by route (stream, book) and status code."}, []string{"route", "code"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "fanoutd_history_refused_total",
			Help: "History queries refused 503 overloaded because history.max_queries were running."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "fanoutd_history_segment_retries_total",
			Help: "Segment reads of history queries tried again after the store throttled or did not answer."}),
		segments: prometheus.NewCounter(prometheus.CounterOpts{Name: "fanoutd_history_segments_read_total",
			Help: "Segments history queries read through the claim-check reader (coalesced and cached reads included)."}),
	}
	reg.MustRegister(m.queries, m.refused, m.retries, m.segments,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fanoutd_history_queries_active",
			Help: "History queries being answered."}, func() float64 { return float64(m.active.Load()) }))
	return m
}

// admitHistory counts a query against history.max_queries; ok false:
// answer 503 overloaded and do not call release.
func (d *Daemon) admitHistory() (release func(), ok bool) {
	max := int64(d.cfg.History.MaxQueries)
	if max <= 0 {
		max = 256
	}
	if d.histm.active.Add(1) > max {
		d.histm.active.Add(-1)
		d.histm.refused.Inc()
		return nil, false
	}
	return func() { d.histm.active.Add(-1) }, true
}

// admitQuery admits a query that reads segments: under history.max_queries
// and holding one of the claim check's max_concurrent_reads. ok false: the
// 503 is written; otherwise call done when the query ends.
func (d *Daemon) admitQuery(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	release, ok := d.admitHistory()
	if !ok {
		claimcheck.WriteError(w, http.StatusServiceUnavailable, api.CodeOverloaded, "history: history.max_queries queries are running; retry", 1)
		return nil, false
	}
	gate, ok := d.claims.node.Reader.Admit(r.Context())
	if !ok {
		release()
		claimcheck.WriteError(w, http.StatusServiceUnavailable, api.CodeOverloaded, "history: the claim check's max_concurrent_reads are running; retry", 1)
		return nil, false
	}
	return func() { gate(); release() }, true
}

// historyRoutes mounts the history routes on mux.
func (d *Daemon) historyRoutes(mux *http.ServeMux) {
	d.tardisRoutes(mux)
	mux.HandleFunc("GET /v1/history", d.authed(d.historyList))
	mux.HandleFunc("GET /v1/history/stream", d.authed(func(w http.ResponseWriter, r *http.Request, tok *api.Token) {
		sw := &statusWriter{ResponseWriter: w}
		d.historyStream(sw, r, tok)
		d.histm.queries.WithLabelValues("stream", strconv.Itoa(sw.code())).Inc()
	}))
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// Unwrap lets http.ResponseController reach the connection (Flush).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// historyList answers what is recorded per venue and symbol, within the
// token's scopes.
func (d *Daemon) historyList(w http.ResponseWriter, r *http.Request, tok *api.Token) {
	es, err := d.hist.Entries(r.Context())
	if err != nil {
		d.historyFail(w, err)
		return
	}
	out := []history.Range{}
	for _, rg := range history.Ranges(es) {
		if allowsAnyChannel(tok, rg.Venue, rg.Symbol) {
			out = append(out, rg)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"ranges": out})
}

func allowsAnyChannel(tok *api.Token, v, sym string) bool {
	for _, ch := range []venue.Channel{venue.Level2, venue.Trades, venue.Ticker} {
		if tok.Allows(venue.NewStream(v, ch, sym)) {
			return true
		}
	}
	return false
}

func (d *Daemon) historyFail(w http.ResponseWriter, err error) {
	status, code, ra := claimcheck.ErrorStatus(err)
	if code == api.CodeStoreError || code == api.CodeStoreForbidden || code == api.CodeNotFound {
		d.log.Warn("history: store read failed", "err", err)
	}
	claimcheck.WriteError(w, status, code, "history: "+historyMessage(code), ra)
}

func historyMessage(code api.Code) string {
	switch code {
	case api.CodeOverloaded:
		return "too many reads in flight; retry"
	case api.CodeDeadline:
		return "a segment read did not answer within its deadline"
	case api.CodeStoreUnavailable:
		return "the object store is unavailable or throttling; retry"
	case api.CodeNotFound:
		return "an indexed segment is missing from the store"
	case api.CodeStoreForbidden:
		return "the object store refused access"
	}
	return "the object store failed"
}

// historyQuery is a parsed, checked history request.
type historyQuery struct {
	patterns []string
	from, to time.Time
	want     map[string]map[string]bool // venue → symbols (nil: all)
	entries  []history.Entry
	ws       bool    // the websocket form
	speed    float64 // its pace: 1, N times faster, 0 as fast as it goes
}

// queryError is a refused history request.
type queryError struct {
	status int
	code   api.Code
	msg    string
}

func (e *queryError) Error() string { return e.msg }

func badQuery(status int, code api.Code, format string, args ...any) *queryError {
	return &queryError{status, code, fmt.Sprintf(format, args...)}
}

// parseRFC3339 takes RFC 3339 with or without fractional seconds.
func parseRFC3339(key, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "%s is required (RFC 3339, e.g. 2026-11-29T12:00:00Z)", key)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "%s=%q is not an RFC 3339 time (e.g. 2026-11-29T12:00:00Z)", key, s)
	}
	return t, nil
}

// maxRange is history.max_range (its default when the configuration was
// not resolved from a file).
func (d *Daemon) maxRange() time.Duration {
	if m := d.cfg.History.MaxRange; m > 0 {
		return m
	}
	return 24 * time.Hour
}

// checkRange refuses from after to and a range past history.max_range.
func (d *Daemon) checkRange(from, to time.Time) error {
	if from.After(to) {
		return badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "from (%s) is after to (%s)", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	if m := d.maxRange(); to.Sub(from) > m {
		return badQuery(http.StatusBadRequest, api.CodeRangeTooLong, "the range is %s, past history.max_range (%s)", to.Sub(from), m)
	}
	return nil
}

// resolve parses the streams of a history request and checks each
// against the index and the token: a name's venue and symbol must be
// recorded, and every recorded stream a name or pattern matches must be
// within the token's scopes.
func (d *Daemon) resolve(ctx context.Context, tok *api.Token, items []string, from, to time.Time) (*historyQuery, error) {
	if len(items) == 0 {
		return nil, badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "streams is required (names or patterns, comma-separated)")
	}
	if len(items) > 1024 {
		return nil, badQuery(http.StatusBadRequest, api.CodeInvalidQuery, "%d streams: at most 1024", len(items))
	}
	es, err := d.hist.Entries(ctx)
	if err != nil {
		return nil, err
	}
	symbols := map[string]map[string]bool{} // recorded: venue → symbols
	for _, e := range es {
		if symbols[e.Venue] == nil {
			symbols[e.Venue] = map[string]bool{}
		}
		for _, s := range e.Symbols {
			symbols[e.Venue][s] = true
		}
	}
	q := &historyQuery{from: from, to: to, want: map[string]map[string]bool{}, entries: es}
	for _, it := range items {
		parts := strings.SplitN(it, ":", 3)
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return nil, badQuery(http.StatusBadRequest, api.CodeInvalidStream, "%q is not venue:channel:symbol", it)
		}
		vp, cp, sp := parts[0], parts[1], parts[2]
		if !strings.Contains(cp, "*") && !venue.Channel(cp).Known() {
			return nil, badQuery(http.StatusBadRequest, api.CodeInvalidStream, "%q: unknown channel %q", it, cp)
		}
		if !strings.Contains(vp, "*") && symbols[vp] == nil {
			return nil, badQuery(http.StatusNotFound, api.CodeUnknownStream, "%q: venue %q has no recorded history", it, vp)
		}
		if !strings.Contains(vp, "*") && !strings.Contains(sp, "*") && !symbols[vp][sp] {
			return nil, badQuery(http.StatusNotFound, api.CodeUnknownSymbol, "%q: %s has no recorded history of %q", it, vp, sp)
		}
		channels := []venue.Channel{venue.Level2, venue.Trades, venue.Ticker}
		if !strings.Contains(cp, "*") {
			channels = []venue.Channel{venue.Channel(cp)}
		}
		for v, syms := range symbols {
			if !api.MatchGlob(vp, v) {
				continue
			}
			for s := range syms {
				if !api.MatchGlob(sp, s) {
					continue
				}
				matched := false
				for _, ch := range channels {
					if !api.MatchGlob(cp, string(ch)) {
						continue
					}
					matched = true
					if st := venue.NewStream(v, ch, s); !tok.Allows(st) {
						return nil, badQuery(http.StatusForbidden, api.CodeUnauthorized, "%s: outside this token's scopes", st)
					}
				}
				if matched {
					if q.want[v] == nil {
						q.want[v] = map[string]bool{}
					}
					q.want[v][s] = true
				}
			}
		}
		q.patterns = append(q.patterns, it)
	}
	return q, nil
}

// streamItems splits the streams parameters (repeated, comma-separated).
func streamItems(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func writeQueryError(w http.ResponseWriter, err error) bool {
	var qe *queryError
	if errors.As(err, &qe) {
		api.WriteError(w, qe.status, qe.code, qe.msg)
		return true
	}
	return false
}

// historyStream answers GET /v1/history/stream: the events and notices of
// the streams within [from, to), as replay --export writes them, played
// from each venue connection's segments that overlap the range.
func (d *Daemon) historyStream(w http.ResponseWriter, r *http.Request, tok *api.Token) {
	qv := r.URL.Query()
	from, err := parseRFC3339("from", qv.Get("from"))
	if err == nil {
		var to time.Time
		if to, err = parseRFC3339("to", qv.Get("to")); err == nil {
			if err = d.checkRange(from, to); err == nil {
				var q *historyQuery
				var speed float64
				if speed, err = parseSpeed(qv.Get("speed")); err == nil {
					if q, err = d.resolve(r.Context(), tok, streamItems(qv["streams"]), from, to); err == nil {
						q.speed, q.ws = speed, isWebsocket(r)
						d.playRange(w, r, q)
						return
					}
				}
			}
		}
	}
	if !writeQueryError(w, err) {
		d.historyFail(w, err)
	}
}

// playRange plays q's segments into w, or into a websocket (q.ws). The
// first segment of every connection is read before the answer starts, so
// a store that fails gets a status of its own; later segments are read as
// the answer streams, and a failure then ends the answer with an error
// line (the websocket: a close 1011 naming the error's code).
func (d *Daemon) playRange(w http.ResponseWriter, r *http.Request, q *historyQuery) {
	chains := history.Chains(q.entries, q.want, q.from, q.to)
	h := w.Header()
	if !q.ws {
		h.Set("Content-Type", "application/x-ndjson")
	}
	h.Set("Cache-Control", "no-store")
	if len(chains) == 0 || !q.from.Before(q.to) {
		h.Set(HistoryHeader, "empty")
		if q.ws {
			if c, err := websocket.Accept(w, r, nil); err == nil {
				c.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	done, ok := d.admitQuery(w, r)
	if !ok {
		return
	}
	defer done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	fetch, err := d.prefetch(ctx, chains)
	if err != nil {
		d.historyFail(w, err)
		return
	}
	found := map[string][]string{}
	for _, c := range chains {
		found[c[0].Venue] = nil
	}
	cfg := *d.cfg
	if err := cfg.ForCaptures(found); err != nil {
		api.WriteError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
	h.Set(HistoryHeader, "segments="+strconv.Itoa(countSegments(chains)))
	var out errWriter
	var wc *websocket.Conn
	if q.ws {
		if wc, err = websocket.Accept(w, r, nil); err != nil {
			return // Accept answered the request
		}
		defer wc.CloseNow()
		out = &wsMessages{ctx: ctx, c: wc, cancel: cancel}
	} else {
		fw := &flushWriter{w: w, rc: http.NewResponseController(w), cancel: cancel}
		w.WriteHeader(http.StatusOK)
		fw.rc.Flush() // the status and headers leave now, before the range plays
		out = fw
	}
	sink := replay.NewExportSink(out)
	sink.Window(q.from, q.to)
	srcs := make([]replay.Source, len(chains))
	for i, c := range chains {
		srcs[i] = history.Source(ctx, c, flushBefore(fetch, sink))
	}
	var wrap func(venue.Sink) venue.Sink
	if q.ws && q.speed > 0 {
		wrap = func(next venue.Sink) venue.Sink {
			return &pacer{ctx: ctx, next: next, flush: func() { sink.Flush() }, from: q.from, speed: q.speed, start: time.Now()}
		}
	}
	// One connection decodes on the answer's goroutine: a query's CPU per
	// event is what bounds a node serving many.
	_, _, err = exportTo(ctx, &cfg, srcs, sink, d.log, q.patterns, len(srcs) > 1 && wrap == nil, wrap)
	failed := err != nil && out.failed() == nil && ctx.Err() == nil
	var code api.Code
	msg := ""
	if failed {
		var status int
		status, code, _ = claimcheck.ErrorStatus(err)
		msg = err.Error()
		if status != http.StatusNotFound && code != api.CodeStoreError {
			msg = historyMessage(code)
		}
		d.log.Warn("history: stream ended early", "err", err)
	}
	switch {
	case wc != nil && failed:
		wc.Close(websocket.StatusInternalError, string(code))
	case wc != nil:
		wc.Close(websocket.StatusNormalClosure, "")
	case failed:
		w.Write(api.AppendError(nil, code, "history: "+msg))
	}
}

func countSegments(chains [][]history.Entry) int {
	n := 0
	for _, c := range chains {
		n += len(c)
	}
	return n
}

// prefetch reads the first segment of every chain, concurrently (so an
// answer starts within one segment read), and returns the fetch that
// hands each out once, reading every other segment through the claim
// check's reader.
func (d *Daemon) prefetch(ctx context.Context, chains [][]history.Entry) (history.Fetch, error) {
	var mu sync.Mutex
	first := map[string][]byte{}
	errs := make([]error, len(chains))
	var wg sync.WaitGroup
	for i, c := range chains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := d.fetchSegment(ctx, c[0].Claim)
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			first[c[0].Claim] = b
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, claim string) ([]byte, error) {
		mu.Lock()
		b, ok := first[claim]
		delete(first, claim)
		mu.Unlock()
		if ok {
			return b, nil
		}
		return d.fetchSegment(ctx, claim)
	}, nil
}

// flushBefore returns fetch that first writes out what sink holds, so
// what the segments before played leaves before a store read that may
// take long.
func flushBefore(fetch history.Fetch, sink *replay.ExportSink) history.Fetch {
	return func(ctx context.Context, claim string) ([]byte, error) {
		sink.Flush()
		return fetch(ctx, claim)
	}
}

// flushWriter writes an answer through to the client as it is written;
// a write error (the client left) cancels the query.
type flushWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	cancel context.CancelFunc
	err    error
}

func (f *flushWriter) failed() error { return f.err }

func (f *flushWriter) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	if err != nil {
		f.err = err
		f.cancel()
	}
	return n, err
}

// maxBookSegments bounds how many segments a book at an instant plays
// back from: past it, the book is no_book.
const maxBookSegments = 8

// bookAt answers GET /v1/books/{venue}/{symbol}?at=: the book of st as the
// recorded frames left it at the instant, rebuilt by playing the segment
// of st's connection that holds the instant (and, until one of them holds
// a snapshot, the ones before it) up to the instant. The seq is counted
// from the first segment played, as a history stream from that segment
// counts it.
func (d *Daemon) bookAt(rw http.ResponseWriter, r *http.Request, st venue.Stream, depth int, atStr string) {
	w := &statusWriter{ResponseWriter: rw}
	defer func() { d.histm.queries.WithLabelValues("book", strconv.Itoa(w.code())).Inc() }()
	at, err := parseRFC3339("at", atStr)
	if err != nil {
		writeQueryError(w, err)
		return
	}
	es, err := d.hist.Entries(r.Context())
	if err != nil {
		d.historyFail(w, err)
		return
	}
	v, sym := st.Venue(), st.Symbol()
	var cands []history.Entry // st's segments that start by the instant, newest last
	knownVenue, knownSymbol := false, false
	for _, e := range es {
		if e.Venue != v {
			continue
		}
		knownVenue = true
		if !slices.Contains(e.Symbols, sym) {
			continue
		}
		knownSymbol = true
		if !e.First.After(at) {
			cands = append(cands, e)
		}
	}
	switch {
	case !knownVenue:
		api.WriteError(w, http.StatusNotFound, api.CodeUnknownStream, "venue "+v+" has no recorded history")
		return
	case !knownSymbol:
		api.WriteError(w, http.StatusNotFound, api.CodeUnknownSymbol, v+" has no recorded history of "+sym)
		return
	case len(cands) == 0:
		api.WriteError(w, http.StatusNotFound, api.CodeNoBook, string(st)+": nothing recorded before "+at.Format(time.RFC3339Nano))
		return
	}
	slices.SortStableFunc(cands, func(a, b history.Entry) int { return a.First.Compare(b.First) })
	conn := cands[len(cands)-1].Connection
	var chain []history.Entry
	for _, e := range cands {
		if e.Connection == conn {
			chain = append(chain, e)
		}
	}
	done, ok := d.admitQuery(w, r)
	if !ok {
		return
	}
	defer done()
	for n := 1; n <= min(len(chain), maxBookSegments); n++ {
		bs, err := d.playBook(r.Context(), st, at, chain[len(chain)-n:])
		if err != nil {
			d.historyFail(w, err)
			return
		}
		if !bs.ok {
			continue
		}
		bids, asks := bs.book.Top(nil, venue.Bid, 0), bs.book.Top(nil, venue.Ask, 0)
		view := bookView{Stream: st, Seq: bs.seq, VenueSeq: bs.last.VenueSeq, RecvTime: bs.last.RecvTime.UTC(),
			Bids: levels(bids, depth), Asks: levels(asks, depth)}
		if !bs.last.VenueTime.IsZero() {
			t := bs.last.VenueTime.UTC()
			view.VenueTime = &t
		}
		writeJSON(w, http.StatusOK, view)
		return
	}
	api.WriteError(w, http.StatusNotFound, api.CodeNoBook, string(st)+": no book snapshot recorded before "+at.Format(time.RFC3339Nano))
}

// bookSink rebuilds one stream's book up to an instant.
type bookSink struct {
	st     venue.Stream
	at     time.Time
	stop   context.CancelFunc
	book   venue.Book
	seq    uint64
	last   venue.Event // the last event applied, without its levels
	ok     bool        // the book holds a snapshot and what followed it
	passed bool        // an event past the instant arrived
}

func (b *bookSink) Event(ev *venue.Event) {
	if b.passed || ev.Stream != b.st {
		return
	}
	if ev.RecvTime.After(b.at) {
		b.passed = true
		b.stop()
		return
	}
	b.seq++
	if ev.Kind != venue.KindBook {
		return
	}
	if ev.Snapshot {
		b.ok = true
	}
	b.book.Apply(ev)
	b.last = venue.Event{Seq: b.seq, VenueSeq: ev.VenueSeq, RecvTime: ev.RecvTime, VenueTime: ev.VenueTime}
}

// Notice: a link drop or a resync leaves no valid book until the next
// snapshot.
func (b *bookSink) Notice(n notice.Notice) {
	if b.passed || n.At.After(b.at) {
		return
	}
	if (n.Kind == notice.LinkDown && n.Venue == b.st.Venue()) || (n.Kind == notice.BookResync && n.Stream == string(b.st)) {
		b.ok = false
		b.book.Reset()
	}
}

// playBook plays chain up to at into a bookSink.
func (d *Daemon) playBook(ctx context.Context, st venue.Stream, at time.Time, chain []history.Entry) (*bookSink, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bs := &bookSink{st: st, at: at, stop: cancel}
	cfg := *d.cfg
	if err := cfg.ForCaptures(map[string][]string{st.Venue(): nil}); err != nil {
		return nil, err
	}
	_, err := replay.Play(ctx, replay.PlayerOptions{
		NewDecoder: decoderFor(&cfg, d.log),
		Sink:       func(string) (venue.Sink, error) { return bs, nil },
	}, []replay.Source{history.Source(ctx, chain, d.fetchSegment)})
	if err != nil && !bs.passed {
		return nil, err
	}
	return bs, nil
}

// OpenClaimNode opens the claim-check node of cfg alone (no daemon), for
// commands that check captures in. Close it to flush its writer.
func OpenClaimNode(ctx context.Context, cfg config.ClaimCheck) (*claimcheck.Node, error) {
	n, err := claimcheck.Open(ctx, cfg.Config, claimcheck.Options{Openers: claimOpeners})
	if err != nil {
		return nil, fmt.Errorf("claim_check: %w", err)
	}
	return n, nil
}
