package check

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads deploy/compose/compose.yaml as docker compose does
// (compose-go: the Compose specification's schema, interpolation with the
// example .env, merge keys, consistency checks).
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	o, err := cli.NewProjectOptions([]string{"../compose/compose.yaml"},
		cli.WithWorkingDirectory("../compose"),
		cli.WithEnvFiles("../compose/.env.example"),
		cli.WithDotEnv,
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := o.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return p
}

// TestCompose: the compose file is valid and is the three-host example —
// three NATS servers clustered, two ingests, two edges, Prometheus and
// Grafana — every service with a health check and its own volume, every
// fanoutd node non-root, read-only, with the io_uring seccomp profile and
// the whole NATS cluster as its bus; every file it mounts exists. Without
// the secrets set it refuses to load.
func TestCompose(t *testing.T) {
	p := loadCompose(t)
	want := []string{"edge-a", "edge-b", "grafana", "ingest-a", "ingest-b", "nats1", "nats2", "nats3", "prometheus"}
	if got := p.ServiceNames(); !slices.Equal(sorted(got), want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	natsURL := "nats://nats1:4222,nats://nats2:4222,nats://nats3:4222"
	vols := map[string]string{}
	for _, s := range p.Services {
		if s.HealthCheck == nil || len(s.HealthCheck.Test) < 2 || s.HealthCheck.Test[0] != "CMD" {
			t.Errorf("%s: no health check", s.Name)
		}
		var data string
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeVolume {
				data = v.Source
				if other, dup := vols[v.Source]; dup {
					t.Errorf("%s and %s share volume %s", s.Name, other, v.Source)
				}
				vols[v.Source] = s.Name
			}
		}
		if data == "" {
			t.Errorf("%s: no named volume for its data", s.Name)
		}
		for _, c := range s.Configs {
			f := p.Configs[c.Source].File
			if _, err := os.Stat(f); err != nil {
				t.Errorf("%s: config %s: %v", s.Name, c.Source, err)
			}
		}
		switch {
		case strings.HasPrefix(s.Name, "nats"):
			if s.Environment["NATS_SERVER_NAME"] == nil || *s.Environment["NATS_SERVER_NAME"] != s.Name {
				t.Errorf("%s: NATS_SERVER_NAME %v", s.Name, s.Environment["NATS_SERVER_NAME"])
			}
			if len(s.Ports) != 0 {
				t.Errorf("%s publishes %v: the bus is for the nodes only", s.Name, s.Ports)
			}
		case strings.HasPrefix(s.Name, "ingest"), strings.HasPrefix(s.Name, "edge"):
			role := strings.SplitN(s.Name, "-", 2)[0]
			if s.Image != "fanoutd:dev" || s.User != "65532:65532" || !s.ReadOnly {
				t.Errorf("%s: image %q user %q read-only %v", s.Name, s.Image, s.User, s.ReadOnly)
			}
			if !slices.Equal(s.Command, []string{"serve", "--config", "/etc/fanoutd/" + role + ".yaml"}) {
				t.Errorf("%s: command %q", s.Name, s.Command)
			}
			if v := s.Environment["FANOUTD_NATS_URL"]; v == nil || *v != natsURL {
				t.Errorf("%s: FANOUTD_NATS_URL %s, want %s", s.Name, deref(v), natsURL)
			}
			pw := s.Environment["FANOUTD_NATS_PASSWORD"]
			if pw == nil || *pw != "change-me-"+role {
				t.Errorf("%s: FANOUTD_NATS_PASSWORD is not the %s password", s.Name, role)
			}
			seccomp := ""
			for _, o := range s.SecurityOpt {
				if f, ok := strings.CutPrefix(o, "seccomp="); ok {
					seccomp = f
				}
			}
			if filepath.Clean(filepath.Join("../compose", seccomp)) != filepath.Clean("../seccomp/fanoutd.json") {
				t.Errorf("%s: seccomp %q, want ../seccomp/fanoutd.json", s.Name, seccomp)
			}
			probe := "/healthz"
			if role == "edge" {
				probe = "/readyz"
			}
			if !slices.Equal(s.HealthCheck.Test, []string{"CMD", "/usr/local/bin/fanoutd", "probe", "http://127.0.0.1:8080" + probe}) {
				t.Errorf("%s: health check %q", s.Name, s.HealthCheck.Test)
			}
			for _, n := range []string{"nats1", "nats2", "nats3"} {
				if d, ok := s.DependsOn[n]; !ok || d.Condition != types.ServiceConditionHealthy {
					t.Errorf("%s does not wait for %s to be healthy", s.Name, n)
				}
			}
		}
	}

	// Without the secrets docker compose refuses the file.
	o, err := cli.NewProjectOptions([]string{"../compose/compose.yaml"}, cli.WithWorkingDirectory("../compose"), cli.WithEnv([]string{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.LoadProject(context.Background()); err == nil || !strings.Contains(err.Error(), "set it in .env") {
		t.Errorf("without .env: %v, want the missing secret named", err)
	}
}

// TestComposeCLI runs `docker compose config`, which needs no engine,
// where the compose plugin is installed.
func TestComposeCLI(t *testing.T) {
	if exec.Command("docker", "compose", "version").Run() != nil {
		t.Skip("docker compose is not installed")
	}
	cmd := exec.Command("docker", "compose", "--env-file", ".env.example", "config", "--quiet")
	cmd.Dir = "../compose"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker compose config: %v\n%s", err, out)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func deref(s *string) string {
	if s == nil {
		return "(unset)"
	}
	return *s
}
