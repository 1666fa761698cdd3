package alloc

import (
	"sort"

	"github.com/drasat/drasat/model"
)

// The first-fit placer: the one depth-first search that places a claim the
// way the kube-scheduler's structured allocator does. Nodes in name order
// (the first node where the claim fits wins), requests in order,
// firstAvailable subrequests in preference order, devices in publication
// order, with backtracking within the claim. The engine's greedy pass, the
// alone bound, the ordered repack, best-fit's enumeration and the brute
// force of the tests use it, and so do the first-fit baselines of
// drasat bench, which must admit exactly what the scheduler admits
// (bench's upstream comparison tests and tools/conformance check that).
//
// What its users choose is how much it may search (steps per node), which
// nodes it skips, and whether it stops at the first placement or
// enumerates them all.

// FirstFit places c in s as the scheduler's allocator would, searching at
// most steps placer steps per node; on success the devices are taken in
// s. A claim whose search runs out of steps on every node where it might
// fit is not placed.
func FirstFit(s *model.State, c *model.Claim, steps int) (*Assignment, bool) {
	a, ok, _ := search(s, c, nil, steps)
	return a, ok
}

// Sequential places the claims one at a time in order with place and never
// moves a placed claim, as a scheduler that sees one claim at a time does;
// the claims place cannot fit are rejected. The baselines drasat is
// compared with (first-fit, first-fit-decreasing, best-fit, FGD) differ
// only in their place.
func Sequential(p *model.Problem, order []*model.Claim, place func(*model.State, *model.Claim) (*Assignment, bool)) *Result {
	s := model.NewState(p)
	res := &Result{Rejected: map[int]error{}}
	for _, c := range order {
		if a, ok := place(s, c); ok {
			res.Assignments = append(res.Assignments, a)
		} else {
			res.Rejected[c.Index] = errDoesNotFit
		}
	}
	sort.Slice(res.Assignments, func(i, j int) bool { return res.Assignments[i].Claim.Index < res.Assignments[j].Claim.Index })
	res.Stats.Pending = len(p.Claims)
	res.Stats.Admitted = len(res.Assignments)
	return res
}

// search is FirstFit that also tells whether a failure is decided (false
// when the search ran out of steps on some node). Nodes in skip are not
// tried, and the nodes where c does not fit are added to it (nil: none).
func search(s *model.State, c *model.Claim, skip map[int]bool, steps int) (a *Assignment, ok, decided bool) {
	if c.Err != nil || !servable(c) {
		return nil, false, true
	}
	decided = true
	for _, n := range claimNodes(s.P, c) {
		if skip[n] || !s.PodAllows(c, n) {
			continue // (not added to skip: the pods' rule may change)
		}
		g := newPlacer(s, c, n, steps)
		if g.request(0) {
			s.PlacePod(c, n)
			return &Assignment{Claim: c, Node: n, Picks: append([]Pick(nil), g.picks...)}, true, true
		}
		if g.budget <= 0 {
			decided = false
		}
		if skip != nil {
			skip[n] = true
		}
	}
	return nil, false, decided
}

// servable tells whether every request of c has an alternative with
// enough candidates at all. A claim that fails it fits nowhere, decided
// without a search (which could run out of budget trying the requests
// before the hopeless one).
func servable(c *model.Claim) bool {
	return c.EveryRequest(func(a *model.Alternative) bool {
		return a.All && len(a.Candidates) > 0 || !a.All && len(a.Candidates) >= a.Count
	})
}

// claimNodes lists the nodes worth trying for c in name order (p.Nodes is
// sorted), or [-1] when no candidate device is tied to nodes.
func claimNodes(p *model.Problem, c *model.Claim) []int {
	if c.FixedNode >= 0 {
		return []int{c.FixedNode}
	}
	return c.CandidateNodes(p)
}

// placer is the search for one claim on one node.
type placer struct {
	s       *model.State
	c       *model.Claim
	node    int
	budget  int // steps left
	picks   []Pick
	inClaim map[int]bool
	// each, when set, is called for every complete placement and the
	// search goes on (exhaustive enumeration for best-fit and tests).
	each func(picks []Pick)
}

func newPlacer(s *model.State, c *model.Claim, node, steps int) *placer {
	return &placer{s: s, c: c, node: node, budget: steps, inClaim: map[int]bool{}}
}

func (g *placer) usable(d int, a *model.Alternative) bool {
	dev := g.s.P.Devices[d]
	if g.node >= 0 && !dev.Reaches(g.node) || g.node < 0 && !dev.All {
		return false
	}
	// A claim takes a device once, but a shared device once per request
	// (the allocator's search moves on past a device within a request).
	if g.inClaim[d] && !dev.MultiAlloc {
		return false
	}
	return g.s.FitsFor(d, a, !a.AdminAccess)
}

