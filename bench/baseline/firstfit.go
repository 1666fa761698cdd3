// Package baseline holds the allocators drasat is measured against: the
// kube-scheduler's own structured allocator (Upstream, with the scheduler's
// node filters for pods) and drasat's model placed first-fit in a given
// order (FirstFit, Decreasing).
package baseline

import (
	"sort"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// ffSteps bounds the search for one claim on one node, so a claim
// upstream needs seconds to reject costs a bounded effort here.
const ffSteps = 50_000

// FirstFit places the pending claims of p one at a time in the given order
// with the scheduler's semantics (alloc.FirstFit, the engine's own
// placer: nodes in name order, the first node where the claim fits wins,
// requests in order, firstAvailable subrequests in preference order,
// devices in publication order, with backtracking within the claim).
// Placed claims are never moved.
func FirstFit(p *model.Problem, order []*model.Claim) *alloc.Result {
	return alloc.Sequential(p, order, func(s *model.State, c *model.Claim) (*alloc.Assignment, bool) {
		return alloc.FirstFit(s, c, ffSteps)
	})
}

// Decreasing orders claims largest first (stable): a claim's size is the
// share of its counter sets' capacity its first candidates consume, summed
// over its requests; claims without counters count their devices.
func Decreasing(p *model.Problem) []*model.Claim {
	size := make([]float64, len(p.Claims))
	for i, c := range p.Claims {
		size[i] = claimSize(p, c)
	}
	out := append([]*model.Claim(nil), p.Claims...)
	sort.SliceStable(out, func(a, b int) bool { return size[out[a].Index] > size[out[b].Index] })
	return out
}

// claimSize is the share of its counter sets' capacity c takes as the
// scheduler would place it first: per request, its preferred alternative's
// first candidate (alloc.DeviceShare) times the count; a device without
// counters counts 1. (The engine's smallest-first order measures the
// cheapest alternative instead: the least a claim can take.)
func claimSize(p *model.Problem, c *model.Claim) float64 {
	total := 0.0
	for _, r := range c.Requests {
		if len(r.Alternatives) == 0 {
			continue
		}
		a := r.Alternatives[0]
		if len(a.Candidates) == 0 {
			continue
		}
		sz := alloc.DeviceShare(p, a, a.Candidates[0])
		if sz == 0 {
			sz = 1
		}
		n := a.Count
		if a.All || n == 0 {
			n = 1
		}
		total += sz * float64(n)
	}
	return total
}
