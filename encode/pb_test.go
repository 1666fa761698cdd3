package encode

import (
	"context"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-air/gini/logic"
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// atMost must accept exactly the assignments whose weighted sum is within
// the limit, whichever encoding it picks (cardinality network for equal
// weights, decision diagram otherwise, copies of literals when the diagram
// is too large): checked on every assignment of small random sums.
func TestAtMostAcceptsExactlyTheSumsWithinLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	for round := 0; round < 150; round++ {
		n := 1 + rng.IntN(7)
		w := make([]int64, n)
		total := int64(0)
		for i := range w {
			switch round % 3 {
			case 0: // counter-like: a few distinct sizes
				w[i] = []int64{14, 28, 42, 49, 24, 98}[rng.IntN(6)]
			case 1: // equal weights: a cardinality constraint
				w[i] = 3
			default:
				w[i] = rng.Int64N(40)
			}
			total += w[i]
		}
		k := rng.Int64N(total + 2)
		if round%5 == 4 {
			// Near 2^63: sums of two or three weights overflow an int64.
			for i := range w {
				w[i] = model.MaxCounterUnits/2 - rng.Int64N(1<<61)
			}
			k = model.MaxCounterUnits - rng.Int64N(1<<62)
		}
		m := &Model{C: logic.NewC()}
		lits := make([]z.Lit, n)
		for i := range lits {
			lits[i] = m.C.Lit()
		}
		if err := m.atMost(lits, w, k); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		s := solver.New(m.C, m.Clauses)
		for mask := 0; mask < 1<<n; mask++ {
			sum := new(big.Int) // exact: int64 sums of these weights overflow
			assume := make([]z.Lit, n)
			for i := range lits {
				assume[i] = lits[i].Not()
				if mask&(1<<i) != 0 {
					sum.Add(sum, big.NewInt(w[i]))
					assume[i] = lits[i]
				}
			}
			got := s.Solve(context.Background(), time.Now().Add(time.Minute), assume...)
			if want := sum.Cmp(big.NewInt(k)) <= 0; (got == solver.Sat) != want {
				t.Fatalf("round %d: weights %v ≤ %d, assignment %b (sum %d): solver says %v", round, w, k, mask, sum, got)
			}
		}
	}
}

// The decision diagram stays small where copies of literals do not: a GPU's
// 98 multiprocessors shared by halves, quarters and MIG slices.
func TestDecisionDiagramIsCompact(t *testing.T) {
	m := &Model{C: logic.NewC()}
	var w []int64
	for _, x := range []struct {
		n  int
		sm int64
	}{{1, 98}, {7, 14}, {3, 28}, {2, 42}, {2, 49}, {4, 24}} {
		for i := 0; i < x.n; i++ {
			w = append(w, x.sm)
		}
	}
	lits := make([]z.Lit, len(w))
	for i := range lits {
		lits[i] = m.C.Lit()
	}
	before := m.C.Len()
	if _, ok := m.pbBDD(lits, w, 98); !ok {
		t.Fatal("decision diagram over its budget")
	}
	if gates := m.C.Len() - before; gates > 2000 {
		t.Errorf("decision diagram of a GPU's multiprocessors has %d gates, want a compact one", gates)
	}
}
