package bound

import (
	"context"
	"errors"
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

// Search improves a solution of the model by neighbourhoods, the way the
// engine's neighbourhood search repacks bins (docs/encoding.md §6), but
// over patterns: the GPU-level packing is already in the patterns, so a
// step chooses patterns for a few bins of one node and the claim counts
// of that node, with everything else held as it is. A step is a small
// model of its own (one node, its other bins fixed to their patterns, each
// class's count limited to what the other nodes leave), encoded for gini
// and asked for more weight on the node. start gives the node of each
// claim of a known allocation (claim index to node); its claims are the
// first solution (an allocation is a solution of the model when the model
// is a relaxation; Search fails when it is not). The search stops at
// upper, at deadline, or when steps stop improving. It proves no bound
// (Bound stays math.MaxInt64): reaching a bound the caller proved is what
// makes its answer optimal.
func (na *NodeAggregate) Search(ctx context.Context, deadline time.Time, start map[int]int, claims []*model.Claim, upper int64) (AggregateSolution, error) {
	res := AggregateSolution{Bound: math.MaxInt64}
	if len(na.merged) > 0 {
		return res, errors.New("pods of several claims: the search starts from claims, not from their pod groups")
	}
	pos := map[string]int{}
	for ki, k := range na.Classes {
		pos[na.r.classes[k.Class].key] = ki
	}
	nodeAt := map[int]int{}
	for i, n := range na.Nodes {
		nodeAt[n] = i
	}
	// y[class][node index], pat[group][bin] (-1: not chosen yet).
	y := make([][]int, len(na.Classes))
	for ki := range y {
		y[ki] = make([]int, len(na.Nodes))
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
		ni, ok := nodeAt[n]
		if !ok {
			return res, fmt.Errorf("claim %s: node %d has no bins in the model", c.Key, n)
		}
		y[ki][ni]++
	}
	pat := make([][]int, len(na.Groups))
	for gi, g := range na.Groups {
		pat[gi] = make([]int, g.Bins)
	}
	weightOn := func(ni int) int64 {
		var w int64
		for ki, k := range na.Classes {
			w += int64(y[ki][ni]) * int64(math.Round(k.Weight))
		}
		return w
	}
	// The start's patterns, node by node: every bin free, every class
	// count held to the start's.
	for ni := range na.Nodes {
		avail := make([]int, len(na.Classes))
		for ki := range avail {
			avail[ki] = y[ki][ni]
		}
		r, err := na.stepNode(ctx, deadline, &res, ni, func(int, int) bool { return true }, pat, y, avail, weightOn(ni))
		if err != nil {
			return res, err
		}
		switch r {
		case solver.Sat:
		case solver.Unsat:
			return res, fmt.Errorf("the start allocation is no solution of the model (node %d)", na.Nodes[ni])
		default:
			return res, fmt.Errorf("no patterns found for the start allocation in time")
		}
	}
	var total int64
	for ni := range na.Nodes {
		total += weightOn(ni)
	}
	// Steps: size bins of a random node free and more weight asked of it.
	// The size grows after quick refutations and shrinks after steps that
	// ran out of their cap; a fixed seed keeps the search deterministic
	// unless a cap or the deadline cuts in.
	rng := rand.New(rand.NewPCG(1, uint64(len(na.Nodes))))
	size, fails, step := 2, 0, 0
	for len(na.Nodes) > 0 && total < upper && time.Now().Before(deadline) && ctx.Err() == nil && fails < 400*len(na.Nodes) {
		ni := rng.IntN(len(na.Nodes))
		var bins [][2]int
		for gi, g := range na.Groups {
			if g.Node == na.Nodes[ni] {
				for b := 0; b < g.Bins; b++ {
					bins = append(bins, [2]int{gi, b})
				}
			}
		}
		avail := make([]int, len(na.Classes))
		for ki, k := range na.Classes {
			avail[ki] = k.Max
			for nj := range na.Nodes {
				if nj != ni {
					avail[ki] -= y[ki][nj]
				}
			}
		}
		before := weightOn(ni)
		step++
		if step%64 != 0 && len(bins) > 0 {
			// The exact step over two bins (enumStep).
			perm := rng.Perm(len(bins))
			free := [][2]int{bins[perm[0]]}
			if len(bins) > 1 {
				free = append(free, bins[perm[1]])
			}
			// Every other exact step is a sideways one.
			target := before + 1
			if step%2 == 1 {
				target = before
			}
			if na.enumStep(ni, free, pat, y, avail, target, rng) && weightOn(ni) > before {
				total += weightOn(ni) - before
				fails = 0
			} else {
				fails++
			}
			continue
		}
		freeBin := map[[2]int]bool{}
		for _, i := range rng.Perm(len(bins))[:min(size, len(bins))] {
			freeBin[bins[i]] = true
		}
		t0 := time.Now()
		r, err := na.stepNode(ctx, minTime(deadline, t0.Add(aggStepCap)), &res, ni, func(gi, b int) bool { return freeBin[[2]int{gi, b}] }, pat, y, avail, before+1)
		if err != nil {
			return res, err
		}
		took := time.Since(t0)
		if r == solver.Sat {
			total += weightOn(ni) - before
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
	res.Values = map[string]float64{}
	for gi := range na.Groups {
		g := &na.Groups[gi]
		for _, p := range pat[gi] {
			res.Values[g.Var(p)]++
		}
	}
	for ki := range na.Classes {
		k := &na.Classes[ki]
		for ni, n := range na.Nodes {
			if y[ki][ni] > 0 {
				res.Values[k.Var(n)] = float64(y[ki][ni])
			}
		}
	}
	res.Objective = total
	return res, nil
}

// stepNode solves the model of one node (index ni) with the bins free
// says free and the others at their patterns, class k's count on the node
// at most avail[k], for a weight of at least target; on success it
// writes the node's new patterns and counts into pat and y.
func (na *NodeAggregate) stepNode(ctx context.Context, deadline time.Time, res *AggregateSolution, ni int, free func(gi, b int) bool, pat, y [][]int, avail []int, target int64) (solver.Result, error) {
	node := na.Nodes[ni]
	sub := &NodeAggregate{Shapes: na.Shapes, Nodes: []int{node}, r: na.r}
	// Where each sub-group's bins and patterns come from.
	type origin struct {
		gi   int
		bins []int
		pats []int // sub pattern -> pattern of the group
	}
	var from []origin
	for gi, g := range na.Groups {
		if g.Node != node {
			continue
		}
		var freeBins []int
		pinned := map[int][]int{} // pattern -> bins
		var pinnedOrder []int
		for b := 0; b < g.Bins; b++ {
			if free(gi, b) {
				freeBins = append(freeBins, b)
				continue
			}
			p := pat[gi][b]
			if pinned[p] == nil {
				pinnedOrder = append(pinnedOrder, p)
			}
			pinned[p] = append(pinned[p], b)
		}
		if len(freeBins) > 0 {
			all := make([]int, len(g.Patterns))
			for p := range all {
				all[p] = p
			}
			sub.Groups = append(sub.Groups, BinGroup{Type: g.Type, Node: node, Bins: len(freeBins), Patterns: g.Patterns})
			from = append(from, origin{gi, freeBins, all})
		}
		for _, p := range pinnedOrder {
			sub.Groups = append(sub.Groups, BinGroup{Type: g.Type, Node: node, Bins: len(pinned[p]), Patterns: [][]ShapeCount{g.Patterns[p]}})
			from = append(from, origin{gi, pinned[p], []int{p}})
		}
	}
	var classOf []int // sub class -> class
	for ki, k := range na.Classes {
		if avail[ki] <= 0 || !containsInt(k.Nodes, node) {
			continue
		}
		sub.Classes = append(sub.Classes, NodeClass{Class: k.Class, Weight: k.Weight, Max: avail[ki], Nodes: []int{node}, Demand: k.Demand})
		classOf = append(classOf, ki)
	}
	e, err := sub.encodeSAT(true)
	if err != nil {
		return solver.Unknown, err
	}
	s := solver.New(e.c, e.clauses)
	r := s.Solve(ctx, deadline, e.obj.Geq(int(target)))
	res.Calls++
	res.Vars = max(res.Vars, s.Vars)
	res.Clauses = max(res.Clauses, s.Clauses)
	if r != solver.Sat {
		return r, nil
	}
	for si, o := range from {
		for bi, x := range e.x[si] {
			for p, l := range x {
				if s.Value(l) {
					pat[o.gi][o.bins[bi]] = o.pats[p]
					break
				}
			}
		}
	}
	for ki := range na.Classes {
		y[ki][ni] = 0
	}
	for si, ki := range classOf {
		for _, l := range e.y[si][0] {
			if s.Value(l) {
				y[ki][ni]++
			}
		}
	}
	return r, nil
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// aggStepCap is the time one neighbourhood step of Search may take.
const aggStepCap = 300 * time.Millisecond

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
