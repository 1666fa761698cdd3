package encode

import (
	"errors"
	"sort"

	"github.com/go-air/gini/logic"
	"github.com/go-air/gini/z"
)

// maxReplicated bounds the sorting network used for a weighted sum: weights
// are expanded into copies of their literal, which is exact and propagates
// well for the small scaled weights counters have.
const maxReplicated = 4096

// ErrTooFine means a counter's scaled weights are too large to encode.
var ErrTooFine = errors.New("counter weights too large to encode exactly")

// atMostOne adds Σ lits ≤ 1: pairwise for few literals, else the sequential
// (ladder) encoding with one helper per literal.
func (m *Model) atMostOne(lits []z.Lit) {
	switch {
	case len(lits) <= 1:
	case len(lits) <= 6:
		for i := range lits {
			for j := i + 1; j < len(lits); j++ {
				m.clause(lits[i].Not(), lits[j].Not())
			}
		}
	default:
		prev := lits[0]
		for i := 1; i < len(lits); i++ {
			s := m.C.Lit()
			m.clause(prev.Not(), s)             // earlier true -> s
			m.clause(lits[i].Not(), s)          // this true -> s
			m.clause(prev.Not(), lits[i].Not()) // not both
			prev = s
		}
	}
}

// atMost adds Σ w_i·lits_i ≤ k exactly (weights ≥ 0).
func (m *Model) atMost(lits []z.Lit, w []int64, k int64) error {
	var ls []z.Lit
	var ws []int64
	var sum int64
	for i, l := range lits {
		switch {
		case w[i] == 0:
		case w[i] > k:
			m.clause(l.Not())
		default:
			ls = append(ls, l)
			ws = append(ws, w[i])
			sum += w[i]
		}
	}
	if sum <= k {
		return nil
	}
	sorted := append([]int64(nil), ws...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	if sorted[0]+sorted[1] > k {
		m.atMostOne(ls)
		return nil
	}
	g := ws[0]
	for _, x := range ws {
		g = gcd(g, x)
	}
	k /= g
	var rep []z.Lit
	for i, l := range ls {
		n := ws[i] / g
		if int64(len(rep))+n > maxReplicated {
			return ErrTooFine
		}
		for j := int64(0); j < n; j++ {
			rep = append(rep, l)
		}
	}
	cs := logic.NewCardSort(rep, m.C)
	m.clause(cs.Leq(int(k)))
	return nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
