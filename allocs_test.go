package fanoutd_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestAllocTestsAreNamed holds .ci/run's allocation step to its word: that
// step runs `go test -run Alloc` without -race, so every test that measures
// allocations must have Alloc in its name, or CI never checks it.
func TestAllocTestsAreNamed(t *testing.T) {
	fset := token.NewFileSet()
	found := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Body == nil {
				continue
			}
			if !callsAllocsPerRun(fn.Body) {
				continue
			}
			found++
			if !strings.Contains(fn.Name.Name, "Alloc") {
				t.Errorf("%s: %s calls testing.AllocsPerRun but has no Alloc in its name, so .ci/run's allocation step skips it", path, fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("found no allocation tests at all: the walk is broken")
	}
}

func callsAllocsPerRun(body *ast.BlockStmt) bool {
	seen := false
	ast.Inspect(body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "AllocsPerRun" {
			seen = true
		}
		return !seen
	})
	return seen
}
