package frag

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// The exact level. Refine's local search finds a good placement; when the
// batch is small this finds the best one: among all placements of exactly
// the batch's claims, one of least FGD fragmentation, by dynamic
// programming. Two facts make that possible (docs/bench.md, "The exact
// level"):
//
//   - the measure is a sum over nodes, and a node's share depends only on
//     which units (devices of one candidate set) its GPUs take, so a DP
//     over nodes whose state is the multiset of claims placed so far
//     covers every assignment of claims to nodes;
//   - within a node, F_n = Σ_m w_m (T − [c_m ≥ k_m]·H_m), with T the
//     node's free share, c_m the GPUs that can host one device of shape m,
//     H_m their free share and k_m the shape's device count. For k_m = 1
//     the bracket is always 1 (H_m = 0 when c_m = 0), so those terms are
//     sums over GPUs. For the multi-device shapes a guess γ (which of them
//     the node will host) makes them sums too; the DP over the node's GPUs
//     tracks c_m (capped at k_m) to keep only guesses that come true, and
//     since each guessed term only lowers the cost, the least over valid
//     guesses is F_n itself.
//
// It applies when every claim asks for Count devices of one candidate set
// per request, with no constraints, admin access or shared devices, and
// every candidate takes from one GPU of the node it is on (MIG partitions
// are; multi-host slices are not), with no exclusions reaching another
// GPU. Its work is bounded by exactMaxClaims
// and exactMaxWork; beyond them Refine keeps its local search.

// exactMaxClaims bounds the batch: the DP over nodes has a state per
// sub-multiset of the batch's claims.
const exactMaxClaims = 12

// exactMaxWork bounds the DP transitions of one batch (about a second).
const exactMaxWork = 40_000_000

// exactSearch is one batch's exact placement problem.
type exactSearch struct {
	m      *Measure
	s      *model.State // the cluster without the batch
	budget budget
	work   int

	types     []*unitType
	typeIndex map[string]int // by the candidates, as intsKey
	bound     []int          // per type: the batch's units of it
	stride    []int          // per type: its digit's weight in a unit vector's index
	vecs      int            // number of unit vectors
	digits    [][]int

	classes []*claimClass

	weightAll  float64 // Σ w_m over the measured shapes
	singleMask uint64  // shapes (bits: indices into m.shapes) of one device, w > 0
	multi      []int   // shapes of several devices, w > 0

	options map[int][]gpuOption // per counter set
}

// unitType is one candidate set: requests with the same candidates take
// their devices from the same pool of devices.
type unitType struct {
	bySet map[int][]int // candidates per counter set, in index order
}

// claimClass is a set of claims with the same units and nodes.
type claimClass struct {
	claims []*model.Claim
	units  []int // per type
	vec    int
	nodes  map[int]bool
}

// gpuOption is one way to add units to a GPU: the devices taken, and the
// GPU's free share and hosted shapes afterwards.
type gpuOption struct {
	vec   int
	free  float64
	hosts uint64 // bit k: the GPU can host a device of shape k
	devs  []int
	typ   []int // per device: its unit type
}

