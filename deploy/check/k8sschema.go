package check

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KubernetesVersion is the Kubernetes release whose API the manifests in
// deploy/kubernetes are validated against: its OpenAPI document ships in
// the k8s.io/kubernetes module (api/openapi-spec/swagger.json), which the
// go command fetches from the module proxy like any module.
const KubernetesVersion = "v1.34.4"

// SwaggerPath returns the path of KubernetesVersion's swagger.json in the
// module cache, downloading the module if it is not there.
func SwaggerPath() (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+KubernetesVersion).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download k8s.io/kubernetes@%s: %v", KubernetesVersion, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download k8s.io/kubernetes@%s: %s %v", KubernetesVersion, m.Error, err)
	}
	return filepath.Join(m.Dir, "api", "openapi-spec", "swagger.json"), nil
}

// KindSuffix is kubeconform's name for an apiVersion in a schema file's
// name: "-v1" for the core group, "-apps-v1", "-policy-v1", and the
// group's first label for a dotted group ("-networking-v1").
func KindSuffix(apiVersion string) string {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return "-" + strings.ToLower(apiVersion)
	}
	first, _, _ := strings.Cut(group, ".")
	return "-" + strings.ToLower(first) + "-" + strings.ToLower(version)
}

// WriteSchemas writes into dir one JSON schema per kind the swagger
// document defines, as kubeconform's "standalone-strict" schemas are
// (file <kind>-<suffix>.json, lower case): self-contained (every
// definition it refers to copied into its own "definitions"), strict (an
// object with properties allows no other), an int-or-string or a
// quantity either, apiVersion and kind their only values. Only the kinds
// in want ("apps/v1 StatefulSet") are written; it fails on one the
// document lacks.
func WriteSchemas(swagger, dir string, want []string) error {
	raw, err := os.ReadFile(swagger)
	if err != nil {
		return err
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %v", swagger, err)
	}
	byGVK := map[string]string{}
	for name, def := range doc.Definitions {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m, _ := g.(map[string]any)
			group, _ := m["group"].(string)
			version, _ := m["version"].(string)
			kind, _ := m["kind"].(string)
			av := version
			if group != "" {
				av = group + "/" + version
			}
			byGVK[av+" "+kind] = name
		}
	}
	for _, w := range want {
		name, ok := byGVK[w]
		if !ok {
			return fmt.Errorf("%s: Kubernetes %s defines no %s", swagger, KubernetesVersion, w)
		}
		av, kind, _ := strings.Cut(w, " ")
		defs := map[string]any{}
		collect(doc.Definitions, name, defs)
		root := strictCopy(doc.Definitions[name]).(map[string]any)
		props, _ := root["properties"].(map[string]any)
		if props != nil {
			props["apiVersion"] = map[string]any{"type": "string", "enum": []any{av}}
			props["kind"] = map[string]any{"type": "string", "enum": []any{kind}}
		}
		for k := range defs {
			defs[k] = strictCopy(doc.Definitions[k])
		}
		if _, ok := defs[quantity]; ok {
			defs[quantity] = map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
		}
		root["definitions"] = defs
		root["$schema"] = "http://json-schema.org/draft-04/schema#"
		b, err := json.Marshal(root)
		if err != nil {
			return err
		}
		file := filepath.Join(dir, strings.ToLower(kind)+KindSuffix(av)+".json")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

const (
	defPrefix = "#/definitions/"
	quantity  = "io.k8s.apimachinery.pkg.api.resource.Quantity" // "500m", "2Gi", or a number
)

// collect adds to out every definition name refers to, transitively.
func collect(all map[string]map[string]any, name string, out map[string]any) {
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, defPrefix) {
				n := strings.TrimPrefix(ref, defPrefix)
				if _, seen := out[n]; !seen {
					out[n] = true
					walk(all[n])
				}
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(all[name])
}

// strictCopy copies a swagger schema as kubeconform's strict schemas have
// it: no other properties than those listed; an int-or-string (format
// int-or-string) a string or an integer, a resource quantity a string or
// a number.
func strictCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v["format"] == "int-or-string" {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
		}
		out := make(map[string]any, len(v)+1)
		for k, e := range v {
			if k == "properties" {
				props := map[string]any{}
				for pk, pv := range e.(map[string]any) {
					props[pk] = strictCopy(pv)
				}
				out[k] = props
				continue
			}
			out[k] = strictCopy(e)
		}
		if _, ok := v["properties"]; ok {
			if _, set := v["additionalProperties"]; !set {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = strictCopy(e)
		}
		return out
	}
	return v
}
