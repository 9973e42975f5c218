package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/internal/cluster"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/wsapi"
	"github.com/fanoutd/fanoutd/venue"
)

// busWire is the daemon's side of a cluster (cluster.role ingest or edge):
// the embedded NATS server, the connection, and the ingest or the edge. A
// nil *busWire (role all) does nothing: one process never needs NATS.
type busWire struct {
	cfg    cluster.Options
	log    *slog.Logger
	ingest *cluster.Ingest // role ingest
	edge   *cluster.Edge   // role edge
	names  *cluster.Names  // role edge: named subscribers in the key-value bucket
	srv    *server.Server  // cluster.embedded_nats
	nc     *nats.Conn
	stats  cluster.ConnStats
}

func newBusWire(c config.Cluster, namedTTL time.Duration, log *slog.Logger) *busWire {
	if !c.Clustered() {
		return nil
	}
	// The configuration's cluster: section and the bus's options are the
	// same fields: the conversion fails to compile when one gains a field.
	b := &busWire{cfg: cluster.Options(c), log: log.With("role", c.Role, "node", c.Node)}
	subj := cluster.Subjects{Prefix: c.SubjectPrefix}
	if c.Role == config.RoleIngest {
		b.ingest = cluster.NewIngest(subj, c.Node, b.log)
		b.ingest.KVReplicas = c.KVReplicas
	} else {
		b.edge = cluster.NewEdge(subj, c.Node, b.log)
		b.names = cluster.NewNames(subj, c.Node, namedTTL, b.log)
		b.names.KVReplicas = c.KVReplicas
	}
	return b
}

// instance names this process in connection ids: the edge's Names
// instance, else the node.
func (b *busWire) instance(node string) string {
	if b == nil || b.names == nil {
		return node
	}
	return b.names.Instance()
}

// wsNames is the websocket server's Names: the bucket's, on an edge.
func (b *busWire) wsNames() wsapi.Names {
	if b == nil || b.names == nil {
		return nil
	}
	return wsNames{b.names}
}

// wsNames adapts cluster.Names to wsapi.Names.
type wsNames struct{ n *cluster.Names }

func (w wsNames) Claim(name, owner, conn string) (*wsapi.NameRecord, error) {
	rec, err := w.n.Claim(name, owner, conn)
	if errors.Is(err, cluster.ErrNameOwned) {
		return nil, wsapi.ErrNameOwned
	}
	if err != nil || rec == nil {
		return nil, err
	}
	out := &wsapi.NameRecord{Owner: rec.Owner, Node: rec.Node, Last: map[venue.Stream]uint64{}}
	for _, s := range rec.Streams {
		if st, err := venue.ParseStream(s); err == nil {
			out.Streams = append(out.Streams, st)
		}
	}
	for s, seq := range rec.Last {
		out.Last[venue.Stream(s)] = seq
	}
	return out, nil
}

func (w wsNames) Changed() { w.n.Changed() }

func (w wsNames) Release(name, conn string, st wsapi.NamedState) { w.n.Release(clusterState(st)) }

func clusterState(st wsapi.NamedState) cluster.NamedState {
	out := cluster.NamedState{Name: st.Name, Owner: st.Owner, Conn: st.Conn, Streams: make([]string, len(st.Streams)), Last: make(map[string]uint64, len(st.Last))}
	for i, s := range st.Streams {
		out.Streams[i] = string(s)
	}
	for s, seq := range st.Last {
		out.Last[string(s)] = seq
	}
	return out
}

// feedOptions sets a feed's bus hooks: an ingest taps every event, an edge
// follows the streams its subscribers want.
func (b *busWire) feedOptions(o *fanout.Options) {
	switch {
	case b == nil:
	case b.ingest != nil:
		o.Tap = b.ingest.Tap(o.Venue)
		o.KeepWindows = true // the edges recover from it (P.recover.<venue>)
	case b.edge != nil:
		o.OnWanted = b.edge.Wanted
	}
}

// want asks an edge's ingest for st (a subscriber's new stream): its
// refusal is the subscribe's. When the ingest could not be asked (the bus
// link is down, no ingest answered in time) st is accepted: the edge's
// renewals ask again, and the ingest subscribes the symbol once it hears
// them. A nil busWire, or a node that is not an edge, accepts.
func (b *busWire) want(st venue.Stream) error {
	if b == nil || b.edge == nil {
		return nil
	}
	code, msg, err := b.edge.Want(st)
	switch {
	case err != nil && !errors.Is(err, cluster.ErrNotAsked):
		b.log.Warn("cluster: no ingest answered a subscriber's stream; accepted, the renewals ask again", "stream", st, "err", err)
	case code != "":
		return &api.Refusal{Code: api.Code(code), Message: msg}
	}
	return nil
}

// backfill is the websocket server's Backfill on an edge (nil elsewhere):
// an adopted name's range is filled from the ingest's window.
func (b *busWire) backfill() func(venue.Stream, uint64) {
	if b == nil || b.edge == nil {
		return nil
	}
	return b.edge.Backfill
}

