package model

import (
	"fmt"
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
)

// The allocator's search order, where a claim's outcome depends on it.
//
// The allocator searches a claim's requests in order, each request's first
// fitting devices in publication order, and backtracks only on a miss, never
// on an error; an error on any node aborts the pod's scheduling attempt.
// Two errors depend on how far the search gets: allocationMode All must take
// every matching device the node sees, and one that breaks a claim
// constraint is an error ("cannot add device ... because a claim constraint
// would not be satisfied"); and a request's selectors are evaluated on each
// device the search reaches (not held already), where a run-time error is an
// error. Whether the search reaches them depends on what it picked before.
//
// Such claims are decided by running that search, node by node, against the
// state before any pending claim is placed (existing allocations only): an
// error on some node makes the claim fail, else the claim may only take the
// devices the search picked on the first node where it succeeded (unless
// the only possible error is the first request's All walk, which no earlier
// pick influences). Pending claims placed before it only take devices and
// counters away: on that node the search still ends at the same devices
// without an error, but on another node where it succeeded it may now go
// past its first success and meet an error. Claims whose own allocation
// does not depend on the order can be placed after it; but when the search
// on another node can meet an error after its first success, and another
// order-dependent pending claim could take what that success used, the
// claim fails too: one of the two would have to come second (a claim that
// fails with an error is never placed, so it is no rival: holdOrdered runs
// once every claim's search is known). Both rules are conservative against
// a scheduler taking the claims in another order: with other claims placed
// first, a failing search may not meet its error, and a held claim could
// get other devices (docs/semantics.md, the allocator's search order).
// SearchSteps bounds the search per claim and node; a claim whose search
// does not finish within it on some node is not allocated.
const SearchSteps = 20000

// searchPick is one device the search took: request, alternative, device.
type searchPick struct{ req, alt, dev int }

// upstreamSearch is the allocator's depth-first search for one claim on one
// node, with its errors.
type upstreamSearch struct {
	b     *builder
	p     *Problem
	s     *State
	c     *Claim
	node  int
	steps int
	late  []bool // devices of pools with binding conditions: tried last
	// until is the request at which the search counts as done: only the
	// first request matters when no later one can fail with an error.
	until int
	// exhaustive: a complete placement counts as a miss, so the search
	// goes on through every placement (does an error lie beyond?).
	exhaustive bool
	picks      []searchPick
	inClaim    map[int]int
	err        error
	// errDev is the device the error was met on (with err; -1 when the
	// error is on no one device, 0 when err is nil).
	errDev int
	// prefer: devices tried first for every request (Replace).
	prefer map[int]bool
	// exceeded: the request being searched would take the claim past 32
	// results. The allocator then unwinds (errAllocationResultMaxSizeExceeded)
	// without trying other devices for the requests before, up to the
	// nearest firstAvailable request, which tries its next subrequest.
	exceeded bool
}

// searchKinds: first, the claim's first request (its first subrequest) is
// All under a constraint; ordered, the search may reach an All request
// under a constraint after other picks (a later request, or a later
// subrequest), or a request's selectors fail at run time on some device.
func searchKinds(c *Claim) (first, ordered bool) {
	for ri, r := range c.Requests {
		for ai, a := range r.Alternatives {
			if a.All && !a.OverLimit && constrained(c, r, a) {
				if ri == 0 && ai == 0 {
					first = true
				} else {
					ordered = true
				}
			}
			if !a.All && len(a.celErrs) > 0 || len(a.derivedErrs) > 0 {
				ordered = true
			}
		}
	}
	return first, ordered
}

func constrained(c *Claim, r *Request, a *Alternative) bool {
	for _, k := range c.Constraints {
		if k.Applies(r, a) {
			return true
		}
	}
	return false
}

// searchOutcome is what the allocator's search found for an
// order-dependent claim: the picks on each node where it succeeded, and
// those nodes in order.
type searchOutcome struct {
	found map[int][]searchPick
	fits  []int
}

