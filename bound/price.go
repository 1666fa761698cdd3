package bound

import (
	"sort"

	"github.com/drasat/drasat/model"
)

// pricingBudget bounds the layout search of one bin. A search that runs out
// answers with a weaker but still valid bound (see Value).
const pricingBudget = 50_000

// Value is the most a bin can still be worth at prices π given state s: the
// largest total price of a set of its devices that can be allocated together
// (counters, compatibility groups, compatibleOnlyWith — all as s decides).
// It returns that value and the devices of a best layout found. A search
// that runs out of budget returns the sum of the positive prices of the
// devices that still fit instead, which bounds any layout: weaker, still
// sound.
func (r *Relaxation) Value(b *Bin, s *model.State, price []float64) (float64, []int) {
	type cand struct {
		d int
		v float64
	}
	var cs []cand
	for _, d := range b.Devices {
		if v := price[r.kindOf[d]]; v > 1e-12 && s.Fits(d, true) {
			cs = append(cs, cand{d, v})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].v > cs[j].v })
	suffix := make([]float64, len(cs)+1)
	for i := len(cs) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1] + cs[i].v
	}
	best := 0.0
	var bestSet, cur []int
	budget := pricingBudget
	var dfs func(i int, v float64)
	dfs = func(i int, v float64) {
		if budget <= 0 || v+suffix[i] <= best+1e-9 {
			return
		}
		budget--
		if i == len(cs) {
			best = v
			bestSet = append(bestSet[:0], cur...)
			return
		}
		if s.Fits(cs[i].d, true) {
			s.Take(cs[i].d, true)
			cur = append(cur, cs[i].d)
			dfs(i+1, v+cs[i].v)
			cur = cur[:len(cur)-1]
			s.Release(cs[i].d, true)
		}
		dfs(i+1, v)
	}
	dfs(0, 0)
	if budget <= 0 {
		return suffix[0], bestSet
	}
	return best, bestSet
}
