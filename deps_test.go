package fanoutd_test

import (
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// policy is a statement of the import policy (as Go's own
// go/build/deps_test.go states it): for every package of this module, the
// packages of this module it may import, directly, in its non-test files.
// A package missing from the table, or an import it does not list, fails
// TestImportPolicy. Read it bottom-up: each layer imports only the layers
// above it in this list. "venues/*" stands for each adapter package, and
// "venues/*/*test" for each adapter's mock venue.
var policy = map[string][]string{
	// Leaves and the contract.
	"internal/jsonw": {},
	"internal/scan":  {},
	"internal/rawio": {}, // the I/O below net.Conn: RawSyscall reads and writes, io_uring
	"notice":         {"internal/jsonw"},
	"venue":          {"notice", "internal/jsonw"},
	"venue/wsconn":   {"venue", "internal/rawio"},

	// The adapters: the contract and the scanner, nothing of who receives.
	"venues/*":        {"venue", "venue/wsconn", "notice", "internal/scan"},
	"venue/venuetest": {"venue", "notice"},
	"venues/*/*test":  {"venue", "venue/venuetest", "venues/*"},
	"venues":          {"venue", "venues/*"},

	// Delivery: who receives, and the core that delivers to them.
	"subscriber": {"venue"},
	// Derived streams: computed from a source stream's events and book.
	"derive": {"internal/jsonw", "venue"},
	"fanout": {"derive", "notice", "subscriber", "venue"},

	// Captures and the claim check.
	"replay":                    {"notice", "venue"},
	"internal/api":              {"internal/jsonw", "venue"},
	"claimcheck":                {"internal/api", "venue"},
	"claimcheck/s3store":        {"claimcheck"},
	"claimcheck/claimchecktest": {"claimcheck", "claimcheck/s3store"},

	// The websocket API and the daemon around it.
	"internal/wsapi": {"fanout", "notice", "subscriber", "venue", "internal/api", "internal/jsonw", "internal/rawio"},
	// The configuration parses the document and checks its keys; it points
	// down to no package it configures (configImporters, below).
	"internal/config":            {"claimcheck", "internal/api", "venue", "venues"},
	"internal/testsource":        {"notice", "venue"},
	"internal/cluster/natstest":  {}, // tests only
	"internal/cluster":           {"fanout", "internal/jsonw", "internal/rawio", "notice", "venue"},
	"internal/ui":                {},
	"internal/ui/bidi":           {}, // tests only: drives Firefox
	"internal/history":           {"claimcheck", "replay"},
	"internal/daemon":            {"internal/ui", "internal/cluster", "claimcheck", "claimcheck/s3store", "derive", "fanout", "internal/api", "internal/config", "internal/history", "internal/wsapi", "notice", "replay", "subscriber", "venue", "venues"},
	"internal/daemon/daemontest": {"internal/config", "internal/daemon"},
	"internal/faults":            {},         // tests only
	"internal/testutil":          {},         // tests only
	"replay/replaytest":          {"replay"}, // tests only
	"internal/bench/tardis":      {},         // tests only (the tardis-dev comparison)
	"internal/bench":             {"fanout", "internal/cli", "internal/config", "internal/daemon", "internal/testsource", "replay", "venue", "venues"},
	"internal/tail":              {"client"},
	"internal/cli":               {},
	// The public Go client imports nothing of ours: users import it alone.
	"client": {},
	// deploy/ holds no Go but its tests (Prometheus rules, the Grafana dashboard).
	"deploy": {},
	// The production binary holds what operators run; the load harness and
	// the soak are a command of their own.
	"cmd/fanoutd":       {"claimcheck", "internal/cli", "internal/tail", "internal/config", "internal/daemon", "notice", "replay", "venue", "venues"},
	"cmd/fanoutd-bench": {"internal/bench"},
}

// configImporters are the only packages that import internal/config: the
// daemon, which maps the configuration to the options of the packages it
// configures, its test harness, the commands, and internal/bench (the body
// of cmd/fanoutd-bench, which builds daemons from YAML as fanoutd does).
// Every other package owns plain typed options and checks them itself.
var configImporters = []string{"internal/daemon", "internal/daemon/daemontest", "internal/bench", "cmd/fanoutd", "cmd/fanoutd-bench"}

// configTypes are what internal/config may import: the vocabulary a key's
// value is checked against (venue, venues), and the option types it cannot
// avoid, each checking itself: claimcheck.Config (claim_check's keys are
// its fields) and internal/api's tokens and JWT options. It imports none of
// the packages it configures otherwise (fanout, internal/wsapi,
// internal/cluster, internal/history, …).
var configTypes = []string{"claimcheck", "internal/api", "venue", "venues"}

// TestConfigPointsDown: the policy lets only configImporters import
// internal/config, and internal/config only configTypes.
func TestConfigPointsDown(t *testing.T) {
	for pkg, list := range policy {
		if slices.Contains(list, "internal/config") && !slices.Contains(configImporters, pkg) {
			t.Errorf("%s may import internal/config: only %v do; give the package typed options the daemon fills", pkg, configImporters)
		}
	}
	for _, dep := range policy["internal/config"] {
		if !slices.Contains(configTypes, dep) {
			t.Errorf("internal/config may import %s: it imports only %v; the daemon maps the configuration to the options of what it configures", dep, configTypes)
		}
	}
}

// websockets names the packages that may import a websocket library: the
// venue links' transport, the mock venues, the websocket API, the daemon's
// history replays (tardis-machine's /ws-replay-normalized, and the
// websocket form of /v1/history/stream: one paced answer per connection,
// no fanout), the tools that are clients, and the tests' shared helpers.
var websockets = []string{"venue/wsconn", "venue/venuetest", "venues/*/*test", "internal/wsapi", "internal/daemon", "internal/bench", "internal/tail", "internal/ui/bidi", "cmd/fanoutd", "client", "internal/testutil"}

const module = "github.com/fanoutd/fanoutd"

// rule returns the policy key that governs pkg.
func rule(pkg string) string {
	if _, ok := policy[pkg]; ok {
		return pkg
	}
	if m, _ := path.Match("venues/*", pkg); m {
		return "venues/*"
	}
	if m, _ := path.Match("venues/*/*test", pkg); m {
		return "venues/*/*test"
	}
	return pkg
}

// allowed reports whether pkg may import dep under the policy list.
func allowed(pkg string, list []string, dep string) bool {
	for _, a := range list {
		if a == dep {
			return true
		}
		if m, _ := path.Match(a, dep); m && a == "venues/*" {
			// An adapter's mock imports its own adapter only.
			return !strings.HasPrefix(rule(pkg), "venues/*/") || strings.HasPrefix(pkg, dep+"/")
		}
	}
	return false
}

func TestImportPolicy(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if fields[0] == module {
			continue // this test's own package
		}
		pkg := strings.TrimPrefix(fields[0], module+"/")
		list, ok := policy[rule(pkg)]
		if !ok {
			t.Errorf("%s is not in the import policy (deps_test.go): add it, with what it may import", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if dep, ours := strings.CutPrefix(imp, module+"/"); ours {
				if !allowed(pkg, list, dep) {
					t.Errorf("%s imports %s, which the import policy does not allow", pkg, dep)
				}
				continue
			}
			if strings.Contains(imp, "websocket") && !slices.Contains(websockets, rule(pkg)) {
				t.Errorf("%s imports %s: only the venue links, the websocket API and client tools know websockets", pkg, imp)
			}
		}
	}
}

// TestPolicyCatchesWrongImports checks the policy's matching on cases it
// must refuse and allow.
func TestPolicyCatchesWrongImports(t *testing.T) {
	for _, tc := range []struct {
		pkg, dep string
		ok       bool
	}{
		{"venues/okx", "venue", true},
		{"venues/okx", "fanout", false},
		{"venues/okx", "venues/kraken", false},
		{"venues/okx/okxtest", "venues/okx", true},
		{"venues/okx/okxtest", "venues/kraken", false},
		{"fanout", "internal/wsapi", false},
		{"fanout", "claimcheck", false},
		{"venue", "fanout", false},
		{"internal/wsapi", "internal/daemon", false},
	} {
		if got := allowed(tc.pkg, policy[rule(tc.pkg)], tc.dep); got != tc.ok {
			t.Errorf("%s importing %s: allowed %v, want %v", tc.pkg, tc.dep, got, tc.ok)
		}
	}
}

// TestImportRulesInDocs checks that a package doc stating import rules (a
// list of "  - pkg: dep, dep" lines after a line that names deps_test.go)
// states exactly the policy's.
func TestImportRulesInDocs(t *testing.T) {
	for _, doc := range []string{"venue/doc.go"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for line := range strings.Lines(string(b)) {
			item, ok := strings.CutPrefix(strings.TrimSpace(line), "//   - ")
			if !ok {
				continue
			}
			pkg, deps, ok := strings.Cut(item, ": ")
			if !ok {
				continue
			}
			n++
			var stated []string
			for d := range strings.SplitSeq(deps, ",") {
				d, _, _ = strings.Cut(strings.TrimSpace(d), " (")
				stated = append(stated, d)
			}
			want, ok := policy[pkg]
			if !ok {
				t.Errorf("%s states the imports of %s, which the policy does not name", doc, pkg)
				continue
			}
			slices.Sort(stated)
			want = slices.Sorted(slices.Values(want))
			if !slices.Equal(stated, want) {
				t.Errorf("%s says %s imports %v; the policy allows %v", doc, pkg, stated, want)
			}
		}
		if n == 0 {
			t.Errorf("%s states no import rules", doc)
		}
	}
}

// TestLayoutTableNamesEveryPackage checks that the layout table of
// docs/development.md names every package of the module, or a directory
// above it.
func TestLayoutTableNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(line, "| `"); ok {
			p, _, _ = strings.Cut(p, "`")
			rows = append(rows, strings.TrimSuffix(strings.ReplaceAll(p, "<name>", "*"), "/"))
		}
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		pkg = strings.TrimPrefix(pkg, module+"/")
		if pkg == module {
			continue
		}
		named := false
		for _, r := range rows {
			for p := pkg; p != "." && !named; p = path.Dir(p) {
				named, _ = path.Match(r, p)
			}
		}
		if !named {
			t.Errorf("docs/development.md's layout table names no row for %s", pkg)
		}
	}
}
