package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/internal/cluster"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/history"
	"github.com/fanoutd/fanoutd/internal/ui"
	"github.com/fanoutd/fanoutd/internal/wsapi"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// Version is the daemon's version, in captures and `fanoutd version`.
const Version = "0.2.0-dev"

// Options configure a Daemon. Only Config is required.
type Options struct {
	// Config is the resolved configuration (package config). Required.
	Config *config.Config
	// Logger receives the daemon's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Venues are the adapters the daemon may build, looked up by the
	// configured venues' names; a configured venue without one is skipped
	// with a warning. Defaults to venues.All.
	Venues []venues.Venue
	// OnSubscribe, if set, is called after every subscription a client
	// makes (replay's --wait counts them).
	OnSubscribe func(venue.Stream)
	// OnSegment, if set, is called with every capture segment the
	// recorder closed, fsynced and renamed (record.enabled).
	OnSegment func(replay.Segment)
	// OnCheckIn, if set, is called with every capture segment checked in
	// to the claim check (record.check_in) and its claim, before OnSegment.
	OnCheckIn func(replay.Segment, claimcheck.Claim)
	// Speed is a paced replay's --speed: derived streams' intervals close
	// by the capture's clock, that many times faster. 0 means 1.
	Speed float64
}

// Daemon is fanoutd: the venues' adapters feeding the fanout hub, the
// websocket server and the HTTP routes. Build one with New, run it with
// Run.
type Daemon struct {
	o      Options
	cfg    *config.Config
	log    *slog.Logger
	hub    *fanout.Hub
	reg    *prometheus.Registry
	ws     *wsapi.Server
	auth   *api.Auth
	hosts  *api.Hosts // without tokens, the Host names answered (front.go); nil with tokens
	http   *http.Server
	venues []*venueRun
	byName map[string]*venueRun
	claims *claimWire     // the claim-check node (claims.go)
	hist   *history.Index // what is recorded (history.go)
	histm  *historyMetrics
	conns  *connGuard // caps idle connections without a token (conns.go)

	released *prometheus.CounterVec // symbols unsubscribed at their venue by the sweep
	reloads  *prometheus.CounterVec // configuration reloads, by result (reload.go)
	reloadMu sync.Mutex             // one Reload at a time
	stopped  chan struct{}
	draining atomic.Bool // POST /drainz: unready, new websockets refused (drain.go)

	shutdownOnce sync.Once
	shutdownErr  error

	rec *replay.Recorder // set by Run when record.enabled (record.go)

	bus *busWire // cluster.role ingest or edge (cluster.go); nil for all
}

// venueRun is one enabled venue: its config, feed and adapter.
type venueRun struct {
	cfg     config.Venue
	feed    *fanout.Feed
	adapter venue.Adapter

	mu      sync.Mutex            // protects symbols
	symbols map[string]*symbolUse // subscribed at the venue
}

// symbolUse is one symbol subscribed at a venue.
type symbolUse struct {
	pinned    bool      // configured (venues.<v>.symbols): never unsubscribed
	idleSince time.Time // when the sweep first found no subscriber; zero while wanted
	edgeAt    time.Time // an ingest's: when an edge last asked for it or renewed it
}

