package alloc

import (
	"context"
	"slices"

	"github.com/drasat/drasat/model"
)

// The scheduler-order post-pass: after the engine has chosen, the claims
// whose outcome depends on the allocator's search order, which the model
// decided from the existing allocations alone, are tried once more as the
// scheduler would place them after every admitted claim
// (docs/semantics.md, "The allocator's search order"). model/searchorder.go
// follows the allocator's search itself; this file decides which claims to
// place last and which admitted claims may make room for them.

// placeLast: claims whose outcome depends on the allocator's search order
// were decided from the existing allocations alone (held to the devices
// found there, or failed with an error there). Those left out may still be
// placed as the scheduler would place them after every admitted claim:
// their search, run with the admitted claims allocated, must meet no error
// on any node, and they get the devices it picks on the first node where
// it succeeds. In input order, each after the ones placed before.
//
// Where such a search meets an error on a device (a selector or derived
// attribute failing there, a device breaking the constraint of an All
// request), an admitted claim whose allocation does not depend on the
// search order may take that device instead of one of its own (any valid
// devices are ones the scheduler could give it, on its node or another
// that reaches the device): the scheduler placing it
// first holds the device, and the later search passes over it, as it
// does when the scheduler takes the claims in input order. Such a change
// is kept when the claims placed last then weigh more.
//
// Before that, an admitted claim held to the devices its search found
// from the existing allocations may yield them to a left-out claim whose
// allocation does not depend on the search order (which takes devices
// its own search picks among the admitted ones) and be placed last
// itself, where the allocator's search may find it others: kept when all
// claims then weigh more.
//
// It returns the admitted claims (changed as above) and those placed last.
func placeLast(ctx context.Context, p *model.Problem, admitted []*Assignment) (kept, late []*Assignment) {
	admitted = slices.Clone(admitted)
	admitted, out := yieldHeld(ctx, p, admitted)
	_, blocked := lastPass(ctx, p, admitted)
	for tries := 0; len(blocked) > 0 && tries < maxReplaceTries && ctx.Err() == nil; {
		improved := false
	search:
		for _, d := range blocked {
			for i, a := range admitted {
				if !usesCandidate(a, d) {
					continue
				}
				s := stateWithout(p, admitted, i) // Replace takes nothing in it
				for _, n := range moveNodes(p, a, d) {
					tries++
					picks, ok := p.Replace(a.Claim, s, n, d)
					if ok && plainMove(p, a.Picks, picks) {
						na := assignmentOf(a.Claim, n, picks)
						trial := slices.Clone(admitted)
						trial[i] = na
						o2, b2 := lastPass(ctx, p, trial)
						if claimWeight(o2) > claimWeight(out) {
							admitted[i] = na
							out, blocked, improved = o2, b2, true
							break search
						}
					}
					if tries >= maxReplaceTries {
						break search
					}
				}
			}
		}
		if !improved {
			break
		}
	}
	return admitted, out
}

// yieldHeld: placeLast's first step, at most maxReplaceTries searches.
func yieldHeld(ctx context.Context, p *model.Problem, admitted []*Assignment) ([]*Assignment, []*Assignment) {
	out, _ := lastPass(ctx, p, admitted)
	tries := 0
	for restart := true; restart && tries < maxReplaceTries && ctx.Err() == nil; {
		restart = false
		in := map[int]bool{}
		for _, a := range admitted {
			in[a.Claim.Index] = true
		}
	search:
		for i, h := range admitted {
			if !h.Claim.Retryable() {
				continue
			}
			for _, f := range p.Claims {
				if in[f.Index] || f.Err != nil || !f.OrderFree() || !wantsAny(f, h.Picks) {
					continue
				}
				if tries >= maxReplaceTries {
					break search
				}
				rest := slices.Delete(slices.Clone(admitted), i, i+1)
				s := stateWithout(p, rest, -1)
				for _, n := range claimNodes(p, f) {
					if tries >= maxReplaceTries {
						break search
					}
					tries++
					picks, ok := p.Replace(f, s, n, -1)
					if !ok {
						continue
					}
					// The first node where it fits, as the scheduler.
					if plainMove(p, nil, picks) {
						trial := append(rest, assignmentOf(f, n, picks))
						o2, _ := lastPass(ctx, p, trial)
						if claimWeight(trial)+claimWeight(o2) > claimWeight(admitted)+claimWeight(out) {
							admitted, out, restart = trial, o2, true
							break search
						}
					}
					break
				}
			}
		}
	}
	return admitted, out
}

