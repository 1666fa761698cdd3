package bound_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// TestSolveNodeAggregateFile (DRASAT_AGG=objects.yaml, DRASAT_AGG_UPPER=n)
// times the in-house solver on an exported batch.
func TestSolveNodeAggregateFile(t *testing.T) {
	path := os.Getenv("DRASAT_AGG")
	if path == "" {
		t.Skip("set DRASAT_AGG=objects.yaml")
	}
	objs, _, err := input.Load([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var live []*model.Claim
	for _, c := range p.Claims {
		if c.Err == nil {
			live = append(live, c)
		}
	}
	start := time.Now()
	rel := relaxationOf(t, p, live, func(*model.Claim) int64 { return 1 })
	na, err := rel.NodeAggregateBy(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("model %+v in %v", na.Stats, time.Since(start))
	upper, _ := strconv.ParseInt(os.Getenv("DRASAT_AGG_UPPER"), 10, 64)
	start = time.Now()
	sol, err := na.Solve(context.Background(), time.Now().Add(60*time.Second), 0, upper)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("solve: objective %d bound %d optimal %v vars %d clauses %d calls %d in %v", sol.Objective, sol.Bound, sol.Optimal(), sol.Vars, sol.Clauses, sol.Calls, time.Since(start))
}