// New builds the daemon: one feed and one adapter per enabled venue of
// o.Config.
func New(o Options) (*Daemon, error) {
	if o.Config == nil {
		return nil, errors.New("daemon: Options.Config is required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Venues == nil {
		o.Venues = venues.All
	}
	cfg, log := o.Config, o.Logger
	if err := checkOptions(cfg); err != nil {
		return nil, err
	}
	d := &Daemon{o: o, cfg: cfg, log: log, hub: fanout.NewHub(subscriber.NewRegistry()), reg: prometheus.NewRegistry(),
		byName: map[string]*venueRun{}, stopped: make(chan struct{})}
	d.hub.SetDerivedLimits(derivedLimits(cfg))
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var err error
	if d.claims, err = openClaims(context.Background(), cfg.ClaimCheck, claimcheck.Options{Registerer: d.reg, Authorize: d.authorizeTenant, AuthorizeStream: d.authorizeStream}, log); err != nil {
		return nil, err
	}
	d.hist = history.NewIndex(d.claims.node.Stores, d.claims.node.Config.Tenant)
	d.histm = newHistoryMetrics(d.reg)
	built := false
	defer func() {
		if !built {
			d.claims.close(context.Background())
		}
	}()
	d.bus = newBusWire(cfg.Cluster, cfg.Websocket.NamedTTL, log)
	if d.bus != nil && d.bus.ingest != nil {
		d.bus.ingest.OnWant = d.edgeWants // edges ask for their subscribers' symbols
		d.bus.ingest.Holds = d.holds
		d.bus.ingest.Link = d.venueLink // the edges' coverage and readiness follow the venue links
	}
	recovery := recoveryOptions(cfg)
	d.hub.SetRecovery(recovery)
	if d.bus != nil && d.bus.edge != nil {
		d.bus.edge.RecoverGaps = recovery.On() // a bus gap is recovered from the ingest's window
	}
	for _, vc := range cfg.Venues {
		i := slices.IndexFunc(o.Venues, func(v venues.Venue) bool { return v.Name == vc.Name })
		if i < 0 {
			log.Warn("venue not built into this binary; skipped", "venue", vc.Name)
			continue
		}
		fo := fanout.Options{Venue: vc.Name, MaxQueueLen: vc.MaxQueueLen, MaxQueueBytes: vc.MaxQueueBytes,
			SnapshotClaim: d.claims.snapshotClaim, Speed: o.Speed}
		d.bus.feedOptions(&fo)
		f, err := d.hub.AddFeed(fo)
		if err != nil {
			return nil, err
		}
		var a venue.Adapter
		if d.bus != nil && d.bus.edge != nil {
			a = d.bus.edge.Venue(f) // no venue link: the bus is the link
		} else if a, err = o.Venues[i].New(venue.Config{WSURL: vc.WSURL, RESTURL: vc.RESTURL, Symbols: vc.Symbols, Channels: vc.Channels,
			Depth: vc.Depth, Sink: d.bus.sink(vc.Name, d.claims.sink(f)), Logger: log, Recorder: d.recorder()}); err != nil {
			return nil, fmt.Errorf("venues.%s: %w", vc.Name, err)
		}
		vr := &venueRun{cfg: vc, feed: f, adapter: a, symbols: map[string]*symbolUse{}}
		for _, s := range vc.Symbols {
			vr.symbols[s] = &symbolUse{pinned: true}
		}
		d.venues = append(d.venues, vr)
		d.byName[vc.Name] = vr
	}
	d.auth = api.NewAuthWithJWT(cfg.Tokens, cfg.JWT)
	if !d.auth.Enabled() {
		d.hosts = api.NewHosts(cfg.Listen)
	}
	wo := wsOptions(cfg)
	wo.Hub, wo.Auth, wo.Hosts, wo.Logger = d.hub, d.auth, d.hosts, log
	wo.Metrics = wsapi.NewMetrics(d.reg)
	d.reg.MustRegister(fanout.NewCollector(d.hub), fanout.NewRecoveryCollector(d.hub), newVenueCollector(d.venues))
	wo.Check, wo.Want = d.checkLocal, d.bus.want
	wo.OnSubscribe = d.onSubscribe
	wo.SnapshotClaim = d.claims.replyClaim
	wo.Names, wo.Node = d.bus.wsNames(), d.bus.instance(cfg.Cluster.Node)
	wo.Backfill = d.bus.backfill()
	d.ws = wsapi.NewServer(wo)
	d.released = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fanoutd_symbols_unsubscribed_total",
		Help: "Symbols unsubscribed at their venue because no subscriber held them for unsubscribe_after."}, []string{"venue"})
	d.reg.MustRegister(d.released)
	d.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fanoutd_config_reloads_total",
		Help: "Configuration reloads (SIGHUP), by result: applied, or refused (the file did not load; nothing changed)."}, []string{"result"})
	d.reloads.WithLabelValues("applied")
	d.reloads.WithLabelValues("refused")
	d.reg.MustRegister(d.reloads)
	for _, vr := range d.venues {
		d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fanoutd_venue_symbols",
			Help: "Symbols subscribed at the venue now.", ConstLabels: prometheus.Labels{"venue": vr.cfg.Name}}, vr.symbolCount))
	}
	if d.bus != nil {
		d.reg.MustRegister(leaderCollector{d}, busCollector{d.bus})
	}
	d.conns = newConnGuard(cfg.HTTP.MaxAnonymousConnections, d.reg)
	d.http = &http.Server{Handler: d.conns.vouching(d.auth, d.routes()),
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
		ConnContext: d.conns.connContext, ConnState: d.conns.connState,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	built = true
	return d, nil
}

