package alloc

import (
	"context"
	"sort"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/model"
)

// orderedRepack admits claims in input order, each iff it fits together
// with every claim admitted before it — for components too large for the
// SAT model's exact check. A claim is first placed as it is (price-guided
// best-fit placement); when that fails, every admitted claim and the new
// one are packed afresh by best-fit, and the new packing is kept if it
// places them all. That check is a heuristic: a claim it rejects might fit
// under some other packing, so the result is not proven. Claims of a class
// that failed a repack are not tried again: the admitted set only grows,
// so a set that did not fit stays too large.
//
// The relaxation's descent, which prices the repacks, runs until
// descentEnd.
func orderedRepack(ctx context.Context, p *model.Problem, claims []*model.Claim, descentEnd, deadline time.Time, lim Limits) []*Assignment {
	unit := func(*model.Claim) int64 { return 1 }
	rel, err := bound.New(ctx, p, claims, unit)
	if err != nil {
		return nil
	}
	lr := rel.Solve(ctx, 0, descentEnd, bound.Options{})
	price := rel.InitialPrice()
	if len(lr.Snapshots) > 1 {
		price = lr.Snapshots[1]
	}
	var admitted []*Assignment
	var admittedClaims []*model.Claim
	failed := map[string]bool{}
	s := model.NewState(p) // the admitted claims' devices taken
	for _, c := range claims {
		if c.Err != nil || failed[c.ClassKey()] {
			continue
		}
		// As it is: the admitted claims stay where they are.
		if a, ok := FirstFit(s, c, lim.SearchSteps); ok {
			admitted = append(admitted, a)
			admittedClaims = append(admittedClaims, c)
			continue
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			continue
		}
		// Packed afresh, largest first, with the new claim among them.
		all := append(append([]*model.Claim(nil), admittedClaims...), c)
		if packed := bestFit(ctx, p, sortBySize(p, all, true), rel, price, deadline, lim); len(packed) == len(all) {
			admitted, admittedClaims = packed, all
			s = model.NewState(p)
			for _, a := range admitted {
				a.take(s)
			}
			continue
		}
		failed[c.ClassKey()] = true
	}
	return admitted
}

// sortBySize orders claims by claimSize, smallest first or, with
// largestFirst, largest first; ties keep input order.
func sortBySize(p *model.Problem, claims []*model.Claim, largestFirst bool) []*model.Claim {
	out := append([]*model.Claim(nil), claims...)
	size := map[int]float64{}
	byClass := map[string]float64{} // identical claims have the same size
	known := leastShares{}
	for _, c := range out {
		v, ok := byClass[c.ClassKey()]
		if !ok {
			v = claimSizeShared(p, c, known) + podShare(p, c)
			byClass[c.ClassKey()] = v
		}
		size[c.Index] = v
		if largestFirst {
			size[c.Index] = -size[c.Index]
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return size[out[i].Index] < size[out[j].Index] })
	return out
}
