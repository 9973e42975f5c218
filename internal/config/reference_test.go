package config

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write the defaults of the code into the reference's default column, add the keys the code has and docs/configuration.md lacks to its table, and remove those the code no longer has")

// The key reference is docs/configuration.md's table, with the cluster's
// keys in docs/cluster.md's; a row `x.*` covers every key under x (the
// claim check's, in docs/claim-check.md).
var (
	refConfig  = filepath.Join("..", "..", "docs", "configuration.md")
	refCluster = filepath.Join("..", "..", "docs", "cluster.md")
	backticked = regexp.MustCompile("`([^`]+)`")
)

// docKeys returns the keys the first cell of each table row of doc names,
// and the row of each. A name starting with '.' continues the one before
// it (`cluster.tls.ca`, `.cert`).
func docKeys(doc string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line[1:], "|", 2)[0]
		prev := ""
		for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
			k := m[1]
			if strings.HasPrefix(k, ".") && prev != "" {
				k = prev[:strings.LastIndexByte(prev, '.')] + k
			}
			out[k], prev = line, k
		}
	}
	return out
}

func covered(doc map[string]string, key string) bool {
	if _, ok := doc[key]; ok {
		return true
	}
	for k := range doc {
		if p, ok := strings.CutSuffix(k, ".*"); ok && strings.HasPrefix(key, p+".") {
			return true
		}
	}
	return false
}

// TestConfigReferenceInDocs: every key the configuration takes (Keys, read
// from the file's structure) has its row in the reference, and every row
// names a key there is. -update adds a row for each key missing, to be
// written, and removes the rows of keys that went.
func TestConfigReferenceInDocs(t *testing.T) {
	b, err := os.ReadFile(refConfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile(refCluster)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rows := docKeys(doc)
	all := docKeys(doc + "\n" + string(c))
	keys := Keys()
	var missing, stale []string
	for _, k := range keys {
		if !covered(all, k) {
			missing = append(missing, k)
		}
	}
	for k := range rows {
		p, wild := strings.CutSuffix(k, ".*")
		if !slices.Contains(keys, k) && !(wild && slices.ContainsFunc(keys, func(s string) bool { return strings.HasPrefix(s, p+".") })) {
			stale = append(stale, k)
		}
	}
	slices.Sort(stale)
	if len(missing) == 0 && len(stale) == 0 {
		return
	}
	if !*update {
		t.Fatalf("%s differs from the configuration's keys: missing %v, no such key %v (go test ./internal/config -run TestConfigReferenceInDocs -update, then write the new rows)", refConfig, missing, stale)
	}
	lines := strings.Split(doc, "\n")
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "| `") {
			last = i
		}
	}
	var out []string
	for i, l := range lines {
		drop := false
		for _, k := range stale {
			if rows[k] == l {
				drop = true
			}
		}
		if !drop {
			out = append(out, l)
		}
		if i == last {
			for _, k := range missing {
				def, ok := defaultCells()[k]
				if !ok {
					def = "(to be written)"
				}
				out = append(out, "| `"+k+"` | "+def+" | (to be written) |")
			}
		}
	}
	if err := os.WriteFile(refConfig, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// proseDefaults are the keys whose default is not one value, written in
// words in the reference: every other key's default column is generated
// (defaultCells).
var proseDefaults = []string{
	"tokens", "tokens[].name", "tokens[].sha256", "tokens[].token", "tokens[].venues", "tokens[].streams", "tokens[].tenants", "tokens[].latency",
	"auth.jwt.issuer", "auth.jwt.audience", "auth.jwt.leeway", "auth.jwt.jwks_file", "auth.jwt.keys",
	"auth.jwt.keys[].kid", "auth.jwt.keys[].alg", "auth.jwt.keys[].secret", "auth.jwt.keys[].public_key", "auth.jwt.keys[].public_key_file",
	"venues", "venues.<name>.ws_url", "venues.<name>.rest_url", "venues.<name>.symbols", "venues.<name>.depth",
	"cluster.node", "cluster.kv_replicas", "cluster.user", "cluster.password", "cluster.token", "cluster.edge_token", "cluster.creds",
	"cluster.tls.ca", "cluster.tls.cert", "cluster.tls.key",
}

// TestConfigDefaultsInDocs: the default column of every key's row in the
// reference is the default the code resolves an empty document to; -update
// writes it there. A key of the code either has its default generated or is
// one of proseDefaults.
func TestConfigDefaultsInDocs(t *testing.T) {
	cells := defaultCells()
	for _, k := range Keys() {
		_, gen := cells[k]
		if !gen && !slices.Contains(proseDefaults, k) && !strings.HasPrefix(k, "claim_check.") {
			t.Errorf("%s: no generated default (defaultCells) and not one of proseDefaults", k)
		}
	}
	for k := range cells {
		if !slices.Contains(Keys(), k) {
			t.Errorf("defaultCells has %s, which is not a key", k)
		}
	}
	seen := map[string]bool{}
	for _, ref := range []string{refConfig, refCluster} {
		b, err := os.ReadFile(ref)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		changed := false
		col := -1 // the default column of the table the line is in
		for i, line := range lines {
			if !strings.HasPrefix(line, "|") {
				col = -1
				continue
			}
			cells := strings.Split(line, "|")
			if col < 0 {
				col = slices.IndexFunc(cells, func(c string) bool { return strings.TrimSpace(c) == "default" })
				if col < 0 {
					col = 0 // a table without a default column
				}
				continue
			}
			if col == 0 || len(cells) <= col {
				continue
			}
			m := backticked.FindStringSubmatch(cells[1])
			if m == nil || strings.Count(cells[1], "`") != 2 {
				continue // not a row of one key
			}
			want, ok := defaultCellOf(m[1])
			seen[m[1]] = seen[m[1]] || ok
			if !ok || strings.TrimSpace(cells[col]) == want {
				continue
			}
			if !*update {
				t.Errorf("%s: %s's default is %s in the code, %s here (go test ./internal/config -run TestConfigDefaultsInDocs -update)", ref, m[1], want, strings.TrimSpace(cells[col]))
				continue
			}
			cells[col] = " " + want + " "
			lines[i], changed = strings.Join(cells, "|"), true
		}
		if changed {
			if err := os.WriteFile(ref, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k := range cells {
		if !seen[k] {
			t.Errorf("%s has a default in the code and no row of its own in %s or %s", k, refConfig, refCluster)
		}
	}
}

func defaultCellOf(key string) (string, bool) {
	c, ok := defaultCells()[key]
	return c, ok
}
