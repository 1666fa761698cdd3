package mip_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
)

// TestAggregateDiveAgainstCBC: on small batches of every mig claim mix
// and fleet, the pure-Go dive on the per-node aggregated model's LP
// (bound.NodeAggregate.Dive) returns an integer solution of the model
// (checked here row by row, apart from the LP code), never above CBC's
// optimum of the same model and equal to it on most; and the engine,
// whose default pipeline realises the dive's answer, writes allocations
// the independent checker accepts.
func TestAggregateDiveAgainstCBC(t *testing.T) {
	if mip.CBCPath() == "" {
		t.Skip("cbc not installed (Debian: apt-get install coinor-cbc); the dive is not compared")
	}
	var ins []*bench.Instance
	for _, fam := range gen.MIGFamilies {
		for seed := uint64(1); seed <= 2; seed++ {
			got, err := bench.Generate("mig", bench.Size{Nodes: 2, GPUs: 4, Claims: 40}, seed, bench.GenerateOptions{MIGFamily: fam})
			if err != nil {
				t.Fatal(err)
			}
			ins = append(ins, got...)
		}
	}
	for _, gpu := range []string{"h100", "mixed"} {
		got, err := bench.Generate("mig", bench.Size{Nodes: 2, GPUs: 4, Claims: 40}, 3, bench.GenerateOptions{MIGFamily: "independent", MIGGPU: gpu})
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, got...)
	}
	dir := t.TempDir()
	runs, equal := 0, 0
	for i, in := range ins {
		p, err := model.Build(context.Background(), in.Objs, model.Options{Compat: in.Compat})
		if err != nil {
			t.Fatal(err)
		}
		var live []*model.Claim
		for _, c := range p.Claims {
			if c.Err == nil {
				live = append(live, c)
			}
		}
		rel := relaxationOf(t, p, live, func(c *model.Claim) int64 { return c.Weight })
		na, err := rel.NodeAggregateBy(context.Background(), time.Time{})
		if err != nil {
			t.Fatalf("%s: %v", in.Name(), err)
		}
		path := filepath.Join(dir, fmt.Sprintf("a%d.lp", i))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		err = na.WriteLP(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		sol, err := mip.SolveCBC(context.Background(), path, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(sol.Status, "Optimal") {
			t.Fatalf("%s: cbc: %s", in.Name(), sol.Status)
		}
		opt := int64(math.Round(sol.Objective))
		dive, _, err := na.Dive(context.Background(), time.Now().Add(time.Minute), 0)
		if err != nil {
			t.Fatalf("%s: %v", in.Name(), err)
		}
		if dive.Values == nil {
			t.Fatalf("%s: the dive found nothing (weight 0 is always feasible)", in.Name())
		}
		checkAggregateSolution(t, in.Name(), na, dive)
		if dive.Objective > opt {
			t.Fatalf("%s: dive %d above CBC's optimum %d of the same model", in.Name(), dive.Objective, opt)
		}
		runs++
		if dive.Objective == opt {
			equal++
		}

		res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 20 * time.Second, MaxVariables: -1})
		if err != nil {
			t.Fatal(err)
		}
		claims, err := alloc.Allocated(p, res)
		if err != nil {
			t.Fatal(err)
		}
		if err := check.Check(in.Objs, claims, check.Options{Compat: in.Compat}); err != nil {
			t.Errorf("%s: the engine's allocation is invalid: %v", in.Name(), err)
		}
	}
	t.Logf("dive equals CBC's optimum of the aggregated model on %d of %d", equal, runs)
	if equal*10 < runs*8 {
		t.Fatalf("dive equals CBC's optimum on %d of %d batches only", equal, runs)
	}
}

// checkAggregateSolution checks a solution's counts against the model's
// rows: every bin takes one pattern, no class beyond its claims, and per
// shape and node no more demand than the patterns supply.
func checkAggregateSolution(t *testing.T, name string, na *bound.NodeAggregate, sol bound.AggregateSolution) {
	t.Helper()
	type sn struct{ s, n int }
	supply, demand := map[sn]float64{}, map[sn]float64{}
	var weight float64
	for gi := range na.Groups {
		g := &na.Groups[gi]
		var bins float64
		for p, pat := range g.Patterns {
			c := sol.Values[g.Var(p)]
			if c != math.Trunc(c) || c < 0 {
				t.Fatalf("%s: %s = %v", name, g.Var(p), c)
			}
			bins += c
			for _, sc := range pat {
				supply[sn{sc.Shape, g.Node}] += c * float64(sc.N)
			}
		}
		if bins != float64(g.Bins) {
			t.Fatalf("%s: group %d/%d: %v patterns for %d bins", name, g.Type, g.Node, bins, g.Bins)
		}
	}
	for ki := range na.Classes {
		k := &na.Classes[ki]
		var n float64
		for _, node := range k.Nodes {
			y := sol.Values[k.Var(node)]
			if y != math.Trunc(y) || y < 0 {
				t.Fatalf("%s: %s = %v", name, k.Var(node), y)
			}
			n += y
			weight += y * k.Weight
			for _, d := range k.Demand {
				demand[sn{d.Shape, node}] += y * d.N
			}
		}
		if n > float64(k.Max) {
			t.Fatalf("%s: class %d: %v claims of %d", name, k.Class, n, k.Max)
		}
	}
	for key, d := range demand {
		if d > supply[key]+1e-9 {
			t.Fatalf("%s: shape %d on node %d: demand %v, supply %v", name, key.s, key.n, d, supply[key])
		}
	}
	if int64(math.Round(weight)) != sol.Objective {
		t.Fatalf("%s: counts weigh %v, the dive says %d", name, weight, sol.Objective)
	}
}
