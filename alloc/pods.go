package alloc

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/drasat/drasat/model"
)

// Pod rules in the engine. The claims of a pod group (model.PodGroup) are
// one decision: all admitted on one node where their pods may run and
// their requests fit with the other groups placed there, or none. The SAT
// model carries these rules (encode); the placers do not all know them, so
// every answer a stage returns goes through podRepair before the driver
// takes it (componentState.accept), and the run's result once more after
// the steps that follow the pipeline (placeLast, the look-ahead). The
// configuration relaxation ignores the rules, which only makes it looser,
// never unsound; podBound and the aggregated model's capacity rows
// (bound.NodeAggregate.Capacities) carry the node resources.

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

// podReasons says, for the claims of pod groups left out that fit alone,
// what their pods meet on the nodes they could use: a node some pod
// refuses ("node-2 cordoned"), or one where the pods admitted there leave
// too little ("needs 40 cpu, node-1 has 24 free"). Where every such node
// has a pod reason, it replaces the generic one.
func podReasons(p *model.Problem, res *Result) {
	if len(p.PodGroups) == 0 || len(res.Rejected) == 0 {
		return
	}
	load := model.NewPodLoad(p)
	placed := map[*model.PodGroup]bool{}
	for _, a := range res.Assignments {
		if g := a.Claim.Group; g != nil && !placed[g] && a.Node >= 0 {
			placed[g] = true
			load.Take(g, a.Node)
		}
	}
	for i, why := range res.Rejected {
		c := p.Claims[i]
		g := c.Group
		if g == nil || c.Err != nil {
			continue
		}
		var pods []string
		for _, pi := range g.Pods {
			pods = append(pods, p.Pods[pi].Key)
		}
		var parts []string
		covered, short := true, false
		for n := range p.Nodes {
			if r, ok := c.PodRefused[n]; ok {
				parts = append(parts, r)
				continue
			}
			if !slices.Contains(c.CandidateNodes(p), n) {
				continue
			}
			if j := load.Short(g, n); j >= 0 {
				short = true
				r := p.Resources[j]
				parts = append(parts, fmt.Sprintf("pod %s: needs %s %s, %s has %s free besides the pods admitted there",
					strings.Join(pods, ", "), model.FormatResource(r, g.Requests[j]), r, p.Nodes[n].Name, model.FormatResource(r, max(load.Free(n, j), 0))))
				continue
			}
			covered = false
		}
		switch {
		case len(parts) == 0:
		case covered:
			reason := model.ReasonNoNode
			if short {
				reason = model.ReasonNodeResources
			}
			res.Rejected[i] = model.Reject(reason, errors.New(joinPodReasons(parts)))
		default:
			res.Rejected[i] = model.Reject(model.ReasonOf(why), fmt.Errorf("%w; %s", why, joinPodReasons(parts)))
		}
	}
}

// joinPodReasons joins "pod P: why" parts, naming a pod once for the
// parts in a row that are about it.
func joinPodReasons(parts []string) string {
	var b strings.Builder
	prev := ""
	for i, s := range parts {
		if i > 0 {
			b.WriteString("; ")
		}
		if k := strings.Index(s, ": "); strings.HasPrefix(s, "pod ") && k > 0 {
			if s[:k] == prev {
				s = s[k+2:]
			} else {
				prev = s[:k]
			}
		}
		b.WriteString(s)
	}
	return b.String()
}

// podBound bounds the weight the claims can admit by the nodes'
// resources: whatever the devices allow, the pod groups admitted request
// at most what all nodes have free of each resource, so for each resource
// the fractional knapsack of the groups (by weight per amount requested)
// over that total bounds them; claims of no group that pins add their
// weight. A valid upper bound, often far below the device bound when CPU
// or memory binds.
func podBound(p *model.Problem, claims []*model.Claim, weight func(*model.Claim) int64) int64 {
	if len(p.PodGroups) == 0 {
		return math.MaxInt64
	}
	var free int64 // weight of the claims no resource limits
	groupW := map[*model.PodGroup]int64{}
	for _, c := range claims {
		if c.Group != nil && p.Pinning(c) {
			groupW[c.Group] += weight(c)
		} else {
			free += weight(c)
		}
	}
	best := math.Inf(1)
	for j := range p.Resources {
		var total float64
		limited := true
		for n := range p.Nodes {
			if !p.Limited(n, j) {
				limited = false
				break
			}
			total += float64(max(p.NodeFree[n][j], 0))
		}
		if !limited {
			continue
		}
		type item struct{ w, size float64 }
		var items []item
		var v float64
		for g, w := range groupW {
			if s := g.Requests[j]; s > 0 {
				items = append(items, item{float64(w), float64(s)})
			} else {
				v += float64(w)
			}
		}
		sort.Slice(items, func(a, b int) bool { return items[a].w*items[b].size > items[b].w*items[a].size })
		left := total
		for _, it := range items {
			if it.size <= left {
				v += it.w
				left -= it.size
				continue
			}
			v += it.w * left / it.size
			break
		}
		best = min(best, v)
	}
	if math.IsInf(best, 1) {
		return math.MaxInt64
	}
	return free + int64(math.Floor(best+1e-6))
}

// podShare is what a claim's pods take of the nodes' resources, for the
// smallest-first order: per resource the group's requests over what one
// node has free on average, times how oversubscribed the resource is
// (all groups' requests over all that is free, when above 1: a scarce
// resource orders the claims more than the devices do), the largest
// such share, split among the group's claims.
func podShare(p *model.Problem, c *model.Claim) float64 {
	g := c.Group
	if g == nil || !p.Pinning(c) || len(p.Nodes) == 0 {
		return 0
	}
	share := 0.0
	for j, v := range g.Requests {
		var total float64
		for n := range p.Nodes {
			if !p.Limited(n, j) {
				total = 0
				break
			}
			total += float64(max(p.NodeFree[n][j], 0))
		}
		if total > 0 && v > 0 {
			var demand float64
			for _, o := range p.PodGroups {
				demand += float64(o.Requests[j])
			}
			share = max(share, float64(v)*float64(len(p.Nodes))/total*max(1, demand/total))
		}
	}
	return share / float64(len(g.Claims))
}

// podsPlaced maps the pod groups of as to their node (claims with a node).
func podsPlaced(as []*Assignment) map[*model.PodGroup]int {
	var out map[*model.PodGroup]int
	for _, a := range as {
		if a.Claim.Group != nil && a.Node >= 0 {
			if out == nil {
				out = map[*model.PodGroup]int{}
			}
			out[a.Claim.Group] = a.Node
		}
	}
	return out
}
