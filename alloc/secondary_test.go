package alloc

import (
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// minTouched is the fewest fresh counter sets any allocation admitting at
// least weight val touches, by brute force.
func (b *bruteForce) minTouched(val int64) int {
	fresh := map[int]bool{}
	for i, cs := range b.p.CounterSets {
		fresh[i] = cs.Untouched()
	}
	s := model.NewState(b.p)
	uses := map[int]int{} // fresh set -> exclusive picks on it
	best := -1
	var rec func(i int, w int64, touched int)
	rec = func(i int, w int64, touched int) {
		if i == len(b.p.Claims) {
			if w >= val && (best < 0 || touched < best) {
				best = touched
			}
			return
		}
		rec(i+1, w, touched)
		c := b.p.Claims[i]
		for _, o := range b.opts[i] {
			undo, ok := tryTake(s, c, o)
			if !ok {
				continue
			}
			var sets []int
			t := touched
			for _, pk := range o.picks {
				if !exclusive(c, pk) {
					continue
				}
				for _, cc := range b.p.Devices[pk.Dev].Consumes {
					if fresh[cc.Set] {
						if uses[cc.Set] == 0 {
							t++
						}
						uses[cc.Set]++
						sets = append(sets, cc.Set)
					}
				}
			}
			rec(i+1, w+c.Weight, t)
			for _, set := range sets {
				uses[set]--
			}
			undo()
		}
	}
	rec(0, 0, 0)
	return best
}

// touchFloor never exceeds the fewest fresh counter sets an allocation of
// the optimal weight touches: a floor above it would end binpack's level at
// a packing that is not the tightest, and call it proven.
func TestTouchFloorIsALowerBound(t *testing.T) {
	weight := func(c *model.Claim) int64 { return c.Weight }
	tight := 0
	for seed := uint64(1); seed <= 150; seed++ {
		for _, compat := range []string{model.CompatKEP5963, model.CompatWildcard} {
			p := build(t, randomInstance(seed), compat)
			b := newBruteForce(p)
			val := b.best()
			least := b.minTouched(val)
			floor := touchFloor(p, p.Claims, val, weight)
			if floor > least {
				t.Fatalf("seed %d %s: touch floor %d above the fewest sets touched, %d", seed, compat, floor, least)
			}
			if floor == least && least > 0 {
				tight++
			}
		}
	}
	if tight == 0 {
		t.Fatal("the floor was never tight: it proves nothing")
	}
	t.Logf("floor tight (and non-zero) on %d of 300 instances", tight)
}

// A hint built from an allocation is satisfiable in the SAT model and
// yields an allocation of the same weight (it is how a best-fit optimum
// becomes the SAT model's starting point).
func TestHintReproducesAllocation(t *testing.T) {
	handedOut := 0
	for seed := uint64(1); seed <= 150; seed++ {
		// Copies of each claim make classes of identical claims; the
		// allocation is then moved onto the last claims of each class,
		// which the model's symmetry breaking would reject unless the
		// hint hands placements out in unit order.
		objs := randomInstance(seed)
		for _, c := range append([]*resourceapi.ResourceClaim(nil), objs.Claims...) {
			cp := c.DeepCopy()
			cp.Name += "-copy"
			objs.Claims = append(objs.Claims, cp)
		}
		p := build(t, objs, model.CompatKEP5963)
		as := firstFitInOrder(context.Background(), p, p.Claims, DefaultLimits.SearchSteps)
		byClass := map[string][]*model.Claim{}
		for _, c := range p.Claims {
			byClass[c.ClassKey()] = append(byClass[c.ClassKey()], c)
		}
		placed := map[string]int{}
		for _, a := range as {
			placed[a.Claim.ClassKey()]++
		}
		moved := map[string]int{}
		for _, a := range as {
			k := a.Claim.ClassKey()
			cls := byClass[k]
			to := cls[len(cls)-placed[k]+moved[k]]
			moved[k]++
			if to != a.Claim {
				handedOut++
			}
			a.Claim = to
		}
		m, err := encode.Encode(context.Background(), p, p.Claims, encode.Options{Symmetry: true})
		if err != nil {
			t.Fatal(err)
		}
		h, ok := hint(m, as)
		if !ok {
			t.Fatalf("seed %d: no hint for a greedy allocation", seed)
		}
		s := solver.New(m.C, m.Clauses)
		if res := s.Solve(context.Background(), time.Now().Add(time.Minute), h...); res != solver.Sat {
			t.Fatalf("seed %d: hint of a feasible allocation is %v", seed, res)
		}
		var want, got int64
		for _, a := range as {
			want += a.Claim.Weight
		}
		for _, a := range decode(p, m, s) {
			got += a.Claim.Weight
		}
		if got != want {
			t.Fatalf("seed %d: model under the hint admits weight %d, the allocation %d", seed, got, want)
		}
	}
	if handedOut == 0 {
		t.Fatal("no placement moved to another claim of its class: the hand-out is untested")
	}
}
