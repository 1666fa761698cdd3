package alloc

import (
	"context"

	"github.com/drasat/drasat/model"
)

// Assignment is one claim's allocation: the node it is for (-1 when no node
// matters) and the devices per request.
type Assignment struct {
	Claim *model.Claim
	Node  int
	Picks []Pick
}

// Pick is one device serving alternative Alt of request Req.
type Pick struct{ Req, Alt, Dev int }

// take allocates a's devices in s.
func (a *Assignment) take(s *model.State) {
	for _, pk := range a.Picks {
		TakePick(s, a.Claim, pk)
	}
}

// release undoes take.
func (a *Assignment) release(s *model.State) {
	for i := len(a.Picks) - 1; i >= 0; i-- {
		ReleasePick(s, a.Claim, a.Picks[i])
	}
}

// FitsPick, TakePick and ReleasePick go through the state with the pick's
// alternative, which says what it consumes of a shared device's capacity
// (and admin access, which holds no device); placers outside alloc (the
// frag baselines) use them too.
func FitsPick(s *model.State, c *model.Claim, pk Pick) bool {
	return s.FitsFor(pk.Dev, c.Requests[pk.Req].Alternatives[pk.Alt], exclusive(c, pk))
}

func TakePick(s *model.State, c *model.Claim, pk Pick) {
	s.TakeFor(pk.Dev, c.Requests[pk.Req].Alternatives[pk.Alt], exclusive(c, pk))
}

func ReleasePick(s *model.State, c *model.Claim, pk Pick) {
	s.ReleaseFor(pk.Dev, c.Requests[pk.Req].Alternatives[pk.Alt], exclusive(c, pk))
}

// searchBudget bounds the depth-first search for one claim, so a greedy pass
// stays fast even on claims the upstream allocator takes seconds to reject.
const searchBudget = 20_000

// place searches a first-fit allocation for c in the current state: nodes in
// name order, requests in order, alternatives in preference order, devices
// in publication order. On success the devices are taken.
func place(s *model.State, c *model.Claim) (*Assignment, bool) {
	a, ok, _ := search(s, c, nil)
	return a, ok
}

// search is place that also tells whether a failure is decided (false
// when the search ran out of budget on some node). Nodes in skip are not
// tried, and the nodes where c does not fit are added to it (nil: none).
func search(s *model.State, c *model.Claim, skip map[int]bool) (a *Assignment, ok, decided bool) {
	if c.Err != nil || !servable(c) {
		return nil, false, true
	}
	decided = true
	for _, n := range claimNodes(s.P, c) {
		if skip[n] {
			continue
		}
		g := &placer{s: s, c: c, node: n, budget: searchBudget, inClaim: map[int]bool{}}
		if g.request(0) {
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
	for _, r := range c.Requests {
		ok := false
		for _, a := range r.Alternatives {
			if a.All && len(a.Candidates) > 0 || !a.All && len(a.Candidates) >= a.Count {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// claimNodes lists the nodes worth trying for c, or [-1] when no candidate
// device is tied to nodes.
func claimNodes(p *model.Problem, c *model.Claim) []int {
	if c.FixedNode >= 0 {
		return []int{c.FixedNode}
	}
	return c.CandidateNodes(p)
}

type placer struct {
	s       *model.State
	c       *model.Claim
	node    int
	budget  int
	picks   []Pick
	inClaim map[int]bool
	// each, when set, is called for every complete placement and the
	// search goes on (exhaustive enumeration for tests and explanations).
	each func(picks []Pick)
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
		if !g.usable(d, a) || !g.constraintsAllow(ri, a, d) {
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
		if !g.usable(d, a) || !g.constraintsAllow(ri, a, d) {
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

// constraintsAllow checks the claim's constraints against devices already
// picked for it.
func (g *placer) constraintsAllow(ri int, a *model.Alternative, d int) bool {
	req := g.c.Requests[ri]
	for _, k := range g.c.Constraints {
		if !k.Applies(req, a) {
			continue
		}
		var chosen [][]string
		for _, p := range g.picks {
			pr := g.c.Requests[p.Req]
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

// greedy places claims in the given order and returns what fits; it stops
// early when ctx ends. Devices are only taken during a pass, so a claim
// that did not fit on a node never fits there later, nor does an
// identical claim: each class of identical claims searches each node at
// most once in vain (failed searches are most of a pass's work).
func greedy(ctx context.Context, p *model.Problem, claims []*model.Claim) []*Assignment {
	s := model.NewState(p)
	var out []*Assignment
	full := map[string]map[int]bool{} // class -> nodes where it did not fit
	for i, c := range claims {
		if i%64 == 0 && ctx.Err() != nil {
			break
		}
		k := c.ClassKey()
		if full[k] == nil {
			full[k] = map[int]bool{}
		}
		if a, ok, _ := search(s, c, full[k]); ok {
			out = append(out, a)
		}
	}
	return out
}

// claimSize estimates how much of the counters a claim takes at least, for
// smallest-first ordering: per request its cheapest alternative, as the sum
// of counter fractions of its smallest candidate device times the count.
func claimSize(p *model.Problem, c *model.Claim) float64 {
	total := 0.0
	for _, r := range c.Requests {
		best := -1.0
		for _, a := range r.Alternatives {
			per := -1.0
			for _, d := range a.Candidates {
				f := model.CapacityShare(a, p.Devices[d])
				for _, cons := range p.Devices[d].Consumes {
					cs := p.CounterSets[cons.Set]
					for j, amt := range cons.Amounts {
						if cs.Capacity[j] > 0 {
							f += float64(amt) / float64(cs.Capacity[j])
						}
					}
				}
				if per < 0 || f < per {
					per = f
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