// checkLocal is wsapi.Options.Check: it accepts the streams of the
// configured venues and channels, for a symbol the venue already
// subscribes, or a new one the venue's instrument list has (where the
// adapter knows it) while the venue subscribes fewer than max_symbols. An
// edge then asks its ingest (busWire.want, wsapi.Options.Want), which
// decides the same way on its own venues, once the command passed every
// limit.
func (d *Daemon) checkLocal(st venue.Stream) error {
	vr := d.byName[st.Venue()]
	if vr == nil {
		return errors.New("venue not served")
	}
	if !vr.cfg.Serves(st.Channel()) {
		return errors.New("channel not served for this venue")
	}
	sym := st.Symbol()
	vr.mu.Lock()
	_, have := vr.symbols[sym]
	n := len(vr.symbols)
	vr.mu.Unlock()
	if have {
		return nil
	}
	if sc, ok := vr.adapter.(venue.SymbolChecker); ok {
		if known, listed := sc.KnownSymbol(sym); listed && !known {
			return &api.Refusal{Code: api.CodeUnknownSymbol, Message: "not an instrument of " + vr.cfg.Name}
		}
	}
	if n >= vr.cfg.MaxSymbols {
		return &api.Refusal{Code: api.CodeTooManySymbols,
			Message: fmt.Sprintf("%s already subscribes %d symbols (venues.%s.max_symbols)", vr.cfg.Name, n, vr.cfg.Name)}
	}
	return nil
}

// onSubscribe has the venue's adapter subscribe a symbol it does not have
// yet. Concurrent subscribes of new symbols may pass max_symbols by as
// many as race past check at once.
func (d *Daemon) onSubscribe(st venue.Stream) {
	if d.o.OnSubscribe != nil {
		d.o.OnSubscribe(st)
	}
	d.hold(st, false)
}

// edgeWants is an ingest's cluster.Ingest.OnWant: an edge asked for st, or
// renewed it. It decides st as check does for a local subscriber and holds
// its symbol, for cluster.WantLapse from now (the sweep's grace follows).
func (d *Daemon) edgeWants(st venue.Stream) (code, msg string) {
	if err := d.checkLocal(st); err != nil {
		c := api.CodeUnknownStream
		if r, ok := errors.AsType[*api.Refusal](err); ok {
			c = r.Code
		}
		return string(c), err.Error()
	}
	d.hold(st, true)
	return "", ""
}

// hold marks st's symbol wanted now (by an edge if fromEdge) and has the
// venue's adapter subscribe it if it does not have it yet.
func (d *Daemon) hold(st venue.Stream, fromEdge bool) {
	vr := d.byName[st.Venue()]
	sym := st.Symbol()
	vr.mu.Lock()
	u, have := vr.symbols[sym]
	if !have {
		u = &symbolUse{}
		vr.symbols[sym] = u
	}
	u.idleSince = time.Time{}
	if fromEdge {
		u.edgeAt = time.Now()
	}
	vr.mu.Unlock()
	if !have {
		if err := vr.adapter.Subscribe(sym); err != nil {
			d.log.Warn("venue subscribe failed", "venue", st.Venue(), "symbol", sym, "err", err)
		}
	}
}

