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

var update = flag.Bool("update", false, "add the keys the code has and docs/configuration.md lacks to its table, and remove those the code no longer has")

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
				out = append(out, "| `"+k+"` | (see the code) | (to be written) |")
			}
		}
	}
	if err := os.WriteFile(refConfig, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}