// stateWithout is the state with the devices of as taken, but for as[skip]
// (skip < 0: all of them).
func stateWithout(p *model.Problem, as []*Assignment, skip int) *model.State {
	s := model.NewState(p)
	for j, a := range as {
		if j != skip {
			a.take(s)
		}
	}
	return s
}

// assignmentOf is c on node with the picks (request, alternative, device)
// of the model's searches.
func assignmentOf(c *model.Claim, node int, picks [][3]int) *Assignment {
	a := &Assignment{Claim: c, Node: node}
	for _, pk := range picks {
		a.Picks = append(a.Picks, Pick{Req: pk[0], Alt: pk[1], Dev: pk[2]})
	}
	return a
}

// wantsAny tells whether some alternative of c may use a device of picks.
func wantsAny(c *model.Claim, picks []Pick) bool {
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			for _, pk := range picks {
				if slices.Contains(a.Candidates, pk.Dev) {
					return true
				}
			}
		}
	}
	return false
}

// moveNodes are the nodes a may move to for taking d: its own, then (for a
// claim on a node that no pod has pinned) the others that reach d and a
// may use, in order.
func moveNodes(p *model.Problem, a *Assignment, d int) []int {
	nodes := []int{a.Node}
	if a.Node < 0 || a.Claim.FixedNode >= 0 {
		return nodes
	}
	for n := range p.Nodes {
		if n != a.Node && p.Devices[d].Reaches(n) && !a.Claim.ExcludedNodes[n] {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// maxReplaceTries bounds the admitted claims placeLast moves onto a device
// a later search met an error on (each try runs the pass again).
const maxReplaceTries = 32

// usesCandidate tells whether a, an admitted claim whose allocation does
// not depend on the search order, could take d for a request it serves
// (and does not hold it already).
func usesCandidate(a *Assignment, d int) bool {
	if !a.Claim.OrderFree() {
		return false
	}
	for _, pk := range a.Picks {
		if pk.Dev == d {
			return false
		}
	}
	for _, pk := range a.Picks {
		if slices.Contains(a.Claim.Requests[pk.Req].Alternatives[pk.Alt].Candidates, d) {
			return true
		}
	}
	return false
}

// plainMove: the devices of picks not among held exclude no other device
// (no name repeated across nodes' slices, no other pool generation): what
// the model counts for them is what the scheduler's search for a later
// claim sees on every node.
func plainMove(p *model.Problem, held []Pick, picks [][3]int) bool {
	for _, pk := range picks {
		had := slices.ContainsFunc(held, func(o Pick) bool { return o.Dev == pk[2] })
		if !had && len(p.Devices[pk[2]].Incompatible) > 0 {
			return false
		}
	}
	return true
}

// lastPass places the claims left out after the admitted ones (placeLast)
// and returns them, with the devices where the searches of those it could
// not place met an error. The searches run on the state the scheduler
// sees: admin-access results neither hold their devices nor count for
// counters, compatibility groups or the capacity of shared devices there
// (its allocated state leaves them out), though the claim that gets them
// was checked with them.
func lastPass(ctx context.Context, p *model.Problem, admitted []*Assignment) (out []*Assignment, blocked []int) {
	in := map[int]bool{}
	var s *model.State
	for _, c := range p.Claims {
		if !c.Retryable() {
			continue
		}
		if ctx.Err() != nil {
			break // what is placed so far stands: each claim after the ones before
		}
		if s == nil {
			s = model.NewState(p)
			for _, a := range admitted {
				for _, pk := range a.Picks {
					if exclusive(a.Claim, pk) {
						TakePick(s, a.Claim, pk)
					}
				}
				in[a.Claim.Index] = true
			}
		}
		if in[c.Index] {
			continue
		}
		node, picks, ok, blocker := p.PlaceLast(c, s)
		if !ok {
			if blocker >= 0 && !slices.Contains(blocked, blocker) {
				blocked = append(blocked, blocker)
			}
			continue
		}
		a := assignmentOf(c, node, picks)
		if slices.ContainsFunc(a.Picks, func(pk Pick) bool { return !exclusive(c, pk) }) {
			// As the scheduler sees it: without the admin-access results.
			a.release(s)
			for _, pk := range a.Picks {
				if exclusive(c, pk) {
					TakePick(s, c, pk)
				}
			}
		}
		out = append(out, a)
	}
	return out, blocked
}
