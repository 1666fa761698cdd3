package bound

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drasat/drasat/model"
)

// The claim-pattern relaxation keeps what the device-kind relaxation
// forgets about claims that must stay on one bin: a claim whose
// matchAttribute (over all its requests) has a value only within single
// bins — matchAttribute parentUUID on MIG devices — is one item that needs
// all its devices from one bin's layout. Other claims are split into one
// single-device item per device they need, as before. Every bin takes a
// pattern: a set of items packed into one of its layouts. With one
// multiplier λ per item, for every λ ≥ 0
//
//	L(λ) = Σ_class n·max(0, w − Σ_item mult·λ) + Σ_type m·max_pattern Σ_item λ
//
// bounds the admitted weight (an allocation puts on each bin items that fit
// one of its layouts). Starting from the device-kind prices (an item's λ
// the cheapest devices it needs) L is at most the device-kind bound, and
// the descent lowers it further: on MIG batches with many claims held to
// one GPU this proves optima that the device-kind bound misses by a claim.
//
// Pricing a bin type is the best packing of items into one of its maximal
// kind vectors: a recursion over multisets of kinds (the lowest kind's
// device is either left empty or used by some item), memoised per descent
// step.

// item is what one claim of a class needs from one bin.
type item struct {
	class int
	mult  float64 // items per claim
	reqs  []itemReq
}

type itemReq struct {
	cnt   int
	kinds []int // sorted
}

type patterns struct {
	items      []item
	byKind     map[int][]int // kind -> items that can use it
	classItems [][]int       // per class: its items; nil for a class never served
	served     []bool
}