// sink wraps a venue's sink on an ingest so that its notices are published.
func (b *busWire) sink(venueName string, s venue.Sink) venue.Sink {
	if b == nil || b.ingest == nil {
		return s
	}
	return b.ingest.Sink(venueName, s)
}

// start runs the embedded server (if configured), connects, and starts the
// ingest or the edge. The connection keeps retrying in the background if
// the server is not up.
func (b *busWire) start(feeds []*fanout.Feed, ws *wsapi.Server) error {
	if b == nil {
		return nil
	}
	if b.cfg.EmbeddedNATS {
		c, files, err := cluster.EmbeddedCredentials(b.cfg)
		if err != nil {
			return err
		}
		if len(files) > 0 {
			b.log.Info("embedded nats: credentials not configured are kept in these files (mode 0600): give edges the edge token (cluster.token)", "files", files)
		}
		srv, err := cluster.StartServer(c)
		if err != nil {
			return err
		}
		b.cfg, b.srv = c, srv
		b.log.Info("embedded nats server running", "url", b.cfg.NATSURL, "jetstream", b.cfg.NATSDir)
	}
	h := cluster.Handlers{Stats: &b.stats}
	if b.edge != nil {
		h.Down, h.Up = func(error) { b.edge.Disconnected() }, b.edge.Reconnected
	}
	nc, err := cluster.Connect(b.cfg, b.log, h)
	if err != nil {
		b.stopServer()
		return err
	}
	b.nc = nc
	if b.ingest != nil {
		err = b.ingest.Start(nc, feeds)
	} else if err = b.edge.Start(nc); err == nil {
		b.names.TakeOver = ws.TakeOver
		b.names.States = func() []cluster.NamedState {
			var out []cluster.NamedState
			for _, st := range ws.NamedStates() {
				out = append(out, clusterState(st))
			}
			return out
		}
		err = b.names.Start(nc)
	}
	if err != nil {
		nc.Close()
		b.stopServer()
		return fmt.Errorf("cluster: %w", err)
	}
	b.log.Info("cluster node on the bus", "cluster", config.Cluster(b.cfg).String())
	return nil
}

// stop flushes what was published (at most 2 s), closes the connection
// and stops the embedded server.
func (b *busWire) stop() {
	if b == nil || b.nc == nil {
		return
	}
	if b.ingest != nil {
		b.ingest.Stop()
		b.nc.FlushTimeout(2 * time.Second)
	} else {
		b.names.Stop()
		b.edge.Stop()
	}
	b.nc.Close()
	b.stopServer()
}

// abort drops the bus at once, as a crash would: nothing is flushed, no
// name released.
func (b *busWire) abort() {
	if b == nil || b.nc == nil {
		return
	}
	b.nc.Close()
	if b.names != nil {
		b.names.Stop()
	}
	if b.edge != nil {
		b.edge.Stop() // its goroutines; it tells the bus nothing
	}
}

func (b *busWire) stopServer() {
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
		b.srv = nil
	}
}

// leader returns the node leading venueName as this node knows it, and
// whether this node leads it (an ingest); ok is false outside a cluster.
func (b *busWire) leader(venueName string, cov venue.Coverage) (node string, leading, ok bool) {
	switch {
	case b == nil:
		return "", false, false
	case b.ingest != nil:
		node, leading = b.ingest.Leader(venueName)
		return node, leading, true
	}
	return cov.Leader, false, true
}

// leaderCollector exports, per venue, the node leading it
// (fanoutd_venue_leader{venue,node} 1) and, on an ingest, whether this
// node leads it (fanoutd_venue_leading{venue}).
type leaderCollector struct{ d *Daemon }

var (
	leaderDesc  = prometheus.NewDesc("fanoutd_venue_leader", "The ingest node leading the venue, as this node knows it (1 for that node).", []string{"venue", "node"}, nil)
	leadingDesc = prometheus.NewDesc("fanoutd_venue_leading", "1 if this ingest node leads the venue (holds its lease and publishes it), 0 if it stands by.", []string{"venue"}, nil)
)

func (c leaderCollector) Describe(ch chan<- *prometheus.Desc) { ch <- leaderDesc; ch <- leadingDesc }

func (c leaderCollector) Collect(ch chan<- prometheus.Metric) {
	for _, vr := range c.d.venues {
		node, leading, ok := c.d.bus.leader(vr.cfg.Name, vr.adapter.Coverage())
		if !ok {
			return
		}
		if node != "" {
			ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, 1, vr.cfg.Name, node)
		}
		if c.d.bus.ingest != nil {
			v := 0.0
			if leading {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(leadingDesc, prometheus.GaugeValue, v, vr.cfg.Name)
		}
	}
}

// venueLink is an ingest's cluster.Ingest.Link: the venue's link state.
func (d *Daemon) venueLink(venueName string) string {
	vr := d.byName[venueName]
	if vr == nil {
		return ""
	}
	return vr.adapter.Coverage().Link
}

// holds is an ingest's cluster.Ingest.Holds: whether st's symbol is
// subscribed at its venue already.
func (d *Daemon) holds(st venue.Stream) bool {
	vr := d.byName[st.Venue()]
	if vr == nil {
		return false
	}
	vr.mu.Lock()
	defer vr.mu.Unlock()
	_, ok := vr.symbols[st.Symbol()]
	return ok
}