// searchOrderError runs the allocator's search for c on every node it may
// use and returns the first error (the claim then fails). For a claim whose
// outcome depends on the search order it also returns what the search
// found, for holdOrdered (nil otherwise).
func (b *builder) searchOrderError(c *Claim) (*searchOutcome, error) {
	first, ordered := searchKinds(c)
	if !first && !ordered {
		return nil, nil
	}
	out := &searchOutcome{found: map[int][]searchPick{}}
	for _, n := range b.searchNodes(c) {
		g, ok := b.search(c, n, false, ordered)
		switch {
		case g.err != nil:
			return nil, Reject(ReasonSearchOrder, fmt.Errorf("%s%s (the scheduler's allocator searches in publication order and fails there)", g.err, b.onNode(n)))
		case g.steps <= 0 && ordered:
			return nil, Reject(ReasonSearchOrder, fmt.Errorf("the scheduler's allocator could not be followed%s within %d search steps, and its outcome depends on its search order", b.onNode(n), SearchSteps))
		case ok:
			out.found[n] = slices.Clone(g.picks)
			out.fits = append(out.fits, n)
		}
	}
	if !ordered || len(out.fits) == 0 {
		return nil, nil
	}
	return out, nil
}

// search runs the allocator's search for c on node n, from the existing
// allocations alone; exhaustive goes on past complete placements.
func (b *builder) search(c *Claim, n int, exhaustive, ordered bool) (*upstreamSearch, bool) {
	st := NewState(b.p)
	st.oneClaim = true
	g := &upstreamSearch{b: b, p: b.p, s: st, c: c, node: n, steps: SearchSteps, late: b.lateDevices(), inClaim: map[int]int{},
		until: len(c.Requests), exhaustive: exhaustive}
	if !ordered {
		g.until = 1
	}
	ok := g.request(0)
	if !ok && g.exceeded && g.err == nil {
		// Past every firstAvailable request: Allocate fails.
		g.err = fmt.Errorf("the claim's results would exceed the limit of %d", MaxResults)
		g.errDev = -1
	}
	return g, ok
}

func (b *builder) onNode(n int) string {
	if n < 0 {
		return ""
	}
	return " on node " + b.p.Nodes[n].Name
}

// holdOrdered decides an order-dependent claim once every claim's search
// is known (claims failing with an error are never placed, so they are no
// rivals): it fails when a rival placed first could make the search on a
// later node go past its first success into an error; otherwise it is
// held to the devices found on the first node where the search succeeds.
func (b *builder) holdOrdered(c *Claim, out *searchOutcome) error {
	for _, m := range out.fits[1:] {
		o := b.contender(c, out.found[m])
		if o == nil {
			continue
		}
		if g, _ := b.search(c, m, true, true); g.err != nil || g.steps <= 0 {
			why := "an error"
			if g.err != nil {
				why = g.err.Error()
			}
			return Reject(ReasonSearchOrder, fmt.Errorf("the scheduler's outcome depends on the order of the pending claims: if claim %s came first, the allocator could go past its first placement%s and meet %s", o.Key, b.onNode(m), why))
		}
	}
	b.holdTo(c, out.fits[0], out.found[out.fits[0]])
	return nil
}

