package frag

import (
	"math"
	"slices"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// Rule chooses among the placements of one claim.
type Rule int

const (
	// FGD: the placement whose node's expected fragmentation grows least
	// (Fragmentation Gradient Descent).
	FGD Rule = iota
	// BestFit: the least free capacity left on the chosen GPUs, then on
	// the chosen node.
	BestFit
)

// Place puts claim c into s by rule: on every node the claim can use, its
// devices are chosen one at a time, each the best by the rule among the
// candidates that fit (with the claim's constraints), and the node with the
// best outcome wins (ties: the first node in name order). Only claims whose
// requests ask for Count devices are placed (allocationMode All and admin
// access are not); for firstAvailable the first subrequest that fits is
// used. It returns false, leaving s unchanged, when the claim fits nowhere.
func (m *Measure) Place(s *model.State, c *model.Claim, rule Rule) (*alloc.Assignment, bool) {
	return m.placeAvoiding(s, c, rule, noNode)
}

// noNode is placeAvoiding's "avoid no node".
const noNode = -2

// placeAvoiding is Place on every node but avoid.
func (m *Measure) placeAvoiding(s *model.State, c *model.Claim, rule Rule, avoid int) (*alloc.Assignment, bool) {
	return m.placeWhere(s, c, rule, func(n int) bool { return n != avoid })
}

// placeWhere is Place on the nodes n with allowed(n).
func (m *Measure) placeWhere(s *model.State, c *model.Claim, rule Rule, allowed func(n int) bool) (*alloc.Assignment, bool) {
	if c.Err != nil {
		return nil, false
	}
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			if a.All || a.AdminAccess {
				return nil, false
			}
		}
	}
	nodes := c.CandidateNodes(m.p)
	if c.FixedNode >= 0 {
		nodes = []int{c.FixedNode}
	}
	class := m.placeClass(s, c)
	var best []alloc.Pick
	bestNode := 0
	bestScore := [2]float64{math.Inf(1), math.Inf(1)}
	for _, n := range nodes {
		if !allowed(n) || !s.PodAllows(c, n) {
			continue
		}
		var (
			picks []alloc.Pick
			sc    [2]float64
			ok    bool
		)
		if class < 0 || n < 0 {
			picks, sc, ok = m.tryOn(s, c, n, rule)
		} else {
			o := m.outcomes()
			key := placeKey{class, int32(n), rule}
			fp := s.NodeFingerprint(n)
			e, known := o.places[key]
			if !known || e.fp != fp {
				e = placeOutcome{fp: fp}
				e.picks, e.score, e.ok = m.tryOn(s, c, n, rule)
				if len(o.places) >= maxOutcomes {
					clear(o.places)
				}
				o.places[key] = e
			}
			picks, sc, ok = e.picks, e.score, e.ok
		}
		if !ok {
			continue
		}
		if sc[0] < bestScore[0]-1e-9 || (math.Abs(sc[0]-bestScore[0]) <= 1e-9 && sc[1] < bestScore[1]-1e-9) {
			best, bestNode, bestScore = picks, n, sc
		}
	}
	if best == nil {
		return nil, false
	}
	for i, pk := range best {
		if !alloc.FitsPick(s, c, pk) {
			// A remembered placement that does not fit: two contents
			// shared a fingerprint. Start over without the outcomes.
			for j := i - 1; j >= 0; j-- {
				alloc.ReleasePick(s, c, best[j])
			}
			m.forget()
			return m.placeUncached(s, c, rule, allowed)
		}
		alloc.TakePick(s, c, pk)
	}
	s.PlacePod(c, bestNode) // its pods' requests count on the node
	return &alloc.Assignment{Claim: c, Node: bestNode, Picks: slices.Clone(best)}, true
}

// placeUncached is placeWhere without remembered outcomes.
func (m *Measure) placeUncached(s *model.State, c *model.Claim, rule Rule, allowed func(n int) bool) (*alloc.Assignment, bool) {
	m.noMemo = true
	defer func() { m.noMemo = false }()
	return m.placeWhere(s, c, rule, allowed)
}

// tryOn places c on node n by rule and takes it back out: its devices
// and its score (lower is better), or false when it does not fit there.
func (m *Measure) tryOn(s *model.State, c *model.Claim, n int, rule Rule) ([]alloc.Pick, [2]float64, bool) {
	var sc [2]float64
	if !anyFits(s, c, n) {
		return nil, sc, false // cheap tests before the node's fragmentation is computed
	}
	var before float64
	var v *nodeView
	if rule == FGD {
		v = m.view(s, m.viewNode(n))
		before = m.frag(v)
	}
	s.PlacePod(c, n) // its pods' requests count in the measure
	if v != nil {
		m.nodeResources(s, v) // the pod's requests changed them, not the GPUs
	}
	picks, ok := m.placeOn(s, c, n, rule, v)
	if !ok {
		s.UnplacePod(c, n)
		return nil, sc, false
	}
	switch rule {
	case FGD:
		if v.node == n && !m.crossUnit(picks) {
			sc[0] = m.frag(v) - before // placeOn kept its view current
		} else {
			sc[0] = m.nodeFragAt(s, n) - before
		}
	case BestFit:
		seen := map[int]bool{}
		for _, pk := range picks {
			for _, u := range m.devUnits[pk.Dev] {
				if !seen[u] {
					seen[u] = true
					sc[0] += m.free(s, u)
				}
			}
		}
		for _, g := range m.nodeSets[n] {
			sc[1] += m.free(s, g)
		}
	}
	for i := len(picks) - 1; i >= 0; i-- {
		alloc.ReleasePick(s, c, picks[i])
	}
	s.UnplacePod(c, n)
	return picks, sc, true
}