// busCollector exports what the bus refused on this node: on an edge,
// fanoutd_cluster_bus_invalid_total{venue,reason} (messages not forwarded
// because they were not what their subject carries, each treated as lost);
// on an ingest, fanoutd_cluster_want_refused_total{venue} (streams a want
// named past cluster.MaxWantAdds new symbols).
type busCollector struct{ b *busWire }

var busInvalidDesc = prometheus.NewDesc("fanoutd_cluster_bus_invalid_total",
	"Messages from the bus an edge did not forward (not one JSON object of the subject's stream at the header's seq, on one line), treated as lost.",
	[]string{"venue", "reason"}, nil)

var wantRefusedDesc = prometheus.NewDesc("fanoutd_cluster_want_refused_total",
	"Streams an edge's want named past the new symbols one want may add (cluster.MaxWantAdds), refused as too_many_symbols.",
	[]string{"venue"}, nil)

var slowConsumerDesc = prometheus.NewDesc("fanoutd_cluster_slow_consumer_total",
	"Slow-consumer events on this node's NATS connection (NATS dropped messages of a subscription that did not keep up; each loss is announced as a gap), by venue and subject kind.",
	[]string{"venue", "kind"}, nil)

var fencedDesc = prometheus.NewDesc("fanoutd_cluster_fenced_total",
	"Messages an edge dropped because the ingest that published them did not hold the venue's lease (fencing: one publisher reaches the subscribers).",
	[]string{"venue"}, nil)

var lameDuckDesc = prometheus.NewDesc("fanoutd_cluster_lame_duck_moves_total",
	"Times this node left its NATS server because the server entered lame-duck mode (a restart), before the server evicted it.", nil, nil)

var publishDroppedDesc = prometheus.NewDesc("fanoutd_cluster_publish_dropped_total",
	"Events this ingest led but did not publish because its NATS connection was down (nothing is buffered while reconnecting; the edges announce the gap).",
	[]string{"venue"}, nil)

var busRecoveredDesc = prometheus.NewDesc("fanoutd_cluster_bus_recovered_total",
	"Ranges of a stream an edge lost on the bus, by result: recovered (the ingest's window sent them again, forwarded in order, nothing announced) or gap (announced as stream_gap or book_resync).",
	[]string{"venue", "result"}, nil)

var backfillsDesc = prometheus.NewDesc("fanoutd_cluster_backfills_total",
	"Ranges a named subscriber reattaching on an edge lost before that edge followed its stream, by result: filled (from the ingest's window, then recovered) or refused (the ingest's window did not hold them).",
	[]string{"venue", "result"}, nil)

func (c busCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- busRecoveredDesc
	ch <- backfillsDesc
	ch <- busInvalidDesc
	ch <- wantRefusedDesc
	ch <- slowConsumerDesc
	ch <- lameDuckDesc
	ch <- fencedDesc
	ch <- publishDroppedDesc
}

func (c busCollector) Collect(ch chan<- prometheus.Metric) {
	if c.b.edge != nil {
		c.b.edge.Rejected(func(v, reason string, n uint64) {
			ch <- prometheus.MustNewConstMetric(busInvalidDesc, prometheus.CounterValue, float64(n), v, reason)
		})
		c.b.edge.Fenced(func(v string, n uint64) {
			ch <- prometheus.MustNewConstMetric(fencedDesc, prometheus.CounterValue, float64(n), v)
		})
		c.b.edge.BusRecovered(func(v string, ok, lost uint64) {
			ch <- prometheus.MustNewConstMetric(busRecoveredDesc, prometheus.CounterValue, float64(ok), v, "recovered")
			ch <- prometheus.MustNewConstMetric(busRecoveredDesc, prometheus.CounterValue, float64(lost), v, "gap")
		})
		c.b.edge.Backfilled(func(v string, ok, lost uint64) {
			ch <- prometheus.MustNewConstMetric(backfillsDesc, prometheus.CounterValue, float64(ok), v, "filled")
			ch <- prometheus.MustNewConstMetric(backfillsDesc, prometheus.CounterValue, float64(lost), v, "refused")
		})
	}
	if c.b.ingest != nil {
		c.b.ingest.WantsCapped(func(v string, n uint64) {
			ch <- prometheus.MustNewConstMetric(wantRefusedDesc, prometheus.CounterValue, float64(n), v)
		})
		c.b.ingest.Dropped(func(v string, n uint64) {
			ch <- prometheus.MustNewConstMetric(publishDroppedDesc, prometheus.CounterValue, float64(n), v)
		})
	}
	c.b.stats.SlowConsumers(func(v, kind string, n uint64) {
		ch <- prometheus.MustNewConstMetric(slowConsumerDesc, prometheus.CounterValue, float64(n), v, kind)
	})
	ch <- prometheus.MustNewConstMetric(lameDuckDesc, prometheus.CounterValue, float64(c.b.stats.LameDuck.Load()))
}
