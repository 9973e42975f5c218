package fanoutd_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection checks the layering of the design card: the contract
// on top, implementations below (tailscale's deptest, in miniature).
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/fanoutd/fanoutd/"
	bad := map[string]map[string]string{ // package prefix => forbidden import prefix => why
		"venue":   {"": "venue is the contract: it imports only notice and internal helpers"},
		"notice":  {"": "notice is a leaf"},
		"venues/": {"fanout": "adapters do not know who receives", "subscriber": "adapters do not know who receives", "cmd/": "adapters do not know the daemon"},
		"fanout":  {"claimcheck": "fanout does not know storage", "cmd/": "fanout does not know the daemon"},
	}
	allowedInContract := map[string]bool{"notice": true, "internal/jsonw": true}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, mod) {
				if (pkg == "fanout" || pkg == "subscriber" || pkg == "venue") && strings.Contains(imp, "websocket") {
					t.Errorf("%s imports %s: the core does not know websockets (subscriber/wsapi does)", pkg, imp)
				}
				continue
			}
			dep := strings.TrimPrefix(imp, mod)
			for prefix, rules := range bad {
				if pkg != prefix && !(strings.HasSuffix(prefix, "/") && strings.HasPrefix(pkg, prefix)) {
					continue
				}
				for forbidden, why := range rules {
					if forbidden == "" {
						if !(prefix == "venue" && allowedInContract[dep]) && !(prefix == "notice" && dep == "internal/jsonw") {
							t.Errorf("%s imports %s: %s", pkg, dep, why)
						}
						continue
					}
					if strings.HasPrefix(dep, forbidden) {
						t.Errorf("%s imports %s: %s", pkg, dep, why)
					}
				}
			}
		}
	}
}
