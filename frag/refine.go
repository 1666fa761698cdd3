package frag

import (
	"context"
	"errors"
	"maps"
	"sort"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// Refine implements alloc.Lookahead: among placements of exactly the claims
// res admits (so the objective and its proof stand), it looks for one that
// leaves the cluster less fragmented for the workload. A small batch is
// placed exactly (exact.go): the least fragmented placement of all, proven
// (Stats.FragExact), and without Cover that is the result. Otherwise, or
// with Cover, local search from two starts: res's
// own placement, and every claim placed afresh, largest first, where FGD's
// fragmentation grows least. Each is then improved by re-insertion: a claim
// at a time (largest first) is taken out and put back where the
// fragmentation grows least, kept when that beats its old place, until a
// pass changes nothing (at most refinePasses); then, with Cover, claims
// are moved off a node to keep the multi-GPU shapes of the workload
// hostable (cover.go). The best result wins, ranked (with Cover) by the
// coverage, then by fragmentation; res when nothing beats it.
//
// With Upgrade (max-claims only), the admitted claims may change first,
// never their weight (upgrade.go).
//
// It stops when ctx ends, at deadline, or alloc.MaxLookahead from now if
// that is sooner (a zero deadline: alloc.MaxLookahead): on a large
// cluster the re-insertion stops there (with what it has), and the fresh
// start is given up. Results within the budget are deterministic.
func (m *Measure) Refine(ctx context.Context, p *model.Problem, res *alloc.Result, deadline time.Time) *alloc.Result {
	if p != m.p || len(m.shapes) == 0 || len(res.Assignments) == 0 {
		return res
	}
	if most := time.Now().Add(maxRefine); deadline.IsZero() || most.Before(deadline) {
		deadline = most
	}
	b := budget{ctx, deadline}
	if !m.NoScarcity {
		m.setPrices(model.NewState(p))
		defer m.clearPrices()
	}
	for _, a := range res.Assignments {
		for _, pk := range a.Picks {
			if a.Claim.Requests[pk.Req].Alternatives[pk.Alt].AdminAccess {
				return res // Place does not handle admin access
			}
		}
	}
	size := map[int]float64{}
	for _, a := range res.Assignments {
		for _, pk := range a.Picks {
			size[a.Claim.Index] += pickShare(m, a.Claim, pk)
		}
	}
	bySize := func(as []*alloc.Assignment) {
		sort.SliceStable(as, func(i, j int) bool { return size[as[i].Claim.Index] > size[as[j].Claim.Index] })
	}

	// Start 1: res's placement.
	s1 := model.NewState(p)
	cur := make([]*alloc.Assignment, len(res.Assignments))
	for i, a := range res.Assignments {
		cp := *a
		cur[i] = &cp
		take(s1, &cp)
	}
	oldScore := m.score(s1)
	var dropped []*model.Claim
	if m.Upgrade {
		cur, dropped = m.upgrade(s1, cur, b)
		for _, a := range cur {
			size[a.Claim.Index] = 0
			for _, pk := range a.Picks {
				size[a.Claim.Index] += pickShare(m, a.Claim, pk)
			}
		}
	}
	changedSet := len(dropped) > 0 || len(cur) != len(res.Assignments)
	// The exact level first: on a small batch it is the least fragmented
	// placement, which local search cannot beat on FGD's measure alone.
	var exact []*alloc.Assignment
	var exactScore placementScore
	claims := make([]*model.Claim, len(cur))
	for i, a := range cur {
		claims[i] = a.Claim
	}
	if e := m.newExact(claims, b); e != nil {
		if as, s0, ok := e.place(); ok {
			exact, exactScore = as, m.score(s0)
		}
	}
	var best []*alloc.Assignment
	var bestScore placementScore
	if exact != nil && !m.Cover {
		best, bestScore = exact, exactScore
	} else {
		best, bestScore = m.localSearch(p, s1, cur, bySize, b)
		if exact != nil && exactScore.less(bestScore) {
			best, bestScore = exact, exactScore
		}
	}
	proven := exact != nil && !m.Cover
	if !changedSet && !bestScore.less(oldScore) {
		if proven && !res.Stats.FragExact {
			out := *res
			out.Stats.FragExact = true
			return &out
		}
		return res
	}
	sort.Slice(best, func(i, j int) bool { return best[i].Claim.Index < best[j].Claim.Index })
	out := *res
	out.Assignments = best
	out.Stats.FragExact = proven
	if changedSet {
		out.Rejected = maps.Clone(res.Rejected)
		for _, a := range best {
			delete(out.Rejected, a.Claim.Index)
		}
		for _, c := range dropped {
			out.Rejected[c.Index] = errTraded
		}
		out.Stats.Admitted = len(best)
		out.Stats.Objective = res.Stats.Objective
		was := map[int]bool{}
		for _, a := range res.Assignments {
			was[a.Claim.Index] = true
		}
		for _, a := range best {
			if !was[a.Claim.Index] {
				out.Stats.Objective += a.Claim.Weight
			}
		}
		for _, c := range dropped {
			out.Stats.Objective -= c.Weight
		}
	}
	return &out
}

// localSearch improves the placement cur, held in s1, in place, and
// places the claims afresh, largest first, in a state of their own; it
// returns the better of the two.
func (m *Measure) localSearch(p *model.Problem, s1 *model.State, cur []*alloc.Assignment, bySize func([]*alloc.Assignment), b budget) ([]*alloc.Assignment, placementScore) {
	bySize(cur)
	m.reinsert(s1, cur, b)
	if m.Cover {
		m.cover(s1, cur, b)
	}
	best, bestScore := cur, m.score(s1)
	// Start 2: afresh, largest first.
	s2 := model.NewState(p)
	var fresh []*alloc.Assignment
	for _, a := range cur {
		placed, ok := m.Place(s2, a.Claim, FGD)
		if !ok || b.over() {
			fresh = nil
			break
		}
		fresh = append(fresh, placed)
	}
	if fresh != nil {
		m.reinsert(s2, fresh, b)
		if m.Cover {
			m.cover(s2, fresh, b)
		}
		if sc := m.score(s2); sc.less(bestScore) {
			best, bestScore = fresh, sc
		}
	}
	return best, bestScore
}

// maxRefine is alloc.MaxLookahead; tests that compare whole searches lift it.
var maxRefine = alloc.MaxLookahead

// budget is when Refine's searches stop: the context ended or the
// deadline passed.
type budget struct {
	ctx context.Context
	end time.Time
}

func (b budget) over() bool { return b.ctx.Err() != nil || time.Now().After(b.end) }

// refinePasses bounds the re-insertion passes.
const refinePasses = 3

// placementScore ranks placements: fewer shapes no node can host first
// (cover.go), then less fragmentation.
type placementScore struct {
	cover coverage
	frag  float64
}

func (a placementScore) less(b placementScore) bool {
	if a.cover.less(b.cover) || b.cover.less(a.cover) {
		return a.cover.less(b.cover)
	}
	return a.frag < b.frag-1e-9
}

func (m *Measure) score(s *model.State) placementScore {
	f, _ := m.Frag(s)
	if !m.Cover {
		return placementScore{frag: f}
	}
	return placementScore{m.coverage(s), f}
}

// take puts a into s, its pods on its node included (as Place does), so
// that the node resources the measure reads stay right.
func take(s *model.State, a *alloc.Assignment) {
	for _, pk := range a.Picks {
		alloc.TakePick(s, a.Claim, pk)
	}
	s.PlacePod(a.Claim, a.Node)
}

func release(s *model.State, a *alloc.Assignment) {
	s.UnplacePod(a.Claim, a.Node)
	for i := len(a.Picks) - 1; i >= 0; i-- {
		alloc.ReleasePick(s, a.Claim, a.Picks[i])
	}
}

// reinsert improves the placement in s of the assignments as, in place.
func (m *Measure) reinsert(s *model.State, as []*alloc.Assignment, b budget) {
	for pass := 0; pass < refinePasses; pass++ {
		changed := false
		for i, a := range as {
			if b.over() {
				return
			}
			release(s, a)
			// The old place's cost: its nodes' fragmentation with and without it.
			nodes := m.assignmentNodes(a)
			before := 0.0
			for _, n := range nodes {
				before += m.nodeFragAt(s, n)
			}
			take(s, a)
			oldDelta := -before
			for _, n := range nodes {
				oldDelta += m.nodeFragAt(s, n)
			}
			release(s, a)
			before = m.nodeFragAt(s, m.viewNode(nodeOf(a)))
			b, ok := m.Place(s, a.Claim, FGD)
			if !ok {
				take(s, a)
				continue
			}
			newDelta := m.nodeFragAt(s, m.viewNode(b.Node))
			if m.viewNode(b.Node) == m.viewNode(nodeOf(a)) {
				newDelta -= before
			} else {
				release(s, b)
				newDelta -= m.nodeFragAt(s, m.viewNode(b.Node))
				take(s, b)
			}
			if newDelta < oldDelta-1e-9 {
				as[i] = b
				changed = true
				continue
			}
			release(s, b)
			take(s, a)
		}
		if !changed {
			return
		}
	}
}

func nodeOf(a *alloc.Assignment) int { return a.Node }

// assignmentNodes are the nodes (views) whose GPUs a's devices consume.
func (m *Measure) assignmentNodes(a *alloc.Assignment) []int {
	seen := map[int]bool{}
	var out []int
	for _, pk := range a.Picks {
		for _, u := range m.devUnits[pk.Dev] {
			n := m.setNode[u]
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

var _ alloc.Lookahead = (*Measure)(nil)

// errTraded rejects a claim the look-ahead traded for one of the same
// weight: what it needs went to a placement that fragments less.
var errTraded = model.Reject(model.ReasonCapacity, errors.New("traded for a claim of the same weight that allocates more of the GPUs"))
