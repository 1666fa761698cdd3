package bound

import (
	"math/bits"
	"sort"
	"strconv"
	"strings"

	"github.com/drasat/drasat/model"
)

// Limits of the layout enumeration of one bin type. Partitionable GPUs have
// a few dozen maximal layouts; a bin beyond these limits (a large pool
// whose devices hardly conflict) is priced by Value's search instead.
const (
	layoutSearchBudget = 200_000
	maxLayouts         = 4096
)

// layouts are the maximal feasible device sets of a bin type at the batch's
// start, so pricing a bin is a scan instead of a search: feasibility is
// downward closed (counters, compatibility groups and compatibleOnlyWith
// only forbid adding devices), so with prices ≥ 0 some maximal set is a
// best layout, and on a bin where the set U is already taken the best
// completion is a best maximal set containing U, minus U.
type layouts struct {
	sets []bitset  // maximal sets, as positions in the representative bin
	vecs []kindVec // their distinct kind counts, for pricing the whole bin
	kind []int     // position -> device kind
}

type bitset []uint64

func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// contains tells whether u ⊆ b.
func (b bitset) contains(u bitset) bool {
	for i, w := range u {
		if w&^b[i] != 0 {
			return false
		}
	}
	return true
}

type kindCount struct {
	kind int
	n    float64
}

type kindVec []kindCount

func (v kindVec) dot(price []float64) float64 {
	t := 0.0
	for _, kc := range v {
		t += kc.n * price[kc.kind]
	}
	return t
}

// enumerate lists the maximal layouts of bin b at state s, or returns nil
// when the bin has more than the limits allow. s is left as it was.
func (r *Relaxation) enumerate(b *Bin, s *model.State) *layouts {
	n := len(b.Devices)
	l := &layouts{kind: make([]int, n)}
	for i, d := range b.Devices {
		l.kind[i] = r.kindOf[d]
	}
	words := (n + 63) / 64
	cur := make(bitset, words)
	budget := layoutSearchBudget
	var dfs func(i int) bool
	dfs = func(i int) bool {
		if budget--; budget < 0 || len(l.sets) > maxLayouts {
			return false
		}
		if i == n {
			// Maximal: every device left out no longer fits.
			for j, d := range b.Devices {
				if !cur.has(j) && s.Fits(d, true) {
					return true
				}
			}
			l.sets = append(l.sets, append(bitset(nil), cur...))
			return true
		}
		d := b.Devices[i]
		if s.Fits(d, true) {
			s.Take(d, true)
			cur[i/64] |= 1 << (i % 64)
			ok := dfs(i + 1)
			cur[i/64] &^= 1 << (i % 64)
			s.Release(d, true)
			if !ok {
				return false
			}
		}
		return dfs(i + 1)
	}
	if !dfs(0) {
		return nil
	}
	l.vecs = distinctVecs(l)
	return l
}

// distinctVecs are the kind counts of l's sets, each once, without those
// another one covers (no more of any kind): only these can be the best.
func distinctVecs(l *layouts) []kindVec {
	seen := map[string]bool{}
	var vecs []kindVec
	for _, set := range l.sets {
		counts := map[int]float64{}
		for w, word := range set {
			for word != 0 {
				i := w*64 + bits.TrailingZeros64(word)
				word &= word - 1
				counts[l.kind[i]]++
			}
		}
		v := make(kindVec, 0, len(counts))
		for k, c := range counts {
			v = append(v, kindCount{k, c})
		}
		sort.Slice(v, func(i, j int) bool { return v[i].kind < v[j].kind })
		var key strings.Builder
		for _, kc := range v {
			key.WriteString(strconv.Itoa(kc.kind) + ":" + strconv.Itoa(int(kc.n)) + ",")
		}
		if !seen[key.String()] {
			seen[key.String()] = true
			vecs = append(vecs, v)
		}
	}
	var out []kindVec
	for i, v := range vecs {
		dominated := false
		for j, w := range vecs {
			if i != j && covers(w, v) { // distinct, so w has more of some kind
				dominated = true
				break
			}
		}
		if !dominated {
			out = append(out, v)
		}
	}
	return out
}

// covers tells whether w has at least as many of every kind as v.
func covers(w, v kindVec) bool {
	j := 0
	for _, kc := range v {
		for j < len(w) && w[j].kind < kc.kind {
			j++
		}
		if j == len(w) || w[j].kind != kc.kind || w[j].n < kc.n {
			return false
		}
	}
	return true
}

// best is the highest-priced vector at π and its value.
func (l *layouts) best(price []float64) (float64, kindVec) {
	bv, bvec := 0.0, kindVec(nil)
	for _, v := range l.vecs {
		if x := v.dot(price); x > bv+1e-12 {
			bv, bvec = x, v
		}
	}
	return bv, bvec
}

// completion is the most the devices outside used can add at π, over the
// maximal sets containing used, and the set that adds it (nil when no set
// contains used).
func (l *layouts) completion(used bitset, price []float64) (float64, bitset) {
	best, bestSet := 0.0, bitset(nil)
	for _, set := range l.sets {
		if !set.contains(used) {
			continue
		}
		v := 0.0
		for w, word := range set {
			word &^= used[w]
			for word != 0 {
				i := w*64 + bits.TrailingZeros64(word)
				word &= word - 1
				v += price[l.kind[i]]
			}
		}
		if bestSet == nil || v > best {
			best, bestSet = v, set
		}
	}
	return best, bestSet
}

// ValueAt is Value for a bin whose state differs from the batch's start
// only by devices taken in s: with the bin type's layouts it is a scan over the
// maximal sets that contain the taken devices, checked against s (which
// also sees counters taken by admin access); otherwise, or when that check
// fails, it is Value's search.
func (r *Relaxation) ValueAt(b *Bin, s *model.State, price []float64) float64 {
	lay := r.layoutsOf(r.types[b.Type])
	if lay == nil {
		v, _ := r.Value(b, s, price)
		return v
	}
	used := make(bitset, len(lay.sets[0]))
	for i, d := range b.Devices {
		if s.Used(d) && !r.p.Devices[d].InUse {
			used[i/64] |= 1 << (i % 64)
		}
	}
	v, set := lay.completion(used, price)
	if set == nil || !r.fitsRest(b, s, set, used) {
		v, _ = r.Value(b, s, price)
	}
	return v
}

// fitsRest tells whether the devices of set outside used can all be taken
// in s.
func (r *Relaxation) fitsRest(b *Bin, s *model.State, set, used bitset) bool {
	var taken []int
	ok := true
	for i, d := range b.Devices {
		if !set.has(i) || used.has(i) {
			continue
		}
		if !s.Fits(d, true) {
			ok = false
			break
		}
		s.Take(d, true)
		taken = append(taken, d)
	}
	for k := len(taken) - 1; k >= 0; k-- {
		s.Release(taken[k], true)
	}
	return ok
}

// Enumerated tells whether every bin type is priced from enumerated
// layouts: a descent step is then a scan, cheap enough to repeat the
// descent; otherwise some bin is priced by search at every step.
func (r *Relaxation) Enumerated() bool {
	for _, t := range r.types {
		if r.layoutsOf(t) == nil {
			return false
		}
	}
	return true
}
