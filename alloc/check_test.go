package alloc

import (
	"testing"

	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// checkAllocations validates the run's allocations with the independent
// checker, which re-derives every rule from the Kubernetes objects.
func checkAllocations(t *testing.T, p *model.Problem, objs *input.Objects, res *Result, compat string) {
	t.Helper()
	claims, err := Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Check(objs, claims, check.Options{Compat: compat}); err != nil {
		t.Fatalf("allocation violates the rules:\n%v", err)
	}
}
