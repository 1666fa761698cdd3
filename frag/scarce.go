package frag

import (
	"fmt"
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/drasat/drasat/model"
)

// Scarcity: FGD's measure counts the free share a shape cannot use, not the
// share it could use that is gone. A task that asks for a GPU model by name
// runs only on that model's nodes; when unconstrained tasks fill them first
// (FGD likes small nodes filled: a full node has no fragments), such tasks
// find no place although the cluster has room. So the measure knows, per
// set M of GPUs that some shapes are held to (the units they have
// candidates on, fewer than all), the share f_M of the workload's GPU
// demand held to it. Expecting the demand to come to be like the demand
// seen, f_M·F of the cluster's free GPU share F will ask for M, whose own
// free share is F_M: ρ_M = f_M·F / F_M of each free share of M is wanted
// by tasks that can go nowhere else. Taking a share of M then costs
// min(ρ_M, 1) of it, in GPUs like FGD's fragments: nothing where no shape
// is held, all of it where the held demand alone would fill M. A node
// left with less CPU or memory than the least a task held to its GPUs
// asks for has lost all of them so (a P100 node of 16 CPUs is full for
// such tasks once a few CPU-only pods are on it). The costs are fixed
// when the look-ahead starts (the cluster before the batch), so that the
// measure stays a sum over nodes. The sets and shares come from every
// shape seen, not only the target workload the measure weighs: a task
// held to a model is a rare shape, mostly outside FGD's top 95 %.

// scarceSet is a set of units some shapes are held to, and the share of
// the workload's GPU demand held to it.
type scarceSet struct {
	units []int
	share float64
}

// heldShape is what heldTo reads of one shape.
type heldShape struct {
	units  []int   // sorted; nil: a task without devices
	demand float64 // in GPUs, times its count in the workload
	sh     *shape
}

// heldTo groups the GPU shapes by the set of units they have candidates
// on and returns the sets of fewer units than the shapes have together
// (a GPU no shape can use, tainted for instance, holds none), each with
// its share of the demand, and those units.
func heldTo(shapes []heldShape) ([]scarceSet, []int) {
	union := map[int]bool{}
	for _, h := range shapes {
		if h.demand > 0 {
			for _, g := range h.units {
				union[g] = true
			}
		}
	}
	all := len(union)
	units := make([]int, 0, all)
	for g := range union {
		units = append(units, g)
	}
	sort.Ints(units)
	total := 0.0
	for _, h := range shapes {
		if len(h.units) > 0 {
			total += h.demand
		}
	}
	if total <= 0 {
		return nil, nil
	}
	byKey := map[string]*scarceSet{}
	var keys []string
	for _, h := range shapes {
		if len(h.units) == 0 || len(h.units) >= all || h.demand <= 0 {
			continue
		}
		k := fmt.Sprint(h.units)
		if byKey[k] == nil {
			byKey[k] = &scarceSet{units: h.units}
			keys = append(keys, k)
		}
		byKey[k].share += h.demand / total
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return nil, nil
	}
	out := make([]scarceSet, len(keys))
	for i, k := range keys {
		out[i] = *byKey[k]
	}
	return out, units
}

// setPrices fixes each unit's cost per share taken in state s (nil when no
// set has a price).
func (m *Measure) setPrices(s *model.State) {
	m.clearPrices()
	if len(m.scarce) == 0 {
		return
	}
	free := make([]float64, m.GPUs())
	total := 0.0
	for _, g := range m.scarceUnits {
		free[g] = m.free(s, g)
		total += free[g]
	}
	for _, sc := range m.scarce {
		have := 0.0
		for _, g := range sc.units {
			have += free[g]
		}
		if have <= 1e-9 {
			continue // nothing of it left to keep
		}
		rho := min(sc.share*total/have, 1)
		if m.price == nil {
			m.price = make([]float64, len(free))
		}
		for _, g := range sc.units {
			m.price[g] += rho
		}
	}
}

// clearPrices drops the prices, and the outcomes computed with them.
func (m *Measure) clearPrices() {
	m.price = nil
	m.forget()
}

// scarceCost is the priced share gone on the view's node: taken by
// devices, or all of it when the node has too little CPU or memory left
// for any task held to its GPUs.
func (m *Measure) scarceCost(v *nodeView) float64 {
	if m.price == nil {
		return 0
	}
	out := 0.0
	for i, g := range v.sets {
		if v.starved {
			out += m.price[g]
		} else {
			out += m.price[g] * (1 - v.free[i])
		}
	}
	return out
}

// heldRequests sets, per node, the least a task held to some of its GPUs
// asks of it (per problem resource and by name; a resource counts when
// every such task asks for it).
func (m *Measure) heldRequests(held []heldShape) {
	m.heldReq, m.heldPodReq = map[int][]nodeReq{}, map[int]map[corev1.ResourceName]int64{}
	m.forget()
	seen := map[int]bool{}
	for _, h := range held {
		if len(h.units) == 0 || len(h.units) >= len(m.scarceUnits) || h.demand <= 0 {
			continue
		}
		nodes := map[int]bool{}
		for _, g := range h.units {
			if n := m.setNode[g]; n >= 0 {
				nodes[n] = true
			}
		}
		for n := range nodes {
			if !seen[n] {
				seen[n] = true
				m.heldReq[n] = append([]nodeReq(nil), h.sh.req...)
				m.heldPodReq[n] = maps.Clone(h.sh.podReq)
				continue
			}
			m.heldReq[n] = leastReq(m.heldReq[n], h.sh.req)
			for r, x := range m.heldPodReq[n] {
				if y, ok := h.sh.podReq[r]; ok {
					m.heldPodReq[n][r] = min(x, y)
				} else {
					delete(m.heldPodReq[n], r)
				}
			}
		}
	}
}

// leastReq is the least of two requests, per resource both ask for.
func leastReq(a, b []nodeReq) []nodeReq {
	var out []nodeReq
	for _, x := range a {
		for _, y := range b {
			if x.j == y.j {
				out = append(out, nodeReq{x.j, min(x.v, y.v)})
			}
		}
	}
	return out
}

// unitsOf is the sorted set of units bySet has candidates on.
func unitsOf(bySet map[int][]int) []int {
	var us []int
	for g, devs := range bySet {
		if len(devs) > 0 {
			us = append(us, g)
		}
	}
	sort.Ints(us)
	return us
}
