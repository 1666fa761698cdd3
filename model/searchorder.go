package model

import (
	"fmt"
	"slices"
)

// The allocator's search order, where a claim's outcome depends on it.
//
// For allocationMode All the allocator must take every matching device the
// node sees, and a device that breaks a claim constraint is an error ("cannot
// add device ... because a claim constraint would not be satisfied"), not a
// miss; an error on any node aborts the pod's scheduling attempt. Whether the
// search ever gets there depends on what it picked before: the requests
// before the All request take their first fitting devices, in publication
// order, and only a miss (never an error) makes it backtrack. So a claim can
// be unallocatable for the scheduler although some other choice for its
// earlier requests would satisfy everything.
//
// Such claims are decided by running that search, node by node, against the
// state before any pending claim is placed (existing allocations only), and
// the claim is held to what it finds: an error on some node makes the claim
// fail, else the claim may only take the devices the search picked on the
// first node where it succeeded. Pending claims placed first only take
// devices and counters away, which turns errors into misses and never a miss
// into an error, so that placement stays one the scheduler produces without
// an error whatever it placed before.

// SearchSteps bounds the search per claim and node; a claim whose search
// does not finish within it on some node is not allocated.
const SearchSteps = 20000

// searchPick is one device the search took: request, alternative, device.
type searchPick struct{ req, alt, dev int }

// upstreamSearch is the allocator's depth-first search for one claim on one
// node, with its errors.
type upstreamSearch struct {
	p     *Problem
	s     *State
	c     *Claim
	node  int
	steps int
	late  []bool // devices of pools with binding conditions: tried last
	// until is the request at which the search counts as done: only the
	// first request matters when no later one can fail with an error.
	until   int
	picks   []searchPick
	inClaim map[int]int
	err     error
}

// orderedAll: a claim with an allocationMode All alternative, under a
// constraint, that the search may reach after picking other devices of the
// claim (a later request, or a later firstAvailable subrequest).
func orderedAll(c *Claim) bool {
	for ri, r := range c.Requests {
		for ai, a := range r.Alternatives {
			if a.All && !a.OverLimit && (ri > 0 || ai > 0) && constrained(c, r, a) {
				return true
			}
		}
	}
	return false
}

func constrained(c *Claim, r *Request, a *Alternative) bool {
	for _, k := range c.Constraints {
		if k.Applies(r, a) {
			return true
		}
	}
	return false
}

// searchOrderError runs the allocator's search for c on every node it may
// use and returns the first error (the claim then fails). A claim whose
// outcome depends on the search order (orderedAll) is then held to the
// devices found on the first node where the search succeeds.
func (b *builder) searchOrderError(c *Claim) error {
	first := len(c.Requests) > 0 && c.Requests[0].Alternatives[0].All && constrained(c, c.Requests[0], c.Requests[0].Alternatives[0])
	ordered := orderedAll(c)
	if !first && !ordered {
		return nil
	}
	late := b.lateDevices()
	var found []searchPick
	foundNode := -2
	for _, n := range b.searchNodes(c) {
		g := &upstreamSearch{p: b.p, s: NewState(b.p), c: c, node: n, steps: SearchSteps, late: late, inClaim: map[int]int{}, until: len(c.Requests)}
		if !ordered {
			g.until = 1
		}
		ok := g.request(0)
		where := ""
		if n >= 0 {
			where = " on node " + b.p.Nodes[n].Name
		}
		switch {
		case g.err != nil:
			return fmt.Errorf("%s%s (the scheduler's allocator searches in publication order and fails there)", g.err, where)
		case g.steps <= 0 && ordered:
			return fmt.Errorf("the scheduler's allocator could not be followed%s within %d search steps: its outcome depends on its search order (allocationMode All under a constraint)", where, SearchSteps)
		case ok && foundNode == -2:
			found, foundNode = slices.Clone(g.picks), n
		}
	}
	if ordered && foundNode != -2 {
		b.holdTo(c, foundNode, found)
	}
	return nil
}

