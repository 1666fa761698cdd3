package frag

import (
	"math"
	"sort"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// Coverage: FGD weighs a task shape by its frequency, so a rare shape that
// needs a whole node (8 GPUs: half a percent of the Alibaba tasks) barely
// counts, and placements that spread small tasks over every large node
// are as good to it as those that keep one whole. Such a shape then fits
// nowhere for as long as small tasks keep coming: no node drains. The
// look-ahead therefore ranks placements first by the shapes of the
// workload that no node can host any more (each shape counts once,
// whatever its frequency), then by FGD's measure. The claims admitted are
// the same either way: only where they go changes.

// wholeNodeShape is the shape of a task that takes every GPU of the
// largest node whole: it has weight 0 (FGD's measure ignores it) and only
// counts for coverage. The workload is learnt from the past, and a rare
// whole-node task may not have been seen yet when the small ones that
// would fill every node arrive; with it, the look-ahead keeps one node of
// the largest size whole whenever the batch's claims fit elsewhere. A GPU
// is whole when a single device can take all of its share (the full GPU
// of a MIG-partitioned one); nil when no node has such GPUs.
func (m *Measure) wholeNodeShape() *shape {
	sh := &shape{resolved: resolved{bySet: map[int][]int{}, onNode: map[int]bool{}}, whole: true}
	perNode := map[int]int{}
	for g, cs := range m.p.CounterSets {
		if len(m.share[g]) == 0 {
			continue
		}
		for _, d := range cs.Devices {
			dev := m.p.Devices[d]
			if len(dev.Consumes) != 1 || dev.All {
				continue
			}
			whole := true
			for _, j := range m.share[g] {
				if dev.Consumes[0].Amounts[j] != cs.Capacity[j] {
					whole = false
				}
			}
			if whole {
				sh.bySet[g] = append(sh.bySet[g], d)
			}
		}
		if len(sh.bySet[g]) > 0 {
			if n := m.setNode[g]; n >= 0 {
				perNode[n]++
			}
		}
	}
	for _, k := range perNode {
		sh.count = max(sh.count, k)
	}
	if sh.count == 0 {
		return nil
	}
	for n, k := range perNode {
		if k == sh.count {
			sh.onNode[n] = true
		}
	}
	sh.any = true
	return sh
}

// coverage is how far the placement is from letting every shape of the
// workload be hosted somewhere: the shapes no node can host, and for them
// together the GPU share that would have to be freed on the node nearest
// to hosting each (its gap). Running claims cannot move, so a shape may
// stay uncovered; the gap then steers the batch's claims off the node
// that is closest to draining, so that it does drain.
//
// For the whole-node shape, more is better: the nodes of the largest size
// left whole are counted (each whole one can take a large task that
// arrives; packing the small ones elsewhere costs nothing while they fit),
// and its gap is that of the nearest node not yet whole.
type coverage struct {
	uncovered int
	whole     int
	gap       float64
}

func (a coverage) less(b coverage) bool {
	if a.uncovered != b.uncovered {
		return a.uncovered < b.uncovered
	}
	if a.whole != b.whole {
		return a.whole > b.whole
	}
	return a.gap < b.gap-1e-9
}

func (m *Measure) coverage(s *model.State) coverage {
	views := map[int]*nodeView{}
	var out coverage
	for k, sh := range m.shapes {
		if sh.whole {
			var g float64
			out.whole, g = m.wholeNodes(s, k, views)
			if !math.IsInf(g, 1) {
				out.gap += g
			}
			continue
		}
		if sh.count < 2 {
			continue // one device: FGD's measure is about those
		}
		g := m.shapeGap(s, k, views)
		if g > 0 {
			out.uncovered++
			if !math.IsInf(g, 1) {
				out.gap += g
			}
		}
	}
	return out
}

// wholeNodes counts the nodes that can host the whole-node shape k, and
// gives the gap of the nearest other node (+Inf: none).
func (m *Measure) wholeNodes(s *model.State, k int, views map[int]*nodeView) (int, float64) {
	n, best := 0, math.Inf(1)
	for _, node := range m.nodeOrder() {
		if !m.shapes[k].onNode[node] {
			continue
		}
		v := views[node]
		if v == nil {
			v = m.view(s, node)
			views[node] = v
		}
		if g := m.nodeGap(v, k); g == 0 {
			n++
		} else if g < best {
			best = g
		}
	}
	return n, best
}

// shapeGap is the least GPU share to free on one node for it to host shape
// k (0: some node hosts it; +Inf: none could even empty).
func (m *Measure) shapeGap(s *model.State, k int, views map[int]*nodeView) float64 {
	best := math.Inf(1)
	for _, n := range m.nodeOrder() {
		if !m.shapes[k].onNode[n] {
			continue
		}
		v := views[n]
		if v == nil {
			v = m.view(s, n)
			views[n] = v
		}
		if g := m.nodeGap(v, k); g < best {
			best = g
		}
		if best == 0 {
			return 0
		}
	}
	return best
}

// nodeGap is the least GPU share to free on the view's node for it to
// host shape k: the smallest used shares among its GPUs that have the
// shape's devices but cannot take one now.
func (m *Measure) nodeGap(v *nodeView, k int) float64 {
	sh := m.shapes[k]
	hosted := 0
	var used []float64
	for i, g := range v.sets {
		switch {
		case v.hosts[i][k]:
			hosted++
		case len(sh.bySet[g]) > 0:
			used = append(used, 1-v.free[i])
		}
	}
	need := sh.count - hosted
	if need <= 0 {
		return 0
	}
	if need > len(used) {
		return math.Inf(1)
	}
	sort.Float64s(used)
	gap := 0.0
	for _, u := range used[:need] {
		gap += u
	}
	return gap
}

// cover moves the batch's claims (as, not the running ones) off nodes to
// improve the coverage, largest uncovered shapes first: for each, the node
// nearest to hosting it once the batch's claims on it are gone is chosen,
// and each of those claims is placed by FGD on another node where it can
// be (the others stay). The moves are kept when the coverage improves; as
// and s are updated in place.
func (m *Measure) cover(s *model.State, as []*alloc.Assignment, b budget) {
	order := make([]int, len(m.shapes))
	for k := range order {
		order[k] = k
	}
	sort.SliceStable(order, func(i, j int) bool { return m.shapes[order[i]].count > m.shapes[order[j]].count })
	for _, k := range order {
		if b.over() {
			return
		}
		if m.shapes[k].count < 2 {
			continue
		}
		if !m.shapes[k].whole && m.shapeGap(s, k, map[int]*nodeView{}) == 0 {
			continue
		}
		before := m.coverage(s)
		// The node nearest to hosting the shape without the batch's
		// claims on it (fewest of them, then name order, on ties).
		best, bestGap, bestOn := -1, math.Inf(1), []int(nil)
		for _, n := range m.nodeOrder() {
			if n < 0 || !m.shapes[k].onNode[n] {
				continue
			}
			var on []int
			for i, a := range as {
				if touches(m, a, n) {
					on = append(on, i)
				}
			}
			if len(on) == 0 {
				continue
			}
			if m.shapes[k].whole && m.nodeGap(m.view(s, n), k) == 0 {
				continue // whole already
			}
			for _, i := range on {
				release(s, as[i])
			}
			g := m.nodeGap(m.view(s, n), k)
			for _, i := range on {
				take(s, as[i])
			}
			if g < bestGap-1e-9 || math.Abs(g-bestGap) <= 1e-9 && len(on) < len(bestOn) {
				best, bestGap, bestOn = n, g, on
			}
		}
		if best < 0 {
			continue
		}
		for _, i := range bestOn {
			release(s, as[i])
		}
		moved := make([]*alloc.Assignment, len(bestOn))
		for j, i := range bestOn {
			if b, ok := m.placeAvoiding(s, as[i].Claim, FGD, best); ok {
				moved[j] = b
			}
		}
		// Claims with no other place go back where they were.
		back := true
		for j, i := range bestOn {
			if moved[j] == nil {
				if !fits(s, as[i]) {
					back = false
					break
				}
				take(s, as[i])
				moved[j] = as[i]
			}
		}
		if back && m.coverage(s).less(before) {
			for j, i := range bestOn {
				as[i] = moved[j]
			}
			continue
		}
		for j := len(moved) - 1; j >= 0; j-- {
			if moved[j] != nil {
				release(s, moved[j])
			}
		}
		for _, i := range bestOn {
			take(s, as[i])
		}
	}
}

// fits tells whether assignment a's devices can all be taken in s.
func fits(s *model.State, a *alloc.Assignment) bool {
	var done []alloc.Pick
	ok := true
	for _, pk := range a.Picks {
		if !alloc.FitsPick(s, a.Claim, pk) {
			ok = false
			break
		}
		alloc.TakePick(s, a.Claim, pk)
		done = append(done, pk)
	}
	for i := len(done) - 1; i >= 0; i-- {
		alloc.ReleasePick(s, a.Claim, done[i])
	}
	return ok
}

// touches tells whether assignment a uses a GPU of node n.
func touches(m *Measure, a *alloc.Assignment, n int) bool {
	for _, x := range m.assignmentNodes(a) {
		if x == n {
			return true
		}
	}
	return false
}
