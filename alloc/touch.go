package alloc

import (
	"math"
	"sort"

	"github.com/drasat/drasat/model"
)

// touchFloor is a lower bound on how many untouched counter sets any
// allocation admitting at least weight val of claims must touch — the
// bin-packing bound per counter name: whatever the claims need of a counter
// beyond what already-touched sets have free must come from fresh sets,
// each holding at most the largest fresh capacity. When binpack's SAT level
// reaches it, the level is proven without the (often hopeless) SAT proof.
//
// A claim's need is the least it can take: per request, the cheapest
// alternative's count times its cheapest candidate; admin access and
// allocationMode All count as nothing. The claims' needs are then the
// cheapest way to reach val, fractionally (so the bound holds for every
// set of claims of that weight, not only the one found).
func touchFloor(p *model.Problem, claims []*model.Claim, val int64, weight func(*model.Claim) int64) int {
	fresh := make([]bool, len(p.CounterSets))
	free := map[string]float64{}     // counter -> free in touched sets
	capacity := map[string]float64{} // counter -> largest fresh capacity
	for i, cs := range p.CounterSets {
		fresh[i] = len(cs.ExistingGroups) == 0 && equalInts(cs.Free, cs.Capacity)
		for j, name := range cs.Counters {
			if fresh[i] {
				capacity[name] = math.Max(capacity[name], float64(cs.Capacity[j]))
			} else {
				free[name] += float64(cs.Free[j])
			}
		}
	}
	floor := 0
	for name, c := range capacity {
		if c <= 0 {
			continue
		}
		type item struct{ need, w float64 }
		var items []item
		for _, cl := range claims {
			if cl.Err != nil || weight(cl) <= 0 {
				continue
			}
			items = append(items, item{claimNeed(p, cl, name), float64(weight(cl))})
		}
		sort.SliceStable(items, func(a, b int) bool { return items[a].need/items[a].w < items[b].need/items[b].w })
		need, left := 0.0, float64(val)
		for _, it := range items {
			if left <= 0 {
				break
			}
			take := math.Min(1, left/it.w)
			need += take * it.need
			left -= take * it.w
		}
		if k := int(math.Ceil((need-free[name])/c - 1e-9)); k > floor {
			floor = k
		}
	}
	return floor
}

// claimNeed is the least of counter name that claim c can take.
func claimNeed(p *model.Problem, c *model.Claim, name string) float64 {
	total := 0.0
	for _, r := range c.Requests {
		least := math.Inf(1)
		for _, a := range r.Alternatives {
			if a.AdminAccess || a.All {
				least = 0
				continue
			}
			each := math.Inf(1)
			for _, d := range a.Candidates {
				each = math.Min(each, deviceAmount(p, d, name))
			}
			least = math.Min(least, float64(a.Count)*each)
		}
		if !math.IsInf(least, 1) {
			total += least
		}
	}
	return total
}

// deviceAmount is how much of counter name device d takes, over its sets.
func deviceAmount(p *model.Problem, d int, name string) float64 {
	v := 0.0
	for _, c := range p.Devices[d].Consumes {
		for j, n := range p.CounterSets[c.Set].Counters {
			if n == name {
				v += float64(c.Amounts[j])
			}
		}
	}
	return v
}
