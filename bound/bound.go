// Package bound proves upper bounds on how much claim weight a batch can
// admit, and prices devices for the heuristics that look for allocations.
//
// The relaxation is the configuration ("pattern") model (docs/encoding.md,
// facts 3): every bin — a physical device, i.e. the counter sets tied
// together by the devices that consume them — takes one feasible layout, and
// claims are served by devices of the kinds their requests accept, without
// the node and constraint coupling between one claim's devices. Identical
// claims form classes, identical bins form types, devices with the same
// candidacy form kinds. The relaxation is solved in its Lagrangian dual with
// one price per device kind:
//
//	L(π) = Σ_class n·max(0, w − cost(π)) + Σ_type m·max_layout Σ_dev π(kind)
//
// L(π) ≥ optimum for every π ≥ 0, so the bound is sound at every iteration;
// subgradient descent drives it down to the LP value of the configuration
// model, which an exact solver measured within one claim of the optimum.
package bound

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/drasat/drasat/model"
)

// Relaxation is the configuration relaxation of one set of pending claims.
// Solve is for one goroutine at a time; ValueAt, Value (with a state of the
// caller's), ClaimCost and BinOf may be called concurrently.
type Relaxation struct {
	p *model.Problem
	// Kinds is the number of device kinds; prices are indexed by kind,
	// then come the prices of the shared devices' capacities (Dims).
	Kinds   int
	Dims    int
	kindOf  map[int]int // candidate device -> kind
	classes []*class
	Bins    []*Bin
	binOf   []int // device -> bin, -1 for devices no claim here can use
	types   []*binType
	state   *model.State // scratch state for pricing, at the batch's start
}

// class is a group of interchangeable claims.
type class struct {
	key    string
	weight float64
	n      int
	reqs   [][]altCost // per request: its alternatives
	rep    *model.Claim
	cands  [][]int // per request: the candidates of all its alternatives
}

// altCost is what one alternative of a request needs: cnt devices of one of
// kinds, or nothing when it is admin access (which occupies no device).
type altCost struct {
	cnt   float64
	kinds []int
	free  bool
	// shares are the shared (allowMultipleAllocations) candidates: a share
	// of one costs the prices of the capacities it consumes.
	shares []shareCost
}

// shareCost is what one share of a shared device consumes: a fraction of
// each of its capacities (amount / capacity left), at price index dim.
type shareCost struct {
	dim  []int
	frac []float64
}

// Bin is a group of counter sets and the candidate devices that consume
// them; devices consuming no counter set are bins of their own.
type Bin struct {
	Index   int   // in Relaxation.Bins
	Devices []int // candidate devices, in device order
	Type    int
	pos     []int // device -> position in its bin, shared by all bins
}

type binType struct {
	rep *Bin
	m   int
	// lay are the type's layouts, enumerated on first use; nil when there
	// are too many, and the type is priced by search.
	lay  *layouts
	once sync.Once
}

// layoutsOf enumerates t's layouts once. Best-fit tries run in parallel
// over one Relaxation, so the enumeration has a state of its own.
func (r *Relaxation) layoutsOf(t *binType) *layouts {
	t.once.Do(func() { t.lay = r.enumerate(t.rep, model.NewState(r.p)) })
	return t.lay
}

