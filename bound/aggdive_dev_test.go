package bound_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// TestDiveFile (DRASAT_AGG=objects.yaml, DRASAT_AGG_TARGET=n, and
// DRASAT_AGG_GLOBAL=1 for the global model) times the per-node model's
// build and the dive on an exported batch, and prints the LP's size.
func TestDiveFile(t *testing.T) {
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
	t.Logf("relaxation %v", time.Since(start))
	start = time.Now()
	na, err := rel.NodeAggregateBy(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	cols, ys, shapeRows := 0, 0, map[[2]int]bool{}
	for _, g := range na.Groups {
		cols += len(g.Patterns)
	}
	for _, k := range na.Classes {
		ys += len(k.Nodes)
		for _, n := range k.Nodes {
			for _, d := range k.Demand {
				shapeRows[[2]int{d.Shape, n}] = true
			}
		}
	}
	defer func() {
		start := time.Now()
		tg, _ := strconv.ParseInt(os.Getenv("DRASAT_AGG_TARGET"), 10, 64)
		g := na
		if os.Getenv("DRASAT_AGG_GLOBAL") != "" {
			g = na.Global()
		}
		sol, st, err := g.Dive(context.Background(), time.Now().Add(60*time.Second), tg)
		if g != na && sol.Values != nil {
			_, w := na.Distribute(g, sol.Values)
			t.Logf("distributed: %d", w)
			start := time.Now()
			// As the engine does (alloc/aggregate.go): the per-node root
			// LP prices the trades; DRASAT_AGG_NOROOT=1 spreads without.
			var root *bound.RootLater
			if len(na.Capacities) > 0 && os.Getenv("DRASAT_AGG_NOROOT") == "" {
				root = na.SolveRootLater(context.Background(), time.Now().Add(60*time.Second))
			}
			_, w = na.DistributeByNode(context.Background(), time.Now().Add(60*time.Second), g, sol.Values, sol.Bound, root)
			if r := root.Wait(); r != nil {
				t.Logf("root LP bound %d", r.Bound)
			}
			t.Logf("by node: %d in %v", w, time.Since(start))
		}
		t.Logf("dive: %v obj %d stats %+v in %v", err, sol.Objective, st, time.Since(start))
	}()
	t.Logf("model %+v in %v: groups %d classes %d nodes %d, c cols %d y cols %d shape rows %d", na.Stats, time.Since(start), len(na.Groups), len(na.Classes), len(na.Nodes), cols, ys, len(shapeRows))
}
