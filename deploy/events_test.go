package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEventReasonsAllowed: every Event reason the adapter records (the
// Reason* constants of package k8s) is one the drasat-event-writes policy
// lets it record; a reason missing there would be refused by the API
// server, and the Event silently lost.
func TestEventReasonsAllowed(t *testing.T) {
	policy, err := os.ReadFile("base/admission.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../k8s/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				reason, _ := strconv.Unquote(lit.Value)
				found++
				if !strings.Contains(string(policy), strconv.Quote(reason)) {
					t.Errorf("%s: Event reason %s (%s) is not allowed by drasat-event-writes in base/admission.yaml", fset.Position(name.Pos()), reason, name.Name)
				}
			}
			return true
		})
	}
	if found == 0 {
		t.Fatal("no Reason constants found in package k8s")
	}
}
