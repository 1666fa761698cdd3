package check

import (
	"go/build"
	"strings"
	"testing"
)

// TestSharesNoCodeWithTheEngine: the checker is only independent while it
// imports nothing of drasat but package input, and input imports nothing of
// drasat at all. An import of model, encode or alloc here would let a mistake
// in the engine hide in the checker too.
func TestSharesNoCodeWithTheEngine(t *testing.T) {
	const module = "github.com/drasat/drasat/"
	allowed := map[string][]string{
		".":        {module + "input"},
		"../input": nil,
	}
	for dir, ok := range allowed {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			found := false
			for _, a := range ok {
				found = found || imp == a
			}
			if !found {
				t.Errorf("package %s imports %s; the checker may depend on %s only", pkg.Name, imp, strings.Join(append([]string{"the API"}, ok...), ", "))
			}
		}
	}
}
