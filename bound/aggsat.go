package bound

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/go-air/gini/logic"
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// The in-house solver of the per-node aggregated model: its integer
// counts are small (a node has a few GPUs), so the model is encoded for
// gini exactly, and maximised by incremental calls under assumptions.
//
//   - every bin takes one of its type's maximal patterns: an order
//     encoding of the pattern index (o_j: "index ≥ j"), whose steps are
//     the pattern literals; identical bins of one node take nondecreasing
//     indexes (swapping them maps solutions onto solutions);
//   - a bin's supply of a shape is unary: u_l ("at least l items of the
//     shape") holds only if the chosen pattern has l of them;
//   - y(k,n), the claims of class k on node n, is unary too, capped by
//     what the node could supply at most;
//   - per shape and node, demand ≤ supply is one cardinality constraint
//     over the demand bits (repeated by multiplicity) and the negated
//     supply bits: Σ demand + Σ ¬supply ≤ |supply|;
//   - per class a sorting network counts Σ_n y(k,n), held to n_k, and the
//     objective sorts those counts (repeated by weight).
//
// The encoding is exact, so an unsatisfiable call proves the model has
// no solution of that weight: the bounds the solver reports are proofs,
// and those it did not prove are not reported.

// AggregateSolution is what the in-house solver of the per-node model found.
type AggregateSolution struct {
	// Values are the counts of a solution, named as in the LP
	// (BinGroup.Var, NodeClass.Var); nil when none was found.
	Values map[string]float64
	// Objective is the solution's weight.
	Objective int64
	// Bound is a proven upper bound on the model's optimum, from an
	// unsatisfiable call; math.MaxInt64 when none was proven.
	Bound int64
	// Vars and Clauses are the size of the SAT encoding; Calls the solver
	// calls made.
	Vars, Clauses, Calls int
}

// Optimal tells whether the solution is proven optimal for the model.
func (s AggregateSolution) Optimal() bool { return s.Values != nil && s.Objective >= s.Bound }

// Solve maximises the model within deadline: it looks for a solution of
// weight upper (a bound the caller knows, e.g. the relaxation's) first,
// and when that is not decided in half the time, for ever more weight
// than lower (a weight the caller already has). Every weight it proves
// out of reach lowers Bound. The claims' weights and multiplicities must
// be integers (max-claims weights are).
func (na *NodeAggregate) Solve(ctx context.Context, deadline time.Time, lower, upper int64) (AggregateSolution, error) {
	res := AggregateSolution{Bound: math.MaxInt64}
	e, err := na.encodeSAT(true)
	if err != nil {
		return res, err
	}
	s := solver.New(e.c, e.clauses)
	res.Vars, res.Clauses = s.Vars, s.Clauses
	total := int64(e.obj.N())
	upper = min(upper, total)
	found := func() {
		res.Values, res.Objective = e.decode(s)
	}
	geq := func(t int64) z.Lit { return e.obj.Geq(int(t)) }
	// Most useful first: the caller's bound reached proves optimality at once.
	if upper > lower {
		half := time.Now().Add(time.Until(deadline) / 2)
		for t := upper; t > lower; t-- {
			r := s.Solve(ctx, half, geq(t))
			if r == solver.Sat {
				found()
				break
			}
			if r != solver.Unsat {
				break
			}
			res.Bound = t - 1
			half = deadline // a proof: keep descending with all the time
		}
	}
	if res.Values == nil || res.Objective < min(upper, res.Bound) {
		for t := max(lower, res.Objective) + 1; t <= min(upper, res.Bound); {
			r := s.Solve(ctx, deadline, geq(t))
			if r == solver.Unsat {
				res.Bound = t - 1
				break
			}
			if r != solver.Sat {
				break
			}
			found()
			t = res.Objective + 1
		}
	}
	res.Calls = s.Calls
	if res.Bound > total {
		res.Bound = min(res.Bound, total)
	}
	return res, nil
}

// aggEncoding is the SAT encoding of a NodeAggregate.
type aggEncoding struct {
	na      *NodeAggregate
	c       *logic.C
	clauses [][]z.Lit
	// x[group][bin][pattern]; y[class][node index in class.Nodes][j-1]
	x   [][][]z.Lit
	y   [][][]z.Lit
	obj *logic.CardSort
}