// newExact builds the search, or nil when the batch is not of the kind the
// DP handles, or too large for it.
func (m *Measure) newExact(claims []*model.Claim, b budget) *exactSearch {
	if len(claims) == 0 || len(claims) > exactMaxClaims || len(m.shapes) > 64 {
		return nil
	}
	// The DP takes a GPU's hosting to depend on that GPU alone: not with
	// node resources in the shapes, nor for GPUs shared by capacity.
	if m.nodeRes || len(m.shared) > 0 || m.price != nil {
		return nil
	}
	p := m.p
	e := &exactSearch{m: m, s: model.NewState(p), budget: b, options: map[int][]gpuOption{}}
	for k, sh := range m.shapes {
		switch {
		case sh.w <= 0:
		case sh.count <= 1:
			e.singleMask |= 1 << k
		default:
			e.multi = append(e.multi, k)
		}
		e.weightAll += max(sh.w, 0)
	}
	if len(e.multi) > 4 {
		return nil // 2^multi guesses per node
	}
	// Whether a GPU hosts a shape must depend on that GPU alone.
	for _, sh := range m.shapes {
		for set, devs := range sh.bySet {
			for _, d := range devs {
				for _, i := range p.Devices[d].Incompatible {
					if c := p.Devices[i].Consumes; len(c) != 1 || c[0].Set != set {
						return nil
					}
				}
			}
		}
	}
	typeIndex := map[string]int{}
	okDev := map[int]bool{}
	eligible := func(d int) bool {
		if ok, seen := okDev[d]; seen {
			return ok
		}
		dev := p.Devices[d]
		n := p.CommonNode([]int{d})
		ok := len(dev.Consumes) == 1 && !dev.MultiAlloc && n >= 0 &&
			m.setNode[dev.Consumes[0].Set] == n && len(m.share[dev.Consumes[0].Set]) > 0
		for _, i := range dev.Incompatible {
			ok = ok && len(p.Devices[i].Consumes) == 1 && p.Devices[i].Consumes[0].Set == dev.Consumes[0].Set
		}
		okDev[d] = ok
		return ok
	}
	classIndex := map[string]int{}
	var classUnits []map[int]int
	for _, c := range claims {
		if c.Err != nil || len(c.Constraints) > 0 {
			return nil
		}
		units := map[int]int{}
		for _, r := range c.Requests {
			if len(r.Alternatives) != 1 {
				return nil
			}
			a := r.Alternatives[0]
			if a.All || a.AdminAccess || a.Shared || a.OverLimit || a.Count < 1 {
				return nil
			}
			key := intsKey(a.Candidates)
			t, ok := typeIndex[key]
			if !ok {
				ut := &unitType{bySet: map[int][]int{}}
				for _, d := range a.Candidates {
					if !eligible(d) {
						return nil
					}
					set := p.Devices[d].Consumes[0].Set
					ut.bySet[set] = append(ut.bySet[set], d)
				}
				t = len(e.types)
				typeIndex[key] = t
				e.types = append(e.types, ut)
			}
			units[t] += a.Count
		}
		nodes := c.CandidateNodes(p)
		if c.FixedNode >= 0 {
			nodes = []int{c.FixedNode}
		}
		ck := c.ClassKey() + "|" + intsKey(nodes)
		k, ok := classIndex[ck]
		if !ok {
			cl := &claimClass{nodes: map[int]bool{}}
			for _, n := range nodes {
				cl.nodes[n] = true
			}
			k = len(e.classes)
			classIndex[ck] = k
			e.classes = append(e.classes, cl)
			classUnits = append(classUnits, units)
		}
		e.classes[k].claims = append(e.classes[k].claims, c)
	}
	e.typeIndex = typeIndex
	e.bound = make([]int, len(e.types))
	for k, cl := range e.classes {
		cl.units = make([]int, len(e.types))
		for t, n := range classUnits[k] {
			cl.units[t] = n
			e.bound[t] += n * len(cl.claims)
		}
	}
	e.stride = make([]int, len(e.types))
	e.vecs = 1
	for t, b := range e.bound {
		e.stride[t] = e.vecs
		e.vecs *= b + 1
		if e.vecs > 1<<16 {
			return nil
		}
	}
	e.digits = make([][]int, e.vecs)
	for v := range e.digits {
		e.digits[v] = make([]int, len(e.types))
		for t := range e.types {
			e.digits[v][t] = v / e.stride[t] % (e.bound[t] + 1)
		}
	}
	for _, cl := range e.classes {
		for t, n := range cl.units {
			cl.vec += n * e.stride[t]
		}
	}
	return e
}

func intsKey(xs []int) string {
	var b strings.Builder
	for _, x := range xs {
		b.WriteString(strconv.Itoa(x))
		b.WriteByte(',')
	}
	return b.String()
}

// spent tells whether the search has used its work or time.
func (e *exactSearch) spent() bool {
	return e.work > exactMaxWork || (e.work&0xffff == 0 && e.budget.over())
}

// gpuOptions lists the ways to add the batch's units to GPU g, the empty
// one first. Units of one type take devices in index order (any order
// gives the same set). Of options with the same units and hosted shapes,
// the one leaving the least free share is kept: it costs least under every
// guess.
func (e *exactSearch) gpuOptions(g int) []gpuOption {
	if opts, ok := e.options[g]; ok {
		return opts
	}
	type key struct {
		vec   int
		hosts uint64
	}
	best := map[key]int{}
	var opts []gpuOption
	var devs, typ []int
	used := make([]int, len(e.types))
	record := func(vec int) {
		o := gpuOption{vec: vec, free: e.m.free(e.s, g)}
		for k, sh := range e.m.shapes {
			if sh.w > 0 && e.m.hosts(e.s, sh, g) {
				o.hosts |= 1 << k
			}
		}
		i, seen := best[key{vec, o.hosts}]
		if seen && o.free >= opts[i].free-1e-12 {
			return
		}
		o.devs, o.typ = slices.Clone(devs), slices.Clone(typ)
		if seen {
			opts[i] = o
			return
		}
		best[key{vec, o.hosts}] = len(opts)
		opts = append(opts, o)
	}
	var walk func(t, after, vec int)
	walk = func(t, after, vec int) {
		e.work++
		record(vec)
		for ; t < len(e.types); t, after = t+1, -1 {
			if used[t] == e.bound[t] {
				continue
			}
			for _, d := range e.types[t].bySet[g] {
				if d <= after || !e.s.Fits(d, true) {
					continue
				}
				e.s.Take(d, true)
				used[t]++
				devs, typ = append(devs, d), append(typ, t)
				walk(t, d, vec+e.stride[t])
				devs, typ = devs[:len(devs)-1], typ[:len(typ)-1]
				used[t]--
				e.s.Release(d, true)
			}
		}
	}
	walk(0, -1, 0)
	e.options[g] = opts
	return opts
}

