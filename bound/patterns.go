package bound

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

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

// item is what one claim of a class needs from one bin: the devices of
// one of its ways (alts). A claim held to one bin with firstAvailable
// requests has a way per choice of alternatives (one 3g, or two 1g, or
// one 2g); other items have one way.
type item struct {
	class int
	mult  float64 // items per claim
	alts  [][]itemReq
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
				for _, v := range con.Values.At(d) {
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
		// Per request: its merged need (the fewest devices of any
		// alternative, from any alternative's kinds), and its
		// alternatives' own needs; nil for a request that needs no
		// device (admin access, shares).
		var reqs []itemReq
		var ways [][]itemReq
		served := true
		for _, alts := range k.reqs {
			cnt, free := math.Inf(1), false
			kinds := map[int]bool{}
			var own []itemReq
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
				own = append(own, itemReq{cnt: int(a.cnt), kinds: sortedKinds(a.kinds)})
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
			ways = append(ways, own)
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
			for _, way := range it.alts {
				for _, rq := range way {
					for _, kd := range rq.kinds {
						if !seen[kd] {
							seen[kd] = true
							ps.byKind[kd] = append(ps.byKind[kd], i)
						}
					}
				}
			}
		}
		if r.local(k) {
			add(item{class: ki, mult: 1, alts: itemWays(reqs, ways)})
			continue
		}
		for _, rq := range reqs {
			add(item{class: ki, mult: float64(rq.cnt), alts: [][]itemReq{{{cnt: 1, kinds: rq.kinds}}}})
		}
	}
	return ps
}

// maxItemWays caps the ways of one item (the product of its requests'
// alternatives); above it the item takes the merged need of each request,
// which relaxes it (any way holds the merged need) and so stays sound.
const maxItemWays = 16

// itemWays are the ways of a claim held to one bin: one alternative of
// each request, every combination (requests with a single alternative
// have just it). merged is each request's merged need, used when there
// is one way only or too many.
func itemWays(merged []itemReq, own [][]itemReq) [][]itemReq {
	n := 1
	for _, alts := range own {
		n *= len(alts)
	}
	if n == 1 || n > maxItemWays {
		return [][]itemReq{merged}
	}
	out := [][]itemReq{nil}
	for _, alts := range own {
		var next [][]itemReq
		for _, way := range out {
			for _, a := range alts {
				next = append(next, append(append([]itemReq(nil), way...), a))
			}
		}
		out = next
	}
	return out
}

func sortedKinds(kinds []int) []int {
	out := slices.Clone(kinds)
	slices.Sort(out)
	return slices.Compact(out)
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

// takeAny is takeEach over the ways of an item shape: every way of every
// alternative, until emit returns false.
func takeAny(ways [][]itemReq, v []kc, emit func(after []kc, usedK0 bool) bool) bool {
	for _, reqs := range ways {
		if !takeEach(reqs, v, -1, false, emit) {
			return false
		}
	}
	return true
}
