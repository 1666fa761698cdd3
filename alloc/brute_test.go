package alloc

import (
	"math"

	"github.com/drasat/drasat/model"
)

// option is one complete way to allocate a claim.
type option struct {
	node  int
	picks []Pick
}

// allOptions enumerates every allocation of c on the initial state,
// exhaustively (no search budget).
func allOptions(p *model.Problem, c *model.Claim) []option {
	if c.Err != nil {
		return nil
	}
	var out []option
	for _, n := range claimNodes(p, c) {
		g := newPlacer(model.NewState(p), c, n, math.MaxInt)
		g.each = func(picks []Pick) { out = append(out, option{n, append([]Pick(nil), picks...)}) }
		g.request(0)
	}
	return out
}

// bruteForce returns the best admitted weight over all combinations.
type bruteForce struct {
	p    *model.Problem
	opts [][]option
}

func newBruteForce(p *model.Problem) *bruteForce {
	b := &bruteForce{p: p}
	for _, c := range p.Claims {
		b.opts = append(b.opts, allOptions(p, c))
	}
	return b
}

// tryTake takes an option's devices if they all fit; it returns an undo.
func tryTake(s *model.State, c *model.Claim, o option) (func(), bool) {
	var taken []Pick
	undo := func() {
		for i := len(taken) - 1; i >= 0; i-- {
			ReleasePick(s, c, taken[i])
		}
	}
	for _, pk := range o.picks {
		if !FitsPick(s, c, pk) {
			undo()
			return nil, false
		}
		TakePick(s, c, pk)
		taken = append(taken, pk)
	}
	return undo, true
}

// best maximises admitted weight.
func (b *bruteForce) best() int64 {
	s := model.NewState(b.p)
	var rec func(i int) int64
	rec = func(i int) int64 {
		if i == len(b.p.Claims) {
			return 0
		}
		c := b.p.Claims[i]
		v := rec(i + 1)
		for _, o := range b.opts[i] {
			if undo, ok := tryTake(s, c, o); ok {
				v = max(v, c.Weight+rec(i+1))
				undo()
			}
		}
		return v
	}
	return rec(0)
}

// feasible tells whether all claims in set can be allocated together.
func (b *bruteForce) feasible(set []int) bool {
	s := model.NewState(b.p)
	var rec func(k int) bool
	rec = func(k int) bool {
		if k == len(set) {
			return true
		}
		i := set[k]
		for _, o := range b.opts[i] {
			if undo, ok := tryTake(s, b.p.Claims[i], o); ok {
				found := rec(k + 1)
				undo()
				if found {
					return true
				}
			}
		}
		return false
	}
	return rec(0)
}

// ordered admits claims in input order iff they fit with the ones before.
func (b *bruteForce) ordered() []int {
	var admitted []int
	for i := range b.p.Claims {
		if b.feasible(append(append([]int(nil), admitted...), i)) {
			admitted = append(admitted, i)
		}
	}
	return admitted
}
