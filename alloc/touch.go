package alloc

import (
	"maps"
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
func touchFloor(p *model.Problem, claims []*model.Claim, val int64, claimValue func(*model.Claim) int64) int {
	fresh := make([]bool, len(p.CounterSets))
	free := map[string]float64{}     // counter -> free in touched sets
	capacity := map[string]float64{} // counter -> largest fresh capacity
	for i, cs := range p.CounterSets {
		fresh[i] = cs.Untouched()
		for j, name := range cs.Counters {
			if fresh[i] {
				capacity[name] = math.Max(capacity[name], float64(cs.Capacity[j]))
			} else {
				free[name] += float64(cs.Free[j])
			}
		}
	}
	// Needs per class of identical claims, per counter.
	type class struct {
		need map[string]float64
		w    float64
		n    int
	}
	var classes []*class
	byKey := map[string]*class{}
	cache := &needCache{devices: map[int]map[string]float64{}, alts: map[candidatesKey]map[string]float64{}}
	for _, cl := range claims {
		if cl.Err != nil || claimValue(cl) <= 0 {
			continue
		}
		if k := byKey[cl.ClassKey()]; k != nil {
			k.n++
			continue
		}
		k := &class{need: claimNeeds(p, cl, cache), w: float64(claimValue(cl)), n: 1}
		byKey[cl.ClassKey()] = k
		classes = append(classes, k)
	}
	names := make([]string, 0, len(capacity))
	for name := range capacity {
		names = append(names, name)
	}
	sort.Strings(names)
	floor := 0
	for _, name := range names {
		c := capacity[name]
		if c <= 0 {
			continue
		}
		sort.SliceStable(classes, func(a, b int) bool {
			return classes[a].need[name]/classes[a].w < classes[b].need[name]/classes[b].w
		})
		need, left := 0.0, float64(val)
		for _, k := range classes {
			if left <= 0 {
				break
			}
			take := math.Min(float64(k.n), left/k.w)
			need += take * k.need[name]
			left -= take * k.w
		}
		if k := int(math.Ceil((need-free[name])/c - 1e-9)); k > floor {
			floor = k
		}
	}
	return floor
}

// needCache remembers what devices and candidate lists need: claims built
// from the same class and selectors share their candidate slice.
type needCache struct {
	devices map[int]map[string]float64
	alts    map[candidatesKey]map[string]float64
}

type candidatesKey struct {
	first *int
	n     int
	count int
}

// claimNeeds is the least of each counter that claim c can take.
func claimNeeds(p *model.Problem, c *model.Claim, cache *needCache) map[string]float64 {
	total := map[string]float64{}
	for _, r := range c.Requests {
		var least map[string]float64 // over the alternatives so far
		for ai, a := range r.Alternatives {
			alt := altNeeds(p, a, cache)
			if ai == 0 {
				least = maps.Clone(alt)
				continue
			}
			for name, v := range least {
				least[name] = math.Min(v, alt[name])
			}
		}
		for name, v := range least {
			total[name] += v
		}
	}
	return total
}

// altNeeds is the least of each counter alternative a takes: count times
// the least over its candidates (a counter one of them does not consume is
// needed 0); nothing for admin access and allocationMode All.
func altNeeds(p *model.Problem, a *model.Alternative, cache *needCache) map[string]float64 {
	if a.AdminAccess || a.All || len(a.Candidates) == 0 {
		return nil
	}
	key := candidatesKey{&a.Candidates[0], len(a.Candidates), a.Count}
	if v, ok := cache.alts[key]; ok {
		return v
	}
	need := map[string]float64{}
	for i, d := range a.Candidates {
		am, ok := cache.devices[d]
		if !ok {
			am = deviceAmounts(p, d)
			cache.devices[d] = am
		}
		if i == 0 {
			for name, v := range am {
				need[name] = float64(a.Count) * v
			}
			continue
		}
		for name, v := range need {
			need[name] = math.Min(v, float64(a.Count)*am[name])
		}
	}
	cache.alts[key] = need
	return need
}

// deviceAmounts is how much of each counter device d takes, over its sets.
func deviceAmounts(p *model.Problem, d int) map[string]float64 {
	out := map[string]float64{}
	for _, c := range p.Devices[d].Consumes {
		for j, n := range p.CounterSets[c.Set].Counters {
			out[n] += float64(c.Amounts[j])
		}
	}
	return out
}
