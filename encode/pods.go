package encode

import (
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/model"
)

// GroupPod: the claims of pod group Claim (model.PodGroup.Index) are
// admitted together on one node; GroupPodResources: resource Counter
// (model.Problem.Resources) of node Device holds the pods placed there.
const (
	GroupPod          GroupKind = "pod"
	GroupPodResources GroupKind = "podResources"
)

// pods adds the pod rules over the claims of the model: the claims of a
// pod group are all admitted or none, on the same node, and on each node
// the pods of the groups placed there fit in what it has free. Claims of
// groups the rules tie to a node are never simple and always choose their
// node explicitly (claimUnit), so their node literals say where their
// pods run.
func (m *Model) pods(placed map[*model.PodGroup]int) {
	p := m.P
	if len(p.PodGroups) == 0 {
		return
	}
	// What the groups placed outside the model take, per node.
	load := model.NewPodLoad(p)
	for g, n := range placed {
		load.Take(g, n)
	}
	unitOf := map[int]*Unit{}
	for _, u := range m.Units {
		if !u.Simple {
			unitOf[u.Claims[0].Index] = u
		}
	}
	// onNode[g][n]: the group's pods run on node n (its first claim's
	// node literal, which the others follow).
	type onNode struct {
		g   *model.PodGroup
		lit map[int]z.Lit
	}
	var groups []onNode
	for _, g := range p.PodGroups {
		var us []*Unit
		for _, ci := range g.Claims {
			if u := unitOf[ci]; u != nil {
				us = append(us, u)
			}
		}
		if len(us) == 0 || !p.Pinning(us[0].Claims[0]) {
			continue
		}
		if n, ok := placed[g]; ok {
			// Some claims of the group are placed, on n: the others go
			// there too, and must be admitted (a pod's claims are one
			// decision); its pods' load is counted already.
			grp := newGroup(GroupPod)
			grp.Claim = g.Index
			m.guarded(&grp, func() {
				for _, u := range us {
					m.clause(u.Admit)
					for k, o := range u.NodeIdx {
						if o != n {
							m.clause(u.NodeLit[k].Not())
						}
					}
					if u.NodeLit == nil {
						m.clause(u.Admit.Not()) // no node: cannot follow
					}
				}
			})
			continue
		}
		grp := newGroup(GroupPod)
		grp.Claim = g.Index
		lits := make([]map[int]z.Lit, len(us))
		for i, u := range us {
			lits[i] = map[int]z.Lit{}
			for k, n := range u.NodeIdx {
				lits[i][n] = u.NodeLit[k]
			}
		}
		m.guarded(&grp, func() {
			for i := 1; i < len(us); i++ {
				// All or none.
				m.clause(us[0].Admit.Not(), us[i].Admit)
				m.clause(us[i].Admit.Not(), us[0].Admit)
				// The same node: a node of one is the node of the other.
				for _, pair := range [2][2]int{{0, i}, {i, 0}} {
					a, b := pair[0], pair[1]
					for n, l := range lits[a] {
						if o, ok := lits[b][n]; ok {
							m.clause(l.Not(), o)
						} else {
							m.clause(l.Not())
						}
					}
				}
			}
		})
		groups = append(groups, onNode{g, lits[0]})
	}
	for n := range p.Nodes {
		for j := range p.Resources {
			if !p.Limited(n, j) {
				continue
			}
			var ls []z.Lit
			var ws []int64
			for _, pg := range groups {
				if l, ok := pg.lit[n]; ok && pg.g.Requests[j] > 0 {
					ls = append(ls, l)
					ws = append(ws, pg.g.Requests[j])
				}
			}
			if len(ls) == 0 {
				continue
			}
			grp := newGroup(GroupPodResources)
			grp.Device, grp.Counter = n, j
			m.guarded(&grp, func() {
				free := load.Free(n, j)
				if free < 0 {
					for _, l := range ls {
						m.clause(l.Not())
					}
					return
				}
				// A sum too fine to encode is left to the engine's
				// check of every answer (alloc's podRepair).
				_ = m.atMost(ls, ws, free)
			})
		}
	}
}
