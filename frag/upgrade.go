package frag

import (
	"math"
	"sort"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// upgrade is the look-ahead's second level under max-claims: among the
// allocations that admit the most claims (weight), one that allocates
// more of the GPUs. A pending claim that fits now is added (a gain the
// search missed within its budget); a pending claim that does not is
// traded for an admitted claim of the same weight that takes a smaller
// GPU share, when it fits in the place that claim leaves (its node). The
// admitted weight never falls, so a proven optimum stays one. Largest
// pending claims first; each admitted claim is traded at most once.
//
// Why: with the same number of claims admitted, every GPU share left
// unallocated now is one the next batches must fill with claims that fit
// the holes; a batch that keeps the small claims and turns the large one
// away leaves more of the cluster to fragments (first-fit-decreasing,
// which places a batch's large claims first, leaves less unallocated than
// FGD at the end of the inflation simulation: docs/history/performance.md).
//
// It returns the assignments (as, changed in place and extended) and the
// claims no longer admitted.
func (m *Measure) upgrade(s *model.State, as []*alloc.Assignment, b budget) ([]*alloc.Assignment, []*model.Claim) {
	admitted := map[int]bool{}
	for _, a := range as {
		admitted[a.Claim.Index] = true
	}
	var pending []*model.Claim
	want := map[int]float64{}
	for _, c := range m.p.Claims {
		if admitted[c.Index] || c.Err != nil {
			continue
		}
		if w, ok := m.requestedShare(c); ok {
			pending = append(pending, c)
			want[c.Index] = w
		}
	}
	if len(pending) == 0 {
		return as, nil
	}
	sort.SliceStable(pending, func(i, j int) bool { return want[pending[i].Index] > want[pending[j].Index] })
	size := func(a *alloc.Assignment) float64 {
		t := 0.0
		for _, pk := range a.Picks {
			t += pickShare(m, a.Claim, pk)
		}
		return t
	}
	traded := map[int]bool{}
	var out []*model.Claim
	for _, r := range pending {
		if b.over() {
			break
		}
		if b, ok := m.Place(s, r, FGD); ok {
			as = append(as, b)
			continue
		}
		// Admitted claims of r's weight and a smaller share, smallest first.
		var cands []int
		for i, a := range as {
			if !traded[a.Claim.Index] && a.Claim.Weight == r.Weight && size(a) < want[r.Index]-1e-9 {
				cands = append(cands, i)
			}
		}
		sort.SliceStable(cands, func(i, j int) bool { return size(as[cands[i]]) < size(as[cands[j]]) })
		for _, i := range cands {
			a := as[i]
			nodes := map[int]bool{}
			for _, n := range m.assignmentNodes(a) {
				nodes[n] = true
			}
			release(s, a)
			b, ok := m.placeWhere(s, r, FGD, func(n int) bool { return nodes[m.viewNode(n)] })
			if ok && size(b) > size(a)+1e-9 {
				as[i] = b
				traded[r.Index] = true
				out = append(out, a.Claim)
				break
			}
			if ok {
				release(s, b)
			}
			take(s, a)
		}
	}
	return as, out
}

// requestedShare is the smallest GPU share claim c can take: per request,
// its first alternative's count times the smallest share of a candidate.
// False when some request has no candidate or asks for all devices.
func (m *Measure) requestedShare(c *model.Claim) (float64, bool) {
	t := 0.0
	for _, r := range c.Requests {
		if len(r.Alternatives) == 0 {
			return 0, false
		}
		a := r.Alternatives[0]
		if a.All || a.AdminAccess || len(a.Candidates) == 0 {
			return 0, false
		}
		least := math.Inf(1)
		for _, d := range a.Candidates {
			least = min(least, consumedShare(m, a, d))
		}
		t += float64(a.Count) * least
	}
	return t, true
}
