package alloc

import (
	"slices"

	"github.com/drasat/drasat/model"
)

// Pod rules in the engine. The claims of a pod group (model.PodGroup) are
// one decision: all admitted on one node where their pods may run and
// their requests fit with the other groups placed there, or none. The SAT
// model carries these rules (encode); the placers do not all know them, so
// every answer a stage returns goes through podRepair before the driver
// takes it (componentState.accept), and the run's result once more after
// the steps that follow the pipeline (placeLast, the look-ahead). Bounds
// ignore the rules, which only makes them looser, never unsound.

// podRepair keeps of as only the claims whose groups satisfy the pod
// rules, groups taken in the order of their first claim (so that under
// the ordered objective earlier claims win). It returns as itself when
// nothing breaks them.
func podRepair(p *model.Problem, as []*Assignment) ([]*Assignment, bool) {
	drop := podViolations(p, as)
	if len(drop) == 0 {
		return as, false
	}
	kept := make([]*Assignment, 0, len(as))
	for _, a := range as {
		if !drop[a.Claim.Index] {
			kept = append(kept, a)
		}
	}
	return kept, true
}

// podViolations lists the claims of as whose group breaks the pod rules.
func podViolations(p *model.Problem, as []*Assignment) map[int]bool {
	if len(p.PodGroups) == 0 {
		return nil
	}
	byClaim := make(map[int]*Assignment, len(as))
	for _, a := range as {
		byClaim[a.Claim.Index] = a
	}
	var drop map[int]bool
	load := model.NewPodLoad(p)
	for _, g := range p.PodGroups {
		node, ok, some := -1, true, false
		for _, ci := range g.Claims {
			a := byClaim[ci]
			if a == nil {
				ok = false
				continue
			}
			some = true
			if a.Node < 0 {
				if len(p.Nodes) > 0 && p.Pinning(a.Claim) {
					ok = false // its pods' node must be known
				}
				continue
			}
			if node >= 0 && node != a.Node || a.Claim.ExcludedNodes[a.Node] {
				ok = false
			}
			node = a.Node
		}
		if !some {
			continue
		}
		if ok && load.Fits(g, node) {
			load.Take(g, node)
			continue
		}
		if drop == nil {
			drop = map[int]bool{}
		}
		for _, ci := range g.Claims {
			drop[ci] = true
		}
	}
	return drop
}

// podUnions joins, for components, the claims the pod rules tie: the
// claims of each group, and the groups that may share a node whose
// resources they request.
func podUnions(p *model.Problem, union func(a, b int)) {
	anchor := map[int]int{} // node -> a claim of a group placed there
	for _, g := range p.PodGroups {
		for _, c := range g.Claims[1:] {
			union(g.Claims[0], c)
		}
		c := p.Claims[g.Claims[0]]
		if !p.Pinning(c) {
			continue
		}
		for _, n := range c.CandidateNodes(p) {
			if n < 0 {
				continue
			}
			if a, ok := anchor[n]; ok {
				union(a, c.Index)
			} else {
				anchor[n] = c.Index
			}
		}
	}
}

// podSafeLate is placeLast's answer checked against the pod rules: a late
// claim whose group breaks them is dropped with every late claim after it
// (their searches saw it allocated); if an admitted claim breaks them (a
// claim moved to another node), placeLast's changes are all undone.
func podSafeLate(p *model.Problem, before, kept, late []*Assignment) ([]*Assignment, []*Assignment) {
	drop := podViolations(p, append(slices.Clone(kept), late...))
	if len(drop) == 0 {
		return kept, late
	}
	for _, a := range kept {
		if drop[a.Claim.Index] {
			return before, nil
		}
	}
	for i, a := range late {
		if drop[a.Claim.Index] {
			return kept, late[:i]
		}
	}
	return kept, late
}
