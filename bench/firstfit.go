package bench

import (
	"sort"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// ffBudget bounds the backtracking search for one claim on one node, so a
// claim upstream needs seconds to reject costs a bounded effort here.
const ffBudget = 50_000

// FirstFit places the pending claims of p one at a time in the given order
// with the scheduler's semantics: nodes in name order, the first node where
// the claim fits wins, requests in order, firstAvailable subrequests in
// preference order, devices in publication order, with backtracking
// within the claim. Placed claims are never moved.
func FirstFit(p *model.Problem, order []*model.Claim) *alloc.Result {
	s := model.NewState(p)
	res := &alloc.Result{Rejected: map[int]string{}}
	for _, c := range order {
		if a, ok := ffPlace(s, c); ok {
			res.Assignments = append(res.Assignments, a)
		} else {
			res.Rejected[c.Index] = "does not fit"
		}
	}
	sort.Slice(res.Assignments, func(i, j int) bool { return res.Assignments[i].Claim.Index < res.Assignments[j].Claim.Index })
	res.Stats.Pending = len(p.Claims)
	res.Stats.Admitted = len(res.Assignments)
	return res
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
		dev := p.Devices[a.Candidates[0]]
		sz := model.CapacityShare(a, dev)
		for _, cons := range dev.Consumes {
			cs := p.CounterSets[cons.Set]
			for j, amt := range cons.Amounts {
				if cs.Capacity[j] > 0 {
					sz += float64(amt) / float64(cs.Capacity[j])
				}
			}
		}
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

// ffNodes lists the nodes to try for c in name order (p.Nodes is sorted),
// or [-1] when no candidate is tied to a node.
func ffNodes(p *model.Problem, c *model.Claim) []int {
	if c.FixedNode >= 0 {
		return []int{c.FixedNode}
	}
	reach := make([]bool, len(p.Nodes))
	local := false
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			for _, d := range a.Candidates {
				dev := p.Devices[d]
				if dev.All {
					continue
				}
				local = true
				for _, n := range dev.Reach {
					reach[n] = true
				}
			}
		}
	}
	if !local {
		return []int{-1}
	}
	var out []int
	for n, ok := range reach {
		if ok {
			out = append(out, n)
		}
	}
	return out
}

type ffSearch struct {
	s      *model.State
	c      *model.Claim
	node   int
	budget int
	picks  []alloc.Pick
	taken  map[int]bool
}

func ffPlace(s *model.State, c *model.Claim) (*alloc.Assignment, bool) {
	if c.Err != nil {
		return nil, false
	}
	for _, n := range ffNodes(s.P, c) {
		f := &ffSearch{s: s, c: c, node: n, budget: ffBudget, taken: map[int]bool{}}
		if f.request(0) {
			return &alloc.Assignment{Claim: c, Node: n, Picks: append([]alloc.Pick(nil), f.picks...)}, true
		}
	}
	return nil, false
}

func (f *ffSearch) request(ri int) bool {
	if ri == len(f.c.Requests) {
		return true
	}
	for ai, a := range f.c.Requests[ri].Alternatives {
		cands := a.CandidatesOn(f.node)
		if a.All {
			if f.all(ri, ai, a, cands) {
				return true
			}
			continue
		}
		if f.pick(ri, ai, a, cands, 0, a.Count) {
			return true
		}
		if f.budget <= 0 {
			return false
		}
	}
	return false
}

// pick chooses n more devices for alternative ai from cands[from:].
func (f *ffSearch) pick(ri, ai int, a *model.Alternative, cands []int, from, n int) bool {
	if n == 0 {
		return f.request(ri + 1)
	}
	for i := from; i < len(cands); i++ {
		if f.budget--; f.budget < 0 {
			return false
		}
		d := cands[i]
		if !f.ok(ri, ai, a, d) {
			continue
		}
		f.take(ri, ai, a, d)
		if f.pick(ri, ai, a, cands, i+1, n-1) {
			return true
		}
		f.undo(a, d)
	}
	return false
}

// all takes every device matching the request on the node; all of them
// must be usable, and there must be at least one.
func (f *ffSearch) all(ri, ai int, a *model.Alternative, cands []int) bool {
	onNode := map[int]bool{}
	for _, d := range cands {
		onNode[d] = true
	}
	for _, d := range a.AllMatch {
		dev := f.s.P.Devices[d]
		if dev.All || (f.node >= 0 && containsInt(dev.Reach, f.node)) {
			if !onNode[d] {
				return false // matches but is not usable here
			}
		}
	}
	if len(cands) == 0 {
		return false
	}
	var done []int
	okAll := true
	for _, d := range cands {
		if !f.ok(ri, ai, a, d) {
			okAll = false
			break
		}
		f.take(ri, ai, a, d)
		done = append(done, d)
	}
	if okAll && f.request(ri+1) {
		return true
	}
	for i := len(done) - 1; i >= 0; i-- {
		f.undo(a, done[i])
	}
	return false
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (f *ffSearch) ok(ri, ai int, a *model.Alternative, d int) bool {
	// A shared device serves several requests of a claim, once each.
	if f.taken[d] && !f.s.P.Devices[d].MultiAlloc || !f.s.FitsFor(d, a, !a.AdminAccess) {
		return false
	}
	req := f.c.Requests[ri]
	for _, con := range f.c.Constraints {
		if !con.Applies(req, a) {
			continue
		}
		// upstream: a device without the attribute fails both kinds
		var chosen [][]string
		for _, pk := range f.picks {
			preq := f.c.Requests[pk.Req]
			if con.Applies(preq, preq.Alternatives[pk.Alt]) {
				chosen = append(chosen, con.ValuesOf(preq.Alternatives[pk.Alt], pk.Dev))
			}
		}
		if !con.Allows(chosen, con.ValuesOf(a, d)) {
			return false
		}
	}
	return true
}

func (f *ffSearch) take(ri, ai int, a *model.Alternative, d int) {
	f.s.TakeFor(d, a, !a.AdminAccess)
	f.taken[d] = true
	f.picks = append(f.picks, alloc.Pick{Req: ri, Alt: ai, Dev: d})
}

func (f *ffSearch) undo(a *model.Alternative, d int) {
	f.s.ReleaseFor(d, a, !a.AdminAccess)
	if !f.s.P.Devices[d].MultiAlloc {
		delete(f.taken, d)
	}
	f.picks = f.picks[:len(f.picks)-1]
}