// anyFits tells whether every request of c has some candidate on node n
// that fits now.
func anyFits(s *model.State, c *model.Claim, n int) bool {
	return c.EveryRequest(func(a *model.Alternative) bool {
		return slices.ContainsFunc(a.CandidatesOn(n), func(d int) bool { return s.FitsFor(d, a, !a.AdminAccess) })
	})
}

func (m *Measure) nodeFragAt(s *model.State, n int) float64 {
	f, _ := m.viewFrag(s, m.viewNode(n))
	return f
}

// placeOn chooses the claim's devices on node n greedily; on success they
// are taken in s (the caller releases them). Under FGD, v is the view of
// n's GPUs it chooses by (the caller's, current): placeOn keeps it
// current on the units of the devices it takes.
func (m *Measure) placeOn(s *model.State, c *model.Claim, n int, rule Rule, v *nodeView) ([]alloc.Pick, bool) {
	var picks []alloc.Pick
	undo := func() {
		for i := len(picks) - 1; i >= 0; i-- {
			alloc.ReleasePick(s, c, picks[i])
		}
	}
	for ri, r := range c.Requests {
		done := false
		for ai, a := range r.Alternatives {
			mark := len(picks)
			ok := true
			for k := 0; k < a.Count; k++ {
				d := m.bestDevice(s, c, ri, ai, a.CandidatesOn(n), picks, v, rule)
				if d < 0 {
					ok = false
					break
				}
				pk := alloc.Pick{Req: ri, Alt: ai, Dev: d}
				alloc.TakePick(s, c, pk)
				picks = append(picks, pk)
				if v != nil {
					m.refreshDevice(s, v, d)
				}
			}
			if ok {
				done = true
				break
			}
			for len(picks) > mark {
				d := picks[len(picks)-1].Dev
				alloc.ReleasePick(s, c, picks[len(picks)-1])
				picks = picks[:len(picks)-1]
				if v != nil {
					m.refreshDevice(s, v, d)
				}
			}
		}
		if !done {
			undo()
			return nil, false
		}
	}
	return picks, true
}

// crossUnit tells whether taking the picks can change what other units
// of their node can take (a device incompatible with others): a view
// refreshed on the picks' units alone is then not the node's.
func (m *Measure) crossUnit(picks []alloc.Pick) bool {
	for _, pk := range picks {
		if len(m.p.Devices[pk.Dev].Incompatible) > 0 {
			return true
		}
	}
	return false
}

// viewNode is the node whose GPUs a placement for node n touches: n, or -1
// when the node has no GPUs of its own (devices reachable from every node).
func (m *Measure) viewNode(n int) int {
	if _, ok := m.nodeSets[n]; ok {
		return n
	}
	return -1
}

func (m *Measure) refreshDevice(s *model.State, v *nodeView, d int) {
	for _, u := range m.devUnits[d] {
		if i := v.pos(u); i >= 0 {
			m.refresh(s, v, i)
		}
	}
}

// bestDevice is the candidate the rule prefers, or -1.
func (m *Measure) bestDevice(s *model.State, c *model.Claim, ri, ai int, cands []int, picks []alloc.Pick, v *nodeView, rule Rule) int {
	best, bestScore := -1, math.Inf(1)
	for _, d := range cands {
		pk := alloc.Pick{Req: ri, Alt: ai, Dev: d}
		if !alloc.FitsPick(s, c, pk) || !alloc.ConstraintsAllow(c, picks, ri, c.Requests[ri].Alternatives[ai], d) || taken(picks, d) {
			continue
		}
		var sc float64
		switch rule {
		case FGD:
			alloc.TakePick(s, c, pk)
			m.refreshDevice(s, v, d)
			sc = m.frag(v)
			alloc.ReleasePick(s, c, pk)
			m.refreshDevice(s, v, d)
		case BestFit:
			alloc.TakePick(s, c, pk)
			for _, u := range m.devUnits[d] {
				sc += m.free(s, u)
			}
			alloc.ReleasePick(s, c, pk)
		}
		if sc < bestScore-1e-9 {
			best, bestScore = d, sc
		}
	}
	return best
}

// consumedShare is the share of its GPUs device d takes for alternative
// a, in GPUs: per counter set, the mean over the counters its free share
// is measured on (memory slices have capacity 1 each, so that is slices
// taken / 8); for a shared device, the mean over its capacities of the
// share a takes.
func consumedShare(m *Measure, a *model.Alternative, d int) float64 {
	t := m.counterShare(d)
	if _, ok := m.unitOf[d]; ok {
		if sh := a.CapacityShares(d); len(sh) > 0 {
			u := 0.0
			for _, x := range sh {
				u += x
			}
			t += u / float64(len(sh))
		}
	}
	return t
}

// pickShare is consumedShare of pick pk of claim c.
func pickShare(m *Measure, c *model.Claim, pk alloc.Pick) float64 {
	return consumedShare(m, c.Requests[pk.Req].Alternatives[pk.Alt], pk.Dev)
}

func taken(picks []alloc.Pick, d int) bool {
	for _, pk := range picks {
		if pk.Dev == d {
			return true
		}
	}
	return false
}

// Greedy places claims one at a time in the given order by rule; claims
// that fit nowhere are rejected.
func (m *Measure) Greedy(order []*model.Claim, rule Rule) *alloc.Result {
	return alloc.Sequential(m.p, order, func(s *model.State, c *model.Claim) (*alloc.Assignment, bool) {
		return m.Place(s, c, rule)
	})
}
