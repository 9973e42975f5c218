package cluster

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/fanoutd/fanoutd/internal/testutil"
)

func runServer(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	o.Host, o.NoLog, o.NoSigs = "127.0.0.1", true, true
	if o.Port == 0 {
		o.Port = -1
	}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	return s
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestConnectListFailsOver: with cluster.nats_url a list whose first
// server is down, Connect reaches the second; and a publish while the
// connection is down fails at once (nothing is buffered to be flushed
// late) instead of being queued.
func TestConnectListFailsOver(t *testing.T) {
	dead := "nats://127.0.0.1:" + strconv.Itoa(freePort(t))
	s := runServer(t, &server.Options{})
	live := "nats://" + s.Addr().String()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	down := make(chan struct{}, 1)
	nc, err := Connect(Options{Role: "edge", Node: "n", NATSURL: dead + ", " + live}, log,
		Handlers{Down: func(error) {
			select {
			case down <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	testutil.WaitFor(t, 30*time.Second, "a connection to the live server", nc.IsConnected)
	if got := nc.ConnectedUrl(); got != live {
		t.Fatalf("connected to %s, want %s", got, live)
	}
	s.Shutdown()
	<-down
	err = nc.Publish("x", []byte("stale"))
	if !errors.Is(err, nats.ErrReconnectBufExceeded) {
		t.Fatalf("publish while reconnecting: %v, want ErrReconnectBufExceeded (no reconnect buffer)", err)
	}
}

// TestConnectLeavesLameDuckServer: when its server enters lame-duck mode,
// the connection moves to another server of the cluster right away (the
// server would evict it only after its grace period), learnt by discovery
// though only the first server was listed; the move is counted.
func TestConnectLeavesLameDuckServer(t *testing.T) {
	pa, pb := freePort(t), freePort(t)
	routes := server.RoutesFromStr("nats://127.0.0.1:" + strconv.Itoa(pa) + ",nats://127.0.0.1:" + strconv.Itoa(pb))
	a := runServer(t, &server.Options{ServerName: "a", Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: pa}, Routes: routes,
		LameDuckGracePeriod: time.Minute, LameDuckDuration: 2 * time.Minute})
	b := runServer(t, &server.Options{ServerName: "b", Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: pb}, Routes: routes})
	testutil.WaitFor(t, 30*time.Second, "the route", func() bool { return a.NumRoutes() > 0 && b.NumRoutes() > 0 })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var stats ConnStats
	nc, err := Connect(Options{Role: "edge", Node: "n", NATSURL: "nats://" + a.Addr().String()}, log, Handlers{Stats: &stats})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	testutil.WaitFor(t, 30*time.Second, "connected to a and b discovered", func() bool { return nc.IsConnected() && len(nc.DiscoveredServers()) > 0 })
	go a.LameDuckShutdown()
	testutil.WaitFor(t, 30*time.Second, "a move to b", func() bool {
		return stats.LameDuck.Load() == 1 && nc.IsConnected() && nc.ConnectedUrl() == "nats://"+b.Addr().String()
	})
}

// TestSubjectKind names the venue and kind of each subject the
// slow-consumer count sees.
func TestSubjectKind(t *testing.T) {
	for _, c := range []struct{ subj, v, kind string }{
		{"p.q.ev.kraken.trades.BTC-USD", "kraken", "ev"},
		{"p.q.hb.bybit", "bybit", "hb"},
		{"p.q.book.*.*", "", "book"},
		{"_INBOX.x", "", "other"},
	} {
		if v, k := subjectKind("p.q", c.subj); v != c.v || k != c.kind {
			t.Errorf("subjectKind(%q) = %q, %q; want %q, %q", c.subj, v, k, c.v, c.kind)
		}
	}
}
