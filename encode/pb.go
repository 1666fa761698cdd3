package encode

import (
	"errors"
	"math"
	"sort"

	"github.com/go-air/gini/logic"
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/model"
)

// maxReplicated bounds the sorting network used for a weighted sum whose
// decision diagram is too large: weights are expanded into copies of their
// literal.
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

// atMost adds Σ w_i·lits_i ≤ k exactly (weights from 0 to
// model.MaxCounterUnits; sums saturate above that, never wrap around).
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
			sum = model.SumUnits(sum, w[i])
		}
	}
	if sum <= k {
		return nil
	}
	if len(ls) < 2 {
		// k < 0: every literal with a weight is already forced false.
		return nil
	}
	sorted := append([]int64(nil), ws...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	if model.SumUnits(sorted[0], sorted[1]) > k {
		m.atMostOne(ls)
		return nil
	}
	g := ws[0]
	uniform := true
	for _, x := range ws {
		g = gcd(g, x)
		uniform = uniform && x == ws[0]
	}
	k /= g
	if uniform {
		cs := logic.NewCardSort(ls, m.C)
		m.clause(cs.Leq(int(k)))
		return nil
	}
	scaled := make([]int64, len(ws))
	for i, x := range ws {
		scaled[i] = x / g
	}
	if root, ok := m.pbBDD(ls, scaled, k); ok {
		m.clause(root)
		return nil
	}
	var rep []z.Lit
	for i, l := range ls {
		n := scaled[i]
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

// maxBDDNodes bounds the decision diagram of one weighted sum.
const maxBDDNodes = 100_000

// pbBDD encodes Σ w_i·lits_i ≤ k as a reduced ordered decision diagram
// over the literals, heaviest first (Eén and Sörensson, "Translating
// pseudo-boolean constraints into SAT", 2006), merging nodes whose
// remaining budgets behave alike by keeping, per level, the interval of
// budgets each node stands for (Abío et al., "A new look at BDDs for
// pseudo-boolean constraints", 2012). Unit propagation on it is complete
// (it infers every literal the constraint forces), and its size depends on
// the distinct partial sums, not on the size of the weights: the 98
// multiprocessors of a GPU shared by halves (49) and MPS quarters (24) need
// a few dozen nodes, where expanding weights into copies of their literal
// fed a sorting network of 500 inputs. It returns false when the diagram
// would exceed maxBDDNodes.
func (m *Model) pbBDD(lits []z.Lit, w []int64, k int64) (z.Lit, bool) {
	order := make([]int, len(lits))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return w[order[a]] > w[order[b]] })
	n := len(order)
	rest := make([]int64, n+1) // Σ of the weights from level i on
	for i := n - 1; i >= 0; i-- {
		rest[i] = model.SumUnits(rest[i+1], w[order[i]])
	}
	type entry struct {
		lo, hi int64 // budgets this node stands for
		node   z.Lit
	}
	memo := make([][]entry, n)
	nodes := 0
	const inf = math.MaxInt64 // above every budget: k ≤ model.MaxCounterUnits
	// rec returns the node for "Σ from level i on ≤ budget" and the
	// interval of budgets for which that node is the answer.
	var rec func(i int, budget int64) (z.Lit, int64, int64, bool)
	rec = func(i int, budget int64) (z.Lit, int64, int64, bool) {
		if budget < 0 {
			return m.C.F, -inf, -1, true
		}
		if rest[i] <= budget {
			return m.C.T, rest[i], inf, true
		}
		for _, e := range memo[i] {
			if e.lo <= budget && budget <= e.hi {
				return e.node, e.lo, e.hi, true
			}
		}
		if nodes++; nodes > maxBDDNodes {
			return z.LitNull, 0, 0, false
		}
		wi := w[order[i]]
		hi, hlo, hhi, ok := rec(i+1, budget-wi)
		if !ok {
			return z.LitNull, 0, 0, false
		}
		lo, llo, lhi, ok := rec(i+1, budget)
		if !ok {
			return z.LitNull, 0, 0, false
		}
		e := entry{lo: max(hlo+wi, llo), hi: min(model.SumUnits(hhi, wi), lhi)}
		// The diagram is monotone (taking x_i only lowers the budget), so
		// "if x_i then hi else lo" is lo ∧ (¬x_i ∨ hi).
		e.node = lo
		if hi != lo {
			e.node = m.C.And(lo, m.C.Or(lits[order[i]].Not(), hi))
		}
		memo[i] = append(memo[i], e)
		return e.node, e.lo, e.hi, true
	}
	root, _, _, ok := rec(0, k)
	return root, ok
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
