package deploy_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"
)

// TestKubernetesNATSConfig: the NATS configuration of
// deploy/kubernetes/nats.yaml is what nats-server reads as one server of
// the three — named by its pod, clustered with the three pods' DNS names,
// JetStream on, lame-duck mode long enough for fanoutd's nodes to move —
// and its accounts are deploy/nats/fanoutd-accounts.conf (with the
// ingest and edge users and the environment's passwords).
func TestKubernetesNATSConfig(t *testing.T) {
	b, err := os.ReadFile("kubernetes/nats.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil || cm.Kind != "ConfigMap" {
		t.Fatalf("the first document of nats.yaml: %v, kind %q; want the ConfigMap", err, cm.Kind)
	}
	accounts, err := os.ReadFile("nats/fanoutd-accounts.conf")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["fanoutd-accounts.conf"] != string(accounts) {
		t.Fatal("nats.yaml's fanoutd-accounts.conf differs from deploy/nats/fanoutd-accounts.conf")
	}
	dir := t.TempDir()
	for name, text := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("NATS_SERVER_NAME", "nats-1")
	t.Setenv("FANOUTD_NATS_INGEST_PASSWORD", "ingest-secret")
	t.Setenv("FANOUTD_NATS_EDGE_PASSWORD", "edge-secret")
	o, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	if o.ServerName != "nats-1" || o.Cluster.Name != "fanoutd" || len(o.Routes) != 3 || !o.JetStream {
		t.Fatalf("nats.conf: server %q cluster %q, %d routes, jetstream %v", o.ServerName, o.Cluster.Name, len(o.Routes), o.JetStream)
	}
	for i, r := range o.Routes {
		if want := "nats-" + string(rune('0'+i)) + ".nats:6222"; r.Host != want {
			t.Errorf("route %d: %s, want %s", i, r.Host, want)
		}
	}
	if o.LameDuckDuration < 10*time.Second || o.LameDuckGracePeriod <= 0 || o.PidFile != "/var/run/nats/nats.pid" {
		t.Errorf("lame duck %v (grace %v), pid file %q: the preStop's --signal ldm needs the pid file", o.LameDuckDuration, o.LameDuckGracePeriod, o.PidFile)
	}
	if len(o.Users) != 2 || o.Users[0].Username != "ingest" || o.Users[0].Password != "ingest-secret" || o.Users[1].Username != "edge" || o.Users[1].Password != "edge-secret" {
		t.Fatalf("users %+v: want ingest and edge with the environment's passwords", o.Users)
	}
}
