package frag

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/drasat/drasat/model"
)

// Measure is FGD's expected fragmentation of a cluster for a workload.
//
// A GPU is a unit of the measure: a counter set, or a device that allows
// multiple allocations with consumable capacity and consumes no counters
// (a GPU shared by capacity, KEP-5075). A counter set's free share is the
// share of its memory slices left (counters named memory-slice-*, as the
// NVIDIA driver publishes MIG GPUs), or, for sets without them, the mean
// over its counters of the share left; a shared device's is the mean over
// its capacities of the share left (capacity left / capacity, FGD's
// gpu_milli left / 1000). A unit belongs to the node its devices are
// reachable from (-1 for devices reachable from every node).
//
// For one task shape m and one node n (Weng et al., §4.1): if m cannot run
// on n, every free share on n is a fragment (F_n(m) = Σ_g free(g)); it
// cannot when fewer of n's GPUs than m asks for can host one of its
// devices, when n lacks the CPU or memory (any resource the pending pods
// request) m's pod asks for, or when m asks for no device at all (a
// CPU-only task uses no GPU). Otherwise the fragments are the free shares
// of the GPUs that cannot host one of m's devices (F_n(m) = Σ_{g cannot
// host m} free(g)). The node's fragmentation is the expectation over the
// workload, F_n = Σ_m p_m F_n(m), and the cluster's the sum over nodes.
type Measure struct {
	p      *model.Problem
	shapes []*shape
	// Units 0..len(p.CounterSets)-1 are the counter sets, the next ones
	// the shared devices listed in shared.
	nSets    int
	shared   []int       // device index per shared unit
	unitOf   map[int]int // shared device -> its unit
	devUnits [][]int     // per device: the units its allocation changes
	setNode  []int       // per unit: its node
	nodeSets map[int][]int
	share    [][]int // per counter set: the counter indices its free share is measured on
	// nodeRes: some shape asks for node resources, so a node's CPU and
	// memory decide whether the shape can run there.
	nodeRes bool
	// Cover ranks placements by coverage before FGD's measure (cover.go).
	// It is for clusters where unadmitted claims wait (the controller,
	// bench's openb-wait): it keeps large nodes whole from the start, at
	// some cost to the packing of the small claims, which where unadmitted
	// claims leave (bench's dropping replay) costs more than it gains:
	// 271 tasks admitted against 321 on default A100. Turned on only once
	// a claim is seen waiting, it comes too late: the large nodes already
	// hold long-running small tasks.
	Cover bool
	// NoScarcity leaves out of the look-ahead's measure (Refine,
	// PlacePods) the cost of taking GPUs that shapes held to them will want
	// (scarce.go): FGD's measure alone, an ablation.
	NoScarcity bool
	scarce     []scarceSet
	// scarceUnits are the units some shape can use (scarce.go).
	scarceUnits []int
	price       []float64 // per unit; nil: none
	// heldReq and heldPodReq: per node, the least a task held to some of
	// its GPUs asks of it.
	heldReq    map[int][]nodeReq
	heldPodReq map[int]map[corev1.ResourceName]int64
	// Upgrade lets Refine change the admitted claims for as many of each
	// weight that allocate more of the GPUs (upgrade.go). Only for the
	// max-claims objective: under ordered, which claims are admitted is
	// fixed by arrival order.
	Upgrade bool
	// memo: outcomes per node fingerprint (memo.go); nil when empty.
	memo *outcomes
	// noMemo: compute afresh (placeUncached).
	noMemo bool
	// units, layouts, layoutOf, keyBuf: remembered GPU rows (memo.go).
	units    map[string]unitRow
	layouts  map[string]int
	layoutOf []int
	keyBuf   []byte
	tally    *viewSums // fragFresh's, reused
}

func newMeasure(p *model.Problem) *Measure {
	m := &Measure{p: p, nSets: len(p.CounterSets), unitOf: map[int]int{}, devUnits: make([][]int, len(p.Devices)),
		setNode: make([]int, len(p.CounterSets)), nodeSets: map[int][]int{}, share: make([][]int, len(p.CounterSets))}
	for i, cs := range p.CounterSets {
		node := p.CommonNode(cs.Devices) // -1: a counter set not on one node
		m.setNode[i] = node
		m.nodeSets[node] = append(m.nodeSets[node], i)
		for j, name := range cs.Counters {
			if strings.HasPrefix(name, "memory-slice-") && cs.Capacity[j] > 0 {
				m.share[i] = append(m.share[i], j)
			}
		}
		if len(m.share[i]) == 0 {
			for j := range cs.Counters {
				if cs.Capacity[j] > 0 {
					m.share[i] = append(m.share[i], j)
				}
			}
		}
	}
	for _, d := range p.Devices {
		for _, c := range d.Consumes {
			m.devUnits[d.Index] = append(m.devUnits[d.Index], c.Set)
		}
		if !d.MultiAlloc || len(d.Consumes) > 0 || len(d.Capacity) == 0 {
			continue
		}
		u := m.nSets + len(m.shared)
		m.shared = append(m.shared, d.Index)
		m.unitOf[d.Index] = u
		m.devUnits[d.Index] = []int{u}
		node := p.CommonNode([]int{d.Index})
		m.setNode = append(m.setNode, node)
		m.nodeSets[node] = append(m.nodeSets[node], u)
	}
	return m
}