// sweepSymbols unsubscribes at the venue every symbol a client asked for
// that no subscriber has held for the venue's unsubscribe_after, and
// forgets its streams' state (their seq starts again at 1). On an ingest,
// a symbol an edge renewed within cluster.WantLapse is held.
func (d *Daemon) sweepSymbols(now time.Time) {
	for _, vr := range d.venues {
		var release []string
		vr.mu.Lock()
		for sym, u := range vr.symbols {
			if u.pinned {
				continue
			}
			switch {
			case vr.feed.Wanted(sym), now.Sub(u.edgeAt) < cluster.WantLapse:
				u.idleSince = time.Time{}
			case u.idleSince.IsZero():
				u.idleSince = now
			case now.Sub(u.idleSince) >= vr.cfg.UnsubscribeAfter:
				delete(vr.symbols, sym)
				release = append(release, sym)
			}
		}
		vr.mu.Unlock()
		if len(release) == 0 {
			continue
		}
		slices.Sort(release)
		if err := vr.adapter.Unsubscribe(release...); err != nil {
			d.log.Warn("venue unsubscribe failed", "venue", vr.cfg.Name, "symbols", len(release), "err", err)
		}
		for _, sym := range release {
			vr.feed.Forget(sym)
		}
		d.released.WithLabelValues(vr.cfg.Name).Add(float64(len(release)))
		d.log.Info("symbols nobody holds unsubscribed at the venue", "venue", vr.cfg.Name, "symbols", len(release))
	}
}

func (vr *venueRun) symbolCount() float64 {
	vr.mu.Lock()
	defer vr.mu.Unlock()
	return float64(len(vr.symbols))
}

// sweepEvery is how often Run sweeps the symbols: a quarter of the
// shortest unsubscribe_after, between 1s and 1m.
func (d *Daemon) sweepEvery() time.Duration {
	every := time.Minute
	for _, vr := range d.venues {
		every = min(every, vr.cfg.UnsubscribeAfter/4)
	}
	return max(every, time.Second)
}

// Metrics returns the registry of the daemon's Prometheus metrics.
func (d *Daemon) Metrics() prometheus.Gatherer { return d.reg }

// Hub returns the daemon's fanout hub.
func (d *Daemon) Hub() *fanout.Hub { return d.hub }

// Run starts the venues and serves HTTP on ln until ctx is done, then
// shuts down (see Shutdown) with the configured shutdown_timeout and
// returns nil, or the error that stopped the HTTP server.
func (d *Daemon) Run(ctx context.Context, ln net.Listener) error {
	if err := d.bus.start(d.hub.Feeds(), d.ws); err != nil {
		d.claims.close(ctx)
		return err
	}
	if err := d.startRecording(); err != nil {
		d.bus.stop()
		return fmt.Errorf("record: %w", err)
	}
	for _, vr := range d.venues {
		if err := vr.adapter.Start(context.WithoutCancel(ctx)); err != nil {
			d.claims.close(ctx)
			return fmt.Errorf("venues.%s: start: %w", vr.cfg.Name, err)
		}
	}
	d.claims.start()
	sweepDone := make(chan struct{})
	defer func() { <-sweepDone }()
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	go func() {
		defer close(sweepDone)
		t := time.NewTicker(d.sweepEvery())
		defer t.Stop()
		for {
			select {
			case <-sweepCtx.Done():
				return
			case now := <-t.C:
				d.sweepSymbols(now)
			}
		}
	}()
	unreachDone := make(chan struct{})
	defer func() { stopSweep(); <-unreachDone }()
	go func() {
		defer close(unreachDone)
		d.watchUnreachable(sweepCtx, 250*time.Millisecond)
	}()
	errc := make(chan error, 1)
	go func() { errc <- d.http.Serve(ln) }()
	d.log.Info("fanoutd listening", "addr", ln.Addr().String(), "venues", len(d.venues), "auth", d.auth.Enabled())
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
	defer cancel()
	err := d.Shutdown(sctx)
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}

