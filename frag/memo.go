package frag

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// outcomes remembers what the measure worked out per node, by the node's
// fingerprint (model.State.NodeFingerprint): each node's fragmentation,
// and the best placement on it of each class of claims. The look-ahead
// tries every node for every claim of a batch, several times over; on a
// large cluster almost every node is as it was the last time, and trying
// a claim on it again (its view, every candidate device against every
// shape) is what the look-ahead's time went to. With it, each class of
// claims is tried once on each node, and again only on the nodes that
// changed since. Answers are the ones a fresh computation gives (the same
// content gives the same answer); a remembered placement is still checked
// to fit before it is taken.
//
// The outcomes depend on the prices (scarce.go): they are dropped whenever
// those are set or cleared.
type outcomes struct {
	frags   map[int]fragOutcome
	places  map[placeKey]placeOutcome
	classes map[string]int32
	classOf map[*model.Claim]int32
}

type fragOutcome struct {
	fp         uint64
	frag, free float64
}

type placeKey struct {
	class, node int32
	rule        Rule
}

type placeOutcome struct {
	fp    uint64
	ok    bool
	score [2]float64
	picks []alloc.Pick
}

// maxOutcomes bounds the remembered placements (class × node); past it
// they start over.
const maxOutcomes = 1 << 17

// remembers tells whether outcomes in s may be remembered: states of the
// measure's own problem, unless placeUncached asked otherwise.
func (m *Measure) remembers(s *model.State) bool { return !m.noMemo && s.P == m.p }

// forget drops every outcome (the prices changed).
func (m *Measure) forget() { m.memo = nil }

func (m *Measure) outcomes() *outcomes {
	if m.memo == nil {
		m.memo = &outcomes{frags: map[int]fragOutcome{}, places: map[placeKey]placeOutcome{},
			classes: map[string]int32{}, classOf: map[*model.Claim]int32{}}
	}
	return m.memo
}

// placeClass is c's class for remembered placements, or -1 when c's
// placements are not remembered: a claim of a pod with other claims (where
// it goes depends on where they went), or a state of another problem.
func (m *Measure) placeClass(s *model.State, c *model.Claim) int32 {
	if !m.remembers(s) || c.Group != nil && len(c.Group.Claims) > 1 {
		return -1
	}
	o := m.outcomes()
	if id, ok := o.classOf[c]; ok {
		return id
	}
	// Claims of one class have the same requests, candidates and pods'
	// requests (ClassKey); whether a pod pins it is the problem's.
	key := c.ClassKey()
	if c.Group != nil {
		key += "\x00group"
		if m.p.Pinning(c) {
			key += "\x00pinned"
		}
	}
	id, ok := o.classes[key]
	if !ok {
		id = int32(len(o.classes))
		o.classes[key] = id
	}
	o.classOf[c] = id
	return id
}

// viewFrag is the fragmentation and free share of view node n (viewNode)
// in s, remembered by the node's fingerprint.
func (m *Measure) viewFrag(s *model.State, n int) (frag, free float64) {
	if !m.remembers(s) {
		return m.fragOfView(m.view(s, n))
	}
	o := m.outcomes()
	fp := s.NodeFingerprint(n)
	if e, ok := o.frags[n]; ok && e.fp == fp {
		return e.frag, e.free
	}
	frag, free = m.fragOfView(m.view(s, n))
	o.frags[n] = fragOutcome{fp, frag, free}
	return frag, free
}

func (m *Measure) fragOfView(v *nodeView) (frag, free float64) {
	for _, f := range v.free {
		free += f
	}
	return m.frag(v), free
}

// A GPU's row in a node view (its free share and the shapes it can host)
// is a function of its counters left and which of its devices are taken,
// when its devices draw on no other counter set, exclude no other device,
// are not shared and have no compatibility groups (MIG GPUs): GPUs of one
// layout (the same counters and devices, the same shapes' candidates among
// them, in order) in the same state have the same row. units remembers the
// rows by layout and state. Trying a claim's candidates on a node takes and
// gives back one device at a time, the claims of every class try the same
// devices, and a large cluster has thousands of GPUs in a handful of
// states: each is worked out once. Rows do not depend on the prices; they
// are kept for the measure's life (at most maxUnitRows, then they start
// over).
type unitRow struct {
	free  float64
	hosts []bool
}

const maxUnitRows = 1 << 17

// Layout ids per counter set: unknown, or not remembered (see above).
const (
	layoutUnknown = -1
	layoutNone    = -2
)

