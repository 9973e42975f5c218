package daemon

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/cluster"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/venue"
)

// busWire is the daemon's side of a cluster (cluster.role ingest or edge):
// the embedded NATS server, the connection, and the ingest or the edge. A
// nil *busWire (role all) does nothing: one process never needs NATS.
type busWire struct {
	cfg    config.Cluster
	log    *slog.Logger
	ingest *cluster.Ingest // role ingest
	edge   *cluster.Edge   // role edge
	srv    *server.Server  // cluster.embedded_nats
	nc     *nats.Conn
}

func newBusWire(c config.Cluster, log *slog.Logger) *busWire {
	if !c.Clustered() {
		return nil
	}
	b := &busWire{cfg: c, log: log.With("role", c.Role, "node", c.Node)}
	subj := cluster.Subjects{Prefix: c.SubjectPrefix}
	if c.Role == config.RoleIngest {
		b.ingest = cluster.NewIngest(subj, c.Node, b.log)
	} else {
		b.edge = cluster.NewEdge(subj, b.log)
	}
	return b
}

// feedOptions sets a feed's bus hooks: an ingest taps every event, an edge
// follows the streams its subscribers want.
func (b *busWire) feedOptions(o *fanout.Options) {
	switch {
	case b == nil:
	case b.ingest != nil:
		o.Tap = b.ingest.Tap(o.Venue)
	case b.edge != nil:
		o.OnWanted = b.edge.Wanted
	}
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
func (b *busWire) start(feeds []*fanout.Feed) error {
	if b == nil {
		return nil
	}
	if b.cfg.EmbeddedNATS {
		srv, err := cluster.StartServer(b.cfg)
		if err != nil {
			return err
		}
		b.srv = srv
		b.log.Info("embedded nats server running", "url", b.cfg.NATSURL, "jetstream", b.cfg.NATSDir)
	}
	var h cluster.Handlers
	if b.edge != nil {
		h = cluster.Handlers{Down: func(error) { b.edge.Disconnected() }, Up: b.edge.Reconnected}
	}
	nc, err := cluster.Connect(b.cfg, b.log, h)
	if err != nil {
		b.stopServer()
		return err
	}
	b.nc = nc
	if b.ingest != nil {
		err = b.ingest.Start(nc, feeds)
	} else {
		err = b.edge.Start(nc)
	}
	if err != nil {
		nc.Close()
		b.stopServer()
		return fmt.Errorf("cluster: %w", err)
	}
	b.log.Info("cluster node on the bus", "cluster", b.cfg.String())
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
		b.edge.Stop()
	}
	b.nc.Close()
	b.stopServer()
}

func (b *busWire) stopServer() {
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
		b.srv = nil
	}
}
