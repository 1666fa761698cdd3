package k8s

import (
	"reflect"
	"slices"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// plan is what the last solve decided for demand that had no claim yet
// (projection.go): the allocations of its admitted stand-ins, by demand
// key, and why the others were not admitted. While nothing relevant
// changes, a claim that appears for a planned stand-in is written with the
// stand-in's allocation (re-checked, as every write is), and one whose
// stand-in was not admitted is left pending, without another solve.
// Relevant is what could change the solve's answer: new demand, planned
// demand that went away (a pod deleted), the inventory (slices, classes,
// taint rules, node labels) or a released allocation.
type plan struct {
	inventory    uint64
	releaseEpoch int
	// demand: every demand key the solve saw (real claims and stand-ins).
	demand map[string]bool
	// alloc: admitted stand-ins not written yet, by demand key.
	alloc map[string]*resourceapi.AllocationResult
	// why: stand-ins not admitted, by demand key: the solve's reason.
	why map[string]string
	// recheck: claims were held back for forecast demand (holding.go);
	// from this time the plan no longer decides, so they are decided
	// again. Zero: none held.
	recheck time.Time
	// held: the demand keys held back (a held stand-in's claim that
	// appears is decided: it stays pending).
	held map[string]bool
}

// covers reports whether the plan still decides the current demand (keys:
// the demand keys of the claims a pass would solve and of the stand-ins),
// given the snapshot's inventory fingerprint and whether allocations were
// released since the plan.
func (pl *plan) covers(keys []string, inventory uint64, releaseEpoch int) bool {
	if pl == nil || pl.inventory != inventory || pl.releaseEpoch != releaseEpoch {
		return false
	}
	if !pl.recheck.IsZero() && !time.Now().Before(pl.recheck) {
		return false // held claims are due
	}
	now := make(map[string]bool, len(keys))
	for _, k := range keys {
		if !pl.demand[k] {
			return false // new demand
		}
		now[k] = true
	}
	for k := range pl.alloc {
		if !now[k] {
			return false // planned demand went away: its devices are free
		}
	}
	return true
}

// ready counts the claims (by demand key) the plan would allocate now.
func (pl *plan) ready(keys []string) int {
	if pl == nil {
		return 0
	}
	n := 0
	for _, k := range keys {
		if pl.alloc[k] != nil {
			n++
		}
	}
	return n
}

// preferReal reorders, among claims of the same spec, who gets the
// allocations the solve found for that spec: real claims first (they can
// be written now, a stand-in only once it exists), then the older ones
// (the resourceclaim controller creates the claims of older pods first, so
// the pods it admits bind sooner). The solver is indifferent: any
// allocation of one is valid for the other. claims and rejected are
// alloc.Allocated's and alloc.Result's, indexed as p.Claims; a claim that
// gives its allocation up takes the rejection reason of the one that gets
// it. Claims fixed to a node or that failed to build keep their own.
func preferReal(p *model.Problem, claims []*resourceapi.ResourceClaim, rejected map[int]error) {
	var groups [][]int // indices of claims with the same demand
	for i, c := range claims {
		if p.Claims[i].FixedNode >= 0 || p.Claims[i].Err != nil {
			continue
		}
		if _, rej := rejected[i]; c.Status.Allocation == nil && !rej {
			continue // held back for forecast demand: neither admitted nor rejected
		}
		g := slices.IndexFunc(groups, func(g []int) bool { return sameDemand(claims[g[0]], c) })
		if g < 0 {
			groups = append(groups, nil)
			g = len(groups) - 1
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range groups {
		var allocs []*resourceapi.AllocationResult
		var whys []error
		for _, i := range g {
			if a := claims[i].Status.Allocation; a != nil {
				allocs = append(allocs, a)
			} else {
				whys = append(whys, rejected[i])
			}
		}
		if len(allocs) == 0 || len(whys) == 0 {
			continue
		}
		order := slices.Clone(g)
		slices.SortStableFunc(order, func(a, b int) int {
			ca, cb := claims[a], claims[b]
			if ra, rb := isProjected(ca), isProjected(cb); ra != rb {
				if rb {
					return -1
				}
				return 1
			}
			if c := ca.CreationTimestamp.Compare(cb.CreationTimestamp.Time); c != 0 {
				return c
			}
			return strings.Compare(ca.Name, cb.Name)
		})
		for k, i := range order {
			if k < len(allocs) {
				claims[i].Status.Allocation = allocs[k]
				delete(rejected, i)
			} else {
				claims[i].Status.Allocation = nil
				rejected[i] = whys[k-len(allocs)]
			}
		}
	}
}

// sameDemand: two claims any allocation of one is valid for the other
// (same spec, same weight).
func sameDemand(a, b *resourceapi.ResourceClaim) bool {
	return a.Annotations[model.WeightAnnotation] == b.Annotations[model.WeightAnnotation] && reflect.DeepEqual(a.Spec, b.Spec)
}

// newPlan records a solve's decisions on its stand-ins.
func newPlan(f *fairness, dem *demand, solved []*resourceapi.ResourceClaim, claims []*resourceapi.ResourceClaim, out *alloc.Result) *plan {
	pl := &plan{inventory: f.inventory, releaseEpoch: f.releaseEpoch, demand: map[string]bool{},
		alloc: map[string]*resourceapi.AllocationResult{}, why: map[string]string{}}
	for _, c := range solved {
		pl.demand[dem.key(c)] = true
	}
	for i, c := range claims {
		k := dem.key(c)
		if outOfRunBudget(out.Rejected[i]) {
			// The solve ran out of budget for its selectors: it decided
			// nothing about it, so the next pass solves it again.
			delete(pl.demand, k)
			continue
		}
		if !isProjected(c) {
			continue
		}
		if c.Status.Allocation != nil {
			pl.alloc[k] = c.Status.Allocation
		} else if why, ok := out.Rejected[i]; ok {
			pl.why[k] = why.Error()
		} // else held (holding.go): undecided until the plan's recheck

	}
	return pl
}
