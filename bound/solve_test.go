package bound_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/model"
)

// TestSolveWithoutTime: a descent whose deadline has already passed proves
// nothing, and says so with the largest bound rather than the int64 that
// converting +Inf gives (math.MinInt64 on amd64, which a loaded machine
// once turned into "bound -9223372036854775808" in drasat bench).
func TestSolveWithoutTime(t *testing.T) {
	p, err := model.Build(context.Background(), gen.MIG(gen.DefaultMIG(1, 2, 10, 1)), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rel := relaxationOf(t, p, p.Claims, func(*model.Claim) int64 { return 1 })
	res := rel.Solve(context.Background(), 0, time.Now().Add(-time.Second), bound.Options{})
	if res.Iterations != 0 || res.Bound != math.MaxInt64 {
		t.Errorf("no time: %d iterations, bound %d; want 0 and math.MaxInt64", res.Iterations, res.Bound)
	}
	if res := rel.Solve(context.Background(), 0, time.Now().Add(time.Minute), bound.Options{}); res.Bound > 10 || res.Bound < 0 {
		t.Errorf("bound %d of 10 claims", res.Bound)
	}
}
