package check

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/validator"
	"go.yaml.in/yaml/v4"
)

// kubeSchemas writes the schemas of the kinds the manifests use into a
// temporary directory and returns kubeconform's schema location for it.
func kubeSchemas(t *testing.T) string {
	t.Helper()
	swagger, err := SwaggerPath()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteSchemas(swagger, dir, []string{"v1 ConfigMap", "v1 Service", "apps/v1 StatefulSet", "apps/v1 Deployment", "policy/v1 PodDisruptionBudget"}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "{{ .ResourceKind }}{{ .KindSuffix }}.json")
}

// kubeconform validates the YAML documents of r (named name) strictly and
// returns each resource's status and error.
func kubeconform(t *testing.T, v validator.Validator, name string, r io.Reader) []validator.Result {
	t.Helper()
	return v.Validate(name, io.NopCloser(r))
}

var manifests = []string{"../kubernetes/nats.yaml", "../kubernetes/ingest.yaml", "../kubernetes/edge.yaml"}

// TestKubernetesManifests: every resource of deploy/kubernetes is valid
// for Kubernetes (KubernetesVersion), checked by kubeconform strictly
// against the API's own OpenAPI document — no unknown field, every type
// right — and a manifest with a misspelled field or a wrong type is
// refused, so the check is not vacuous.
func TestKubernetesManifests(t *testing.T) {
	v, err := validator.New([]string{kubeSchemas(t)}, validator.Opts{Strict: true, KubernetesVersion: strings.TrimPrefix(KubernetesVersion, "v")})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, path := range manifests {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range kubeconform(t, v, path, bytes.NewReader(b)) {
			sig, _ := res.Resource.Signature()
			if res.Status != validator.Valid {
				t.Errorf("%s: %+v: status %d: %v", path, sig, res.Status, res.Err)
				continue
			}
			kinds[sig.Kind]++
		}
	}
	want := map[string]int{"ConfigMap": 1, "Service": 3, "StatefulSet": 2, "Deployment": 1, "PodDisruptionBudget": 3}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}

	edge, err := os.ReadFile("../kubernetes/edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ what, from, to string }{
		{"a misspelled field", "replicas: 2", "replica: 2"},
		{"a wrong type", "periodSeconds: 2", "periodSeconds: two"},
		{"an unknown field in a container", "readinessProbe:", "readinesProbe:"},
	} {
		doc := strings.Replace(string(edge), bad.from, bad.to, 1)
		invalid := false
		for _, res := range kubeconform(t, v, "edge.yaml", strings.NewReader(doc)) {
			if res.Status == validator.Invalid {
				invalid = true
			}
		}
		if !invalid {
			t.Errorf("%s (%q for %q) was not refused", bad.what, bad.to, bad.from)
		}
	}
}

// kubeDocs parses every YAML document of the manifests.
func kubeDocs(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, path := range manifests {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out[doc["kind"].(string)+"/"+dig[string](doc, "metadata", "name")] = doc
		}
		f.Close()
	}
	return out
}

// dig returns the value at the path of keys (and list indexes, as ints).
func dig[T any](v any, path ...any) T {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				v = nil
			} else {
				v = l[k]
			}
		}
	}
	t, _ := v.(T)
	return t
}

func strs(v []any) []string {
	out := make([]string, len(v))
	for i, e := range v {
		out[i], _ = e.(string)
	}
	return out
}

