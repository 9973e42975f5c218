package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
)

// embedded runs the embedded server on a free loopback port with the
// credentials EmbeddedCredentials generated, and returns its settings.
func embedded(t *testing.T) Options {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c := Options{Role: RoleIngest, NATSURL: fmt.Sprintf("nats://127.0.0.1:%d", port), SubjectPrefix: "t", Node: "n",
		EmbeddedNATS: true, NATSDir: t.TempDir()}
	c, files, err := EmbeddedCredentials(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || c.Token == "" || c.EdgeToken == "" || c.Token == c.EdgeToken {
		t.Fatalf("generated %v: ingest %d bytes, edge %d bytes", files, len(c.Token), len(c.EdgeToken))
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
		}
	}
	again, _, err := EmbeddedCredentials(Options{NATSDir: c.NATSDir})
	if err != nil || again.Token != c.Token || again.EdgeToken != c.EdgeToken {
		t.Fatalf("a restart does not read the same secrets: %v", err)
	}
	s, err := StartServer(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return c
}

func dial(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, chan error) {
	t.Helper()
	errs := make(chan error, 64)
	nc, err := nats.Connect(url, append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// TestEmbeddedRoles: the embedded server takes each role's generated
// secret (as a token, or as the password of the role's user) and nothing
// else; an edge keeps the names bucket but cannot bind the lease bucket or
// create a stream; an ingest keeps the lease bucket but cannot create
// another stream; the account's JetStream limits are set.
func TestEmbeddedRoles(t *testing.T) {
	c := embedded(t)
	if _, err := nats.Connect(c.NATSURL); err == nil {
		t.Fatal("connected without credentials")
	}
	if _, err := nats.Connect(c.NATSURL, nats.UserInfo(RoleIngest, c.EdgeToken)); err == nil {
		t.Fatal("the edges' secret logged in as an ingest")
	}
	edge, _ := dial(t, c.NATSURL, nats.UserInfo(RoleEdge, c.EdgeToken))
	ingest, _ := dial(t, c.NATSURL, nats.Token(c.Token))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	n := NewNames(Subjects{Prefix: "t"}, "e", time.Hour, log)
	if err := n.Start(edge); err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if _, err := n.Claim("desk", "a", "c1"); err != nil {
		t.Fatalf("an edge claims a name: %v", err)
	}
	if rec, err := n.Claim("desk", "a", "c2"); err != nil || rec == nil || rec.Conn != "c1" {
		t.Fatalf("an edge reads a name: %+v %v", rec, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ijs, _ := jetstream.New(ingest)
	kv, err := ijs.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "t_leases", History: 1})
	if err != nil {
		t.Fatalf("an ingest keeps the lease bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "coinbase", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	ai, err := ijs.AccountInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ai.Limits.MaxStreams != embeddedMaxStreams || ai.Limits.MaxConsumers != embeddedMaxConsumers {
		t.Errorf("account limits %+v", ai.Limits)
	}

	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	ejs, _ := jetstream.New(edge)
	// An edge reads the leases (fencing) and writes none.
	ekv, err := ejs.KeyValue(short(), "t_leases")
	if err != nil {
		t.Fatalf("an edge cannot bind the lease bucket to watch it: %v", err)
	}
	w, err := ekv.WatchAll(short())
	if err != nil {
		t.Fatalf("an edge cannot watch the leases: %v", err)
	}
	if en := <-w.Updates(); en == nil || en.Key() != "coinbase" {
		t.Fatalf("an edge's watch: %v", en)
	}
	w.Stop()
	if _, err := ekv.Put(short(), "coinbase", []byte(`{"node":"edge"}`)); err == nil {
		t.Error("an edge wrote the lease bucket")
	}
	for who, js := range map[string]jetstream.JetStream{"edge": ejs, "ingest": ijs} {
		if _, err := js.CreateStream(short(), jetstream.StreamConfig{Name: "SPAM", Subjects: []string{"spam.>"}}); err == nil {
			t.Errorf("an %s created a stream", who)
		}
	}
	if _, err := ijs.CreateOrUpdateKeyValue(short(), jetstream.KeyValueConfig{Bucket: "t_names"}); err == nil {
		t.Error("an ingest wrote the names bucket")
	}
}

// TestEmbeddedConfiguredSecrets: configured secrets are used as they are
// (nothing is written), user+password names the ingests' user, and one
// secret for both roles is refused.
func TestEmbeddedConfiguredSecrets(t *testing.T) {
	dir := t.TempDir()
	c, files, err := EmbeddedCredentials(Options{NATSDir: dir, User: "in", Password: "pw-ingest", EdgeToken: "tok-edge"})
	if err != nil || len(files) != 0 || c.Token != "" {
		t.Fatalf("configured: %v %v token %q", files, err, c.Token)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("wrote %v", ents)
	}
	if _, err := embeddedAuth(Options{Token: "same", EdgeToken: "same"}); err == nil || !strings.Contains(err.Error(), "different") {
		t.Fatalf("one secret for both roles: %v", err)
	}
	a, err := embeddedAuth(Options{User: "in", Password: "pw-ingest", EdgeToken: "tok-edge", SubjectPrefix: "t"})
	if err != nil || a.roles[0].user != "in" || a.roles[1].user != RoleEdge {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := embeddedAuth(Options{User: RoleEdge, Password: "x", EdgeToken: "y"}); err == nil {
		t.Fatal("the ingests' user named edge")
	}
}

// TestStandaloneConfig: a standalone nats-server run with StandaloneConfig
// (the configuration docs/cluster.md gives) enforces the roles as the
// embedded server does: no login without a password, an edge cannot
// publish an event, bind the lease bucket or answer a request, but keeps
// the names bucket; an ingest keeps the lease bucket.
func TestStandaloneConfig(t *testing.T) {
	s := natstest.StandaloneConfig(t, StandaloneConfig("fanoutd", "pw-ingest", "pw-edge"))
	if nc, err := nats.Connect(s.URL()); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	}
	edge, errs := dial(t, s.URL(), nats.UserInfo(RoleEdge, "pw-edge"))
	ingest, _ := dial(t, s.URL(), nats.UserInfo(RoleIngest, "pw-ingest"))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := NewNames(Subjects{Prefix: "fanoutd"}, "e", time.Hour, log)
	if err := n.Start(edge); err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if _, err := n.Claim("desk", "a", "c1"); err != nil {
		t.Fatalf("an edge claims a name: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ijs, _ := jetstream.New(ingest)
	if _, err := ijs.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "fanoutd_leases", History: 1}); err != nil {
		t.Fatalf("an ingest keeps the lease bucket: %v", err)
	}
	for _, subj := range []string{"fanoutd.ev.coinbase.trades.BTC-USD", "$KV.fanoutd_leases.coinbase", "_INBOX.x.y"} {
		edge.Publish(subj, []byte("{}"))
		waitViolation(t, errs, subj)
	}
}

func waitViolation(t *testing.T, errs chan error, subject string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-errs:
			if strings.Contains(err.Error(), "Permissions Violation") && strings.Contains(err.Error(), subject) {
				return
			}
		case <-deadline:
			t.Fatalf("no permissions violation for %q", subject)
		}
	}
}
