package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fanoutd/fanoutd/internal/cluster"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venues"
)

// hostileBus is an ingest running the embedded NATS server with the
// credentials it generated (none configured), fed by a test source, and
// an edge connected with the edge credentials from the ingest's nats_dir.
type hostileBus struct {
	url, dir     string
	src          *source
	ingest, edge *daemontest.Running
}

func startHostileBus(t *testing.T) *hostileBus {
	t.Helper()
	b := &hostileBus{url: fmt.Sprintf("nats://127.0.0.1:%d", freeTCPPort(t)), dir: t.TempDir(), src: &source{}}
	b.ingest = daemontest.Start(t, "cluster:\n  role: ingest\n  node: in-1\n  embedded_nats: true\n  nats_url: "+b.url+"\n  nats_dir: "+b.dir+
		"\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n", daemon.Options{Venues: []venues.Venue{b.src.adapter()}})
	waitFor(t, 10*time.Second, "the ingest to lead", func() bool {
		_, leading := coverageLeader(t, b.ingest.URL("http"))
		return leading != nil && *leading
	})
	b.edge = daemontest.Start(t, "cluster:\n  role: edge\n  node: edge-1\n  nats_url: "+b.url+"\n  token: "+b.token(t, "edge")+
		"\nvenues:\n  coinbase:\n    symbols: []\n", daemon.Options{})
	waitReady(t, b.edge)
	return b
}

