package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
)

func writeConfig(t testing.TB, yml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fanoutd.yaml")
	if err := os.WriteFile(p, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBadMaxQueueLenExits2NamingKeyAndValue(t *testing.T) {
	for _, tc := range []struct{ yaml, value string }{
		{`"10000"`, `"10000"`},
		{`1.5`, `1.5`},
		{`true`, `true`},
		{`0`, `0`},
		{`-5`, `-5`},
		{`"infinity"`, `"infinity"`},
		{`.inf`, `+Inf`},
	} {
		p := writeConfig(t, "venues:\n  kraken:\n    max_queue_len: "+tc.yaml+"\n")
		for _, args := range [][]string{{"check-config", p}, {"serve", "--config", p}} {
			var out, errb bytes.Buffer
			code := run(args, &out, &errb)
			msg := errb.String()
			if code != 2 || !strings.HasPrefix(msg, "fanoutd: config: venues.kraken.max_queue_len: "+tc.value+" ") || strings.Count(msg, "\n") != 1 {
				t.Errorf("%v with max_queue_len %s: exit %d, stderr %q", args[0], tc.yaml, code, msg)
			}
		}
	}
	for _, good := range []string{"1", "10000", "null"} {
		p := writeConfig(t, "venues:\n  kraken:\n    max_queue_len: "+good+"\n")
		var out, errb bytes.Buffer
		if code := run([]string{"check-config", p}, &out, &errb); code != 0 {
			t.Errorf("max_queue_len %s: exit %d %s", good, code, errb.String())
		}
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"listen: 127.0.0.1:8080\nfrobnicate: 1\n", "frobnicate: unknown key"},
		{"venues:\n  coinbase:\n    symbolz: [BTC-USD]\n", "venues.coinbase.symbolz: unknown key"},
		{"limits:\n  max_streams_per_connection: many\n", "limits.max_streams_per_connection"},
		{"limits:\n  max_streams_per_connection: 0\n", "limits.max_streams_per_connection: 0"},
		{"websocket:\n  write_timeout: soon\n", `websocket.write_timeout: "soon"`},
		{"venues:\n  ftx: {}\n", "venues.ftx: unknown venue"},
		{"venues:\n  coinbase:\n    channels: [level3]\n", `venues.coinbase.channels[0]: "level3"`},
		{"venues:\n  coinbase:\n    max_queue_bytes: -1\n", "venues.coinbase.max_queue_bytes: -1"},
		{"tokens:\n  - name: a\n", "tokens[0]: set sha256"},
		{"tokens:\n  - name: a\n    sha256: abc\n", "tokens[0].sha256: not 64 hex digits"},
		{"log_level: loud\n", `log_level: "loud"`},
		{"websocket:\n  io_uring: sometimes\n", "websocket.io_uring"},
		// Values that would otherwise pass check-config and then crash or
		// weaken serve.
		{"limits:\n  max_message_bytes: 100000000000\n", "limits.max_message_bytes: 100000000000 is not an integer from 64 to 1048576"},
		{"limits:\n  max_message_bytes: 4611686018427387904\n", "limits.max_message_bytes: 4611686018427387904 is not an integer"},
		{"limits:\n  max_message_bytes: 1.5\n", "limits.max_message_bytes: 1.5 is not an integer"},
		{"limits:\n  commands_per_second: 0\n", "limits.commands_per_second: 0 is not a number above 0"},
		{"websocket:\n  max_batch_bytes: 1e12\n", "websocket.max_batch_bytes"},
		{"venues:\n  coinbase:\n    depth: 2.5\n", "venues.coinbase.depth: 2.5"},
		{"venues:\n  coinbase:\n    max_queue_bytes: 100000000000000\n", "venues.coinbase.max_queue_bytes"},
		{"listen: 127.0.0.1:99999\n", `listen: "127.0.0.1:99999": port "99999" is not a number from 0 to 65535`},
		{"tokens:\n  - {name: a, token: s}\n  - {name: b, token: s}\n", "tokens[1]: has the same secret as tokens[0]"},
		{"tokens:\n  - {name: a, token: s, streams: [\"coinbase:levl2:*\"]}\n", `tokens[0].streams[0]: "coinbase:levl2:*" names channel "levl2"`},
		{"tokens:\n  - {name: a, token: s, streams: [\"ftx:*\"]}\n", `tokens[0].streams[0]: "ftx:*" names venue "ftx"`},
		{"tokens:\n  - {name: a, token: s, streams: [\"coinbase:level2\"]}\n", `tokens[0].streams[0]: "coinbase:level2" is not a stream`},
		{"tokens:\n  - {name: a, token: s, streams: [\"*BTC*\"]}\n", `tokens[0].streams[0]: "*BTC*" venue part "*BTC*" matches no venue`},
		{"http:\n  idle_timeout: 0s\n", `http.idle_timeout: "0s"`},
		{"http:\n  max_anonymous_connections: -1\n", "http.max_anonymous_connections: -1"},
		{"websocket:\n  named_ttl: forever\n", `websocket.named_ttl: "forever" is not a duration from 1s to 8760h, or never`},
		{"limits:\n  max_reply_bytes: 10\n", "limits.max_reply_bytes: 10 is not an integer from 1024"},
		{"limits:\n  max_named_per_token: 0\n", "limits.max_named_per_token: 0 is not an integer from 1"},
		{"limits:\n  max_named: many\n", `limits.max_named: "many" is not`},
		{"tokens:\n  - {name: t1, token: s1, streams: [[\"x\"]]}\n", "tokens[0].streams[0]: cannot unmarshal !!seq"},
		{"shutdown_timeout: 1000h\n", `shutdown_timeout: "1000h" is not a duration between 0 and 24h`},
		// cluster:; secrets are never echoed.
		{"cluster:\n  role: relay\n", `cluster.role: "relay" is not all, ingest or edge`},
		{"cluster:\n  nats_url: http://x:1\n", `cluster.nats_url: "http://x:1" is not nats://host:port`},
		{"cluster:\n  nats_url: nats://bob:hunter2@x:4222\n", "cluster.nats_url: carries credentials"},
		{"cluster:\n  nats_url: nats://x\n", `cluster.nats_url: "nats://x" has no port`},
		{"cluster:\n  nats_url: nats://a:4222, http://b:1,nats://c\n", `cluster.nats_url: "http://b:1" is not nats://host:port or tls://host:port; "nats://c" has no port`},
		{"cluster:\n  nats_url: \" , \"\n", `cluster.nats_url: is empty`},
		{"cluster:\n  kv_replicas: 7\n", `cluster.kv_replicas: 7 is not an integer from 1 to 5`},
		{"cluster:\n  kv_replicas: 0\n", `cluster.kv_replicas: 0 is not an integer from 1 to 5`},
		{"cluster:\n  role: ingest\n  embedded_nats: true\n  nats_url: nats://127.0.0.1:4222,nats://127.0.0.1:4223\n", `cluster.embedded_nats: the embedded server listens on one address, and cluster.nats_url lists 2`},
		{"cluster:\n  subject_prefix: a.*\n", `cluster.subject_prefix: "a.*" is not dot-separated tokens`},
		{"cluster:\n  user: bob\n", "cluster.user: user and password go together"},
		{"cluster:\n  token: hunter2\n  creds: /x.creds\n", "cluster: set one of user+password, token or creds"},
		{"cluster:\n  tls: {cert: /c.pem}\n", "cluster.tls: cert and key go together"},
		{"cluster:\n  role: edge\n  embedded_nats: true\n", "cluster.embedded_nats: only an ingest node runs the embedded NATS server (role is edge)"},
		{"cluster:\n  node: a b\n", `cluster.node: "a b" is not a name`},
		{"cluster:\n  role: ingest\n  embedded_nats: true\n  nats_url: nats://0.0.0.0:4222\n", `cluster.embedded_nats: "0.0.0.0:4222" is not a loopback address and no bus credentials are configured (configure cluster.token and cluster.edge_token, or listen on loopback)`},
		{"cluster:\n  role: ingest\n  embedded_nats: true\n  nats_url: nats://10.0.0.5:4222\n  token: t-ingest\n", `cluster.embedded_nats: "10.0.0.5:4222" is not a loopback address and no bus credentials`},
		{"cluster:\n  role: ingest\n  embedded_nats: true\n  token: same\n  edge_token: same\n", "cluster.edge_token: is the ingests' secret too (each role needs its own)"},
		{"cluster:\n  colour: red\n", "cluster.colour: unknown key"},
	} {
		p := writeConfig(t, tc.yaml)
		var out, errb bytes.Buffer
		code := run([]string{"check-config", p}, &out, &errb)
		if code != 2 || !strings.HasPrefix(errb.String(), "fanoutd: config: ") || !strings.Contains(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.yaml, code, errb.String(), "fanoutd: config: "+tc.want)
		}
	}
}

