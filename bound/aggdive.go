package bound

import (
	"context"
	"errors"
	"math"
	"sort"
	"time"

	"github.com/drasat/drasat/bound/lp"
)

// Dive looks for an integer solution of the per-node model with weight
// at least target by diving on its LP relaxation (bound/lp): solve the
// LP, fix one fractional count (which one: the dive's rule, diveRule),
// solve again from the same basis, and so on until every count is
// integral. A fixing that makes the LP infeasible or drops its value
// below the dive's goal is undone and the other rounding tried; when both
// fail the dive backtracks one level, within a budget of failed fixings;
// past it the next dive starts again from the root with another rule or
// budget (diveRounds). The first goal is the LP's value rounded down, the
// best any integer solution can have; when every dive fails, the goal is
// one less, down to target. The LP
// relaxation of this model is tight on the MIG batches (its value floors
// to the optimum), so the first dive seldom needs to backtrack.
//
// The dive itself proves nothing, but the root LP does: Bound is the
// Lagrangian bound of the root's duals (lp.DualBound, which does not
// trust the simplex's arithmetic), rounded down, or math.MaxInt64 when
// the root is not solved. It bounds the model's integer optimum, so the
// admitted weight wherever the model is a relaxation (the caller knows
// when). Weights must be integers (max-claims weights are).
func (na *NodeAggregate) Dive(ctx context.Context, deadline time.Time, target int64) (res AggregateSolution, st DiveStats, err error) {
	res.Bound = math.MaxInt64
	prob, cols := na.lp()
	st.Rows, st.Columns = prob.Rows(), prob.Columns()
	defer func() { st.Iterations = prob.Iterations }()
	if s := prob.Solve(ctx, deadline); s != lp.Optimal {
		return res, st, errors.New("aggregated LP: " + s.String())
	}
	st.LPValue = prob.Objective()
	st.RootIterations = prob.Iterations
	if b := prob.DualBound(prob.Duals()); b < math.MaxInt64/2 {
		res.Bound = int64(math.Floor(b + 1e-6))
	}
	los, ups := make([]float64, prob.Columns()), make([]float64, prob.Columns())
	for j := range los {
		los[j], ups[j] = prob.Bounds(j)
	}
	for goal := int64(math.Floor(st.LPValue + 1e-6)); goal >= target; goal-- {
		if ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		for _, r := range na.diveRounds() {
			if ctx.Err() != nil || time.Now().After(deadline) {
				break
			}
			st.Dives++
			if dive(ctx, deadline, prob, cols, float64(goal)-1e-6, r, &st) {
				res.Values, res.Objective = na.values(prob, cols)
				return res, st, nil
			}
			for j := range los {
				prob.SetBounds(j, los[j], ups[j])
			}
		}
	}
	return res, st, nil
}

// dive fixes fractional counts of prob until its solution is integral
// (true) with a value of at least goal; false when the budget of failed
// fixings or the time runs out first.
func dive(ctx context.Context, deadline time.Time, prob *lp.Problem, cols []lpCol, goal float64, round diveRound, st *DiveStats) bool {
	// The fixings made, for backtracking: the variable, its bounds
	// before, and whether the other rounding (down) was tried.
	type fix struct {
		j      int
		lo, up float64
		other  float64
		tried  bool
	}
	var stack []fix
	failures := 0
	if s := prob.Solve(ctx, deadline); s != lp.Optimal || prob.Objective() < goal {
		return false
	}
	for {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		// The fractional count to fix, by the round's rule.
		j, bestF, bestC := -1, -1.0, false
		for k := 0; k < prob.Columns(); k++ {
			v := prob.Value(k)
			f := v - math.Floor(v)
			if f < 1e-6 || f > 1-1e-6 {
				continue
			}
			c := cols[k].group >= 0 // a pattern count
			switch round.rule {
			case claimsFirst:
				c = !c
			case mostFractional:
				f = 1 - math.Abs(f-0.5)
			}
			if j < 0 || c && !bestC || c == bestC && f > bestF {
				j, bestF, bestC = k, f, c
			}
		}
		if j < 0 {
			return true // integral
		}
		v := prob.Value(j)
		lo, up := prob.Bounds(j)
		stack = append(stack, fix{j: j, lo: lo, up: up, other: math.Floor(v)})
		prob.SetBounds(j, math.Ceil(v), up)
		st.Fixings++
		for {
			s := prob.Solve(ctx, deadline)
			if s == lp.Stopped {
				return false
			}
			if s == lp.Optimal && prob.Objective() >= goal {
				break
			}
			// This fixing fails: try the other rounding, else backtrack.
			failures++
			st.Failures++
			if failures > round.failures {
				return false
			}
			for len(stack) > 0 && stack[len(stack)-1].tried {
				f := stack[len(stack)-1]
				prob.SetBounds(f.j, f.lo, f.up)
				stack = stack[:len(stack)-1]
			}
			if len(stack) == 0 {
				return false
			}
			f := &stack[len(stack)-1]
			f.tried = true
			prob.SetBounds(f.j, f.lo, f.other)
		}
	}
}