func (e *aggEncoding) clause(ls ...z.Lit) { e.clauses = append(e.clauses, ls) }

func (e *aggEncoding) lits(n int) []z.Lit {
	ls := make([]z.Lit, n)
	for i := range ls {
		ls[i] = e.c.Lit()
	}
	return ls
}

func (na *NodeAggregate) encodeSAT(symmetry bool) (*aggEncoding, error) {
	e := &aggEncoding{na: na, c: logic.NewC()}
	type sn struct{ s, n int }
	supply := map[sn][]z.Lit{}
	most := map[sn]int{} // the most a node can supply of a shape
	for _, g := range na.Groups {
		P := len(g.Patterns)
		var bins [][]z.Lit
		var prevO []z.Lit
		for b := 0; b < g.Bins; b++ {
			if P == 0 {
				continue
			}
			// o[j] for j in 1..P-1: the pattern index is at least j.
			o := e.lits(P)
			x := e.lits(P)
			for j := 1; j < P; j++ {
				if j+1 < P {
					e.clause(o[j+1].Not(), o[j])
				}
			}
			at := func(j int) (z.Lit, bool) { // o[j], or a constant
				switch {
				case j == 0:
					return z.LitNull, true
				case j >= P:
					return z.LitNull, false
				}
				return o[j], false
			}
			for p := 0; p < P; p++ {
				lo, loTrue := at(p)
				hi, hiFalse := at(p + 1)
				hiFalse = p+1 >= P
				// x[p] ↔ o[p] ∧ ¬o[p+1]
				if !loTrue {
					e.clause(x[p].Not(), lo)
				}
				if !hiFalse {
					e.clause(x[p].Not(), hi.Not())
				}
				cl := []z.Lit{x[p]}
				if !loTrue {
					cl = append(cl, lo.Not())
				}
				if !hiFalse {
					cl = append(cl, hi)
				}
				e.clause(cl...)
			}
			if prevO != nil && symmetry {
				for j := 1; j < P; j++ {
					e.clause(prevO[j].Not(), o[j])
				}
			}
			prevO = o
			bins = append(bins, x)
			// Supply: u_l only if the pattern has at least l of the shape.
			maxOf := map[int]int{}
			for _, pat := range g.Patterns {
				for _, sc := range pat {
					maxOf[sc.Shape] = max(maxOf[sc.Shape], sc.N)
				}
			}
			for s := 0; s < na.Shapes; s++ {
				m := maxOf[s]
				if m == 0 {
					continue
				}
				us := e.lits(m)
				for l := 1; l <= m; l++ {
					cl := []z.Lit{us[l-1].Not()}
					for p, pat := range g.Patterns {
						for _, sc := range pat {
							if sc.Shape == s && sc.N >= l {
								cl = append(cl, x[p])
							}
						}
					}
					e.clause(cl...)
					if l > 1 {
						e.clause(us[l-1].Not(), us[l-2])
					}
				}
				k := sn{s, g.Node}
				supply[k] = append(supply[k], us...)
				most[k] += m
			}
		}
		e.x = append(e.x, bins)
	}
	demand := map[sn][]z.Lit{}
	var objLits []z.Lit
	for _, k := range na.Classes {
		w := int(math.Round(k.Weight))
		if float64(w) != k.Weight || w < 0 {
			return nil, fmt.Errorf("class %d: weight %g is not a whole number", k.Class, k.Weight)
		}
		var perNode [][]z.Lit
		var all []z.Lit
		for _, n := range k.Nodes {
			c := k.Max
			for _, d := range k.Demand {
				mult := int(math.Round(d.N))
				if float64(mult) != d.N || mult <= 0 {
					return nil, fmt.Errorf("class %d: %g items of shape %d is not a whole number", k.Class, d.N, d.Shape)
				}
				c = min(c, most[sn{d.Shape, n}]/mult)
			}
			ys := e.lits(c)
			for j := 1; j < c; j++ {
				e.clause(ys[j].Not(), ys[j-1])
			}
			for _, d := range k.Demand {
				mult := int(math.Round(d.N))
				for _, l := range ys {
					for r := 0; r < mult; r++ {
						demand[sn{d.Shape, n}] = append(demand[sn{d.Shape, n}], l)
					}
				}
			}
			perNode = append(perNode, ys)
			all = append(all, ys...)
		}
		e.y = append(e.y, perNode)
		if len(all) == 0 || w == 0 {
			continue
		}
		count := all
		if len(all) > 1 {
			cs := logic.NewCardSort(all, e.c)
			if len(all) > k.Max {
				e.clause(cs.Leq(k.Max))
			}
			count = count[:0:0]
			for j := 1; j <= min(len(all), k.Max); j++ {
				count = append(count, cs.Geq(j))
			}
		}
		for _, l := range count {
			for r := 0; r < w; r++ {
				objLits = append(objLits, l)
			}
		}
	}
	// Demand ≤ supply per shape and node, in a fixed order.
	for s := 0; s < na.Shapes; s++ {
		for _, n := range na.Nodes {
			d := demand[sn{s, n}]
			if len(d) == 0 {
				continue
			}
			sup := supply[sn{s, n}]
			ls := append([]z.Lit(nil), d...)
			for _, u := range sup {
				ls = append(ls, u.Not())
			}
			cs := logic.NewCardSort(ls, e.c)
			e.clause(cs.Leq(len(sup)))
		}
	}
	e.obj = logic.NewCardSort(objLits, e.c)
	return e, nil
}

