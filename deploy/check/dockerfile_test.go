package check

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDockerfile checks deploy/Dockerfile, which cannot be built here (no
// Docker engine): the binary is built static (CGO_ENABLED=0), the final
// stage is a distroless static base run as a non-root user, and its
// entrypoint, command, user, port, working directory, listen address and
// health check are the image's (ImageConfig), so both images behave alike.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Instructions, continuation lines joined, comments dropped.
	var ins [][2]string
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		cur += line
		if strings.HasSuffix(cur, "\\") {
			cur = strings.TrimSuffix(cur, "\\") + " "
			continue
		}
		if f := strings.Fields(cur); len(f) > 0 {
			ins = append(ins, [2]string{strings.ToUpper(f[0]), strings.TrimSpace(cur[len(f[0]):])})
		}
		cur = ""
	}
	var stages []int
	for i, in := range ins {
		if in[0] == "FROM" {
			stages = append(stages, i)
		}
	}
	if len(stages) != 2 {
		t.Fatalf("%d stages, want 2 (build, run)", len(stages))
	}
	build, final := ins[stages[0]:stages[1]], ins[stages[1]:]
	if f := final[0][1]; !strings.HasPrefix(f, "gcr.io/distroless/static") || !strings.HasSuffix(f, ":nonroot") {
		t.Errorf("final base %q, want distroless static, nonroot", f)
	}
	static := false
	for _, in := range build {
		if in[0] == "RUN" && strings.Contains(in[1], "go build") {
			static = strings.Contains(in[1], "CGO_ENABLED=0") && strings.Contains(in[1], "./cmd/fanoutd")
		}
	}
	if !static {
		t.Error("the build stage does not build ./cmd/fanoutd with CGO_ENABLED=0")
	}
	want := ImageConfig()
	got := map[string][]string{}
	for _, in := range final {
		got[in[0]] = append(got[in[0]], in[1])
	}
	jsonArray := func(key string) []string {
		var v []string
		if len(got[key]) != 1 || json.Unmarshal([]byte(got[key][0]), &v) != nil {
			t.Errorf("%s: %q, want one JSON array", key, got[key])
		}
		return v
	}
	if users := got["USER"]; len(users) != 1 || users[0] != want.User {
		t.Errorf("USER %q, want %q (non-root)", users, want.User)
	}
	if e := jsonArray("ENTRYPOINT"); !slices.Equal(e, want.Entrypoint) {
		t.Errorf("ENTRYPOINT %q, want %q", e, want.Entrypoint)
	}
	if c := jsonArray("CMD"); !slices.Equal(c, want.Cmd) {
		t.Errorf("CMD %q, want %q", c, want.Cmd)
	}
	if w := got["WORKDIR"]; len(w) != 1 || w[0] != want.WorkingDir {
		t.Errorf("WORKDIR %q, want %q", w, want.WorkingDir)
	}
	if p := got["EXPOSE"]; len(p) != 1 || p[0]+"/tcp" != "8080/tcp" {
		t.Errorf("EXPOSE %q", p)
	}
	if env := got["ENV"]; !slices.Contains(env, "FANOUTD_LISTEN=0.0.0.0:8080") {
		t.Errorf("ENV %q: the image listens on 0.0.0.0:8080", env)
	}
	hc := got["HEALTHCHECK"]
	if len(hc) != 1 || !strings.Contains(hc[0], "CMD ") {
		t.Fatalf("HEALTHCHECK %q", hc)
	}
	var test []string
	if err := json.Unmarshal([]byte(hc[0][strings.Index(hc[0], "CMD ")+4:]), &test); err != nil || !slices.Equal(append([]string{"CMD"}, test...), want.Healthcheck.Test) {
		t.Errorf("HEALTHCHECK %q, want %q", hc[0], want.Healthcheck.Test)
	}
	// The data directory is the user's: the image's WORKDIR alone would be root's.
	owned := false
	for _, c := range got["COPY"] {
		if strings.Contains(c, "--chown=65532:65532") && strings.HasSuffix(c, " "+want.WorkingDir) {
			owned = true
		}
	}
	if !owned {
		t.Errorf("no COPY --chown=65532:65532 … %s", want.WorkingDir)
	}
}
