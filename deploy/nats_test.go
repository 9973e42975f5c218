package deploy_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fanoutd/fanoutd/internal/cluster"
)

var update = flag.Bool("update", false, "rewrite deploy/nats/fanoutd-accounts.conf from cluster.StandaloneConfig")

// accountsConfig is cluster.StandaloneConfig for prefix fanoutd with each
// password read from the server's environment (a NATS config variable,
// which must not be quoted) instead of a literal.
func accountsConfig() string {
	const ingest, edge = "<<ingest>>", "<<edge>>"
	s := cluster.StandaloneConfig("fanoutd", ingest, edge)
	s = strings.Replace(s, fmt.Sprintf("%q", ingest), "$FANOUTD_NATS_INGEST_PASSWORD", 1)
	s = strings.Replace(s, fmt.Sprintf("%q", edge), "$FANOUTD_NATS_EDGE_PASSWORD", 1)
	return "# Generated from cluster.StandaloneConfig by TestNATSAccountsConfig (go test\n" +
		"# ./deploy -run TestNATSAccountsConfig -update); the passwords come from\n" +
		"# the servers' environment.\n" + s
}

// TestNATSAccountsConfig: deploy/nats/fanoutd-accounts.conf is what
// cluster.StandaloneConfig writes, and deploy/nats/nats.conf with it
// makes a working three-server cluster: three real servers started from
// the parsed file (only the ports and store directories moved to free
// ones on 127.0.0.1) form one JetStream cluster, the ingest user logs in
// with its password and creates the lease bucket with three replicas, the
// edge user may not touch it, and a wrong password is refused.
func TestNATSAccountsConfig(t *testing.T) {
	const path = "nats/fanoutd-accounts.conf"
	want := accountsConfig()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not what cluster.StandaloneConfig generates: go test ./deploy -run TestNATSAccountsConfig -update", path)
	}

	t.Setenv("FANOUTD_NATS_INGEST_PASSWORD", "ingest-secret")
	t.Setenv("FANOUTD_NATS_EDGE_PASSWORD", "edge-secret")
	routePorts := make([]int, 3)
	for i := range routePorts {
		routePorts[i] = freePort(t)
	}
	var clientURLs []string
	for i := range 3 {
		t.Setenv("NATS_SERVER_NAME", fmt.Sprintf("nats%d", i+1))
		o, err := server.ProcessConfigFile("nats/nats.conf")
		if err != nil {
			t.Fatalf("nats.conf: %v", err)
		}
		if o.ServerName != fmt.Sprintf("nats%d", i+1) || o.Cluster.Name != "fanoutd" || len(o.Routes) != 3 || !o.JetStream {
			t.Fatalf("nats.conf: server %q cluster %q, %d routes, jetstream %v", o.ServerName, o.Cluster.Name, len(o.Routes), o.JetStream)
		}
		if len(o.Users) != 2 || o.Users[0].Username != cluster.RoleIngest || o.Users[0].Password != "ingest-secret" || o.Users[1].Username != cluster.RoleEdge || o.Users[1].Password != "edge-secret" {
			t.Fatalf("nats.conf: users %+v: want ingest and edge with the environment's passwords", o.Users)
		}
		o.Host, o.Port, o.HTTPPort = "127.0.0.1", -1, 0
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", routePorts[i]
		o.Routes = nil
		for _, p := range routePorts {
			o.Routes = append(o.Routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
		}
		o.StoreDir = filepath.Join(t.TempDir(), "js")
		o.NoLog, o.NoSigs = true, true
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(s.Shutdown)
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats server not ready")
		}
		clientURLs = append(clientURLs, s.ClientURL())
	}
	servers := strings.Join(clientURLs, ",")

	if nc, err := nats.Connect(servers, nats.UserInfo("ingest", "wrong")); err == nil {
		nc.Close()
		t.Error("a wrong password was accepted")
	}
	ingest, err := nats.Connect(servers, nats.UserInfo("ingest", "ingest-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer ingest.Close()
	js, err := jetstream.New(ingest)
	if err != nil {
		t.Fatal(err)
	}
	// The JetStream cluster elects its meta leader after the routes form.
	var kv jetstream.KeyValue
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "fanoutd_leases", Replicas: 3})
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the ingest user cannot create the lease bucket with 3 replicas: %v", err)
	}
	st, err := kv.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if si := st.(*jetstream.KeyValueBucketStatus).StreamInfo(); si.Config.Replicas != 3 || si.Cluster == nil || len(si.Cluster.Replicas) != 2 {
		t.Errorf("lease bucket: %d replicas configured, cluster %+v", si.Config.Replicas, si.Cluster)
	}
	if _, err := kv.Put(context.Background(), "coinbase", []byte(`{}`)); err != nil {
		t.Errorf("ingest put: %v", err)
	}

	edge, err := nats.Connect(servers, nats.UserInfo("edge", "edge-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer edge.Close()
	ejs, _ := jetstream.New(edge)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// An edge reads the lease (it fences publishers that do not hold it)
	// and can never write it.
	ekv, err := ejs.KeyValue(ctx, "fanoutd_leases")
	if err != nil {
		t.Fatalf("the edge user cannot read the lease bucket: %v", err)
	}
	if _, err := ekv.Put(ctx, "coinbase", []byte(`{"node":"evil"}`)); err == nil {
		t.Error("the edge user could write the lease")
	}
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