// New builds the relaxation of claims (one component) of p. It stops with
// the context's cause when ctx ends: on a large batch, grouping claims and
// devices into classes and kinds takes seconds.
func New(ctx context.Context, p *model.Problem, claims []*model.Claim, weight func(*model.Claim) int64) (*Relaxation, error) {
	r := &Relaxation{p: p, kindOf: map[int]int{}, binOf: make([]int, len(p.Devices)), state: model.NewState(p)}
	for i := range r.binOf {
		r.binOf[i] = -1
	}
	// Classes, and the alternatives each device is a candidate of.
	byKey := map[string]*class{}
	candidacy := map[int][]string{}
	type altRef struct {
		cls        *class
		ri, ai     int
		candidates []int
		shared     []int
		alt        *model.Alternative
	}
	// dimOf is the first capacity price (after the kinds) of each shared
	// candidate device.
	dimOf := map[int]int{}
	var alts []altRef
	for i, c := range claims {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, stopped(ctx)
		}
		if c.Err != nil {
			continue
		}
		if k := byKey[c.ClassKey()]; k != nil {
			k.n++
			continue
		}
		k := &class{key: c.ClassKey(), weight: float64(weight(c)), n: 1, rep: c}
		byKey[c.ClassKey()] = k
		r.classes = append(r.classes, k)
		for ri, req := range c.Requests {
			k.reqs = append(k.reqs, make([]altCost, len(req.Alternatives)))
			k.cands = append(k.cands, nil)
			for ai, a := range req.Alternatives {
				var cands, shared []int
				for _, d := range a.Candidates {
					dev := p.Devices[d]
					if !dev.Reachable() || c.FixedNode >= 0 && !dev.Reaches(c.FixedNode) {
						continue
					}
					// A shared device serves any number of claims within
					// its capacities: it is no bin item, its capacities
					// are priced instead (below).
					if dev.MultiAlloc {
						shared = append(shared, d)
						if _, ok := dimOf[d]; !ok {
							dimOf[d] = r.Dims
							r.Dims += len(dev.Capacity)
						}
						continue
					}
					cands = append(cands, d)
					k.cands[ri] = append(k.cands[ri], d)
					id := fmt.Sprintf("%d/%d/%d", len(r.classes)-1, ri, ai)
					candidacy[d] = append(candidacy[d], id)
				}
				alts = append(alts, altRef{k, ri, ai, cands, shared, a})
			}
		}
	}
	// Kinds: devices that serve the same alternatives are interchangeable.
	devs := make([]int, 0, len(candidacy))
	for d := range candidacy {
		devs = append(devs, d)
	}
	sort.Ints(devs)
	kindByKey := map[string]int{}
	for _, d := range devs {
		key := strings.Join(candidacy[d], ",")
		k, ok := kindByKey[key]
		if !ok {
			k = len(kindByKey)
			kindByKey[key] = k
		}
		r.kindOf[d] = k
	}
	r.Kinds = len(kindByKey)
	if ctx.Err() != nil {
		return nil, stopped(ctx)
	}
	for _, ar := range alts {
		// Admin access occupies no device (on a shared device it takes
		// capacity: free is a relaxation, still sound).
		ac := altCost{cnt: float64(ar.alt.Count), free: ar.alt.AdminAccess}
		if ar.alt.All {
			ac.cnt = 1 // at least one device: a relaxation of "all on the node"
		}
		if !ac.free {
			ac.shares, ac.free = r.shareCosts(ar.alt, ar.shared, dimOf)
		}
		seen := map[int]bool{}
		for _, d := range ar.candidates {
			if k := r.kindOf[d]; !seen[k] {
				seen[k] = true
				ac.kinds = append(ac.kinds, k)
			}
		}
		sort.Ints(ac.kinds)
		if n := len(ar.candidates) + len(ar.shared); n < int(ac.cnt) || n == 0 {
			ac.kinds, ac.shares = nil, nil // cannot be served
		}
		ar.cls.reqs[ar.ri][ar.ai] = ac
	}
	r.buildBins(devs)
	return r, nil
}

// stopped is the error of a build that ctx ended: the context's cause, as
// model's and alloc's builds report it.
func stopped(ctx context.Context) error {
	return fmt.Errorf("building the relaxation stopped: %w", context.Cause(ctx))
}

// shareCosts prices the shares alternative a may take of its shared
// candidates. The relaxation keeps, per capacity of a shared device, that
// the shares of all claims fit in what is left (a knapsack row priced in
// the dual); it drops that one request takes a device once and the
// counters a first share consumes, which only relaxes. A share that
// consumes nothing makes the alternative free.
func (r *Relaxation) shareCosts(a *model.Alternative, shared []int, dimOf map[int]int) ([]shareCost, bool) {
	var out []shareCost
	for _, d := range shared {
		dev := r.p.Devices[d]
		amounts := a.CapacityAmounts(d)
		sc := shareCost{}
		fits := true
		for j, dim := range dev.Capacity {
			var amt int64
			if amounts != nil {
				amt = amounts[j]
			}
			if amt <= 0 {
				continue
			}
			if dim.Free < amt {
				fits = false // never fits (not a candidate then, normally)
				break
			}
			sc.dim = append(sc.dim, dimOf[d]+j)
			sc.frac = append(sc.frac, float64(amt)/float64(dim.Free))
		}
		if !fits {
			continue
		}
		if len(sc.dim) == 0 {
			return nil, true
		}
		out = append(out, sc)
	}
	return out, false
}

