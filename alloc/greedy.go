package alloc

import (
	"context"
	"slices"
	"unsafe"

	"github.com/drasat/drasat/model"
)

// firstFitInOrder places claims in the given order and returns what fits; it stops
// early when ctx ends. Devices are only taken during a pass, so a claim
// that did not fit on a node never fits there later, nor does an
// identical claim: each class of identical claims searches each node at
// most once in vain (failed searches are most of a pass's work).
// steps bounds each claim's search per node.
func firstFitInOrder(ctx context.Context, p *model.Problem, claims []*model.Claim, steps int) []*Assignment {
	return fill(ctx, p, nil, claims, steps)
}

// fill is greedy on top of an allocation: the devices of as are taken
// first, then the claims not in as are placed in order; it returns as
// with the claims placed appended.
func fill(ctx context.Context, p *model.Problem, as []*Assignment, claims []*model.Claim, steps int) []*Assignment {
	s := model.NewState(p)
	in := map[int]bool{}
	for _, a := range as {
		a.take(s)
		in[a.Claim.Index] = true
	}
	out := slices.Clone(as)
	full := map[string]map[int]bool{} // class -> nodes where it did not fit
	for i, c := range claims {
		if i%64 == 0 && ctx.Err() != nil {
			break
		}
		if in[c.Index] {
			continue
		}
		k := c.ClassKey()
		if full[k] == nil {
			full[k] = map[int]bool{}
		}
		if a, ok, _ := search(s, c, full[k], steps); ok {
			out = append(out, a)
		}
	}
	return out
}

// claimSize estimates how much of the counters a claim takes at least, for
// smallest-first ordering: per request its cheapest alternative, as the sum
// of counter fractions of its smallest candidate device times the count.
func claimSize(p *model.Problem, c *model.Claim) float64 {
	return claimSizeShared(p, c, nil)
}

// leastShares keeps an alternative's least device share by its candidate
// list, which claims of different specs share when their selectors match
// the same devices: at 1,000 nodes a pass's hundred classes walked a
// hundred thousand candidates each.
type leastShares map[leastShareKey]float64

type leastShareKey struct {
	first *int
	n     int
}

// leastShare is the least DeviceShare of a's candidates (-1: none).
func leastShare(p *model.Problem, a *model.Alternative) float64 {
	per := -1.0
	for _, d := range a.Candidates {
		if f := DeviceShare(p, a, d); per < 0 || f < per {
			per = f
		}
	}
	return per
}

// claimSizeShared is claimSize with the alternatives' least shares kept
// in known (nil: none kept).
func claimSizeShared(p *model.Problem, c *model.Claim, known leastShares) float64 {
	total := 0.0
	for _, r := range c.Requests {
		best := -1.0
		for _, a := range r.Alternatives {
			// Without capacity requests the share depends on the
			// candidates alone (what a shared device gives is its default).
			keep := known != nil && a.CapacityRequests == nil
			key := leastShareKey{unsafe.SliceData(a.Candidates), len(a.Candidates)}
			per, ok := known[key]
			if !keep || !ok {
				per = leastShare(p, a)
				if keep {
					known[key] = per
				}
			}
			n := float64(a.Count)
			if a.All {
				n = float64(len(a.AllMatch))
			}
			v := (per + 1e-3) * n
			if per >= 0 && (best < 0 || v < best) {
				best = v
			}
		}
		total += max(best, 0)
	}
	return total
}