// token reads a role's generated secret from the ingest's nats_dir.
func (b *hostileBus) token(t *testing.T, role string) string {
	t.Helper()
	s, err := os.ReadFile(filepath.Join(b.dir, role+".token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(s))
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// connect connects to the bus as a client of the test, collecting the
// server's asynchronous errors (permission violations) in errs.
func (b *hostileBus) connect(t *testing.T, opts ...nats.Option) (*nats.Conn, chan error, error) {
	errs := make(chan error, 64)
	opts = append(opts, nats.Timeout(3*time.Second), nats.NoReconnect(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	nc, err := nats.Connect(b.url, opts...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, errs, err
}

// violation waits for the server's permissions violation naming subject.
func violation(t *testing.T, errs chan error, what, subject string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-errs:
			if strings.Contains(err.Error(), "Permissions Violation") && strings.Contains(err.Error(), subject) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: the server did not refuse it (no permissions violation for %q)", what, subject)
		}
	}
}

// TestHostileBusOutsider: a peer on the NATS port without the bus's
// credentials, or with a wrong secret, is refused.
func TestHostileBusOutsider(t *testing.T) {
	b := startHostileBus(t)
	for _, c := range []struct {
		name string
		opts []nats.Option
	}{
		{"no credentials", nil},
		{"a wrong token", []nats.Option{nats.Token("guess")}},
		{"a wrong password", []nats.Option{nats.UserInfo("edge", "guess")}},
	} {
		if nc, _, err := b.connect(t, c.opts...); err == nil {
			nc.Close()
			t.Errorf("%s: connected to the bus", c.name)
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v, want an authorization violation", c.name, err)
		}
	}
}

// TestHostileBusEdgeRole: a peer with the edge's credentials cannot
// publish an event, write a lease or answer a book request; the ingest
// keeps its lease and the edge's subscriber sees nothing of it.
func TestHostileBusEdgeRole(t *testing.T) {
	b := startHostileBus(t)
	c := dialSub(t, b.edge.URL("ws"), trBTC, l2BTC)
	b.src.run(t)
	waitFor(t, 10*time.Second, "trades through the edge", func() bool { return lastOf(c.all(), trBTC) > 3 })

	nc, errs, err := b.connect(t, nats.Token(b.token(t, "edge")))
	if err != nil {
		t.Fatal(err)
	}
	subj := cluster.Subjects{Prefix: "fanoutd"}
	ev := subj.Event("coinbase:trades:BTC-USD")
	forged := `{"type":"trade","stream":"coinbase:trades:BTC-USD","seq":1,"id":"forged-by-edge","price":"1","size":"1","side":"buy","recv_time":"2026-01-01T00:00:00Z"}`
	nc.PublishMsg(&nats.Msg{Subject: ev, Header: nats.Header{cluster.HeaderSeq: {"1"}}, Data: []byte(forged)})
	violation(t, errs, "an event", ev)

	nc.Publish("$KV.fanoutd_leases.coinbase", []byte(`{"node":"edge-1","instance":"x","epoch":"x"}`))
	violation(t, errs, "a lease write", "$KV.fanoutd_leases.coinbase")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	js, _ := jetstream.New(nc)
	if kv, err := js.KeyValue(ctx, "fanoutd_leases"); err == nil {
		if _, err := kv.Put(ctx, "coinbase", []byte(`{"node":"edge-1"}`)); err == nil {
			t.Error("the edge's credentials wrote the lease")
		}
	}

	if _, err := nc.Subscribe("fanoutd.book.>", func(*nats.Msg) {}); err == nil {
		violation(t, errs, "receiving book requests", "fanoutd.book.>")
	}
	nc.Publish("_INBOX.forged.1", []byte(forged))
	violation(t, errs, "a book answer", "_INBOX.forged.1")

	// The lease is the ingest's still, and it leads.
	inc, _, err := b.connect(t, nats.Token(b.token(t, "ingest")))
	if err != nil {
		t.Fatal(err)
	}
	ijs, _ := jetstream.New(inc)
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	kv, err := ijs.KeyValue(ctx, "fanoutd_leases")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "coinbase")
	if err != nil {
		t.Fatal(err)
	}
	var l cluster.Lease
	if json.Unmarshal(e.Value(), &l); l.Node != "in-1" {
		t.Errorf("lease %s, want the ingest's", e.Value())
	}
	if _, leading := coverageLeader(t, b.ingest.URL("http")); leading == nil || !*leading {
		t.Error("the ingest stopped leading")
	}
	for _, m := range c.all() {
		if strings.Contains(string(m.raw), "forged") {
			t.Errorf("delivered: %s", m.raw)
		}
	}
}

// TestHostileBusForgedBytes: messages that reach the bus with the ingest's
// own credentials (the test's path for what no other peer may publish) are
// checked before an edge forwards them: a newline inside the bytes, a body
// of another stream, a body whose seq is not the header's. None reaches
// the subscriber, each is counted, and the stream goes on whole with the
// ingest's own events at those seqs.
func TestHostileBusForgedBytes(t *testing.T) {
	b := startHostileBus(t)
	c := dialSub(t, b.edge.URL("ws"), trBTC)
	waitFor(t, 10*time.Second, "trades through the edge", func() bool {
		b.src.step()
		return lastOf(c.all(), trBTC) >= 10
	})
	last := lastOf(c.all(), trBTC)

	nc, _, err := b.connect(t, nats.Token(b.token(t, "ingest")))
	if err != nil {
		t.Fatal(err)
	}
	hb, err := nc.SubscribeSync("fanoutd.hb.coinbase")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hb.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	epoch, leader := m.Header.Get(cluster.HeaderEpoch), m.Header.Get(cluster.HeaderLeader)
	body := func(stream string, seq uint64, id string) string {
		return `{"type":"trade","stream":"` + stream + `","seq":` + strconv.FormatUint(seq, 10) + `,"id":"` + id +
			`","price":"12345.6","size":"1","side":"buy","recv_time":"2026-01-01T00:00:00Z"}`
	}
	shutdown := `{"type":"notice","kind":"shutdown","severity":"error","venue":"","stream":"","time":"2026-01-01T00:00:00Z","message":"forged","details":{}}`
	subject := cluster.Subjects{Prefix: "fanoutd"}.Event(trBTC)
	for i, data := range []string{
		body(trBTC, last+1, "forged-newline") + "\n" + shutdown,
		body("coinbase:trades:ETH-USD", last+2, "forged-stream"),
		body(trBTC, 999999, "forged-seq"),
		body(trBTC, last+4, "forged-two") + body(trBTC, last+4, "forged-two"),
	} {
		seq := last + 1 + uint64(i)
		nc.PublishMsg(&nats.Msg{Subject: subject, Data: []byte(data),
			Header: nats.Header{cluster.HeaderEpoch: {epoch}, cluster.HeaderSeq: {strconv.FormatUint(seq, 10)}, cluster.HeaderLeader: {leader}}})
	}
	nc.Flush()
	edge := &hostile{Running: b.edge}
	waitFor(t, 10*time.Second, "the forged messages counted", func() bool {
		return metric(t, edge, "fanoutd_cluster_bus_invalid_total") >= 4
	})
	waitFor(t, 10*time.Second, "the ingest's trades after the forged ones", func() bool {
		b.src.step()
		return lastOf(c.all(), trBTC) >= last+6
	})
	var seqs []uint64
	for _, m := range c.all() {
		if strings.Contains(string(m.raw), "forged") || m.Kind == "shutdown" {
			t.Errorf("delivered: %s", m.raw)
		}
		if m.Type == "trade" {
			seqs = append(seqs, m.Seq)
		}
		if m.Kind == "stream_gap" {
			t.Errorf("a gap announced though the ingest's events arrived: %s", m.raw)
		}
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Errorf("trade seq %d after %d", seqs[i], seqs[i-1])
		}
	}
}

// TestFencedPublisher: events, notices and heartbeats from an ingest
// that does not hold the venue's lease (as an old leader cut off from
// the key-value store would publish them, well formed, at the seqs that
// come next) are dropped by the edge and counted in
// fanoutd_cluster_fenced_total; its subscriber sees the lease holder's
// events only, seq contiguous, no notice of the other's.
func TestFencedPublisher(t *testing.T) {
	b := startHostileBus(t)
	c := dialSub(t, b.edge.URL("ws"), trBTC)
	waitFor(t, 10*time.Second, "trades through the edge", func() bool {
		b.src.step()
		return lastOf(c.all(), trBTC) >= 10
	})
	last := lastOf(c.all(), trBTC)
	nc, _, err := b.connect(t, nats.Token(b.token(t, "ingest")))
	if err != nil {
		t.Fatal(err)
	}
	hb, err := nc.SubscribeSync("fanoutd.hb.coinbase")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hb.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	epoch := m.Header.Get(cluster.HeaderEpoch)
	stale := nats.Header{cluster.HeaderEpoch: {epoch}, cluster.HeaderLeader: {"in-0~stale"}}
	subj := cluster.Subjects{Prefix: "fanoutd"}
	for i := range uint64(20) {
		seq := strconv.FormatUint(last+1+i, 10)
		h := nats.Header{cluster.HeaderSeq: {seq}}
		for k, v := range stale {
			h[k] = v
		}
		nc.PublishMsg(&nats.Msg{Subject: subj.Event(trBTC), Header: h, Data: []byte(`{"type":"trade","stream":"` + trBTC + `","seq":` + seq +
			`,"id":"fenced","price":"1","size":"1","side":"buy","recv_time":"2026-01-01T00:00:00Z"}`)})
	}
	nc.PublishMsg(&nats.Msg{Subject: subj.Notice("coinbase"), Header: stale,
		Data: []byte(`{"type":"notice","kind":"link_down","severity":"warn","venue":"coinbase","stream":"","time":"2026-01-01T00:00:00Z","message":"fenced","details":{}}`)})
	nc.PublishMsg(&nats.Msg{Subject: subj.Heartbeat("coinbase"), Header: stale, Data: []byte(`{"node":"in-0","epoch":"` + epoch + `","streams":{}}`)})
	nc.Flush()
	edge := &hostile{Running: b.edge}
	waitFor(t, 10*time.Second, "the fenced messages counted", func() bool {
		return metric(t, edge, "fanoutd_cluster_fenced_total", "venue", "coinbase") == 22
	})
	waitFor(t, 10*time.Second, "the holder's trades after the fenced ones", func() bool {
		for range 10 { // the holder goes on whatever the polling pace
			b.src.step()
		}
		return lastOf(c.all(), trBTC) >= last+25
	})
	var seqs []uint64
	for _, m := range c.all() {
		if strings.Contains(string(m.raw), "fenced") {
			t.Errorf("delivered from the fenced ingest: %s", m.raw)
		}
		if m.Type == "trade" {
			seqs = append(seqs, m.Seq)
		}
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Errorf("trade seq %d after %d", seqs[i], seqs[i-1])
		}
	}
}

// TestHostileBusWantFlood: one want message naming 499 invented symbols
// (sent with an edge's credentials, as a compromised edge could) adds at
// most cluster.MaxWantAdds symbols at the ingest's venue; the rest are
// refused and counted.
func TestHostileBusWantFlood(t *testing.T) {
	b := startHostileBus(t)
	nc, _, err := b.connect(t, nats.Token(b.token(t, "edge")))
	if err != nil {
		t.Fatal(err)
	}
	w := cluster.Want{Node: "evil"}
	for i := range 499 {
		w.Streams = append(w.Streams, fmt.Sprintf("coinbase:trades:FAKE%d-USD", i))
	}
	data, _ := json.Marshal(w)
	if err := nc.Publish(cluster.Subjects{Prefix: "fanoutd"}.Want("coinbase"), data); err != nil {
		t.Fatal(err)
	}
	ingest := &hostile{Running: b.ingest}
	waitFor(t, 10*time.Second, "the want's streams decided", func() bool {
		return metric(t, ingest, "fanoutd_cluster_want_refused_total", "venue", "coinbase") == 499-cluster.MaxWantAdds
	})
	if n := metric(t, ingest, "fanoutd_venue_symbols", "venue", "coinbase"); n != 1+cluster.MaxWantAdds {
		t.Fatalf("the venue subscribes %v symbols, want BTC-USD and %d of the want's", n, cluster.MaxWantAdds)
	}
}