// buildBins groups candidate devices that share a counter set or are tied by
// compatibleOnlyWith, and groups identical bins into types.
func (r *Relaxation) buildBins(devs []int) {
	// Devices first, then counter sets.
	sets := model.NewDisjointSets(len(r.p.Devices) + len(r.p.CounterSets))
	find, union := sets.Find, sets.Union
	setNode := func(s int) int { return len(r.p.Devices) + s }
	for _, d := range devs {
		for _, c := range r.p.Devices[d].Consumes {
			union(d, setNode(c.Set))
		}
		for _, o := range r.p.Devices[d].Incompatible {
			if _, ok := r.kindOf[o]; ok {
				union(d, o)
			}
		}
	}
	byRoot := map[int]*Bin{}
	pos := make([]int, len(r.p.Devices))
	for _, d := range devs {
		root := find(d)
		b := byRoot[root]
		if b == nil {
			b = &Bin{Index: len(r.Bins), pos: pos}
			byRoot[root] = b
			r.Bins = append(r.Bins, b)
		}
		b.pos[d] = len(b.Devices)
		b.Devices = append(b.Devices, d)
	}
	for i, b := range r.Bins {
		for _, d := range b.Devices {
			r.binOf[d] = i
		}
	}
	typeByKey := map[string]int{}
	for _, b := range r.Bins {
		key := r.signature(b)
		t, ok := typeByKey[key]
		if !ok {
			t = len(r.types)
			typeByKey[key] = t
			r.types = append(r.types, &binType{rep: b})
		}
		r.types[t].m++
		b.Type = t
	}
}

// signature is equal for bins that are the same up to renaming: the same
// device kinds consuming the same amounts from sets with the same free
// counters and groups, the same devices in use, the same exclusions.
func (r *Relaxation) signature(b *Bin) string {
	var sb strings.Builder
	setPos := map[int]int{}
	for _, d := range b.Devices {
		dev := r.p.Devices[d]
		fmt.Fprintf(&sb, "k%d u%t a%t", r.kindOf[d], dev.InUse, dev.All)
		for _, c := range dev.Consumes {
			pos, ok := setPos[c.Set]
			if !ok {
				pos = len(setPos)
				setPos[c.Set] = pos
				cs := r.p.CounterSets[c.Set]
				fmt.Fprintf(&sb, " S%v%v%q", cs.Counters, cs.Free, cs.ExistingGroups)
			}
			fmt.Fprintf(&sb, " c%d%v%q", pos, c.Amounts, c.Groups)
		}
		for _, o := range dev.Incompatible {
			if r.binOf[o] == b.Index {
				fmt.Fprintf(&sb, " x%d", b.pos[o])
			} else if r.p.Devices[o].InUse {
				sb.WriteString(" X")
			}
		}
		sb.WriteByte(';')
	}
	return sb.String()
}

// Position is d's place in b.Devices (d must be one of them).
func (b *Bin) Position(d int) int { return b.pos[d] }

// cost is the cheapest way to serve one claim of k at prices π, and for the
// subgradient the kinds (with counts) that way uses.
//
// Kinds are priced at price[kind], a share of a shared device at the prices
// of its capacities (price[r.Kinds+dim], per whole capacity left) times
// the fractions it consumes; use gets price indices with the amounts used.
func (k *class) cost(price []float64, kinds int, use func(index int, n float64)) float64 {
	total := 0.0
	for _, alts := range k.reqs {
		best, bestKind, bestCnt := math.Inf(1), -1, 0.0
		var bestShare *shareCost
		for _, a := range alts {
			if a.free {
				best, bestKind, bestShare = 0, -1, nil
				break
			}
			for _, kd := range a.kinds {
				if v := a.cnt * price[kd]; v < best {
					best, bestKind, bestCnt, bestShare = v, kd, a.cnt, nil
				}
			}
			for i := range a.shares {
				sh := &a.shares[i]
				v := 0.0
				for j, dim := range sh.dim {
					v += price[kinds+dim] * sh.frac[j]
				}
				if v *= a.cnt; v < best {
					best, bestKind, bestCnt, bestShare = v, -1, a.cnt, sh
				}
			}
		}
		if math.IsInf(best, 1) {
			return math.Inf(1) // some request can never be served
		}
		total += best
		switch {
		case use == nil:
		case bestKind >= 0:
			use(bestKind, bestCnt)
		case bestShare != nil:
			for j, dim := range bestShare.dim {
				use(kinds+dim, bestCnt*bestShare.frac[j])
			}
		}
	}
	return total
}

// BinOf returns the bin of a candidate device, or nil.
func (r *Relaxation) BinOf(d int) *Bin {
	if i := r.binOf[d]; i >= 0 {
		return r.Bins[i]
	}
	return nil
}

// ClaimCost is the cheapest way to serve claim c at prices π, +Inf when it
// cannot be served; claims whose cost exceeds their weight are not worth
// their devices in the relaxation's optimum.
func (r *Relaxation) ClaimCost(c *model.Claim, price []float64) float64 {
	for _, k := range r.classes {
		if k.key == c.ClassKey() {
			return k.cost(price, r.Kinds, nil)
		}
	}
	return math.Inf(1)
}
