package notice

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated notice table in docs/protocol.md")

const (
	tableBegin = "<!-- The notice table is generated from notice/schema.go: go test ./notice -run TestNoticeTableInDocs -update -->"
	tableEnd   = "<!-- end of the generated notice table -->"
)

// noticeTable is the docs/protocol.md table of every kind: its default
// severity, what it means and its details, from the schemas.
func noticeTable() string {
	var b strings.Builder
	b.WriteString("| kind | default severity | meaning | details (`*` always present) |\n| --- | --- | --- | --- |\n")
	for k := Kind(1); k.Valid(); k++ {
		s := SchemaOf(k)
		var ds []string
		for _, f := range s.Fields {
			star := ""
			if f.Required {
				star = "*"
			}
			ds = append(ds, "`"+f.Key+"`"+star+" "+f.Type.String()+": "+f.Doc)
		}
		details := strings.Join(ds, "; ")
		if s.Evidence {
			details += "; further string, integer or boolean keys are the venue's evidence (sequence numbers, checksums): show them, do not rely on them"
		}
		if details == "" {
			details = "none"
		}
		b.WriteString("| `" + k.String() + "` | " + k.DefaultSeverity().String() + " | " + s.Doc + " | " + details + " |\n")
	}
	return b.String()
}

// TestNoticeTableInDocs: the notice table in docs/protocol.md is the one
// the schemas give; -update rewrites it.
func TestNoticeTableInDocs(t *testing.T) {
	p := filepath.Join("..", "docs", "protocol.md")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want := tableBegin + "\n" + noticeTable() + tableEnd
	i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if i >= 0 && j > i && doc[i:j+len(tableEnd)] == want {
		return
	}
	if !*update {
		t.Fatalf("the notice table in %s is not the one notice/schema.go gives: go test ./notice -run TestNoticeTableInDocs -update", p)
	}
	if i < 0 || j < i { // the hand-written table: replace it whole
		i = strings.Index(doc, "| kind | default severity |")
		if i < 0 {
			t.Fatalf("%s has no notice table to replace", p)
		}
		j = i
		for j < len(doc) && doc[j] == '|' {
			j += strings.IndexByte(doc[j:], '\n') + 1
		}
		doc = doc[:i] + want + "\n" + doc[j:]
	} else {
		doc = doc[:i] + want + doc[j+len(tableEnd):]
	}
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEveryKindDocumented: every kind says what it means and every
// details key what it says, so the generated table has no empty cell.
func TestEveryKindDocumented(t *testing.T) {
	for k := Kind(1); k.Valid(); k++ {
		s := SchemaOf(k)
		if s.Doc == "" {
			t.Errorf("%s: no Doc in notice/schema.go", k)
		}
		for _, f := range s.Fields {
			if f.Doc == "" {
				t.Errorf("%s.%s: no Doc", k, f.Key)
			}
		}
	}
}
