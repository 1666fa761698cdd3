package alloc

import (
	"testing"

	"github.com/drasat/drasat/model"
)

// checkAllocations validates the run's allocations (placeholder until the
// independent checker lands).
func checkAllocations(t *testing.T, p *model.Problem, objs *model.Objects, res *Result, compat string) {
	t.Helper()
	if _, err := Allocated(p, res); err != nil {
		t.Fatal(err)
	}
}
