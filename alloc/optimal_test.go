package alloc

import (
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

func build(t *testing.T, objs *input.Objects, compat string) *model.Problem {
	t.Helper()
	p, err := model.Build(context.Background(), objs, model.Options{Compat: compat})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, p *model.Problem, opts Options) *Result {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	res, err := Run(context.Background(), p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// On small random instances the solver's optimum equals brute-force
// enumeration, is proven, is never below first-fit, and every allocation
// passes the independent checker.
func TestOptimumEqualsBruteForce(t *testing.T) {
	for seed := uint64(1); seed <= 250; seed++ {
		for _, compat := range []string{model.CompatKEP5963, model.CompatWildcard} {
			objs := randomInstance(seed)
			p := build(t, objs, compat)
			res := run(t, p, Options{})
			want := newBruteForce(p).best()
			if res.Stats.Objective != want {
				t.Fatalf("seed %d %s: solver admitted weight %d, brute force %d", seed, compat, res.Stats.Objective, want)
			}
			if !res.Stats.Optimal || res.Stats.Bound != want {
				t.Errorf("seed %d %s: optimum %d not proven (bound %d)", seed, compat, want, res.Stats.Bound)
			}
			var ff int64
			for _, a := range firstFitInOrder(context.Background(), p, p.Claims, DefaultLimits.SearchSteps) {
				ff += a.Claim.Weight
			}
			if res.Stats.Objective < ff {
				t.Errorf("seed %d: below first-fit (%d < %d)", seed, res.Stats.Objective, ff)
			}
			checkAllocations(t, p, objs, res, compat)
		}
	}
}

// The ordered objective admits exactly the claims that fit together with
// every earlier admitted claim.
func TestOrderedEqualsBruteForce(t *testing.T) {
	for seed := uint64(1); seed <= 150; seed++ {
		objs := randomInstance(seed)
		p := build(t, objs, "")
		res := run(t, p, Options{Objective: Ordered})
		want := newBruteForce(p).ordered()
		var got []int
		for _, a := range res.Assignments {
			got = append(got, a.Claim.Index)
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d: ordered admitted %v, brute force %v", seed, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("seed %d: ordered admitted %v, brute force %v", seed, got, want)
			}
		}
		checkAllocations(t, p, objs, res, "")
	}
}