func (g *placer) request(ri int) bool {
	if ri == len(g.c.Requests) {
		if g.each != nil {
			g.each(g.picks)
			return false
		}
		return true
	}
	for ai, a := range g.c.Requests[ri].Alternatives {
		if a.All {
			if g.all(ri, ai, a) {
				return true
			}
			continue
		}
		if len(g.picks)+a.Count > model.MaxResults {
			continue // upstream: past the claim's result limit; next alternative
		}
		if g.devices(ri, ai, a, 0, a.Count) {
			return true
		}
		if g.budget <= 0 {
			return false
		}
	}
	return false
}

// devices picks need more devices for alternative a from position from on,
// then continues with the next request.
func (g *placer) devices(ri, ai int, a *model.Alternative, from, need int) bool {
	if need == 0 {
		return g.request(ri + 1)
	}
	cands := a.CandidatesOn(g.node)
	for i := from; i <= len(cands)-need; i++ {
		g.budget--
		if g.budget <= 0 {
			return false
		}
		d := cands[i]
		if !g.usable(d, a) || !ConstraintsAllow(g.c, g.picks, ri, a, d) {
			continue
		}
		g.add(ri, ai, a, d)
		if g.devices(ri, ai, a, i+1, need-1) {
			return true
		}
		g.remove(a, d)
	}
	return false
}

// all takes every matching device reachable from the node, or fails.
func (g *placer) all(ri, ai int, a *model.Alternative) bool {
	var take []int
	cand := map[int]bool{}
	for _, d := range a.Candidates {
		cand[d] = true
	}
	for _, d := range a.AllMatch {
		dev := g.s.P.Devices[d]
		if g.node >= 0 && !dev.SeenFrom(g.node) {
			continue
		}
		if !cand[d] {
			return false
		}
		take = append(take, d)
	}
	if len(take) == 0 || len(g.picks)+len(take) > model.MaxResults {
		return false
	}
	n := 0
	for _, d := range take {
		if !g.usable(d, a) || !ConstraintsAllow(g.c, g.picks, ri, a, d) {
			break
		}
		g.add(ri, ai, a, d)
		n++
	}
	if n == len(take) && g.request(ri+1) {
		return true
	}
	for i := n - 1; i >= 0; i-- {
		g.remove(a, take[i])
	}
	return false
}

func (g *placer) add(ri, ai int, a *model.Alternative, d int) {
	g.picks = append(g.picks, Pick{ri, ai, d})
	g.inClaim[d] = true
	g.s.TakeFor(d, a, !a.AdminAccess)
}

func (g *placer) remove(a *model.Alternative, d int) {
	g.picks = g.picks[:len(g.picks)-1]
	if !g.s.P.Devices[d].MultiAlloc {
		delete(g.inClaim, d)
	}
	g.s.ReleaseFor(d, a, !a.AdminAccess)
}

// ConstraintsAllow tells whether device d, serving alternative a of
// request ri, keeps claim c's matchAttribute and distinctAttribute
// constraints with the devices picked for c so far (the model's rule:
// list-type attributes, derived values; a device without the attribute
// fails both kinds, as upstream). Placers outside alloc (frag's) use it too.
func ConstraintsAllow(c *model.Claim, picks []Pick, ri int, a *model.Alternative, d int) bool {
	req := c.Requests[ri]
	for _, k := range c.Constraints {
		if !k.Applies(req, a) {
			continue
		}
		var chosen [][]string
		for _, p := range picks {
			pr := c.Requests[p.Req]
			if k.Applies(pr, pr.Alternatives[p.Alt]) {
				chosen = append(chosen, k.ValuesOf(pr.Alternatives[p.Alt], p.Dev))
			}
		}
		if !k.Allows(chosen, k.ValuesOf(a, d)) {
			return false
		}
	}
	return true
}

// DeviceShare is how much of its counter sets (and, for a shared device,
// of its capacity) device d takes when it serves alternative a, as the sum
// of the fractions of each counter's capacity: the size measure of the
// smallest-first and largest-first orders.
func DeviceShare(p *model.Problem, a *model.Alternative, d int) float64 {
	dev := p.Devices[d]
	f := model.CapacityShare(a, dev)
	for _, cons := range dev.Consumes {
		cs := p.CounterSets[cons.Set]
		for j, amt := range cons.Amounts {
			if cs.Capacity[j] > 0 {
				f += float64(amt) / float64(cs.Capacity[j])
			}
		}
	}
	return f
}