// unitKey appends counter set g's state to key (its layout, counters left
// and taken devices), or returns false when g's rows are not remembered.
func (m *Measure) unitKey(s *model.State, g int, key []byte) ([]byte, bool) {
	if m.layoutOf == nil {
		m.units = map[string]unitRow{}
		m.layouts = map[string]int{}
		m.layoutOf = make([]int, m.nSets)
		for i := range m.layoutOf {
			m.layoutOf[i] = layoutUnknown
		}
	}
	id := m.layoutOf[g]
	if id == layoutUnknown {
		id = m.layout(g)
		m.layoutOf[g] = id
	}
	if id == layoutNone {
		return key, false
	}
	key = binary.AppendUvarint(key, uint64(id))
	cs := m.p.CounterSets[g]
	for j := range cs.Counters {
		key = binary.AppendVarint(key, s.Free(g, j))
	}
	var bits byte
	for i, d := range cs.Devices {
		if s.Used(d) {
			bits |= 1 << (i % 8)
		}
		if i%8 == 7 || i == len(cs.Devices)-1 {
			key = append(key, bits)
			bits = 0
		}
	}
	return key, true
}

// layout is counter set g's layout id, or layoutNone.
func (m *Measure) layout(g int) int {
	cs := m.p.CounterSets[g]
	for _, l := range cs.ExistingGroups {
		if len(l) > 0 {
			return layoutNone
		}
	}
	pos := make(map[int]int, len(cs.Devices))
	var sig []byte
	for _, j := range m.share[g] {
		sig = binary.AppendUvarint(sig, uint64(j))
	}
	sig = append(sig, '|')
	for j, c := range cs.Counters {
		sig = append(sig, c...)
		sig = binary.AppendVarint(append(sig, 0), cs.Capacity[j])
	}
	for i, d := range cs.Devices {
		dev := m.p.Devices[d]
		if len(dev.Consumes) != 1 || len(dev.Incompatible) > 0 || dev.MultiAlloc || len(dev.Consumes[0].Groups) > 0 {
			return layoutNone
		}
		pos[d] = i
		sig = append(sig, '|')
		for _, a := range dev.Consumes[0].Amounts {
			sig = binary.AppendVarint(sig, a)
		}
	}
	for _, sh := range m.shapes {
		sig = append(sig, '|')
		for _, d := range sh.bySet[g] {
			i, ok := pos[d]
			if !ok {
				return layoutNone // a candidate drawing on g from elsewhere
			}
			sig = binary.AppendUvarint(sig, uint64(i))
		}
	}
	id, ok := m.layouts[string(sig)]
	if !ok {
		id = len(m.layouts)
		m.layouts[string(sig)] = id
	}
	return id
}

// viewSums are a view's per-shape sums (nodeView.sums), so that F_n of a
// node with one GPU changed costs a pass over the shapes, not over shapes
// and GPUs. They are exact (exact false otherwise): every free share a
// multiple of 1/1024 below 2^20, as memory slices of eight are, so adding
// and taking away rows in any order gives frag's own sums to the bit.
type viewSums struct {
	total    float64
	hosting  []int
	unhosted []float64
	exact    bool
}

func newViewSums(v *nodeView, shapes int) *viewSums {
	vs := &viewSums{}
	vs.reset(shapes)
	for i := range v.sets {
		vs.add(v, i)
	}
	if !vs.exact {
		return nil
	}
	return vs
}

// reset empties the sums for shapes shapes.
func (vs *viewSums) reset(shapes int) {
	vs.total, vs.exact = 0, true
	vs.hosting = slices.Grow(vs.hosting[:0], shapes)[:shapes]
	vs.unhosted = slices.Grow(vs.unhosted[:0], shapes)[:shapes]
	clear(vs.hosting)
	clear(vs.unhosted)
}

// add counts row i of v in the sums; remove takes it out.
func (vs *viewSums) add(v *nodeView, i int) { vs.count(v, i, 1) }

func (vs *viewSums) remove(v *nodeView, i int) { vs.count(v, i, -1) }

func (vs *viewSums) count(v *nodeView, i, sign int) {
	if vs == nil {
		return
	}
	f := v.free[i]
	if x := f * 1024; x != math.Trunc(x) || math.Abs(f) >= 1<<20 {
		vs.exact = false
	}
	vs.total += float64(sign) * f
	for k, h := range v.hosts[i] {
		if h {
			vs.hosting[k] += sign
		} else {
			vs.unhosted[k] += float64(sign) * f
		}
	}
}
