package alloc

import (
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/model"
)

// The configuration relaxation's bound is never below the brute-force
// optimum (it is what proves optimality at scale, so an unsound bound would
// pass off a poor allocation as optimal), and best-fit at its prices only
// produces allocations the independent checker accepts, never worse than
// nothing and never above the optimum.
func TestRelaxationBoundAndBestFit(t *testing.T) {
	weight := func(c *model.Claim) int64 { return c.Weight }
	for seed := uint64(1); seed <= 200; seed++ {
		for _, compat := range []string{model.CompatKEP5963, model.CompatWildcard} {
			objs := randomInstance(seed)
			p := build(t, objs, compat)
			want := newBruteForce(p).best()
			rel := bound.New(p, p.Claims, weight)
			lr := rel.Solve(context.Background(), 0, time.Now().Add(time.Minute), bound.Options{Patience: 40})
			if lr.Bound < want {
				t.Fatalf("seed %d %s: relaxation bound %d (L=%.4f) below the optimum %d", seed, compat, lr.Bound, lr.Value, want)
			}
			for _, price := range lr.Snapshots {
				as := bestFit(context.Background(), p, sortBySize(p, p.Claims, false), rel, price, time.Now().Add(time.Minute), DefaultLimits)
				var got int64
				for _, a := range as {
					got += a.Claim.Weight
				}
				if got > want {
					t.Fatalf("seed %d %s: best-fit admitted weight %d above the optimum %d", seed, compat, got, want)
				}
				res := &Result{Assignments: as, Rejected: map[int]string{}}
				checkAllocations(t, p, objs, res, compat)
			}
		}
	}
}
