package bound

import (
	"slices"
	"sort"
)

// Pods of several claims. The claims of a pod group (model.PodGroup:
// pods and the claims they use, tied together) are admitted on one node
// or not at all. Left as classes of their own, the per-node model places
// them apart, or one without the other: a relaxation still, but its
// answers do not realise (on batches of the independent generator where
// one pod in eight uses two claims, the dive's answers lost a tenth of
// the bound). So mergePodGroups makes each such group one class: its
// claims' items together, their weight together, at most one, on the
// nodes every claim may use, asking the group's whole requests of its
// node. The merged class keeps the variable of its first member's class;
// expand gives the members their counts back before a solution is
// realised.

// groupMember is one class of claims of a merged pod group: the
// relaxation's class index and how many of its claims the group has.
type groupMember struct{ class, n int }

// mergePodGroups merges the classes of every pod group of several claims
// whose claims are all in the model (served, in this component); other
// groups keep their classes (a relaxation of the group).
func (na *NodeAggregate) mergePodGroups() {
	type members struct {
		index   int   // PodGroup.Index: the order of merging
		classes []int // indices into na.Classes
		claims  int
		size    int // len(PodGroup.Claims)
	}
	byGroup := map[int]*members{}
	for ki := range na.Classes {
		rep := na.r.classes[na.Classes[ki].Class].rep
		g := rep.Group
		if g == nil || len(g.Claims) < 2 {
			continue
		}
		m := byGroup[g.Index]
		if m == nil {
			m = &members{index: g.Index, size: len(g.Claims)}
			byGroup[g.Index] = m
		}
		m.classes = append(m.classes, ki)
		m.claims += na.Classes[ki].Max
	}
	if len(byGroup) == 0 {
		return
	}
	groups := make([]*members, 0, len(byGroup))
	for _, m := range byGroup {
		if m.claims == m.size {
			groups = append(groups, m)
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].index < groups[j].index })
	drop := map[int]bool{}
	into := map[int]NodeClass{} // the first member's position: the merged class
	for _, m := range groups {
		first := &na.Classes[m.classes[0]]
		merged := NodeClass{Class: first.Class, Max: 1, Nodes: slices.Clone(first.Nodes)}
		byShape := map[int]float64{}
		var list []groupMember
		for _, ki := range m.classes {
			k := &na.Classes[ki]
			merged.Weight += k.Weight * float64(k.Max)
			merged.Nodes = slices.DeleteFunc(merged.Nodes, func(n int) bool { return !slices.Contains(k.Nodes, n) })
			for _, d := range k.Demand {
				byShape[d.Shape] += d.N * float64(k.Max)
			}
			list = append(list, groupMember{k.Class, k.Max})
			if na.memberDemand == nil {
				na.memberDemand = map[string][]ShapeDemand{}
			}
			na.memberDemand[na.r.classes[k.Class].key] = k.Demand
			drop[ki] = true
		}
		for s := 0; s < na.Shapes; s++ {
			if d, ok := byShape[s]; ok {
				merged.Demand = append(merged.Demand, ShapeDemand{s, d})
			}
		}
		if na.merged == nil {
			na.merged = map[int][]groupMember{}
		}
		na.merged[merged.Class] = list
		into[m.classes[0]] = merged
	}
	var out []NodeClass
	for ki, k := range na.Classes {
		if m, ok := into[ki]; ok {
			out = append(out, m)
		} else if !drop[ki] {
			out = append(out, k)
		}
	}
	na.Classes = out
}

// expand turns a solution's values into ones the relaxation's classes
// read (Relaxation.NodesOf): a merged group's count on a node becomes
// its members' counts there.
func (na *NodeAggregate) expand(values map[string]float64) map[string]float64 {
	if len(na.merged) == 0 {
		return values
	}
	out := make(map[string]float64, len(values))
	for k, v := range values {
		out[k] = v
	}
	for _, k := range na.Classes {
		list, ok := na.merged[k.Class]
		if !ok {
			continue
		}
		for _, n := range k.Nodes {
			v := values[k.Var(n)]
			for _, m := range list {
				mk := NodeClass{Class: m.class}
				out[mk.Var(n)] = v * float64(m.n)
			}
		}
	}
	return out
}