// decode reads the counts of the last satisfiable call.
func (e *aggEncoding) decode(s *solver.S) (map[string]float64, int64) {
	values := map[string]float64{}
	for gi := range e.na.Groups {
		g := &e.na.Groups[gi]
		for _, x := range e.x[gi] {
			for p, l := range x {
				if s.Value(l) {
					values[g.Var(p)]++
				}
			}
		}
	}
	var obj int64
	for ki := range e.na.Classes {
		k := &e.na.Classes[ki]
		for ni, ys := range e.y[ki] {
			for _, l := range ys {
				if s.Value(l) {
					values[k.Var(k.Nodes[ni])]++
					obj += int64(math.Round(k.Weight))
				}
			}
		}
	}
	return values, obj
}

// Search improves a solution of the model by node neighbourhoods, the way
// the engine's neighbourhood search repacks bins (docs/encoding.md §6),
// but over patterns: the GPU-level packing is already in the patterns, so
// a step's SAT call only chooses patterns and claim counts for a few
// nodes, with every other node held as it is. start gives the node of
// each claim of a known allocation (claim index to node); its claims
// become the first solution (an allocation is a solution of the model
// when the model is a relaxation; Search fails when it is not). The
// search stops at upper, at deadline, or when steps stop improving. It
// proves no bound of its own (Bound stays math.MaxInt64 unless a call
// over the whole model was unsatisfiable); reaching a bound the caller
// proved is what makes its answer optimal.
func (na *NodeAggregate) Search(ctx context.Context, deadline time.Time, start map[int]int, claims []*model.Claim, upper int64) (AggregateSolution, error) {
	res := AggregateSolution{Bound: math.MaxInt64}
	// No symmetry breaking: a step frees some bins of a group and pins
	// others, which an order between them would hold in place.
	e, err := na.encodeSAT(false)
	if err != nil {
		return res, err
	}
	s := solver.New(e.c, e.clauses)
	res.Vars, res.Clauses = s.Vars, s.Clauses
	defer func() { res.Calls = s.Calls }()
	// The start's counts y(k,n), pinned by their unary bits.
	pos := map[string]int{}
	for ki, k := range na.Classes {
		pos[na.r.classes[k.Class].key] = ki
	}
	y := make([]map[int]int, len(na.Classes))
	for ki := range y {
		y[ki] = map[int]int{}
	}
	for _, c := range claims {
		n, ok := start[c.Index]
		if !ok {
			continue
		}
		ki, ok := pos[c.ClassKey()]
		if !ok {
			return res, fmt.Errorf("claim %s: its class is not in the model", c.Key)
		}
		y[ki][n]++
	}
	pinY := func(as []z.Lit, ki, ni int, v int) ([]z.Lit, bool) {
		ys := e.y[ki][ni]
		if v > len(ys) {
			return as, false
		}
		for j := 0; j < v; j++ {
			as = append(as, ys[j])
		}
		if v < len(ys) {
			as = append(as, ys[v].Not())
		}
		return as, true
	}
	var as []z.Lit
	for ki, k := range na.Classes {
		for ni, n := range k.Nodes {
			var ok bool
			if as, ok = pinY(as, ki, ni, y[ki][n]); !ok {
				return res, fmt.Errorf("class %d: %d claims on node %d, more than the model allows", k.Class, y[ki][n], n)
			}
		}
	}
	total := deadline.Sub(time.Now())
	switch s.Solve(ctx, time.Now().Add(total/4), as...) {
	case solver.Sat:
	case solver.Unsat:
		return res, fmt.Errorf("the start allocation is no solution of the model")
	default:
		return res, fmt.Errorf("no patterns found for the start allocation in time")
	}
	// cur: the pattern of every bin and the counts, of the best solution.
	type state struct {
		pat [][]int
		y   [][]int // per class, per node index
	}
	read := func() state {
		var st state
		for gi := range na.Groups {
			var ps []int
			for _, x := range e.x[gi] {
				p := -1
				for pi, l := range x {
					if s.Value(l) {
						p = pi
						break
					}
				}
				ps = append(ps, p)
			}
			st.pat = append(st.pat, ps)
		}
		for ki := range na.Classes {
			var ys []int
			for _, bits := range e.y[ki] {
				v := 0
				for _, l := range bits {
					if s.Value(l) {
						v++
					}
				}
				ys = append(ys, v)
			}
			st.y = append(st.y, ys)
		}
		return st
	}
	cur := read()
	res.Values, res.Objective = e.decode(s)
	// Steps: a few nodes free, the rest pinned, and more weight asked for.
	// The neighbourhood grows after quick steps and shrinks after slow ones
	// (as the engine's neighbourhood search does); a fixed seed keeps it
	// deterministic unless a step's cap or the deadline cuts in.
	rng := rand.New(rand.NewPCG(1, uint64(len(na.Nodes))))
	size, fails := 2, 0
	for step := 0; len(na.Nodes) > 0 && res.Objective < upper && time.Now().Before(deadline) && ctx.Err() == nil; step++ {
		if fails > 4*len(na.Nodes)*len(na.Nodes) {
			break
		}
		// A node's claims and size of its bins are free (the whole node
		// when size reaches its bins).
		node := na.Nodes[rng.IntN(len(na.Nodes))]
		free := map[int]bool{node: true}
		var bins [][2]int
		for gi, g := range na.Groups {
			if g.Node == node {
				for b := range e.x[gi] {
					bins = append(bins, [2]int{gi, b})
				}
			}
		}
		freeBin := map[[2]int]bool{}
		for _, i := range rng.Perm(len(bins))[:min(size, len(bins))] {
			freeBin[bins[i]] = true
		}
		as = as[:0]
		for gi := range na.Groups {
			for b, x := range e.x[gi] {
				if !freeBin[[2]int{gi, b}] {
					as = append(as, x[cur.pat[gi][b]])
				}
			}
		}
		for ki, k := range na.Classes {
			for ni, n := range k.Nodes {
				if !free[n] {
					as, _ = pinY(as, ki, ni, cur.y[ki][ni])
				}
			}
		}
		as = append(as, e.obj.Geq(int(res.Objective+1)))
		t0 := time.Now()
		r := s.Solve(ctx, minTime(deadline, t0.Add(aggStepCap)), as...)
		took := time.Since(t0)
		switch {
		case r == solver.Sat:
			cur = read()
			res.Values, res.Objective = e.decode(s)
			fails = 0
			continue
		}
		fails++
		switch {
		case r == solver.Unsat && took < aggStepCap/10 && size < len(bins):
			size++
		case r != solver.Unsat && size > 1:
			size--
		}
	}
	return res, nil
}

// aggStepCap is the time one neighbourhood step of Search may take.
const aggStepCap = 300 * time.Millisecond

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