// contender is another pending claim whose outcome also depends on the
// search order (it cannot simply be placed after c) that could take a
// device of picks, or counters or capacity they use (nil if none).
func (b *builder) contender(c *Claim, picks []searchPick) *Claim {
	touched := map[int]bool{}
	for _, pk := range picks {
		dev := b.p.Devices[pk.dev]
		touched[pk.dev] = true
		for _, o := range dev.Incompatible {
			touched[o] = true
		}
		for _, cons := range dev.Consumes {
			for _, o := range b.p.CounterSets[cons.Set].Devices {
				touched[o] = true
			}
		}
	}
	if b.ordered == nil {
		b.ordered = []*Claim{}
		for _, o := range b.p.Claims {
			if _, ordered := searchKinds(o); ordered {
				b.ordered = append(b.ordered, o)
			}
		}
	}
	// Claims whose allocation does not depend on the search order can be
	// placed after c; so can those that fail anyway.
	for _, o := range b.ordered {
		if o == c || o.Err != nil {
			continue
		}
		for _, r := range o.Requests {
			for _, a := range r.Alternatives {
				for _, d := range a.Candidates {
					if touched[d] {
						return o
					}
				}
			}
		}
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

// firstSearchNode is searchNodes(c) cut to its first node.
func (b *builder) firstSearchNode(c *Claim) []int {
	if len(b.p.Nodes) == 0 || c.FixedNode >= 0 {
		return b.searchNodes(c)
	}
	for n := range b.p.Nodes {
		if !c.ExcludedNodes[n] {
			return []int{n}
		}
	}
	return nil
}

// anyAll tells whether some alternative of c has allocationMode All.
func (c *Claim) anyAll() bool {
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			if a.All {
				return true
			}
		}
	}
	return false
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

// selectorNodes are the nodes whose search evaluates selectors on d: those
// that see it and, for a slice with perDeviceNodeSelection, those that see
// any device of the slice (the allocator takes the whole slice and
// evaluates selectors before it checks the device's own nodes).
func (b *builder) selectorNodes(d *Device) []int {
	seen := func(o *Device) []int {
		if o.Sees != nil {
			return o.Sees
		}
		if o.All {
			nodes := make([]int, len(b.p.Nodes))
			for i := range nodes {
				nodes[i] = i
			}
			return nodes
		}
		return o.Reach
	}
	if d.Slice == nil || d.Slice.Spec.PerDeviceNodeSelection == nil || !*d.Slice.Spec.PerDeviceNodeSelection {
		return seen(d)
	}
	if b.sliceNodes == nil {
		b.sliceNodes = map[*resourceapi.ResourceSlice][]int{}
	}
	nodes, ok := b.sliceNodes[d.Slice]
	if !ok {
		set := map[int]bool{}
		for _, o := range b.p.Devices {
			if o.Slice == d.Slice {
				for _, n := range seen(o) {
					set[n] = true
				}
			}
		}
		nodes = slices.Sorted(maps.Keys(set))
		b.sliceNodes[d.Slice] = nodes
	}
	return nodes
}

// lateDevices marks the devices of pools with binding conditions: the
// allocator tries those pools after all others.
func (b *builder) lateDevices() []bool {
	if b.late != nil {
		return b.late
	}
	late := make([]bool, len(b.p.Devices))
	b.late = late
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

// order puts devs in the allocator's order: pools with binding conditions
// last (and, for Replace, the preferred devices first).
func (g *upstreamSearch) order(devs []int) []int {
	if g.prefer != nil {
		return frontFirst(devs, func(d int) bool { return g.prefer[d] })
	}
	if !slices.ContainsFunc(devs, func(d int) bool { return g.late[d] }) {
		return devs
	}
	return frontFirst(devs, func(d int) bool { return !g.late[d] })
}

// frontFirst is devs with those where front holds first, each part in its
// order.
func frontFirst(devs []int, front func(d int) bool) []int {
	out := make([]int, 0, len(devs))
	for _, want := range []bool{true, false} {
		for _, d := range devs {
			if front(d) == want {
				out = append(out, d)
			}
		}
	}
	return out
}

func (g *upstreamSearch) request(ri int) bool {
	if ri == g.until {
		return !g.exhaustive
	}
	allExceeded := true
	for ai, a := range g.c.Requests[ri].Alternatives {
		if g.steps <= 0 || g.err != nil {
			return false
		}
		g.exceeded = false
		switch {
		case a.All:
			if g.all(ri, ai, a) {
				return true
			}
		case a.OverLimit || len(g.picks)+a.Count > MaxResults:
			g.exceeded = true
		case g.devices(ri, ai, a, 0, a.Count):
			return true
		}
		allExceeded = allExceeded && g.exceeded
	}
	// A firstAvailable request whose every subrequest exceeded passes the
	// error on; so does a request without subrequests.
	g.exceeded = allExceeded
	return false
}

// fits: the checks the allocator makes before the constraints, which only
// make it pass over a device (the capacity left is checked apart).
func (g *upstreamSearch) fits(d int, a *Alternative) bool {
	dev := g.p.Devices[d]
	if g.node >= 0 && !dev.Reaches(g.node) || g.node < 0 && !dev.All {
		return false
	}
	if g.inClaim[d] > 0 && !dev.MultiAlloc {
		return false
	}
	return g.s.fitsBesidesCapacity(d, a, !a.AdminAccess)
}

// lookUpValues fills in the constraint values of d, a device that is not a
// candidate of a; false when one is a derived attribute (not evaluated).
func (g *upstreamSearch) lookUpValues(a *Alternative, d int) bool {
	req := g.c.Requests[0]
	for _, r := range g.c.Requests {
		if slices.Contains(r.Alternatives, a) {
			req = r
		}
	}
	for _, k := range g.c.Constraints {
		if !k.Applies(req, a) {
			continue
		}
		if _, derived := a.Derived[k.Attribute]; derived {
			return false
		}
		k.Values.lookUp(g.p.Devices[d], k.Attribute)
	}
	return true
}

// allowed tells whether d keeps the claim's constraints, in their order; a
// derived attribute that fails on d is an error (g.err).
func (g *upstreamSearch) allowed(ri int, a *Alternative, d int) bool {
	req := g.c.Requests[ri]
	for _, k := range g.c.Constraints {
		if !k.Applies(req, a) {
			continue
		}
		if _, derived := a.Derived[k.Attribute]; derived && a.derivedErrs[d] != nil {
			g.err = fmt.Errorf("request %s: device %s: %w", a.Name, g.p.Devices[d].ID, a.derivedErrs[d])
			g.errDev = d
			return false
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
	cands := g.order(g.reached(a))
	for i := from; i < len(cands); i++ {
		if g.steps--; g.steps <= 0 || g.err != nil {
			return false
		}
		d := cands[i]
		if err := a.celErrs[d]; err != nil {
			// Evaluated unless held (by an existing claim or this one).
			mine := g.inClaim[d] > 0 && !g.p.Devices[d].MultiAlloc
			if !(mine || !a.AdminAccess && g.s.Used(d)) {
				g.err = fmt.Errorf("request %s: %w", a.Name, err)
				g.errDev = d
				return false
			}
			continue
		}
		if !g.s.capacityFits(d, a) || !g.fits(d, a) || !g.allowed(ri, a, d) {
			continue
		}
		g.take(ri, ai, a, d)
		if g.devices(ri, ai, a, i+1, need-1) {
			return true
		}
		g.release(a, d)
		if g.exceeded {
			return false
		}
	}
	return false
}

// reached lists the devices the search looks at for a on the node: its
// candidates and, in device order among them, those where a selector fails.
func (g *upstreamSearch) reached(a *Alternative) []int {
	cands := a.CandidatesOn(g.node)
	if len(a.celErrs) == 0 {
		return cands
	}
	out := slices.Clone(cands)
	for d := range a.celErrs {
		if g.node < 0 && g.p.Devices[d].All || g.node >= 0 && slices.Contains(g.b.selectorNodes(g.p.Devices[d]), g.node) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
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
	if len(take) == 0 {
		return false
	}
	if len(g.picks)+len(take) > MaxResults {
		g.exceeded = true
		return false
	}
	// The allocator checks, in order: held, counters and groups, taints,
	// the constraints (an error), the capacity left.
	n := 0
	for _, d := range take {
		if g.steps--; g.steps <= 0 {
			break
		}
		dev := g.p.Devices[d]
		capacityLeft := true
		if !slices.Contains(a.Candidates, d) {
			if TaintPrevents(dev.Spec, a.Tolerations) || !FitsAlone(g.p, dev) || dev.InUse && !a.AdminAccess {
				break
			}
			// Only what existing shares left rules it out: its constraint
			// values were not looked up with the candidates'.
			capacityLeft = false
			if !g.lookUpValues(a, d) {
				break
			}
		} else if !g.fits(d, a) {
			break
		} else {
			capacityLeft = g.s.capacityFits(d, a)
		}
		if !g.allowed(ri, a, d) {
			if g.err == nil {
				g.err = fmt.Errorf("request %s: cannot add device %s because a claim constraint would not be satisfied", a.Name, dev.ID)
				g.errDev = d
			}
			break
		}
		if !capacityLeft {
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

// unheld keeps a claim's candidates as built, before holdTo, and the error
// of its search from the existing allocations (nil when it was held).
type unheld struct {
	cands, allMatch [][]int // per alternative, requests in order
	excluded        map[int]bool
	err             error
}

func saveUnheld(c *Claim) *unheld {
	u := &unheld{excluded: maps.Clone(c.ExcludedNodes)}
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			u.cands = append(u.cands, slices.Clone(a.Candidates))
			u.allMatch = append(u.allMatch, slices.Clone(a.AllMatch))
		}
	}
	return u
}

// Retryable tells whether c is a claim whose outcome depends on the
// allocator's search order, which the build decided from the existing
// allocations alone (held to the devices found there, or failed with an
// error there): placed after the other claims, its search may end
// elsewhere.
func (c *Claim) Retryable() bool { return c.unheld != nil }

// PlaceLast follows the allocator's search for c, a Retryable claim, with
// every claim already in s placed before it: the scheduler taking c last.
// It returns the node and picks (request, alternative, device) of the
// first node where the search succeeds, and false when it fails on every
// node or meets an error (or runs out of steps) on any. The picks are
// taken in s. When the search meets an error on one device, blocker is
// that device (else -1): a claim placed before c that held it would keep
// the search from evaluating it there.
func (p *Problem) PlaceLast(c *Claim, s *State) (node int, picks [][3]int, ok bool, blocker int) {
	blocker = -1
	u := c.unheld
	if u == nil {
		return 0, nil, false, blocker
	}
	// The scheduler's search does not know the exclusions that only keep
	// claims from depending on their order (Device.OrderExclusive); where
	// one could steer this search, the claim is not retried.
	mine := map[int]bool{}
	for _, cands := range u.cands {
		for _, d := range cands {
			mine[d] = true
		}
	}
	for d := range mine {
		for _, o := range p.Devices[d].OrderExclusive {
			if mine[o] && shareNode(p.Devices[d], p.Devices[o]) || s.Taken(o) {
				return 0, nil, false, blocker
			}
		}
	}
	type saved struct {
		cands, allMatch []int
		onNode          map[int][]int
	}
	var keep []saved
	i := 0
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			keep = append(keep, saved{a.Candidates, a.AllMatch, a.onNode})
			a.Candidates, a.AllMatch = u.cands[i], u.allMatch[i]
			a.indexByNode(p)
			i++
		}
	}
	excluded, err := c.ExcludedNodes, c.Err
	c.ExcludedNodes, c.Err = u.excluded, nil
	defer func() {
		i := 0
		for _, r := range c.Requests {
			for _, a := range r.Alternatives {
				a.Candidates, a.AllMatch, a.onNode = keep[i].cands, keep[i].allMatch, keep[i].onNode
				i++
			}
		}
		c.ExcludedNodes, c.Err = excluded, err
		c.nodes = nil
	}()
	b := &builder{p: p, late: p.searchLate}
	var found []searchPick
	node = -1
	for _, n := range b.searchNodes(c) {
		g := b.searchAfter(c, s, n)
		ok := g.request(0)
		if g.err != nil && g.errDev >= 0 {
			blocker = g.errDev
		}
		if g.err != nil || g.steps <= 0 || !ok && g.exceeded {
			return 0, nil, false, blocker
		}
		if ok {
			if found == nil {
				found, node = slices.Clone(g.picks), n
			}
			g.undo()
		}
	}
	if found == nil {
		return 0, nil, false, blocker
	}
	g := &upstreamSearch{p: p, s: s, c: c, inClaim: map[int]int{}}
	for _, pk := range found {
		g.take(pk.req, pk.alt, c.Requests[pk.req].Alternatives[pk.alt], pk.dev)
		picks = append(picks, [3]int{pk.req, pk.alt, pk.dev})
	}
	return node, picks, true, blocker
}

// searchAfter is the allocator's search for all of c's requests on node n
// with every claim in s placed before it (PlaceLast, Replace).
func (b *builder) searchAfter(c *Claim, s *State, n int) *upstreamSearch {
	return &upstreamSearch{b: b, p: b.p, s: s, c: c, node: n, steps: SearchSteps, late: b.late, inClaim: map[int]int{}, until: len(c.Requests)}
}

// OrderFree tells whether c's allocation does not depend on the
// allocator's search order at all: any valid devices are ones the
// scheduler could pick (no All request under a constraint, no selector or
// derived attribute failing at run time, not held by the build).
func (c *Claim) OrderFree() bool {
	first, ordered := searchKinds(c)
	return !first && !ordered && c.unheld == nil
}

// Replace finds other devices for c, an OrderFree claim, on node: the
// allocator's search with every claim in s placed (c's own devices not
// among them), trying dev first wherever c may use it. It returns picks
// (request, alternative, device) that include dev (any picks for dev < 0),
// or false. Nothing is taken in s.
func (p *Problem) Replace(c *Claim, s *State, node, dev int) (picks [][3]int, ok bool) {
	if !c.OrderFree() {
		return nil, false
	}
	g := (&builder{p: p, late: p.searchLate}).searchAfter(c, s, node)
	g.prefer = map[int]bool{dev: true}
	ok = g.request(0)
	if !ok || g.err != nil || g.steps <= 0 {
		if ok {
			g.undo()
		}
		return nil, false
	}
	has := dev < 0
	for _, pk := range g.picks {
		picks = append(picks, [3]int{pk.req, pk.alt, pk.dev})
		has = has || pk.dev == dev
	}
	g.undo()
	return picks, has
}

// undo releases the devices of a successful search.
func (g *upstreamSearch) undo() {
	for len(g.picks) > 0 {
		pk := g.picks[len(g.picks)-1]
		g.release(g.c.Requests[pk.req].Alternatives[pk.alt], pk.dev)
	}
}

// shareNode tells whether some node reaches both devices (one search may
// see both).
func shareNode(a, b *Device) bool {
	if a.All || b.All {
		return true
	}
	for _, n := range a.Reach {
		if slices.Contains(b.Reach, n) {
			return true
		}
	}
	return false
}