// Shutdown stops the daemon, in order: stop accepting (the listener
// closes; upgrades in progress are refused with 503); send every attached
// subscriber a shutdown notice; let each connection flush what is queued
// and close it with 1001, until ctx is done (then the rest are closed at
// once); stop the venues; flush, close and fsync the recording (up to
// 30 s, record.go); close the claim-check node (flushing its writer, for
// at most 5 s). It returns ctx.Err() if a flush did not finish in time,
// nil otherwise. Calling it again returns the first result.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.shutdownOnce.Do(func() {
		defer close(d.stopped)
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		d.http.Shutdown(hctx) // hijacked websockets are not waited for; wsapi owns them
		cancel()
		d.hub.Broadcast(notice.Must(notice.Shutdown, "", "", time.Now(), "fanoutd is shutting down", nil))
		err := d.ws.Shutdown(ctx)
		if errors.Is(err, wsapi.ErrServerClosed) {
			err = nil // Abort closed it
		}
		if err != nil {
			d.log.Warn("shutdown: flush did not finish in time", "err", err)
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, vr := range d.venues {
			if e := vr.adapter.Stop(sctx); e != nil {
				d.log.Warn("shutdown: venue stop", "venue", vr.cfg.Name, "err", e)
			}
		}
		d.bus.stop()                             // after the venues: their last events are published
		d.stopRecording()                        // after the venues: everything they read is written
		if e := d.claims.close(sctx); e != nil { // after the venues: their last books are flushed
			d.log.Warn("shutdown: claim check", "err", e)
		}
		d.shutdownErr = err
		d.log.Info("fanoutd stopped")
	})
	<-d.stopped
	return d.shutdownErr
}

// Abort stops the daemon at once, as a crash would (a test's stand-in for
// kill -9 in one process): the bus connection drops unflushed, every
// websocket closes without a notice, nothing is released in the cluster's
// record of names. Run still returns once its context is done.
func (d *Daemon) Abort() {
	d.bus.abort()
	d.ws.Abort()
	d.http.Close()
	for _, vr := range d.venues {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		vr.adapter.Stop(ctx)
		cancel()
	}
}

func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", d.readyz)
	mux.HandleFunc("POST /drainz", d.drainz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{Registry: d.reg}))
	if d.cfg.Cluster.Role == config.RoleIngest {
		mux.HandleFunc("GET /v1/stream", func(w http.ResponseWriter, _ *http.Request) {
			api.WriteError(w, http.StatusNotFound, api.CodeUnknownStream, "this node is an ingest (cluster.role): subscribe on an edge")
		})
	} else {
		mux.Handle("GET /v1/stream", d.refuseWhileDraining(d.ws))
	}
	mux.HandleFunc("GET /v1/coverage", d.authed(d.coverage))
	mux.HandleFunc("GET /v1/subscribers", d.authed(d.subscribers))
	mux.HandleFunc("GET /v1/books/{venue}/{symbol...}", d.authed(d.book))
	d.claims.register(mux, d)
	d.historyRoutes(mux)
	ui.Register(mux)
	return d.front(mux)
}

// authed requires a valid token on a /v1 route when tokens are configured.
func (d *Daemon) authed(h func(http.ResponseWriter, *http.Request, *api.Token)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, err := d.auth.Check(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fanoutd"`)
			api.WriteError(w, http.StatusUnauthorized, api.CodeUnauthenticated, api.RefusalMessage(err))
			return
		}
		h(w, r, tok)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// readyz: a node is ready when every venue's link is up; an edge when
// at least one of its venues is up (its bus link to the ingest and the
// ingest's link to the venue), since a client there can be served that
// venue while another is down.
func (d *Daemon) readyz(w http.ResponseWriter, _ *http.Request) {
	var down []string
	for _, vr := range d.venues {
		if vr.adapter.Coverage().Link != venue.LinkUp.String() {
			down = append(down, vr.cfg.Name)
		}
	}
	if d.bus != nil && d.bus.edge != nil && len(down) < len(d.venues) {
		down = nil
	}
	select {
	case <-d.stopped:
		down = append(down, "(shutting down)")
	default:
	}
	if d.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "draining": true})
		return
	}
	if len(down) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "not_linked": down})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true})
}

// coverage lists the venues and streams within tok's scopes: a venue no
// stream of which the token may read is left out, and so is every stream
// outside them (which symbols other tokens asked for is not the token's).
func (d *Daemon) coverage(w http.ResponseWriter, _ *http.Request, tok *api.Token) {
	out := make([]venue.Coverage, 0, len(d.venues))
	for _, vr := range d.venues {
		if !tok.AllowsVenue(vr.cfg.Name) {
			continue
		}
		cov := vr.adapter.Coverage()
		if tok != nil {
			mine := make([]venue.StreamCoverage, 0, len(cov.Streams))
			for _, sc := range cov.Streams {
				if tok.Allows(sc.Stream) {
					mine = append(mine, sc)
				}
			}
			cov.Streams = mine
		}
		if node, leading, ok := d.bus.leader(vr.cfg.Name, cov); ok {
			cov.Leader = node
			if d.bus.ingest != nil {
				cov.Leading = &leading
			}
		}
		out = append(out, cov)
	}
	writeJSON(w, http.StatusOK, out)
}