// diveRule picks the fractional count a dive fixes next (rounding it up
// first).
type diveRule int

const (
	// patternsFirst: pattern counts before claim counts (rounding a
	// GPU's pattern up commits it), the one nearest its ceiling first.
	patternsFirst diveRule = iota
	// claimsFirst: claim counts before pattern counts, nearest the
	// ceiling first (admitting a class's claims; the patterns follow).
	claimsFirst
	// mostFractional: pattern counts first, the one nearest a half.
	mostFractional
)

// diveRound is one dive: a rule and its budget of failed fixings.
type diveRound struct {
	rule     diveRule
	failures int
}

// diveRounds are the dives tried for one goal, each from the root. The
// per-node model's answer is the one realised, and with the dual simplex
// a failed fixing costs a few pivots, so it restarts with the rules in
// turn on budgets that double every three rounds, 8,192 failures in all:
// no one rule finds every answer early (on a random claim mix at
// 16x8/1,000 patterns first had not found the LP's 502 after 4,096
// failures, claims first found it after 9; elsewhere claims first needs
// 26 failures where patterns first needs 3). The global model's answer
// is spread over the nodes and loses claims there anyway: one round of
// 64, since a long search for its last claim took the time best-fit
// needed (whole 64x8/2,000: 12 s for 1,396 where 64 failures gave 1,395
// in 0.9 s).
func (na *NodeAggregate) diveRounds() []diveRound {
	if len(na.Nodes) == 1 && na.Nodes[0] == -1 {
		return []diveRound{{patternsFirst, 64}}
	}
	var out []diveRound
	for budget, spent := 128, 0; spent < 8192; budget *= 2 {
		for _, r := range []diveRule{claimsFirst, patternsFirst, mostFractional} {
			out = append(out, diveRound{r, budget})
			spent += budget
		}
	}
	return out
}

// values names the counts of prob's (integral) solution as the LP file
// does, and sums its weight.
func (na *NodeAggregate) values(prob *lp.Problem, cols []lpCol) (map[string]float64, int64) {
	vals := map[string]float64{}
	var obj float64
	for j, c := range cols {
		v := math.Round(prob.Value(j))
		if v == 0 {
			continue
		}
		if c.group >= 0 {
			vals[na.Groups[c.group].Var(c.index)] = v
		} else {
			k := &na.Classes[c.class]
			vals[k.Var(c.index)] = v
			obj += v * k.Weight
		}
	}
	return vals, int64(math.Round(obj))
}

// DiveStats describes a dive.
type DiveStats struct {
	Rows, Columns       int
	LPValue             float64
	Iterations, Fixings int
	RootIterations      int
	Failures, Dives     int
}

// lpCol names a column of the model's LP: a pattern count (group,
// pattern index) or a claim count (class, node).
type lpCol struct {
	group, class, index int
}

// lp builds the model's LP relaxation (the rows of WriteLP; shape rows
// only where some claim needs the shape).
func (na *NodeAggregate) lp() (*lp.Problem, []lpCol) {
	var rhs []float64
	var eq []bool
	row := func(b float64, e bool) int {
		rhs = append(rhs, b)
		eq = append(eq, e)
		return len(rhs) - 1
	}
	groupRow := make([]int, len(na.Groups))
	for gi, g := range na.Groups {
		groupRow[gi] = row(float64(g.Bins), true)
	}
	classRow := make([]int, len(na.Classes))
	type sn struct{ s, n int }
	shapeRow := map[sn]int{}
	for ki, k := range na.Classes {
		classRow[ki] = row(float64(k.Max), false)
		for _, n := range k.Nodes {
			for _, d := range k.Demand {
				if _, ok := shapeRow[sn{d.Shape, n}]; !ok {
					shapeRow[sn{d.Shape, n}] = row(0, false)
				}
			}
		}
	}
	p := lp.New(rhs, eq)
	var cols []lpCol
	for gi, g := range na.Groups {
		for pi, pat := range g.Patterns {
			rows, vals := []int{groupRow[gi]}, []float64{1}
			for _, sc := range pat {
				if r, ok := shapeRow[sn{sc.Shape, g.Node}]; ok {
					rows = append(rows, r)
					vals = append(vals, -float64(sc.N))
				}
			}
			p.AddColumn(0, 0, float64(g.Bins), rows, vals)
			cols = append(cols, lpCol{group: gi, class: -1, index: pi})
		}
	}
	for ki, k := range na.Classes {
		for _, n := range k.Nodes {
			rows, vals := []int{classRow[ki]}, []float64{1}
			for _, d := range k.Demand {
				rows = append(rows, shapeRow[sn{d.Shape, n}])
				vals = append(vals, d.N)
			}
			p.AddColumn(k.Weight, 0, float64(k.Max), rows, vals)
			cols = append(cols, lpCol{group: -1, class: ki, index: n})
		}
	}
	return p, cols
}