func TestClusterDefaultsAndEnv(t *testing.T) {
	cfg, err := config.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if c := cfg.Cluster; c.Role != "all" || c.NATSURL != "nats://127.0.0.1:4222" || c.SubjectPrefix != "fanoutd" || c.Node != host || c.EmbeddedNATS || c.Clustered() {
		t.Fatalf("defaults: %+v", c)
	}
	env := map[string]string{"FANOUTD_NATS_URL": "tls://n1:4443", "FANOUTD_NATS_TOKEN": "hunter2", "FANOUTD_NATS_EDGE_TOKEN": "hunter3"}
	cfg, err = config.Parse([]byte("cluster:\n  role: ingest\n  embedded_nats: true\n  node: in-1\n  subject_prefix: acme.md\n"), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Cluster
	if c.Role != "ingest" || !c.EmbeddedNATS || c.Node != "in-1" || c.SubjectPrefix != "acme.md" || c.NATSURL != "tls://n1:4443" || c.Token != "hunter2" || c.EdgeToken != "hunter3" {
		t.Fatalf("%+v", c)
	}
	if s := c.String(); strings.Contains(s, "hunter2") || strings.Contains(s, "hunter3") || !strings.Contains(s, "auth=token") {
		t.Fatalf("String leaks or misses: %s", s)
	}
	_, err = config.Parse([]byte("cluster:\n  user: bob\n"), func(k string) string {
		return map[string]string{"FANOUTD_NATS_PASSWORD": "hunter2"}[k]
	})
	if err != nil {
		t.Fatalf("user from file, password from env: %v", err)
	}
	_, err = config.Parse([]byte("cluster:\n  password: hunter2\n"), nil)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("password without user: %v", err)
	}
}

