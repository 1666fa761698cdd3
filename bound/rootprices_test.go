package bound

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/drasat/drasat/bound/lp"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// TestBoundOnBoundsSubModels: the root LP's prices bound the LP of any
// set of its nodes with any claims left (RootLP.BoundOn), which is what
// lets DistributeByNode skip a trade without solving its LP; over every
// node with every claim they give back the root's LP value (it fails if
// a part of the dual bound is dropped or counted twice). On a batch
// whose pods' resources bind, and on rich claims, whose distinct rows
// (distinct.go) a sub-model has with fewer steps. On the two small rich
// batches of one node marked delta, a distinct row's δ is at its upper
// bound with a positive reduced cost (the row's D ≤ Most, Most being
// the node's slots of the shape over the claim's items rounded down, is
// tighter than the shape's row): they fail if RootLP drops the δ terms,
// which the larger batches do not show.
func TestBoundOnBoundsSubModels(t *testing.T) {
	pods := scalegen.Generate(scalegen.Config{Nodes: 8, GPUs: 2, Claims: 120, Seed: 3})
	scalegen.AddPods(pods, 8, 3)
	for _, tc := range []struct {
		name        string
		objs        *input.Objects
		pods, delta bool
	}{
		{"pods", pods, true, false},
		{"rich", scalegen.Generate(scalegen.Config{Nodes: 4, GPUs: 4, Claims: 80, Seed: 2, Family: "rich"}), false, false},
		{"rich-delta", scalegen.Generate(scalegen.Config{Nodes: 1, GPUs: 4, Claims: 10, Seed: 3, Family: "rich"}), false, true},
		{"rich-delta-fractional", scalegen.Generate(scalegen.Config{Nodes: 1, GPUs: 4, Claims: 20, Seed: 2, Family: "rich"}), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testBoundOn(t, tc.objs, tc.pods, tc.delta) })
	}
}

func testBoundOn(t *testing.T, objs *input.Objects, pods, delta bool) {
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := New(context.Background(), p, p.Claims, func(*model.Claim) int64 { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	na, err := rel.NodeAggregateBy(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if pods && len(na.Capacities) == 0 {
		t.Fatal("no capacity rows: the pods' resources do not bind")
	}
	if !pods && len(na.distinctRows()) == 0 {
		t.Fatal("no distinct rows: the batch has no distinct claims")
	}
	if delta {
		if d := deltaTerms(t, na); d < 1e-6 {
			t.Fatalf("the δ columns' positive reduced costs at their upper bounds sum to %g: the batch no longer tries them", d)
		}
	}
	root, err := na.SolveRoot(context.Background(), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	solved := func(sub *NodeAggregate) float64 {
		prob, _ := sub.lp()
		if s := prob.Solve(context.Background(), time.Now().Add(time.Minute)); s != lp.Optimal {
			t.Fatalf("sub LP: %v", s)
		}
		return prob.Objective()
	}
	all := make([]int, len(na.Classes))
	for ki, k := range na.Classes {
		all[ki] = k.Max
	}
	whole := solved(na.onNodes(na.Nodes, all))
	if got := root.BoundOn(na.Nodes, all); math.Abs(got-whole) > 1e-6 {
		t.Fatalf("every node, every claim: prices bound %g, LP %g", got, whole)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var nodes []int
		for _, n := range na.Nodes {
			if rng.IntN(3) == 0 {
				nodes = append(nodes, n)
			}
		}
		if len(nodes) == 0 {
			continue
		}
		most := make([]int, len(all))
		for ki := range most {
			most[ki] = rng.IntN(all[ki] + 1)
		}
		sub := na.onNodes(nodes, most)
		if len(sub.Classes) == 0 {
			continue
		}
		if b, v := root.BoundOn(nodes, most), solved(sub); b < v-1e-6 {
			t.Fatalf("nodes %v: prices bound %g below the LP's %g", nodes, b, v)
		}
	}
}

// deltaTerms is the part of the model's LP dual bound that its distinct
// rows' δ and Rest columns carry: their positive reduced costs at their
// upper bounds, read from the LP's columns as lpRows makes them.
func deltaTerms(t *testing.T, na *NodeAggregate) float64 {
	t.Helper()
	prob, cols, _ := na.lpRows()
	if s := prob.Solve(context.Background(), time.Now().Add(time.Minute)); s != lp.Optimal {
		t.Fatalf("LP: %v", s)
	}
	_, reduced := prob.DualTerms(prob.Duals())
	z := 0.0
	for j, c := range cols {
		if c.group < 0 && c.class < 0 {
			_, up := prob.Bounds(j)
			z += max(reduced[j], 0) * up
		}
	}
	return z
}