// Global is the model with every node merged into one (node −1): bin
// groups by type, classes over the whole cluster, shape rows for the
// cluster. It is the global aggregated model (WriteAggregateLP) in this
// structure, small enough for the LP at any cluster size (the per-node
// model's rows grow with the nodes); Distribute turns its answers into
// the per-node model's.
func (na *NodeAggregate) Global() *NodeAggregate {
	g := &NodeAggregate{Stats: na.Stats, Shapes: na.Shapes, Nodes: []int{-1}, r: na.r, ag: na.ag}
	byType := map[int]int{}
	for _, bg := range na.Groups {
		gi, ok := byType[bg.Type]
		if !ok {
			gi = len(g.Groups)
			byType[bg.Type] = gi
			g.Groups = append(g.Groups, BinGroup{Type: bg.Type, Node: -1, Patterns: bg.Patterns})
		}
		g.Groups[gi].Bins += bg.Bins
	}
	for _, k := range na.Classes {
		k.Nodes = []int{-1}
		g.Classes = append(g.Classes, k)
	}
	return g
}

// Distribute turns a solution of the global model (Global) into one of
// this per-node model, greedily: each type's patterns go to its bins node
// by node, in pattern order (alike patterns stay together, so a node
// holds the GPUs of claims that need several), then the claims, those
// needing the most items first, each to the first node whose patterns
// still supply all its items. Claims that find no node are left out, so
// the answer may weigh less than the global one; it is a solution of the
// per-node model.
func (na *NodeAggregate) Distribute(global *NodeAggregate, values map[string]float64) (map[string]float64, int64) {
	out := map[string]float64{}
	type sn struct{ s, n int }
	supply := map[sn]float64{}
	for _, gg := range global.Groups {
		// This type's groups, node by node, and their free bins.
		var groups []int
		for gi := range na.Groups {
			if na.Groups[gi].Type == gg.Type {
				groups = append(groups, gi)
			}
		}
		cur, free := 0, 0
		if len(groups) > 0 {
			free = na.Groups[groups[0]].Bins
		}
		for p := range gg.Patterns {
			for n := int(math.Round(values[gg.Var(p)])); n > 0 && cur < len(groups); {
				if free == 0 {
					if cur++; cur == len(groups) {
						break
					}
					free = na.Groups[groups[cur]].Bins
					continue
				}
				take := min(n, free)
				g := &na.Groups[groups[cur]]
				out[g.Var(p)] += float64(take)
				for _, sc := range g.Patterns[p] {
					supply[sn{sc.Shape, g.Node}] += float64(take * sc.N)
				}
				n -= take
				free -= take
			}
		}
	}
	order := make([]int, len(na.Classes))
	items := func(k *NodeClass) (s float64) {
		for _, d := range k.Demand {
			s += d.N
		}
		return s
	}
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ka, kb := &na.Classes[order[a]], &na.Classes[order[b]]
		if ia, ib := items(ka), items(kb); ia != ib {
			return ia > ib
		}
		return len(ka.Demand) > len(kb.Demand)
	})
	var weight float64
	for _, ki := range order {
		k := &na.Classes[ki]
		want := int(math.Round(values[global.Classes[ki].Var(-1)]))
		for _, n := range k.Nodes {
			for want > 0 {
				fits := true
				for _, d := range k.Demand {
					if supply[sn{d.Shape, n}] < d.N-1e-9 {
						fits = false
					}
				}
				if !fits {
					break
				}
				for _, d := range k.Demand {
					supply[sn{d.Shape, n}] -= d.N
				}
				out[k.Var(n)]++
				weight += k.Weight
				want--
			}
		}
	}
	return out, int64(math.Round(weight))
}

// Rows is the number of rows of the model's LP (Dive).
func (na *NodeAggregate) Rows() int {
	type sn struct{ s, n int }
	shape := map[sn]bool{}
	for _, k := range na.Classes {
		for _, n := range k.Nodes {
			for _, d := range k.Demand {
				shape[sn{d.Shape, n}] = true
			}
		}
	}
	return len(na.Groups) + len(na.Classes) + len(shape)
}