// TestKubernetesDeployment: the manifests are the deployment the cluster
// needs — two ingests in a StatefulSet, an edge Deployment ready on
// /readyz, live on /healthz, drained by `fanoutd drain` before it stops
// with time left for the shutdown; a PodDisruptionBudget over each set of
// pods; every pod non-root with a seccomp profile, no privilege
// escalation, a read-only root; the image's configuration files; the
// three NATS servers named in every node's server list.
func TestKubernetesDeployment(t *testing.T) {
	docs := kubeDocs(t)
	ingest, edge, nats := docs["StatefulSet/fanoutd-ingest"], docs["Deployment/fanoutd-edge"], docs["StatefulSet/nats"]
	if ingest == nil || edge == nil || nats == nil {
		t.Fatalf("want StatefulSets fanoutd-ingest and nats and Deployment fanoutd-edge: %v", slices.Collect(func(yield func(string) bool) {
			for k := range docs {
				yield(k)
			}
		}))
	}
	if n := dig[int](ingest, "spec", "replicas"); n != 2 {
		t.Errorf("ingest replicas %d, want 2", n)
	}
	if n := dig[int](nats, "spec", "replicas"); n != 3 {
		t.Errorf("nats replicas %d, want 3", n)
	}
	if n := dig[int](edge, "spec", "replicas"); n < 2 {
		t.Errorf("edge replicas %d, want at least 2", n)
	}
	c := dig[map[string]any](edge, "spec", "template", "spec", "containers", 0)
	if p := dig[string](c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("edge readiness probe on %q, want /readyz", p)
	}
	for _, set := range []map[string]any{ingest, edge} {
		c := dig[map[string]any](set, "spec", "template", "spec", "containers", 0)
		if p := dig[string](c, "livenessProbe", "httpGet", "path"); p != "/healthz" && p != "/livez" {
			t.Errorf("%s liveness probe on %q, want /healthz or /livez", dig[string](set, "metadata", "name"), p)
		}
	}
	pre := strs(dig[[]any](c, "lifecycle", "preStop", "exec", "command"))
	if len(pre) < 2 || pre[0] != "/usr/local/bin/fanoutd" || pre[1] != "drain" || !slices.Contains(pre, "--wait") {
		t.Errorf("edge preStop %q, want /usr/local/bin/fanoutd drain --wait …", pre)
	}
	if g := dig[int](edge, "spec", "template", "spec", "terminationGracePeriodSeconds"); g < 5+5+5 {
		t.Errorf("edge terminationGracePeriodSeconds %d: the drain's 5 s and the shutdown's 5 s need more", g)
	}

	for key, doc := range docs {
		if !strings.HasPrefix(key, "PodDisruptionBudget/") {
			continue
		}
		sel := dig[map[string]any](doc, "spec", "selector", "matchLabels")
		matched := 0
		for _, set := range []map[string]any{ingest, edge, nats} {
			labels := dig[map[string]any](set, "spec", "template", "metadata", "labels")
			all := len(sel) > 0
			for k, v := range sel {
				if labels[k] != v {
					all = false
				}
			}
			if all {
				matched++
			}
		}
		if matched != 1 {
			t.Errorf("%s selects %d sets of pods, want 1", key, matched)
		}
	}
	for _, name := range []string{"fanoutd-ingest", "fanoutd-edge", "nats"} {
		if docs["PodDisruptionBudget/"+name] == nil {
			t.Errorf("no PodDisruptionBudget %s", name)
		}
	}

	for _, set := range []map[string]any{ingest, edge, nats} {
		name := dig[string](set, "metadata", "name")
		pod := dig[map[string]any](set, "spec", "template", "spec")
		if dig[bool](pod, "securityContext", "runAsNonRoot") != true || dig[int](pod, "securityContext", "runAsUser") == 0 {
			t.Errorf("%s: not non-root: %v", name, pod["securityContext"])
		}
		if typ := dig[string](pod, "securityContext", "seccompProfile", "type"); typ != "RuntimeDefault" && typ != "Localhost" {
			t.Errorf("%s: seccomp profile %q", name, typ)
		}
		for _, c := range dig[[]any](pod, "containers") {
			sc := dig[map[string]any](c, "securityContext")
			if dig[bool](sc, "allowPrivilegeEscalation") != false || sc["allowPrivilegeEscalation"] == nil || dig[bool](sc, "readOnlyRootFilesystem") != true || !slices.Equal(strs(dig[[]any](sc, "capabilities", "drop")), []string{"ALL"}) {
				t.Errorf("%s: container security context %v", name, sc)
			}
		}
	}

	var natsURLs []string
	for i := range 3 {
		natsURLs = append(natsURLs, "nats://nats-"+string(rune('0'+i))+".nats:4222")
	}
	for role, set := range map[string]map[string]any{"ingest": ingest, "edge": edge} {
		c := dig[map[string]any](set, "spec", "template", "spec", "containers", 0)
		args := strs(dig[[]any](c, "args"))
		if !slices.Equal(args, []string{"serve", "--config", "/etc/fanoutd/" + role + ".yaml"}) {
			t.Errorf("%s args %q", role, args)
		}
		if _, err := os.Stat("../config/" + role + ".yaml"); err != nil {
			t.Errorf("%s: the image has no such configuration: %v", role, err)
		}
		env := map[string]map[string]any{}
		for _, e := range dig[[]any](c, "env") {
			env[dig[string](e, "name")] = e.(map[string]any)
		}
		if got := dig[string](env["FANOUTD_NATS_URL"], "value"); got != strings.Join(natsURLs, ",") {
			t.Errorf("%s FANOUTD_NATS_URL %q, want %q", role, got, strings.Join(natsURLs, ","))
		}
		if key := dig[string](env["FANOUTD_NATS_PASSWORD"], "valueFrom", "secretKeyRef", "key"); key != role+"-password" {
			t.Errorf("%s's NATS password from key %q, want %s-password", role, key, role)
		}
	}
}
