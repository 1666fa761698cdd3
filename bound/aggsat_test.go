package bound_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
)

// smallAggregates are per-node aggregated models small enough to solve by
// brute force: a GPU or two on one or two nodes, every mig claim mix.
func smallAggregates(t *testing.T) map[string]*bound.NodeAggregate {
	t.Helper()
	out := map[string]*bound.NodeAggregate{}
	for _, fam := range gen.MIGFamilies {
		for seed := uint64(1); seed <= 3; seed++ {
			sz := bench.Size{Nodes: 1 + int(seed%2), GPUs: 1, Claims: 6}
			in, err := bench.Generate("mig", sz, seed, bench.GenerateOptions{MIGFamily: fam})
			if err != nil {
				t.Fatal(err)
			}
			p, err := model.Build(context.Background(), in[0].Objs, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var live []*model.Claim
			for _, c := range p.Claims {
				if c.Err == nil {
					live = append(live, c)
				}
			}
			rel := relaxationOf(t, p, live, func(*model.Claim) int64 { return 1 })
			na, err := rel.NodeAggregateBy(context.Background(), time.Time{})
			if err != nil {
				continue
			}
			combos := 1
			for _, g := range na.Groups {
				for b := 0; b < g.Bins; b++ {
					combos *= len(g.Patterns)
				}
			}
			if combos > 5000 {
				continue
			}
			out[fmt.Sprintf("%s/%d", fam, seed)] = na
		}
	}
	if len(out) < 5 {
		t.Fatalf("only %d small models", len(out))
	}
	return out
}

// bruteAggregate is the model's optimum by enumeration: every pattern per
// bin, then every claim count per class and node.
func bruteAggregate(na *bound.NodeAggregate) int64 {
	type sn struct{ s, n int }
	var bins []*bound.BinGroup
	for gi := range na.Groups {
		for b := 0; b < na.Groups[gi].Bins; b++ {
			bins = append(bins, &na.Groups[gi])
		}
	}
	best := int64(0)
	supply := map[sn]int{}
	var counts func(ki, ni int, used map[sn]float64, left []int, v int64)
	counts = func(ki, ni int, used map[sn]float64, left []int, v int64) {
		best = max(best, v)
		if ki == len(na.Classes) {
			return
		}
		k := &na.Classes[ki]
		if ni == len(k.Nodes) {
			counts(ki+1, 0, used, left, v)
			return
		}
		n := k.Nodes[ni]
		for y := 0; y <= left[ki]; y++ {
			ok := true
			for _, d := range k.Demand {
				if used[sn{d.Shape, n}]+float64(y)*d.N > float64(supply[sn{d.Shape, n}])+1e-9 {
					ok = false
				}
			}
			if !ok {
				break
			}
			for _, d := range k.Demand {
				used[sn{d.Shape, n}] += float64(y) * d.N
			}
			left[ki] -= y
			counts(ki, ni+1, used, left, v+int64(y)*int64(k.Weight))
			left[ki] += y
			for _, d := range k.Demand {
				used[sn{d.Shape, n}] -= float64(y) * d.N
			}
		}
	}
	var pick func(i int)
	pick = func(i int) {
		if i == len(bins) {
			left := make([]int, len(na.Classes))
			for ki, k := range na.Classes {
				left[ki] = k.Max
			}
			counts(0, 0, map[sn]float64{}, left, 0)
			return
		}
		g := bins[i]
		for _, pat := range g.Patterns {
			for _, sc := range pat {
				supply[sn{sc.Shape, g.Node}] += sc.N
			}
			pick(i + 1)
			for _, sc := range pat {
				supply[sn{sc.Shape, g.Node}] -= sc.N
			}
		}
	}
	pick(0)
	return best
}

// checkAggregate fails unless values are a solution of the model of the
// given weight.
func checkAggregate(t *testing.T, name string, na *bound.NodeAggregate, values map[string]float64, weight int64) {
	t.Helper()
	type sn struct{ s, n int }
	supply, demand := map[sn]float64{}, map[sn]float64{}
	for gi := range na.Groups {
		g := &na.Groups[gi]
		bins := 0.0
		for p, pat := range g.Patterns {
			c := values[g.Var(p)]
			bins += c
			for _, sc := range pat {
				supply[sn{sc.Shape, g.Node}] += c * float64(sc.N)
			}
		}
		if bins != float64(g.Bins) {
			t.Fatalf("%s: group %s takes %g patterns for %d bins", name, g.Var(-1), bins, g.Bins)
		}
	}
	var w float64
	for ki := range na.Classes {
		k := &na.Classes[ki]
		sum := 0.0
		for _, n := range k.Nodes {
			y := values[k.Var(n)]
			sum += y
			w += y * k.Weight
			for _, d := range k.Demand {
				demand[sn{d.Shape, n}] += y * d.N
			}
		}
		if sum > float64(k.Max) {
			t.Fatalf("%s: class %d admits %g of %d", name, k.Class, sum, k.Max)
		}
	}
	for key, d := range demand {
		if d > supply[key]+1e-9 {
			t.Fatalf("%s: shape %d on node %d: demand %g above supply %g", name, key.s, key.n, d, supply[key])
		}
	}
	if int64(math.Round(w)) != weight {
		t.Fatalf("%s: values weigh %g, the solver says %d", name, w, weight)
	}
}

// TestNodeAggregateSolveAgainstBruteForce: the in-house solver's optimum,
// proven, equals the brute-force optimum of the model, its solution is
// one, and it proves no bound below the optimum when asked for more than
// the optimum. When cbc is on PATH, CBC's optimum of the LP file agrees.
func TestNodeAggregateSolveAgainstBruteForce(t *testing.T) {
	cbc := mip.CBCPath() != ""
	dir := t.TempDir()
	for name, na := range smallAggregates(t) {
		want := bruteAggregate(na)
		sol, err := na.Solve(context.Background(), time.Now().Add(time.Minute), 0, math.MaxInt32)
		if err != nil {
			t.Fatal(err)
		}
		if !sol.Optimal() || sol.Objective != want || sol.Bound != want {
			t.Fatalf("%s: in-house %d (bound %d, optimal %v), brute force %d", name, sol.Objective, sol.Bound, sol.Optimal(), want)
		}
		checkAggregate(t, name, na, sol.Values, sol.Objective)
		// Started below and above the optimum, it still ends there.
		if sol, _ := na.Solve(context.Background(), time.Now().Add(time.Minute), want-1, want+2); sol.Objective != want || sol.Bound != want {
			t.Fatalf("%s: from below %d (bound %d), want %d", name, sol.Objective, sol.Bound, want)
		}
		if !cbc {
			continue
		}
		var buf bytes.Buffer
		if err := na.WriteLP(&buf); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, strings.ReplaceAll(name, "/", "-")+".lp")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		cs, err := mip.SolveCBC(context.Background(), path, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(cs.Status, "Optimal") || int64(math.Round(cs.Objective)) != want {
			t.Fatalf("%s: CBC %s %g, brute force %d", name, cs.Status, cs.Objective, want)
		}
		checkAggregate(t, name+" (CBC)", na, cs.Values, want)
	}
	if !cbc {
		t.Log("cbc not on PATH (apt-get install coinor-cbc): compared with brute force only")
	}
}

// TestNodeAggregateSearch: the neighbourhood search from an empty start
// returns solutions of the model, never above its optimum.
func TestNodeAggregateSearch(t *testing.T) {
	reached, runs := 0, 0
	for name, na := range smallAggregates(t) {
		want := bruteAggregate(na)
		sol, err := na.Search(context.Background(), time.Now().Add(2*time.Second), nil, nil, math.MaxInt32)
		if err != nil {
			t.Fatal(err)
		}
		runs++
		if sol.Objective > want || sol.Bound < want {
			t.Fatalf("%s: search %d (bound %d), optimum %d", name, sol.Objective, sol.Bound, want)
		}
		checkAggregate(t, name, na, sol.Values, sol.Objective)
		if sol.Objective == want {
			reached++
		}
	}
	t.Logf("search reached the optimum on %d of %d models", reached, runs)
	if reached*2 < runs {
		t.Fatalf("search reached the optimum on only %d of %d models", reached, runs)
	}
}