// nodeStep is a back pointer of the DP over a node's GPUs.
type nodeStep struct {
	prev, option int
}

// nodeCosts is F_n for every unit vector the node's GPUs can take (+Inf
// where none), by the DP over its GPUs under every guess. With want >= 0
// it also returns the options (one per GPU of the node) of a least-cost
// way to take exactly want.
func (e *exactSearch) nodeCosts(n, want int) ([]float64, []gpuOption, bool) {
	sets := e.m.nodeSets[n]
	cost := make([]float64, e.vecs)
	for i := range cost {
		cost[i] = math.Inf(1)
	}
	var plan []gpuOption
	planCost := math.Inf(1)
	for guess := 0; guess < 1<<len(e.multi); guess++ {
		var tracked []int // shape indices guessed hosted
		counted := e.singleMask
		possible := true
		for i, k := range e.multi {
			if guess&(1<<i) != 0 {
				tracked = append(tracked, k)
				counted |= 1 << k
				possible = possible && e.m.shapes[k].count <= len(sets)
			}
		}
		if !possible {
			continue
		}
		capsN := 1
		capStride := make([]int, len(tracked))
		for i, k := range tracked {
			capStride[i] = capsN
			capsN *= e.m.shapes[k].count + 1
		}
		cur := map[int]float64{0: 0}
		var back []map[int]nodeStep
		for _, g := range sets {
			opts := e.gpuOptions(g)
			// An option's cost under this guess: its free share counts for
			// every shape but those it hosts and that count as hosted.
			optCost := make([]float64, len(opts))
			for oi, o := range opts {
				f := e.weightAll
				for k, sh := range e.m.shapes {
					if o.hosts&counted&(1<<k) != 0 {
						f -= sh.w
					}
				}
				optCost[oi] = o.free * max(f, 0)
			}
			next := make(map[int]float64, len(cur))
			var step map[int]nodeStep
			if want >= 0 {
				step = make(map[int]nodeStep, len(cur))
			}
			for st, c := range cur {
				vec, caps := st/capsN, st%capsN
				dv := e.digits[vec]
				for oi := range opts {
					o := &opts[oi]
					e.work++
					if e.spent() {
						return nil, nil, false
					}
					od := e.digits[o.vec]
					fits := true
					for t := range dv {
						if dv[t]+od[t] > e.bound[t] {
							fits = false
							break
						}
					}
					if !fits {
						continue
					}
					nc := caps
					for i, k := range tracked {
						if o.hosts&(1<<k) != 0 {
							ci := caps / capStride[i] % (e.m.shapes[k].count + 1)
							if ci < e.m.shapes[k].count {
								nc += capStride[i]
							}
						}
					}
					ns := (vec+o.vec)*capsN + nc
					v := c + optCost[oi]
					if old, ok := next[ns]; !ok || v < old-1e-12 {
						next[ns] = v
						if step != nil {
							step[ns] = nodeStep{st, oi}
						}
					}
				}
			}
			cur = next
			back = append(back, step)
		}
		full := 0
		for i, k := range tracked {
			full += e.m.shapes[k].count * capStride[i]
		}
		for st, c := range cur {
			if st%capsN != full {
				continue
			}
			vec := st / capsN
			if c < cost[vec]-1e-12 {
				cost[vec] = c
			}
			if want == vec && c < planCost-1e-12 {
				planCost = c
				plan = make([]gpuOption, len(sets))
				for i := len(sets) - 1; i >= 0; i-- {
					b := back[i][st]
					plan[i] = e.gpuOptions(sets[i])[b.option]
					st = b.prev
				}
			}
		}
	}
	return cost, plan, true
}

