package model

import (
	"maps"
	"slices"
)

// PodLoad tracks what pod groups placed so far take of the nodes'
// resources (Problem.NodeFree): each group's pods consume their requests
// on the one node of its claims, once per pod.
type PodLoad struct {
	p    *Problem
	used [][]int64 // per node, per resource
}

// NewPodLoad is the load before any pending pod is placed.
func NewPodLoad(p *Problem) *PodLoad {
	l := &PodLoad{p: p, used: make([][]int64, len(p.Nodes))}
	for n := range l.used {
		l.used[n] = make([]int64, len(p.Resources))
	}
	return l
}

// Fits tells whether g's pods fit on node n besides those placed.
func (l *PodLoad) Fits(g *PodGroup, n int) bool { return l.Short(g, n) < 0 }

// Short is the first resource (index in Problem.Resources) g's pods do
// not fit on node n for, or -1.
func (l *PodLoad) Short(g *PodGroup, n int) int {
	if n < 0 {
		return -1
	}
	for j, v := range g.Requests {
		if v > 0 && l.p.Limited(n, j) && SumUnits(l.used[n][j], v) > l.p.NodeFree[n][j] {
			return j
		}
	}
	return -1
}

// Free is what is left of resource j on node n.
func (l *PodLoad) Free(n, j int) int64 { return l.p.NodeFree[n][j] - l.used[n][j] }

// Take places g's pods on node n (n < 0: none, nothing is taken).
func (l *PodLoad) Take(g *PodGroup, n int) {
	if n < 0 {
		return
	}
	for j, v := range g.Requests {
		l.used[n][j] = SumUnits(l.used[n][j], v)
	}
}

// Release undoes Take(g, n).
func (l *PodLoad) Release(g *PodGroup, n int) {
	if n < 0 {
		return
	}
	for j, v := range g.Requests {
		l.used[n][j] -= v
	}
}

// Regroup rebuilds PodGroups from the claims' groups after p.Claims was
// re-indexed or cut down (a sub-problem over copies of the claims): the
// claims of one group, as far as p has them, form one group again. A
// claim that appears twice (a copy standing for a claim to come) is no
// pod's claim the second time.
func (p *Problem) Regroup() {
	if len(p.PodGroups) == 0 {
		return
	}
	byOld := map[*PodGroup]*PodGroup{}
	seen := map[string]bool{}
	var out []*PodGroup
	for _, c := range p.Claims {
		old := c.Group
		if old == nil {
			continue
		}
		if seen[c.Key] {
			c.Group = nil
			continue
		}
		seen[c.Key] = true
		g := byOld[old]
		if g == nil {
			g = &PodGroup{Index: len(out), Pods: old.Pods, Requests: old.Requests}
			byOld[old] = g
			out = append(out, g)
		}
		g.Claims = append(g.Claims, c.Index)
		c.Group = g
	}
	p.PodGroups = out
}

// Split is p without the claims drop selects, and those claims (as in p).
// The problem keeps p's devices, nodes and allocations. When the dropped
// claims are a suffix of p's (a caller that adds claims for its own use at
// the end of the input, such as the frag measure's shapes) it shares p's
// claims; otherwise its claims are copies, renumbered, and regrouped.
func (p *Problem) Split(drop func(*Claim) bool) (*Problem, []*Claim) {
	q := *p
	q.Claims = make([]*Claim, 0, len(p.Claims))
	var dropped []*Claim
	suffix := true
	for _, c := range p.Claims {
		if drop(c) {
			dropped = append(dropped, c)
			continue
		}
		suffix = suffix && len(dropped) == 0
		q.Claims = append(q.Claims, c)
	}
	if suffix {
		return &q, dropped
	}
	for i, c := range q.Claims {
		cc := *c
		cc.Index = i
		cc.Requests = slices.Clone(c.Requests)
		cc.Constraints = slices.Clone(c.Constraints)
		cc.ExcludedNodes = maps.Clone(c.ExcludedNodes)
		q.Claims[i] = &cc
	}
	q.Regroup() // the pod groups by the new indices
	return &q, dropped
}