// SubscriberView is one entry of GET /v1/subscribers.
type SubscriberView struct {
	ID         string         `json:"id"`
	Kind       string         `json:"kind"`
	Attached   bool           `json:"attached"`
	Streams    []venue.Stream `json:"streams"`
	QueueLen   int            `json:"queue_len"`
	QueueBytes int            `json:"queue_bytes"`
	Bounds     map[string]any `json:"bounds"`
	Dropping   bool           `json:"dropping"`
	Dropped    uint64         `json:"dropped_total"`
	// Replaced counts conflated messages replaced unsent by a newer one.
	Replaced uint64 `json:"replaced_total"`
}

// subscribers lists the subscribers tok created (every one without tokens).
func (d *Daemon) subscribers(w http.ResponseWriter, _ *http.Request, tok *api.Token) {
	out := []SubscriberView{}
	for _, s := range d.ws.Subscribers(tok) {
		v := SubscriberView{ID: s.ID(), Kind: s.Kind().String(), Streams: s.Streams(), Bounds: map[string]any{}}
		if c := s.Resolve(); c != nil {
			v.Attached, v.QueueLen, v.QueueBytes = true, c.Len(), c.Bytes()
		}
		for _, f := range d.hub.Feeds() {
			st, ok := f.State(s)
			if !ok {
				continue
			}
			n, b := f.Bounds()
			v.Bounds[f.Venue()] = map[string]int{"max_queue_len": n, "max_queue_bytes": b}
			v.Dropping = v.Dropping || st.Dropping
			v.Dropped += st.DroppedTotal
			v.Replaced += st.ReplacedTotal
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

type bookView struct {
	Stream    venue.Stream `json:"stream"`
	Seq       uint64       `json:"seq"`
	VenueSeq  int64        `json:"venue_seq,omitempty"`
	RecvTime  time.Time    `json:"recv_time"`
	VenueTime *time.Time   `json:"venue_time,omitempty"`
	Bids      [][2]string  `json:"bids"`
	Asks      [][2]string  `json:"asks"`
}

func levels(ls []venue.Level, depth int) [][2]string {
	if depth > 0 && len(ls) > depth {
		ls = ls[:depth]
	}
	out := make([][2]string, len(ls))
	for i, l := range ls {
		out[i] = [2]string{l.Price.String(), l.Size.String()}
	}
	return out
}

func (d *Daemon) book(w http.ResponseWriter, r *http.Request, tok *api.Token) {
	st, err := venue.ParseStream(r.PathValue("venue") + ":level2:" + r.PathValue("symbol"))
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	depth := 0
	if q := r.URL.Query().Get("depth"); q != "" {
		if depth, err = strconv.Atoi(q); err != nil || depth < 0 {
			api.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, "depth must be a non-negative integer")
			return
		}
	}
	if !tok.Allows(st) {
		api.WriteError(w, http.StatusForbidden, api.CodeUnauthorized, string(st)+": outside this token's scopes")
		return
	}
	if at := r.URL.Query().Get("at"); at != "" {
		d.bookAt(w, r, st, depth, at)
		return
	}
	f := d.hub.Feed(st.Venue())
	if f == nil {
		api.WriteError(w, http.StatusNotFound, api.CodeUnknownStream, "venue not served")
		return
	}
	ev, ok := f.Book(st)
	if !ok {
		api.WriteError(w, http.StatusNotFound, api.CodeNoBook, string(st)+": no book")
		return
	}
	bids, asks := ev.Levels()
	v := bookView{Stream: st, Seq: ev.Seq, VenueSeq: ev.VenueSeq, RecvTime: ev.RecvTime.UTC(),
		Bids: levels(bids, depth), Asks: levels(asks, depth)}
	if !ev.VenueTime.IsZero() {
		t := ev.VenueTime.UTC()
		v.VenueTime = &t
	}
	writeJSON(w, http.StatusOK, v)
}