// deviceShare is the share of its GPU one device takes: of a shared
// device, the mean of need (its capacities' shares; all of it when need
// is not known); else its counters' (counterShare).
func (m *Measure) deviceShare(d int, need []float64) float64 {
	if _, ok := m.unitOf[d]; !ok {
		return m.counterShare(d)
	}
	if len(need) == 0 {
		return 1
	}
	t := 0.0
	for _, x := range need {
		t += x
	}
	return t / float64(len(need))
}

// counterShare is the share of its counter sets device d consumes,
// measured on the counters its free share is (memory slices, or the mean
// over all).
func (m *Measure) counterShare(d int) float64 {
	t := 0.0
	for _, cons := range m.p.Devices[d].Consumes {
		cs := m.p.CounterSets[cons.Set]
		idx := m.share[cons.Set]
		if len(idx) == 0 {
			continue
		}
		u := 0.0
		for _, j := range idx {
			u += float64(cons.Amounts[j]) / float64(cs.Capacity[j])
		}
		t += u / float64(len(idx))
	}
	return t
}

// Problem is the problem the measure is bound to.
func (m *Measure) Problem() *model.Problem { return m.p }

// free is the free share of unit g in s, in GPUs (0..1).
func (m *Measure) free(s *model.State, g int) float64 {
	if g >= m.nSets {
		d := m.shared[g-m.nSets]
		if s.Used(d) {
			return 0 // held whole by an existing dedicated result
		}
		n := len(m.p.Devices[d].Capacity)
		t := 0.0
		for j := 0; j < n; j++ {
			t += min(max(s.ShareLeft(d, j), 0), 1)
		}
		return t / float64(n)
	}
	cs := m.p.CounterSets[g]
	idx := m.share[g]
	if len(idx) == 0 {
		return 0
	}
	if strings.HasPrefix(cs.Counters[idx[0]], "memory-slice-") {
		var f, c int64
		for _, j := range idx {
			f += s.Free(g, j)
			c += cs.Capacity[j]
		}
		return float64(f) / float64(c)
	}
	t := 0.0
	for _, j := range idx {
		t += float64(s.Free(g, j)) / float64(cs.Capacity[j])
	}
	return t / float64(len(idx))
}

// hosts tells whether GPU g can still take one device of shape sh.
func (m *Measure) hosts(s *model.State, sh *shape, g int) bool {
	if g >= m.nSets {
		d := m.shared[g-m.nSets]
		return s.Fits(d, true) && m.sharedHosts(s, sh, g, d)
	}
	for _, d := range sh.bySet[g] {
		// Without shared candidates need is empty: no lookup per device.
		if s.Fits(d, true) && (sh.sharedOK == nil || sharesFit(s, d, sh.need[d])) {
			return true
		}
	}
	return false
}

// sharedHosts is hosts for shared unit g, device d, without s.Fits(d):
// whether d is one of sh's candidates and sh's share fits in what is left.
func (m *Measure) sharedHosts(s *model.State, sh *shape, g, d int) bool {
	i := g - m.nSets
	if sh.sharedOK == nil || sh.sharedOK[i/64]&(1<<(i%64)) == 0 {
		return false
	}
	need := sh.sharedNeed
	if sh.needVaries {
		need = sh.need[d]
	}
	return sharesFit(s, d, need)
}

// sharesFit tells whether a share that takes need (per capacity, as
// shares of their values) still fits on shared device d.
func sharesFit(s *model.State, d int, need []float64) bool {
	for j, x := range need {
		if x > s.ShareLeft(d, j)+1e-9 {
			return false
		}
	}
	return true
}

// podFits tells whether node n has the node resources shape sh's pod asks
// for left (true for -1, the devices reachable from every node).
func (m *Measure) podFits(s *model.State, sh *shape, n int) bool {
	return m.reqFits(s, sh.req, n)
}

// reqFits tells whether node n has req left (true for -1).
func (m *Measure) reqFits(s *model.State, req []nodeReq, n int) bool {
	if n < 0 {
		return true
	}
	for _, r := range req {
		if left, ok := s.NodeLeft(n, r.j); ok && r.v > left {
			return false
		}
	}
	return true
}

// nodeView caches, for one node, each GPU's free share and which shapes it
// can host, so that trying a device recomputes only the GPUs it touches.
type nodeView struct {
	node  int
	sets  []int
	free  []float64
	hosts [][]bool // per set position, per shape
	// sums: per shape, the GPUs that host it and the free share of those
	// that do not, and the free share in all, kept as rows change, while
	// every free share is a multiple of 1/1024 (exact: then these sums
	// are the ones frag's loops give, in any order); nil otherwise.
	sums  *viewSums
	index map[int]int // unit -> position, for views of many units
	// runs: per shape, whether the node has the node resources it asks for.
	runs []bool
	// starved: the node lacks the least a task held to its GPUs asks for
	// (Scarcity).
	starved bool
}