// place finds a least-fragmenting placement of the batch, and the state
// with it taken. It returns false when the work or the deadline ran out, or
// when the placement it finds does not check out (it then leaves the batch
// to the local search).
func (e *exactSearch) place() ([]*alloc.Assignment, *model.State, bool) {
	// States of the DP over nodes: how many claims of each class are placed.
	counts := make([]int, len(e.classes))
	cstride := make([]int, len(e.classes))
	states := 1
	for k, cl := range e.classes {
		counts[k] = len(cl.claims)
		cstride[k] = states
		states *= counts[k] + 1
	}
	unitVec := make([]int, states) // the units of a class vector
	for x := range unitVec {
		for k, cl := range e.classes {
			unitVec[x] += x / cstride[k] % (counts[k] + 1) * cl.vec
		}
	}
	nodeSet := map[int]bool{}
	for _, cl := range e.classes {
		for n := range cl.nodes {
			nodeSet[n] = true
		}
	}
	var nodes []int
	for n := range nodeSet {
		if _, ok := e.m.nodeSets[n]; ok {
			nodes = append(nodes, n)
		}
	}
	sort.Ints(nodes)

	dp := make([]float64, states)
	for i := range dp {
		dp[i] = math.Inf(1)
	}
	dp[0] = 0
	choice := make([][]int32, len(nodes)) // per node: the classes vector it took
	for ni, n := range nodes {
		cost, _, ok := e.nodeCosts(n, -1)
		if !ok {
			return nil, nil, false
		}
		next := make([]float64, states)
		for i := range next {
			next[i] = math.Inf(1)
		}
		ch := make([]int32, states)
		for a := 0; a < states; a++ {
			if math.IsInf(dp[a], 1) {
				continue
			}
			// Every x with a + x <= counts, classes allowed on n only.
			var sub func(k, x int)
			sub = func(k, x int) {
				if k == len(e.classes) {
					e.work++
					c := cost[unitVec[x]]
					if v := dp[a] + c; v < next[a+x]-1e-12 {
						next[a+x], ch[a+x] = v, int32(x)
					}
					return
				}
				room := counts[k] - a/cstride[k]%(counts[k]+1)
				if !e.classes[k].nodes[n] {
					room = 0
				}
				for j := 0; j <= room; j++ {
					sub(k+1, x+j*cstride[k])
				}
			}
			sub(0, 0)
			if e.spent() {
				return nil, nil, false
			}
		}
		dp, choice[ni] = next, ch
	}
	if math.IsInf(dp[states-1], 1) {
		return nil, nil, false
	}
	// Walk back: the classes each node takes, then the node's devices.
	taken := make([]int, len(e.classes))
	var out []*alloc.Assignment
	st := states - 1
	for ni := len(nodes) - 1; ni >= 0; ni-- {
		x := int(choice[ni][st])
		st -= x
		if x == 0 {
			continue
		}
		n := nodes[ni]
		_, plan, ok := e.nodeCosts(n, unitVec[x])
		if !ok || plan == nil {
			return nil, nil, false
		}
		pool := make([][]int, len(e.types)) // devices per type on n
		for _, o := range plan {
			for i, d := range o.devs {
				pool[o.typ[i]] = append(pool[o.typ[i]], d)
			}
		}
		for k, cl := range e.classes {
			for j := 0; j < x/cstride[k]%(counts[k]+1); j++ {
				c := cl.claims[taken[k]]
				taken[k]++
				a := &alloc.Assignment{Claim: c, Node: n}
				for ri, r := range c.Requests {
					t := e.typeIndex[intsKey(r.Alternatives[0].Candidates)]
					for q := 0; q < r.Alternatives[0].Count; q++ {
						if len(pool[t]) == 0 {
							return nil, nil, false
						}
						a.Picks = append(a.Picks, alloc.Pick{Req: ri, Alt: 0, Dev: pool[t][0]})
						pool[t] = pool[t][1:]
					}
				}
				out = append(out, a)
			}
		}
	}
	// Check the placement on a fresh state: the DP's bookkeeping must
	// agree with the state's own rules, or the batch goes to local search.
	s := model.NewState(e.m.p)
	for _, a := range out {
		for _, pk := range a.Picks {
			if !alloc.FitsPick(s, a.Claim, pk) {
				return nil, nil, false
			}
			alloc.TakePick(s, a.Claim, pk)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Claim.Index < out[j].Claim.Index })
	return out, s, true
}
