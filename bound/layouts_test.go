package bound_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// Pricing a bin from its enumerated layouts (ValueAt) must agree with the
// exhaustive layout search (Value) at any prices and in any state the
// heuristics reach: on an empty bin, which is what the bound sums, and on
// bins partly taken, which is what best-fit scores. A wrong layout list would
// make the bound unsound or best-fit blind.
func TestValueAtMatchesSearch(t *testing.T) {
	tpu, err := gen.TPU(gen.TPUConfig{Nodes: 16, Claims: 12, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	instances := []struct {
		name   string
		objs   *input.Objects
		compat string
	}{
		{"mig", gen.MIG(gen.DefaultMIG(2, 4, 60, 1)), ""},
		{"modes-kep5963", gen.Modes(gen.ModesConfig{Nodes: 2, GPUsPerNode: 2, Claims: 40, Seed: 2}), model.CompatKEP5963},
		{"modes-wildcard", gen.Modes(gen.ModesConfig{Nodes: 2, GPUsPerNode: 2, Claims: 40, Seed: 2}), model.CompatWildcard},
		{"tpu", tpu, ""},
	}
	for _, in := range instances {
		t.Run(in.name, func(t *testing.T) {
			p, err := model.Build(context.Background(), in.objs, model.Options{Compat: in.compat})
			if err != nil {
				t.Fatal(err)
			}
			rel := relaxationOf(t, p, p.Claims, func(*model.Claim) int64 { return 1 })
			if len(rel.Bins) == 0 {
				t.Fatal("no bins: the instance tests nothing")
			}
			enumerated := 0
			for _, b := range rel.Bins {
				if rel.HasLayouts(b) {
					enumerated++
				}
			}
			if in.name != "tpu" && enumerated != len(rel.Bins) {
				t.Fatalf("%d of %d GPU bins have enumerated layouts, want all", enumerated, len(rel.Bins))
			}
			rng := rand.New(rand.NewPCG(7, 11))
			checked := 0
			for trial := 0; trial < 40; trial++ {
				price := make([]float64, rel.Kinds)
				for i := range price {
					if rng.IntN(4) > 0 {
						price[i] = float64(rng.IntN(100)) / 10
					}
				}
				s := model.NewState(p)
				for _, b := range rel.Bins {
					if rel.HasLayouts(b) {
						want, _ := rel.Value(b, s, price)
						if got := rel.LayoutValue(b, price); math.Abs(got-want) > 1e-9 {
							t.Fatalf("trial %d bin %d: layout value %.4f, search %.4f", trial, b.Index, got, want)
						}
					}
					// Take a random feasible part of the bin, checking the
					// value after every step.
					for step := 0; ; step++ {
						want, _ := rel.Value(b, s, price)
						if got := rel.ValueAt(b, s, price); math.Abs(got-want) > 1e-9 {
							t.Fatalf("trial %d bin %d step %d: ValueAt %.4f, search %.4f", trial, b.Index, step, got, want)
						}
						checked++
						var fits []int
						for _, d := range b.Devices {
							if s.Fits(d, true) {
								fits = append(fits, d)
							}
						}
						if len(fits) == 0 || rng.IntN(3) == 0 {
							break
						}
						s.Take(fits[rng.IntN(len(fits))], true)
					}
				}
			}
			t.Logf("%d bins (%d enumerated), %d kinds, %d values compared", len(rel.Bins), enumerated, rel.Kinds, checked)
		})
	}
}

// The bound never rises above the relaxation's value at any prices, and the
// descent ends at a bound no lower than what a feasible greedy packing of
// the same claims admits (a bound below a feasible allocation is unsound).
func TestSolveBoundsGreedy(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		p, err := model.Build(context.Background(), gen.MIG(gen.DefaultMIG(4, 4, 120, seed)), model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rel := relaxationOf(t, p, p.Claims, func(*model.Claim) int64 { return 1 })
		res := rel.Solve(context.Background(), 0, time.Now().Add(time.Minute), bound.Options{})
		ff := baseline.FirstFit(p, p.Claims)
		if res.Bound < int64(len(ff.Assignments)) {
			t.Fatalf("seed %d: bound %d below first-fit's %d admitted claims", seed, res.Bound, len(ff.Assignments))
		}
		if res.Bound >= int64(len(p.Claims)) {
			t.Fatalf("seed %d: bound %d proves nothing (%d claims): the instance is not oversubscribed", seed, res.Bound, len(p.Claims))
		}
	}
}

// A descent cut off before its first iteration proves nothing: its bound
// is no bound at all (it was math.MinInt64, below every allocation).
func TestSolvePastDeadlineBoundsNothing(t *testing.T) {
	p, err := model.Build(context.Background(), gen.MIG(gen.DefaultMIG(2, 4, 40, 1)), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rel := relaxationOf(t, p, p.Claims, func(*model.Claim) int64 { return 1 })
	res := rel.Solve(context.Background(), 0, time.Now().Add(-time.Second), bound.Options{})
	if res.Bound < int64(len(p.Claims)) {
		t.Fatalf("bound %d from no iteration, below the %d claims", res.Bound, len(p.Claims))
	}
}
