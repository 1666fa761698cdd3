package bound

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/drasat/drasat/bound/lp"
)

// Dive looks for an integer solution of the per-node model with weight
// at least target by diving on its LP relaxation (bound/lp): solve the
// LP, fix one fractional count (a pattern count first: rounding a GPU's
// pattern up commits it; then the claim counts), solve again from the
// same basis, and so on until every count is integral. A fixing that
// makes the LP infeasible or drops its value below the dive's goal is
// undone and the other rounding tried; when both fail the dive backtracks
// one level, within a budget of failed fixings. The first dive's goal is
// the LP's value rounded down, the best any integer solution can have;
// when it fails, the next dive asks one less, down to target. The LP
// relaxation of this model is tight on the MIG batches (its value floors
// to the optimum), so the first dive seldom needs to backtrack.
//
// Diving proves nothing: Bound stays math.MaxInt64. Weights must be
// integers (max-claims weights are).
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
	los, ups := make([]float64, prob.Columns()), make([]float64, prob.Columns())
	for j := range los {
		los[j], ups[j] = prob.Bounds(j)
	}
	for goal := int64(math.Floor(st.LPValue + 1e-6)); goal >= target; goal-- {
		if ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		st.Dives++
		if dive(ctx, deadline, prob, cols, float64(goal)-1e-6, &st) {
			res.Values, res.Objective = na.values(prob, cols)
			return res, st, nil
		}
		for j := range los {
			prob.SetBounds(j, los[j], ups[j])
		}
	}
	return res, st, nil
}

// dive fixes fractional counts of prob until its solution is integral
// (true) with a value of at least goal; false when the budget of failed
// fixings or the time runs out first.
func dive(ctx context.Context, deadline time.Time, prob *lp.Problem, cols []lpCol, goal float64, st *DiveStats) bool {
	// The fixings made, for backtracking: the variable, its bounds
	// before, and whether the other rounding (down) was tried.
	type fix struct {
		j      int
		lo, up float64
		other  float64
		tried  bool
	}
	var stack []fix
	failures, maxFailures := 0, 64
	if s := prob.Solve(ctx, deadline); s != lp.Optimal || prob.Objective() < goal {
		return false
	}
	for {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		// The fractional count to fix: pattern counts before claim
		// counts; among them the one nearest to its ceiling.
		j, bestF, bestC := -1, -1.0, false
		for k := 0; k < prob.Columns(); k++ {
			v := prob.Value(k)
			f := v - math.Floor(v)
			if f < 1e-6 || f > 1-1e-6 {
				continue
			}
			c := cols[k].group >= 0
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
			if failures > maxFailures {
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
