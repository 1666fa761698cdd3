package lp

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// randomProblem is a bounded LP shaped like the aggregated model: a few
// equality rows (bins choose patterns), ≤ rows with positive and
// negative entries (demand against supply), bounded integer-like columns.
func randomProblem(rng *rand.Rand) (*Problem, [][]float64) {
	m := 2 + rng.IntN(12)
	n := 1 + rng.IntN(30)
	rhs := make([]float64, m)
	eq := make([]bool, m)
	for i := range rhs {
		rhs[i] = float64(rng.IntN(6))
		eq[i] = rng.IntN(4) == 0
	}
	dense := make([][]float64, m)
	for i := range dense {
		dense[i] = make([]float64, n)
	}
	p := New(rhs, eq)
	for j := 0; j < n; j++ {
		var rows []int
		var vals []float64
		for i := 0; i < m; i++ {
			if rng.IntN(3) == 0 {
				v := float64(rng.IntN(7) - 3)
				if v != 0 {
					rows = append(rows, i)
					vals = append(vals, v)
					dense[i][j] = v
				}
			}
		}
		up := float64(1 + rng.IntN(5))
		if rng.IntN(5) == 0 {
			up = math.Inf(1)
		}
		p.AddColumn(float64(rng.IntN(5)), 0, up, rows, vals)
	}
	return p, dense
}

// check verifies x against the rows and bounds, and that the objective
// meets the Lagrangian bound of the simplex's duals (so it is optimal).
func check(t *testing.T, p *Problem, dense [][]float64) {
	t.Helper()
	for j := 0; j < p.n; j++ {
		if x := p.Value(j); x < p.lo[j]-1e-6 || x > p.up[j]+1e-6 {
			t.Fatalf("x%d = %g outside [%g, %g]", j, x, p.lo[j], p.up[j])
		}
	}
	for i, row := range dense {
		var s float64
		for j, a := range row {
			s += a * p.Value(j)
		}
		if s > p.rhs[i]+1e-6 || p.eq[i] && s < p.rhs[i]-1e-6 {
			t.Fatalf("row %d: %g against %g (eq %v)", i, s, p.rhs[i], p.eq[i])
		}
	}
	if z, b := p.Objective(), p.DualBound(p.Duals()); math.Abs(z-b) > 1e-6 {
		t.Fatalf("objective %g, dual bound %g", z, b)
	}
}

func TestSolveRandomAgainstDuals(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	counts := map[Status]int{}
	for n := 0; n < 2000; n++ {
		p, dense := randomProblem(rng)
		st := p.Solve(context.Background(), time.Time{})
		counts[st]++
		switch st {
		case Optimal:
			check(t, p, dense)
		case Stopped:
			t.Fatalf("problem %d stopped", n)
		}
		if st != Optimal {
			continue
		}
		// Warm start after fixing a column: the same optimum as a cold
		// solve of the fixed problem.
		j := rng.IntN(p.n)
		v := math.Floor(p.Value(j))
		if rng.IntN(2) == 0 {
			v = math.Ceil(p.Value(j))
		}
		if math.IsInf(v, 0) || v > p.up[j] {
			continue
		}
		p.SetBounds(j, v, v)
		warm := p.Solve(context.Background(), time.Time{})
		cold := New(p.rhs, p.eq)
		for k := 0; k < p.n; k++ {
			cold.AddColumn(p.cost[k], p.lo[k], p.up[k], intsOf(p.colIdx[k]), p.colVal[k])
		}
		if cs := cold.Solve(context.Background(), time.Time{}); cs != warm {
			t.Fatalf("problem %d: warm %v, cold %v", n, warm, cs)
		}
		if warm == Optimal {
			check(t, p, dense)
			if math.Abs(p.Objective()-cold.Objective()) > 1e-6 {
				t.Fatalf("problem %d: warm %g, cold %g", n, p.Objective(), cold.Objective())
			}
		}
	}
	if counts[Optimal] < 500 || counts[Infeasible] == 0 {
		t.Fatalf("statuses %v: the generator should give both", counts)
	}
}

