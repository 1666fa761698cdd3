package bound_test

import (
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/tools/scalegen"
)

// TestRootBoundBelowGlobal: on nodes that differ (zones, a tainted and a
// cordoned node, what runs where) the per-node LP bounds below the global
// model, which pools every node's capacity, and still at or above what
// the spread over the nodes finds (a solution of the per-node model).
func TestRootBoundBelowGlobal(t *testing.T) {
	objs := scalegen.Generate(scalegen.Config{Nodes: 16, GPUs: 2, Claims: 240, Seed: 1})
	scalegen.AddPods(objs, 16, 1)
	_, na := perNodeModel(t, objs)
	g := na.Global()
	sol, _, err := g.Dive(context.Background(), time.Now().Add(time.Minute), 1)
	if err != nil || sol.Values == nil {
		t.Fatalf("global dive: %v", err)
	}
	later := na.SolveRootLater(context.Background(), time.Now().Add(time.Minute))
	rlp := later.Wait()
	if rlp == nil {
		t.Fatal("per-node LP not solved")
	}
	root := rlp.Bound
	vals, w := na.DistributeByNode(context.Background(), time.Now().Add(10*time.Second), g, sol.Values, root, later)
	checkPerNode(t, na, vals, w)
	if root >= sol.Bound || root < w {
		t.Fatalf("per-node bound %d, global %d, spread %d: want spread <= per-node < global", root, sol.Bound, w)
	}
	t.Logf("per-node bound %d, global %d, spread %d", root, sol.Bound, w)
}