// local tells whether every claim of k keeps all its devices on one bin.
func (r *Relaxation) local(k *class) bool {
	devices := 0
	for _, alts := range k.reqs {
		least := math.Inf(1)
		for _, a := range alts {
			least = math.Min(least, a.cnt)
		}
		devices += int(least)
	}
	if devices <= 1 {
		return true
	}
	c := k.rep
	for _, con := range c.Constraints {
		if con.Kind != model.MatchAttribute {
			continue
		}
		// Derived values differ per alternative: only the devices' own
		// values are looked at here, so such a constraint proves nothing.
		covers := true
		for _, req := range c.Requests {
			for _, a := range req.Alternatives {
				_, derived := a.Derived[con.Attribute]
				covers = covers && con.Applies(req, a) && !derived
			}
		}
		if !covers {
			continue
		}
		// Every value (a list-type attribute has several) on one bin only:
		// devices sharing a value then share the bin.
		binOfValue := map[string]int{}
		ok := true
		for _, cands := range k.cands {
			for _, d := range cands {
				for _, v := range con.Values[d] {
					if b, seen := binOfValue[v]; seen && b != r.binOf[d] {
						ok = false
					}
					binOfValue[v] = r.binOf[d]
				}
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (r *Relaxation) patternItems() *patterns {
	ps := &patterns{byKind: map[int][]int{}, classItems: make([][]int, len(r.classes)), served: make([]bool, len(r.classes))}
	for ki, k := range r.classes {
		var reqs []itemReq
		served := true
		for _, alts := range k.reqs {
			cnt, free := math.Inf(1), false
			kinds := map[int]bool{}
			for _, a := range alts {
				// Shares of shared devices are not items of this
				// relaxation: relaxing them to free keeps it sound.
				if a.free || len(a.shares) > 0 {
					free = true
					break
				}
				if a.kinds == nil {
					continue
				}
				cnt = math.Min(cnt, a.cnt)
				for _, kd := range a.kinds {
					kinds[kd] = true
				}
			}
			if free {
				continue // admin access occupies no device
			}
			if len(kinds) == 0 {
				served = false
				break
			}
			req := itemReq{cnt: int(cnt)}
			for kd := range kinds {
				req.kinds = append(req.kinds, kd)
			}
			sort.Ints(req.kinds)
			reqs = append(reqs, req)
		}
		ps.served[ki] = served
		if !served || len(reqs) == 0 {
			continue
		}
		add := func(it item) {
			i := len(ps.items)
			ps.items = append(ps.items, it)
			ps.classItems[ki] = append(ps.classItems[ki], i)
			seen := map[int]bool{}
			for _, rq := range it.reqs {
				for _, kd := range rq.kinds {
					if !seen[kd] {
						seen[kd] = true
						ps.byKind[kd] = append(ps.byKind[kd], i)
					}
				}
			}
		}
		if r.local(k) {
			add(item{class: ki, mult: 1, reqs: reqs})
			continue
		}
		for _, rq := range reqs {
			add(item{class: ki, mult: float64(rq.cnt), reqs: []itemReq{{cnt: 1, kinds: rq.kinds}}})
		}
	}
	return ps
}

// kc is a count of devices of one kind; a multiset of kinds is a slice of
// them sorted by kind, without zero counts.
type kc struct{ kind, n int }

func keyOf(v []kc) string {
	var sb strings.Builder
	for _, x := range v {
		sb.WriteString(strconv.Itoa(x.kind))
		sb.WriteByte(':')
		sb.WriteString(strconv.Itoa(x.n))
		sb.WriteByte(',')
	}
	return sb.String()
}

// take removes n devices of kind from v (a copy).
func take(v []kc, kind, n int) []kc {
	out := make([]kc, 0, len(v))
	for _, x := range v {
		if x.kind == kind {
			if x.n -= n; x.n == 0 {
				continue
			}
		}
		out = append(out, x)
	}
	return out
}

type packEntry struct {
	val  float64
	item int  // -1: the lowest kind's device is left empty
	rest []kc // what is left after the choice
}

// packer finds best packings at one λ.
type packer struct {
	ps     *patterns
	lambda []float64
	memo   map[string]packEntry
}

// best is the most λ a packing of items into v is worth.
func (pk *packer) best(v []kc) float64 {
	if len(v) == 0 {
		return 0
	}
	key := keyOf(v)
	if e, ok := pk.memo[key]; ok {
		return e.val
	}
	k0 := v[0].kind
	rest := take(v, k0, 1)
	e := packEntry{val: pk.best(rest), item: -1, rest: rest}
	for _, i := range pk.ps.byKind[k0] {
		if pk.lambda[i] <= 0 {
			continue
		}
		pk.place(pk.ps.items[i].reqs, v, k0, false, func(after []kc) {
			if val := pk.lambda[i] + pk.best(after); val > e.val+1e-12 {
				e = packEntry{val: val, item: i, rest: after}
			}
		})
	}
	pk.memo[key] = e
	return e.val
}

// place enumerates the ways to take reqs' devices from v, using at least
// one device of kind k0, and calls emit with what is left.
func (pk *packer) place(reqs []itemReq, v []kc, k0 int, usedK0 bool, emit func([]kc)) {
	takeEach(reqs, v, k0, usedK0, func(after []kc, used bool) bool {
		if used {
			emit(after)
		}
		return true
	})
}

// takeEach enumerates the ways to take reqs' devices from v (each request
// its count, spread over its kinds), calling emit with what is left and
// whether a device of kind k0 was taken (or used already was); it stops
// when emit returns false, and then returns false.
func takeEach(reqs []itemReq, v []kc, k0 int, used bool, emit func(after []kc, usedK0 bool) bool) bool {
	if len(reqs) == 0 {
		return emit(v, used)
	}
	rq := reqs[0]
	var choose func(j, left int, v []kc, used bool) bool
	choose = func(j, left int, v []kc, used bool) bool {
		if left == 0 {
			return takeEach(reqs[1:], v, k0, used, emit)
		}
		if j == len(rq.kinds) {
			return true
		}
		kd := rq.kinds[j]
		have := 0
		for _, x := range v {
			if x.kind == kd {
				have = x.n
			}
		}
		for t := min(have, left); t >= 0; t-- {
			next := v
			if t > 0 {
				next = take(v, kd, t)
			}
			if !choose(j+1, left-t, next, used || (t > 0 && kd == k0)) {
				return false
			}
		}
		return true
	}
	return choose(0, rq.cnt, v, used)
}

// counts adds the items of v's best packing (best must have run on v).
func (pk *packer) counts(v []kc, m float64, g []float64) {
	for len(v) > 0 {
		e := pk.memo[keyOf(v)]
		if e.item >= 0 {
			g[e.item] += m
		}
		v = e.rest
	}
}

// PatternResult is the claim-pattern descent's outcome.
type PatternResult struct {
	// Bound is a proven upper bound on the admitted weight; math.MaxInt64
	// when the relaxation does not apply (a bin type without enumerated
	// layouts) or the descent never ran.
	Bound      int64
	Value      float64
	Iterations int
}

// SolvePatterns minimises the claim-pattern relaxation's L(λ) by
// subgradient descent from the best device-kind prices any Solve found,
// until the bound meets lower, the steps vanish or the deadline passes.
func (r *Relaxation) SolvePatterns(ctx context.Context, lower int64, deadline time.Time) PatternResult {
	res := PatternResult{Bound: math.MaxInt64, Value: math.Inf(1)}
	vecs := make([][][]kc, len(r.types))
	for t, bt := range r.types {
		lay := r.layoutsOf(bt)
		if lay == nil {
			return res
		}
		for _, v := range lay.vecs {
			var s []kc
			for _, x := range v {
				s = append(s, kc{x.kind, int(x.n)})
			}
			vecs[t] = append(vecs[t], s)
		}
	}
	ps := r.patternItems()
	lambda := make([]float64, len(ps.items))
	for i, it := range ps.items {
		k := r.classes[it.class]
		for _, rq := range it.reqs {
			cheapest := math.Inf(1)
			for _, kd := range rq.kinds {
				if r.best != nil {
					cheapest = math.Min(cheapest, r.best[kd])
				}
			}
			if math.IsInf(cheapest, 1) {
				cheapest = k.weight / float64(len(ps.classItems[it.class])) / it.mult / float64(len(it.reqs)*rq.cnt)
			}
			lambda[i] += float64(rq.cnt) * cheapest
		}
	}
	eval := func() (float64, []float64) {
		g := make([]float64, len(lambda))
		total := 0.0
		for ki, k := range r.classes {
			if !ps.served[ki] {
				continue
			}
			reduced := k.weight
			for _, i := range ps.classItems[ki] {
				reduced -= ps.items[i].mult * lambda[i]
			}
			if reduced <= 0 {
				continue
			}
			total += float64(k.n) * reduced
			for _, i := range ps.classItems[ki] {
				g[i] -= float64(k.n) * ps.items[i].mult
			}
		}
		pk := &packer{ps: ps, lambda: lambda, memo: map[string]packEntry{}}
		for t, bt := range r.types {
			bv, bvec := 0.0, []kc(nil)
			for _, v := range vecs[t] {
				if x := pk.best(v); bvec == nil || x > bv+1e-12 {
					bv, bvec = x, v
				}
			}
			total += float64(bt.m) * bv
			if bvec != nil {
				pk.counts(bvec, float64(bt.m), g)
			}
		}
		return total, g
	}
	theta, stale := 1.0, 0
	for it := 0; it < 3000; it++ {
		if ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		v, g := eval()
		res.Iterations++
		if v < res.Value-1e-9 {
			res.Value, stale = v, 0
		} else if stale++; stale >= 15 {
			theta, stale = theta/2, 0
		}
		if math.Floor(res.Value+1e-6) <= float64(lower) || theta < 1e-6 {
			break
		}
		norm := 0.0
		for _, x := range g {
			norm += x * x
		}
		if norm == 0 {
			break
		}
		step := theta * math.Max(v-float64(lower), 0.5) / norm
		for i := range lambda {
			lambda[i] = math.Max(0, lambda[i]-step*g[i])
		}
	}
	if !math.IsInf(res.Value, 1) {
		res.Bound = int64(math.Floor(res.Value + 1e-6))
	}
	return res
}
