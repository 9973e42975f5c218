package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/fanoutd/fanoutd/internal/rawio"
)

// Reconnection backoff, once every listed and discovered server was
// tried: 50 ms doubling to 1 s, with up to 20% jitter (so that the nodes
// of a cluster do not retry in step). A server that died is left at once
// for the next one in the pool; the backoff only paces a bus that is down.
const (
	minReconnectDelay = 50 * time.Millisecond
	maxReconnectDelay = time.Second
)

// Handlers are called on the connection's state changes, from nats.go's
// callback goroutine.
type Handlers struct {
	Down func(err error) // the connection dropped
	Up   func()          // connected again (also after a first connect that had to retry)
	// Stats, if set, counts the connection's events (slow consumers, lame
	// duck moves) for the metrics.
	Stats *ConnStats
}

// ConnStats counts what happened to a node's NATS connection.
type ConnStats struct {
	slow     burstCounter  // slow-consumer events, by subject kind
	LameDuck atomic.Uint64 // moves to another server because this one entered lame-duck mode
}

// SlowConsumers calls f with the number of slow-consumer events (NATS
// dropped messages for a subscriber that did not keep up), per venue
// ("" when the subject names none) and subject kind (ev, notice, hb, …).
func (s *ConnStats) SlowConsumers(f func(venueName, kind string, n uint64)) { s.slow.each(f) }

// Connect dials c.NATSURL (a comma-separated list) with c's credentials
// and TLS, as client name "fanoutd-<role>-<node>". It does not fail when
// no server is up yet: it keeps retrying with backoff (Handlers.Up tells
// when it connects), so an edge can start before NATS. It fails over
// between the listed servers and those the cluster announces (discovery
// stays on), and it is set for market data: nothing is buffered while
// reconnecting (a publish then fails and is counted, and the receivers'
// seq check announces the gap: stale events are not delivered late), and
// when its server enters lame-duck mode it moves to another at once, before
// it is evicted. Credentials are never logged.
func Connect(c Options, log *slog.Logger, h Handlers) (*nats.Conn, error) {
	stats := h.Stats
	if stats == nil {
		stats = &ConnStats{}
	}
	stats.slow.log, stats.slow.msg = log, "nats: slow consumer, messages dropped (counted in fanoutd_cluster_slow_consumer_total; the rest of this burst is not logged)"
	urls := strings.Join(c.URLs(), ",")
	opts := []nats.Option{
		nats.Name("fanoutd-" + c.Role + "-" + c.Node),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectBufSize(-1),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.PingInterval(2 * time.Second),
		nats.SetCustomDialer(rawDialer{}),
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats: disconnected", "err", err)
			if h.Down != nil {
				h.Down(err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats: reconnected", "url", nc.ConnectedUrlRedacted())
			if h.Up != nil {
				h.Up()
			}
		}),
		nats.ConnectHandler(func(nc *nats.Conn) { // after RetryOnFailedConnect
			log.Info("nats: connected", "url", nc.ConnectedUrlRedacted())
			if h.Up != nil {
				h.Up()
			}
		}),
		nats.LameDuckModeHandler(func(nc *nats.Conn) {
			stats.LameDuck.Add(1)
			log.Info("nats: server entering lame-duck mode; moving to another", "url", nc.ConnectedUrlRedacted())
			if err := nc.ForceReconnect(); err != nil {
				log.Warn("nats: cannot leave the lame-duck server", "err", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			subj := ""
			if s != nil {
				subj = s.Subject
			}
			if errors.Is(err, nats.ErrSlowConsumer) {
				v, kind := subjectKind(c.SubjectPrefix, subj)
				stats.slow.reject(v, kind, "subject", subj)
				return
			}
			log.Warn("nats: async error", "subject", subj, "err", err)
		}),
	}
	switch {
	case c.Creds != "":
		opts = append(opts, nats.UserCredentials(c.Creds))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: nats %s: %w", urls, err)
	}
	return nc, nil
}

// subjectKind names the venue and kind (ev, notice, hb, book, want, …)
// of a subject under prefix, for the slow-consumer count.
func subjectKind(prefix, subj string) (venueName, kind string) {
	rest, ok := strings.CutPrefix(subj, prefix+".")
	if !ok {
		return "", "other"
	}
	kind, rest, _ = strings.Cut(rest, ".")
	venueName, _, _ = strings.Cut(rest, ".")
	if venueName == "*" || venueName == ">" {
		venueName = ""
	}
	return venueName, kind
}

// rawDialer dials as nats.go's default dialer does, but the connection
// reads with RawSyscall (rawio.ReadConn, as a venue link does): an edge
// reads NATS about once per event, and each plain read woke the runtime's
// sysmon thread into its 20 µs polling loop (docs/design.md, where
// an edge's CPU goes). TLS, if configured, runs over it.
type rawDialer struct{}

func (rawDialer) Dial(network, address string) (net.Conn, error) {
	d := net.Dialer{Timeout: nats.DefaultTimeout}
	c, err := d.Dial(network, address)
	if err != nil {
		return nil, err
	}
	return rawio.ReadConn(c), nil
}

func reconnectDelay(attempts int) time.Duration {
	d := minReconnectDelay << min(attempts, 6)
	d = min(d, maxReconnectDelay)
	var b [1]byte
	rand.Read(b[:])
	return d + d*time.Duration(b[0])/(5*256)
}

// NewEpoch returns a fresh epoch: 16 random hex digits.
func NewEpoch() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// StartServer runs the NATS server in this process (cluster.embedded_nats):
// the real nats-server, JetStream on (its store bounded, and its account's
// streams and consumers),
// storing under c.NATSDir, listening on c.NATSURL's host and port. Every
// client logs in as a role (Permissions): the ingests with c's own
// credentials, the edges with c.EdgeToken; c comes from
// EmbeddedCredentials. It returns once the server accepts connections.
func StartServer(c Options) (*server.Server, error) {
	u, err := url.Parse(strings.TrimSpace(c.NATSURL))
	if err != nil {
		return nil, fmt.Errorf("cluster: embedded nats: %w", err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("cluster: embedded nats: %w", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("cluster: embedded nats: port %q", port)
	}
	if c.Creds != "" || c.TLSCert != "" || u.Scheme == "tls" {
		return nil, fmt.Errorf("cluster: embedded nats: creds files and TLS need a standalone nats-server")
	}
	auth, err := embeddedAuth(c)
	if err != nil {
		return nil, err
	}
	o := &server.Options{ServerName: "fanoutd-" + c.Node, Host: host, Port: p, JetStream: true, StoreDir: c.NATSDir,
		JetStreamMaxMemory: embeddedMaxMemory, JetStreamMaxStore: embeddedMaxStore,
		NoSigs: true, NoLog: true, CustomClientAuthentication: auth}
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("cluster: embedded nats: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("cluster: embedded nats: not ready on %s within 10s", u.Host)
	}
	if err := s.GlobalAccount().UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{"": {
		MaxMemory: -1, MaxStore: -1, MaxStreams: embeddedMaxStreams, MaxConsumers: embeddedMaxConsumers,
		MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1}}); err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("cluster: embedded nats: jetstream limits: %w", err)
	}
	return s, nil
}