// searchNodes are the nodes the scheduler tries c on, in name order ([-1]
// without nodes): its bound node, else every node a selector error does not
// already rule out.
func (b *builder) searchNodes(c *Claim) []int {
	if len(b.p.Nodes) == 0 {
		return []int{-1}
	}
	if c.FixedNode >= 0 {
		return []int{c.FixedNode}
	}
	var nodes []int
	for n := range b.p.Nodes {
		if !c.ExcludedNodes[n] {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// holdTo restricts c to node n and the devices picked there: every other
// node is excluded, each request keeps only the alternative the search used,
// with only the devices it picked.
func (b *builder) holdTo(c *Claim, n int, picks []searchPick) {
	if n >= 0 {
		if c.ExcludedNodes == nil {
			c.ExcludedNodes = map[int]bool{}
		}
		for o := range b.p.Nodes {
			if o != n {
				c.ExcludedNodes[o] = true
			}
		}
	}
	for ri, r := range c.Requests {
		for ai, a := range r.Alternatives {
			var devs []int
			for _, p := range picks {
				if p.req == ri && p.alt == ai {
					devs = append(devs, p.dev)
				}
			}
			// Alternatives share their candidate lists (the match cache):
			// give this one its own.
			a.Candidates = devs
			if len(devs) == 0 {
				a.AllMatch = nil
			}
			a.indexByNode(b.p)
		}
	}
	c.nodes = nil
}

// lateDevices marks the devices of pools with binding conditions: the
// allocator tries those pools after all others.
func (b *builder) lateDevices() []bool {
	late := make([]bool, len(b.p.Devices))
	for ci, pc := range b.copies {
		has := false
		for _, s := range pc.slices {
			for i := range s.Spec.Devices {
				if s.Spec.Devices[i].BindingConditions != nil {
					has = true
				}
			}
		}
		if !has {
			continue
		}
		for d, c := range b.copyOf {
			if c == ci {
				late[d] = true
			}
		}
	}
	return late
}

// order puts devs in the allocator's order: pools with binding conditions last.
func (g *upstreamSearch) order(devs []int) []int {
	if !slices.ContainsFunc(devs, func(d int) bool { return g.late[d] }) {
		return devs
	}
	out := make([]int, 0, len(devs))
	for _, last := range []bool{false, true} {
		for _, d := range devs {
			if g.late[d] == last {
				out = append(out, d)
			}
		}
	}
	return out
}

func (g *upstreamSearch) request(ri int) bool {
	if ri == g.until {
		return true
	}
	for ai, a := range g.c.Requests[ri].Alternatives {
		if g.steps <= 0 || g.err != nil {
			return false
		}
		if a.All {
			if g.all(ri, ai, a) {
				return true
			}
			continue
		}
		if len(g.picks)+a.Count > MaxResults {
			continue
		}
		if g.devices(ri, ai, a, 0, a.Count) {
			return true
		}
	}
	return false
}

// fits: the checks the allocator makes before the constraints, which only
// make it pass over a device.
func (g *upstreamSearch) fits(d int, a *Alternative) bool {
	dev := g.p.Devices[d]
	if g.node >= 0 && !dev.Reaches(g.node) || g.node < 0 && !dev.All {
		return false
	}
	if g.inClaim[d] > 0 && !dev.MultiAlloc {
		return false
	}
	return g.s.FitsFor(d, a, !a.AdminAccess)
}

func (g *upstreamSearch) allowed(ri int, a *Alternative, d int) bool {
	req := g.c.Requests[ri]
	for _, k := range g.c.Constraints {
		if !k.Applies(req, a) {
			continue
		}
		var chosen [][]string
		for _, p := range g.picks {
			pr := g.c.Requests[p.req]
			if pa := pr.Alternatives[p.alt]; k.Applies(pr, pa) {
				chosen = append(chosen, k.ValuesOf(pa, p.dev))
			}
		}
		if !k.Allows(chosen, k.ValuesOf(a, d)) {
			return false
		}
	}
	return true
}

func (g *upstreamSearch) devices(ri, ai int, a *Alternative, from, need int) bool {
	if need == 0 {
		return g.request(ri + 1)
	}
	cands := g.order(a.CandidatesOn(g.node))
	for i := from; i < len(cands); i++ {
		if g.steps--; g.steps <= 0 || g.err != nil {
			return false
		}
		d := cands[i]
		if !g.fits(d, a) || !g.allowed(ri, a, d) {
			continue
		}
		g.take(ri, ai, a, d)
		if g.devices(ri, ai, a, i+1, need-1) {
			return true
		}
		g.release(a, d)
	}
	return false
}

// all takes every matching device the node sees, in order; a device that
// cannot be taken ends the attempt, one that breaks a constraint is an error.
func (g *upstreamSearch) all(ri, ai int, a *Alternative) bool {
	var take []int
	for _, d := range g.order(a.AllMatch) {
		if g.node < 0 || g.p.Devices[d].SeenFrom(g.node) {
			take = append(take, d)
		}
	}
	if len(take) == 0 || len(g.picks)+len(take) > MaxResults {
		return false
	}
	n := 0
	for _, d := range take {
		if g.steps--; g.steps <= 0 {
			break
		}
		if !slices.Contains(a.Candidates, d) || !g.fits(d, a) {
			break
		}
		if !g.allowed(ri, a, d) {
			g.err = fmt.Errorf("request %s: cannot add device %s because a claim constraint would not be satisfied", a.Name, g.p.Devices[d].ID)
			break
		}
		g.take(ri, ai, a, d)
		n++
	}
	ok := n == len(take) && g.request(ri+1)
	if !ok {
		for i := n - 1; i >= 0; i-- {
			g.release(a, take[i])
		}
	}
	return ok
}

func (g *upstreamSearch) take(ri, ai int, a *Alternative, d int) {
	g.picks = append(g.picks, searchPick{ri, ai, d})
	g.inClaim[d]++
	g.s.TakeFor(d, a, !a.AdminAccess)
}

func (g *upstreamSearch) release(a *Alternative, d int) {
	g.picks = g.picks[:len(g.picks)-1]
	g.inClaim[d]--
	g.s.ReleaseFor(d, a, !a.AdminAccess)
}
