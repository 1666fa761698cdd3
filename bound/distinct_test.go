package bound_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// A distinctAttribute claim (two 1g devices on two GPUs of one node) that
// the realisation gives bins gets as many bins as it has items, so that
// its group can hold it; on the rich family's dive answers it often does,
// and taken slot by slot its items shared one bin.
func TestRealiseSpreadsDistinctClaims(t *testing.T) {
	spread, whole := 0, 0
	for seed := uint64(1); seed <= 3; seed++ {
		p, na := perNodeModel(t, scalegen.Generate(scalegen.Config{Nodes: 4, GPUs: 8, Claims: 200, Seed: seed, Family: "rich"}))
		sol, _, err := na.Dive(context.Background(), time.Now().Add(time.Minute), 0)
		if err != nil || sol.Values == nil {
			t.Fatalf("dive: %v", err)
		}
		re, err := na.Realise(sol.Values, p.Claims)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Claims {
			if _, on := re.Nodes[c.Index]; !on || len(c.Constraints) == 0 || c.Constraints[0].Kind != model.DistinctAttribute {
				continue
			}
			bins, ok := re.Bins[c.Index]
			switch {
			case !ok:
				whole++
			case len(bins) < 2:
				t.Errorf("seed %d: %s has its two items on bins %v", seed, c.Key, bins)
			default:
				spread++
			}
		}
	}
	if spread == 0 {
		t.Fatalf("no distinct claim admitted with bins (%d with its whole node)", whole)
	}
	t.Logf("distinct claims on two bins: %d; left their whole node: %d", spread, whole)
}

// The per-node model's answers keep distinctAttribute claims on nodes
// whose slots of their shape lie on enough GPUs: D claims of N items fit
// bins with c_g slots exactly when N·D ≤ Σ_g min(c_g, D). Without the
// model's distinct rows its dives put claims on nodes with all their
// slots on one or two GPUs (rich 8x8/300 seed 1: three nodes), answers no
// realisation keeps; each such claim then left its whole node to the SAT
// model (TestRealiseSpreadsDistinctClaims).
func TestDistinctRowsKeepClaimsOnEnoughBins(t *testing.T) {
	placed := 0
	for _, cfg := range []scalegen.Config{
		{Nodes: 4, GPUs: 8, Claims: 200, Seed: 1}, {Nodes: 4, GPUs: 8, Claims: 200, Seed: 2},
		{Nodes: 8, GPUs: 8, Claims: 300, Seed: 1}, {Nodes: 8, GPUs: 8, Claims: 300, Seed: 3},
	} {
		cfg.Family = "rich"
		p, na := perNodeModel(t, scalegen.Generate(cfg))
		sol, _, err := na.Dive(context.Background(), time.Now().Add(time.Minute), 0)
		if err != nil || sol.Values == nil {
			t.Fatalf("dive: %v", err)
		}
		// The distinct classes, from the claims: one request of N 1g
		// devices under distinctAttribute.
		distinct := map[int]bool{}
		for _, c := range p.Claims {
			if len(c.Constraints) > 0 && c.Constraints[0].Kind == model.DistinctAttribute {
				distinct[bound.ClassOf(na, c)] = true
			}
		}
		for _, n := range na.Nodes {
			for _, k := range na.Classes {
				d := int(math.Round(sol.Values[k.Var(n)]))
				if !distinct[k.Class] || d == 0 {
					continue
				}
				placed += d
				items, shape := int(k.Demand[0].N), k.Demand[0].Shape
				serve := 0
				for _, g := range na.Groups {
					if g.Node != n {
						continue
					}
					for p, pat := range g.Patterns {
						for _, sc := range pat {
							if sc.Shape == shape {
								serve += int(math.Round(sol.Values[g.Var(p)])) * min(sc.N, d)
							}
						}
					}
				}
				if items*d > serve {
					t.Errorf("%+v node %d: %d distinct claims of %d items, the bins serve %d", cfg, n, d, items, serve)
				}
			}
		}
	}
	if placed == 0 {
		t.Fatal("no distinct claim admitted: nothing checked")
	}
	t.Logf("%d distinct claims admitted, each node's on enough bins", placed)
}