func (m *Measure) view(s *model.State, n int) *nodeView {
	v := &nodeView{node: n, sets: m.nodeSets[n]}
	v.free = make([]float64, len(v.sets))
	v.hosts = make([][]bool, len(v.sets))
	v.runs = make([]bool, len(m.shapes))
	m.nodeResources(s, v)
	if len(v.sets) > 16 {
		v.index = make(map[int]int, len(v.sets))
	}
	flat := make([]bool, len(v.sets)*len(m.shapes))
	for i, g := range v.sets {
		if v.index != nil {
			v.index[g] = i
		}
		v.hosts[i] = flat[i*len(m.shapes) : (i+1)*len(m.shapes) : (i+1)*len(m.shapes)]
		m.refreshRow(s, v, i)
	}
	if !m.noMemo {
		v.sums = newViewSums(v, len(m.shapes))
	}
	return v
}

// nodeResources sets what in v depends on the node's resources left (not
// on its GPUs): which shapes' pods fit there, and whether it is starved.
func (m *Measure) nodeResources(s *model.State, v *nodeView) {
	for k, sh := range m.shapes {
		v.runs[k] = !m.nodeRes || m.podFits(s, sh, v.node)
	}
	v.starved = m.price != nil && !m.reqFits(s, m.heldReq[v.node], v.node)
}

// pos is the position of unit g in the view, or -1 (a node has a few
// GPUs: a scan beats a map).
func (v *nodeView) pos(g int) int {
	if v.index != nil {
		if i, ok := v.index[g]; ok {
			return i
		}
		return -1
	}
	for i, x := range v.sets {
		if x == g {
			return i
		}
	}
	return -1
}

func (m *Measure) refresh(s *model.State, v *nodeView, i int) {
	v.sums.remove(v, i)
	m.refreshRow(s, v, i)
	v.sums.add(v, i)
	if v.sums != nil && !v.sums.exact {
		v.sums = nil // the loops answer from now on
	}
}

func (m *Measure) refreshRow(s *model.State, v *nodeView, i int) {
	g := v.sets[i]
	if g >= m.nSets || !m.remembers(s) {
		m.refreshFresh(s, v, i)
		return
	}
	key, ok := m.unitKey(s, g, m.keyBuf[:0])
	m.keyBuf = key
	if !ok {
		m.refreshFresh(s, v, i)
		return
	}
	if r, ok := m.units[string(key)]; ok {
		v.free[i] = r.free
		copy(v.hosts[i], r.hosts)
		return
	}
	m.refreshFresh(s, v, i)
	if len(m.units) >= maxUnitRows {
		clear(m.units)
	}
	m.units[string(key)] = unitRow{v.free[i], slices.Clone(v.hosts[i])}
}

func (m *Measure) refreshFresh(s *model.State, v *nodeView, i int) {
	g := v.sets[i]
	v.free[i] = m.free(s, g)
	if g >= m.nSets {
		// A shared GPU: whether it takes a new share at all is the same
		// for every shape, and the look-ahead asks it of every GPU of a
		// node it tries, for every shape.
		d := m.shared[g-m.nSets]
		fits := s.Fits(d, true)
		for k, sh := range m.shapes {
			v.hosts[i][k] = fits && m.sharedHosts(s, sh, g, d)
		}
		return
	}
	for k, sh := range m.shapes {
		v.hosts[i][k] = m.hosts(s, sh, g)
	}
}

// frag is F_n of the view's node (with Scarcity, plus its priced use),
// from the view's kept sums, or from sums tallied afresh.
func (m *Measure) frag(v *nodeView) float64 {
	if v.sums == nil {
		return m.fragFresh(v)
	}
	return m.fragFrom(v, v.sums)
}

// fragFresh is frag from sums tallied afresh (in GPU order, as the kept
// sums would be had they never changed).
func (m *Measure) fragFresh(v *nodeView) float64 {
	if m.tally == nil {
		m.tally = &viewSums{}
	}
	m.tally.reset(len(m.shapes))
	for i := range v.sets {
		m.tally.add(v, i)
	}
	return m.fragFrom(v, m.tally)
}

func (m *Measure) fragFrom(v *nodeView, vs *viewSums) float64 {
	out := m.scarceCost(v)
	for k, sh := range m.shapes {
		if sh.count == 0 || !v.runs[k] || vs.hosting[k] < sh.count {
			// a CPU-only shape, one the node cannot run, or too few GPUs
			out += sh.w * vs.total
		} else {
			out += sh.w * vs.unhosted[k]
		}
	}
	return out
}

// Frag is the cluster's expected fragmentation in s, in GPUs, and its free
// GPU capacity (the unallocated share summed over GPUs).
func (m *Measure) Frag(s *model.State) (frag, free float64) {
	for _, n := range m.nodeOrder() {
		f, g := m.viewFrag(s, n)
		frag += f
		free += g
	}
	return frag, free
}

func (m *Measure) nodeOrder() []int {
	ns := make([]int, 0, len(m.nodeSets))
	for n := range m.nodeSets {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	return ns
}

// GPUs is the number of units (GPUs) measured.
func (m *Measure) GPUs() int { return len(m.setNode) }