func TestDefaultsAndEnvOverrides(t *testing.T) {
	cfg, err := config.Parse(nil, func(k string) string {
		return map[string]string{"FANOUTD_LISTEN": "127.0.0.1:9999", "FANOUTD_TOKENS": "abc, sha256:" + strings.Repeat("0", 64)}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9999" || len(cfg.Tokens) != 2 || len(cfg.Venues) != 5 || cfg.Venues[0].MaxQueueLen != 10000 ||
		cfg.Venues[0].MaxQueueBytes != 8<<20 || cfg.ShutdownTimeout != 5*time.Second || !cfg.Websocket.IOUring || cfg.Websocket.WriteDelay != 10*time.Millisecond {
		t.Fatalf("%+v", cfg)
	}
	cfg, err = config.Parse([]byte("websocket:\n  io_uring: false\n"), nil)
	if err != nil || cfg.Websocket.IOUring {
		t.Fatalf("io_uring: false: %v, Uring %v", err, cfg.Websocket.IOUring)
	}
}

func TestServeRefusesNonLoopbackWithoutTokens(t *testing.T) {
	var out, errb bytes.Buffer
	p := writeConfig(t, "listen: 0.0.0.0:0\nvenues: {}\n")
	if code := serve(context.Background(), []string{"--config", p}, &out, &errb, daemon.Options{}, nil); code != 2 || !strings.Contains(errb.String(), "--insecure") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestServeRefusesOpenBus: the flags that put the embedded NATS server on
// a non-loopback address without bus credentials stop serve as the file
// would.
func TestServeRefusesOpenBus(t *testing.T) {
	var out, errb bytes.Buffer
	p := writeConfig(t, "venues: {}\n")
	args := []string{"--config", p, "--role", "ingest", "--embedded-nats", "--nats", "nats://0.0.0.0:4222"}
	if code := serve(context.Background(), args, &out, &errb, daemon.Options{}, nil); code != 2 ||
		!strings.HasPrefix(errb.String(), `fanoutd: config: cluster.embedded_nats: "0.0.0.0:4222" is not a loopback address`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

func TestServeRunsAndStops(t *testing.T) {
	p := writeConfig(t, "listen: 127.0.0.1:0\nvenues: {}\nclaim_check: {stores: [{kind: dir, path: "+t.TempDir()+"}]}\n")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() { done <- serve(ctx, []string{"--config", p}, &out, &errb, daemon.Options{}, ready) }()
	addr := <-ready
	if code, _ := httpGet(t, "http://"+addr+"/healthz", nil); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