// TestDiveAgainstColdSolves: a dive's sequence of fixings and restored
// bounds (the warm starts go through the dual simplex) gives, at every
// step, the status and optimum of a cold solve of the same bounds.
func TestDiveAgainstColdSolves(t *testing.T) {
	// The dual simplex's pivot row, through A's rows (sparse ρ) and
	// through its columns, and as it chooses.
	for _, dense := range []int{0, 1 << 30, denseRho} {
		t.Run(fmt.Sprint("denseRho=", dense), func(t *testing.T) {
			defer func(d int) { denseRho = d }(denseRho)
			denseRho = dense
			testDive(t)
		})
	}
}

func testDive(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	steps, dualPivots := 0, 0
	for n := 0; n < 600; n++ {
		p, dense := randomProblem(rng)
		if p.Solve(context.Background(), time.Time{}) != Optimal {
			continue
		}
		orig := append([]float64(nil), p.up[:p.n]...)
		for step := 0; step < 8; step++ {
			j := rng.IntN(p.n)
			switch v := p.Value(j); {
			case rng.IntN(4) == 0:
				p.SetBounds(j, 0, orig[j]) // restore, as a backtrack does
			case rng.IntN(2) == 0:
				p.SetBounds(j, math.Floor(v), math.Floor(v))
			default:
				up := orig[j]
				if c := math.Ceil(v); c <= up {
					p.SetBounds(j, c, up)
				}
			}
			warm := p.Solve(context.Background(), time.Time{})
			cold := New(p.rhs, p.eq)
			for k := 0; k < p.n; k++ {
				cold.AddColumn(p.cost[k], p.lo[k], p.up[k], intsOf(p.colIdx[k]), p.colVal[k])
			}
			if cs := cold.Solve(context.Background(), time.Time{}); cs != warm {
				t.Fatalf("problem %d step %d: warm %v, cold %v", n, step, warm, cs)
			}
			steps++
			if warm != Optimal {
				break
			}
			check(t, p, dense)
			if math.Abs(p.Objective()-cold.Objective()) > 1e-6 {
				t.Fatalf("problem %d step %d: warm %g, cold %g", n, step, p.Objective(), cold.Objective())
			}
		}
		dualPivots += p.DualIterations
	}
	if steps < 1000 || dualPivots < 100 {
		t.Fatalf("%d warm solves, %d dual simplex pivots: the dual path is hardly tested", steps, dualPivots)
	}
	t.Logf("%d warm solves, %d dual simplex pivots", steps, dualPivots)
}

func intsOf(xs []int32) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

func TestSolveKnown(t *testing.T) {
	// max 3x + 2y, x + y ≤ 4, x + 3y ≤ 6, x ≤ 3: optimum x=3, y=1, 11.
	p := New([]float64{4, 6}, []bool{false, false})
	x := p.AddColumn(3, 0, 3, []int{0, 1}, []float64{1, 1})
	y := p.AddColumn(2, 0, math.Inf(1), []int{0, 1}, []float64{1, 3})
	if st := p.Solve(context.Background(), time.Time{}); st != Optimal {
		t.Fatal(st)
	}
	if p.Value(x) != 3 || math.Abs(p.Value(y)-1) > 1e-9 || math.Abs(p.Objective()-11) > 1e-9 {
		t.Fatalf("x %g y %g z %g", p.Value(x), p.Value(y), p.Objective())
	}
	// x = 0 forces y ≤ 2: 4.
	p.SetBounds(x, 0, 0)
	if st := p.Solve(context.Background(), time.Time{}); st != Optimal || math.Abs(p.Objective()-4) > 1e-9 {
		t.Fatalf("%v %g", st, p.Objective())
	}
	// An equality out of reach: x + y = 5 with x ≤ 0, y ≤ 2.
	q := New([]float64{5}, []bool{true})
	q.AddColumn(1, 0, 0, []int{0}, []float64{1})
	q.AddColumn(1, 0, 2, []int{0}, []float64{1})
	if st := q.Solve(context.Background(), time.Time{}); st != Infeasible {
		t.Fatal(st)
	}
}
