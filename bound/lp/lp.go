// Package lp is a small sparse linear-programming solver: a bounded
// primal revised simplex with a product-form inverse, warm-started after
// bound changes. It is written for the aggregated claim-pattern model
// (bound.NodeAggregate: a few hundred to a few thousand rows, tens of
// thousands of sparse columns, every variable bounded), whose LP a
// diving heuristic re-solves many times after fixing variables. gonum's
// simplex, the one pure-Go LP at hand, is dense and refactorises the
// basis at every iteration, too slow at this size (docs/encoding.md §3).
//
// The problem is
//
//	maximise Σ c_j x_j  s.t.  Σ_j a_ij x_j ≤ b_i (or = b_i),  lo_j ≤ x_j ≤ up_j
//
// with finite lower bounds. Every row gets a slack (bounded by [0, ∞) or
// [0, 0]); phase 1 minimises the sum of bound violations of the basic
// variables from whatever basis it starts with, so a solve after bound
// changes starts from the last optimal basis.
package lp

import (
	"context"
	"errors"
	"math"
	"sort"
	"time"
)

// Status is the outcome of a solve.
type Status int

const (
	// Optimal: X is an optimal solution.
	Optimal Status = iota
	// Infeasible: no point satisfies the rows and bounds.
	Infeasible
	// Unbounded: the objective grows without limit.
	Unbounded
	// Stopped: the deadline, the context or the iteration limit ended the
	// solve; X is not meaningful.
	Stopped
)

func (s Status) String() string {
	return [...]string{"optimal", "infeasible", "unbounded", "stopped"}[s]
}

// Tolerances.
const (
	feasTol  = 1e-7 // a basic variable this far outside its bounds is infeasible
	dualTol  = 1e-7 // a reduced cost this large makes a variable attractive
	pivotTol = 1e-9 // smaller entries of the entering column are not pivots
	// refactor is the number of eta vectors after which the basis is
	// re-inverted (accuracy and speed of FTRAN/BTRAN).
	refactor = 100
)

// Problem is a linear program and the state of its simplex: after Solve,
// the basis is kept, and SetBounds followed by Solve warm-starts from it.
type Problem struct {
	m, n    int // rows, structural columns
	rhs     []float64
	eq      []bool
	cost    []float64 // maximisation costs of the structurals
	colIdx  [][]int32
	colVal  [][]float64
	rowIdx  [][]int32 // the same entries by row, built by the dual simplex
	rowVal  [][]float64
	nnz     int       // entries of the structural columns
	lo, up  []float64 // n+m: structurals, then slacks
	x       []float64 // n+m: current values
	head    []int     // m: the basic variable of each row position
	pos     []int     // n+m: row position if basic, else -1
	etas    []eta
	base    int // etas of the last reinversion; those after are pivots
	next    int // where the next partial pricing scan starts
	started bool

	// Iterations counts the simplex pivots and bound flips of all solves;
	// DualIterations those of them made by the dual simplex.
	Iterations, DualIterations int
	// MaxIterations ends a solve (Stopped); 0: 50·(rows+columns).
	MaxIterations int
}

// eta is one pivot of the product-form inverse: row r, pivot value piv,
// the rest of the entering column (FTRAN'd) in idx/val.
type eta struct {
	r   int
	piv float64
	idx []int32
	val []float64
}

// New returns a problem with the given rows: rhs[i], and eq[i] for an
// equality row (else ≤).
func New(rhs []float64, eq []bool) *Problem {
	m := len(rhs)
	p := &Problem{m: m, rhs: append([]float64(nil), rhs...), eq: append([]bool(nil), eq...)}
	return p
}

// AddColumn adds a structural variable with maximisation cost c, bounds
// [lo, up] (up may be +Inf) and its row entries; it returns its index.
// Columns must be added before the first Solve.
func (p *Problem) AddColumn(c, lo, up float64, rows []int, vals []float64) int {
	if p.started {
		panic("lp: AddColumn after Solve")
	}
	idx := make([]int32, len(rows))
	for i, r := range rows {
		idx[i] = int32(r)
	}
	p.cost = append(p.cost, c)
	p.colIdx = append(p.colIdx, idx)
	p.colVal = append(p.colVal, append([]float64(nil), vals...))
	p.lo = append(p.lo, lo)
	p.up = append(p.up, up)
	p.n++
	return p.n - 1
}

// Columns is the number of structural variables.
func (p *Problem) Columns() int { return p.n }

// Rows is the number of rows.
func (p *Problem) Rows() int { return p.m }

// Bounds returns variable j's bounds.
func (p *Problem) Bounds(j int) (lo, up float64) { return p.lo[j], p.up[j] }

// SetBounds changes variable j's bounds; the next Solve starts from the
// current basis.
func (p *Problem) SetBounds(j int, lo, up float64) {
	p.lo[j], p.up[j] = lo, up
	if p.started && p.pos[j] < 0 {
		// A nonbasic variable sits at one of its bounds.
		switch {
		case p.x[j] >= up:
			p.x[j] = up
		default:
			p.x[j] = lo
		}
		if math.IsInf(p.x[j], 1) {
			p.x[j] = lo
		}
	}
}

// Value is variable j's value in the last solution.
func (p *Problem) Value(j int) float64 { return p.x[j] }

// Objective is the objective's value at the current point.
func (p *Problem) Objective() float64 {
	var z float64
	for j := 0; j < p.n; j++ {
		z += p.cost[j] * p.x[j]
	}
	return z
}

// start sets up the slack basis: slacks basic, structurals at their lower
// bounds.
func (p *Problem) start() {
	p.started = true
	m, n := p.m, p.n
	for i := 0; i < m; i++ {
		p.lo = append(p.lo, 0)
		if p.eq[i] {
			p.up = append(p.up, 0)
		} else {
			p.up = append(p.up, math.Inf(1))
		}
	}
	p.x = make([]float64, n+m)
	for j := 0; j < n; j++ {
		p.x[j] = p.lo[j]
	}
	p.head = make([]int, m)
	p.pos = make([]int, n+m)
	for j := range p.pos {
		p.pos[j] = -1
	}
	for i := 0; i < m; i++ {
		p.head[i] = n + i
		p.pos[n+i] = i
	}
	p.computeBasics()
}

// column scatters variable j's column into w (dense, zeroed).
func (p *Problem) column(j int, w []float64) {
	if j >= p.n {
		w[j-p.n] = 1
		return
	}
	for k, r := range p.colIdx[j] {
		w[r] += p.colVal[j][k]
	}
}

// ftran solves B w' = w in place.
func (p *Problem) ftran(w []float64) {
	for e := range p.etas {
		et := &p.etas[e]
		xr := w[et.r]
		if xr == 0 {
			continue
		}
		xr /= et.piv
		w[et.r] = xr
		for k, i := range et.idx {
			w[i] -= et.val[k] * xr
		}
	}
}

// btran solves y B = c in place (y a row vector).
func (p *Problem) btran(y []float64) {
	for e := len(p.etas) - 1; e >= 0; e-- {
		et := &p.etas[e]
		s := y[et.r]
		for k, i := range et.idx {
			s -= et.val[k] * y[i]
		}
		y[et.r] = s / et.piv
	}
}

// pushEta records the pivot of column alpha (FTRAN'd) on row r.
func (p *Problem) pushEta(r int, alpha []float64) {
	et := eta{r: r, piv: alpha[r]}
	for i, v := range alpha {
		if i != r && math.Abs(v) > 1e-12 {
			et.idx = append(et.idx, int32(i))
			et.val = append(et.val, v)
		}
	}
	p.etas = append(p.etas, et)
}

// computeBasics sets the basic variables from the nonbasic ones:
// x_B = B⁻¹ (b − N x_N).
func (p *Problem) computeBasics() {
	v := append([]float64(nil), p.rhs...)
	for j := 0; j < p.n+p.m; j++ {
		if p.pos[j] >= 0 || p.x[j] == 0 {
			continue
		}
		if j >= p.n {
			v[j-p.n] -= p.x[j]
			continue
		}
		for k, r := range p.colIdx[j] {
			v[r] -= p.colVal[j][k] * p.x[j]
		}
	}
	p.ftran(v)
	for i, j := range p.head {
		p.x[j] = v[i]
	}
}

// reinvert rebuilds the product-form inverse of the current basis from
// the slack basis, pivoting the structural columns in (sparsest first,
// each on its largest entry among the rows still held by slacks that
// leave). A column that finds no pivot leaves the basis for the slack,
// at its nearer bound.
func (p *Problem) reinvert() {
	n, m := p.n, p.m
	keep := make([]bool, m) // the row's slack stays basic
	var cols []int
	for _, j := range p.head {
		if j >= n {
			keep[j-n] = true
		} else {
			cols = append(cols, j)
		}
	}
	sort.Slice(cols, func(a, b int) bool {
		la, lb := len(p.colIdx[cols[a]]), len(p.colIdx[cols[b]])
		if la != lb {
			return la < lb
		}
		return cols[a] < cols[b]
	})
	p.etas = p.etas[:0]
	for i := 0; i < m; i++ {
		if p.head[i] < n {
			p.pos[p.head[i]] = -1
		}
		p.head[i] = n + i
		p.pos[n+i] = i
	}
	w := make([]float64, m)
	taken := make([]bool, m)
	for _, j := range cols {
		clear(w)
		p.column(j, w)
		p.ftran(w)
		r, best := -1, pivotTol*10
		for i, v := range w {
			if !keep[i] && !taken[i] && math.Abs(v) > best {
				r, best = i, math.Abs(v)
			}
		}
		if r < 0 {
			// Singular: j leaves at its nearer bound.
			if p.up[j]-p.x[j] < p.x[j]-p.lo[j] {
				p.x[j] = p.up[j]
			} else {
				p.x[j] = p.lo[j]
			}
			continue
		}
		taken[r] = true
		p.pushEta(r, w)
		p.pos[p.head[r]] = -1
		p.x[p.head[r]] = 0 // the slack leaves; reset below
		p.head[r] = j
		p.pos[j] = r
	}
	p.base = len(p.etas)
	// Slacks that left sit at their lower bound (0); all values follow.
	for i := 0; i < m; i++ {
		if p.pos[n+i] < 0 {
			p.x[n+i] = p.lo[n+i]
		}
	}
	p.computeBasics()
}

var errStopped = errors.New("lp: stopped")

// Solve optimises from the current basis until optimal, infeasible,
// unbounded, or stopped by ctx, deadline (zero: none) or MaxIterations.
func (p *Problem) Solve(ctx context.Context, deadline time.Time) Status {
	n, m := p.n, p.m
	maxIt := p.MaxIterations
	if maxIt == 0 {
		maxIt = 50 * (n + m)
	}
	it := 0
	if !p.started {
		p.start()
	} else {
		p.computeBasics()
		// After bound changes the last optimal basis is usually still
		// dual feasible: the dual simplex restores primal feasibility in
		// a few pivots where phase 1 would undo the optimum.
		switch st := p.dual(ctx, deadline, maxIt, &it); st {
		case Infeasible, Stopped:
			return st
		}
	}
	y := make([]float64, m)
	alpha := make([]float64, m)
	degenerate := 0
	for ; ; it++ {
		if it >= maxIt {
			return Stopped
		}
		if it%64 == 0 && (ctx.Err() != nil || !deadline.IsZero() && time.Now().After(deadline)) {
			return Stopped
		}
		if len(p.etas)-p.base >= refactor {
			p.reinvert()
		}
		// Phase: minimise the sum of infeasibilities while any basic
		// variable is out of bounds, else −c·x.
		phase1 := false
		clear(y)
		for i, j := range p.head {
			switch {
			case p.x[j] < p.lo[j]-feasTol:
				y[i], phase1 = -1, true
			case p.x[j] > p.up[j]+feasTol:
				y[i], phase1 = 1, true
			}
		}
		if !phase1 {
			for i, j := range p.head {
				if j < n {
					y[i] = -p.cost[j]
				}
			}
		}
		p.btran(y)
		// Pricing: Dantzig, or Bland's smallest index after a run of
		// degenerate pivots (no cycling).
		bland := degenerate > 30
		q, qd, best := -1, 0.0, dualTol
		// Partial pricing: from where the last scan stopped, a segment
		// at a time, until a segment has a candidate (Bland scans all,
		// in index order).
		// Segments of a 256th of the columns (at least 64): on the
		// per-node LPs of 16x8/1,000 batches with pods (1,200 rows,
		// 20,000 columns) an eighth took 9,500-15,200 pivots, a 256th
		// 5,000-6,500 (seed 5 of the 48-CPU bench batch: building and
		// solving it took 2.8 s of CPU, now 1.3 s); on LPs of a few
		// thousand columns the pivots stay within a fifth either way
		// and each scan is shorter.
		seg := max(64, (n+m)/256)
		from := p.next
		if bland {
			from = 0
		}
		for t := 0; t < n+m; t++ {
			j := from + t
			if j >= n+m {
				j -= n + m
			}
			if q >= 0 && !bland && t >= seg && t%seg == 0 {
				p.next = j
				break
			}
			if p.pos[j] >= 0 || p.lo[j] == p.up[j] {
				continue
			}
			var base float64
			if j < n && !phase1 {
				base = -p.cost[j]
			}
			d := p.reduced(base, y, j)
			atLo := p.x[j] <= p.lo[j]
			if atLo && d < -dualTol || !atLo && d > dualTol {
				if bland {
					q, qd = j, d
					break
				}
				if math.Abs(d) > best {
					q, qd, best = j, d, math.Abs(d)
				}
			}
		}
		if q < 0 {
			if phase1 {
				return Infeasible
			}
			return Optimal
		}
		dir := 1.0 // x_q increases
		if qd > 0 {
			dir = -1
		}
		clear(alpha)
		p.column(q, alpha)
		p.ftran(alpha)
		// Ratio test: x_B(θ) = x_B − dir·θ·α.
		theta := p.up[q] - p.lo[q]
		r, toUp := -1, false
		bestPiv := 0.0
		for i, j := range p.head {
			a := alpha[i]
			if math.Abs(a) < pivotTol {
				continue
			}
			rate := -dir * a
			xi, l, u := p.x[j], p.lo[j], p.up[j]
			var lim float64
			var up bool
			switch {
			case rate < 0 && xi > u+feasTol: // phase 1: falls back to its upper bound
				lim, up = (xi-u)/-rate, true
			case rate < 0 && xi >= l-feasTol: // falls to its lower bound
				lim = (xi - l) / -rate
			case rate > 0 && xi <= u+feasTol && xi >= l-feasTol: // rises to its upper bound
				if math.IsInf(u, 1) {
					continue
				}
				lim, up = (u-xi)/rate, true
			case rate > 0 && xi < l-feasTol: // phase 1: rises to its lower bound
				lim = (l - xi) / rate
			default:
				continue
			}
			lim = max(lim, 0)
			if lim < theta-1e-12 || lim <= theta+1e-12 && math.Abs(a) > bestPiv {
				theta, r, toUp, bestPiv = lim, i, up, math.Abs(a)
			}
		}
		if math.IsInf(theta, 1) {
			if phase1 {
				return Infeasible // cannot happen: phase 1 is bounded below
			}
			return Unbounded
		}
		p.Iterations++
		if theta < 1e-12 {
			degenerate++
		} else {
			degenerate = 0
		}
		for i, j := range p.head {
			if a := alpha[i]; a != 0 {
				p.x[j] -= dir * theta * a
			}
		}
		p.x[q] += dir * theta
		if r < 0 {
			// Bound flip.
			if dir > 0 {
				p.x[q] = p.up[q]
			} else {
				p.x[q] = p.lo[q]
			}
			continue
		}
		leave := p.head[r]
		if toUp {
			p.x[leave] = p.up[leave]
		} else {
			p.x[leave] = p.lo[leave]
		}
		p.pushEta(r, alpha)
		p.pos[leave] = -1
		p.head[r] = q
		p.pos[q] = r
	}
}

// reducedCosts sets d to the reduced costs of the phase-2 objective
// (minimise −c·x) at the current basis; basic variables get 0.
func (p *Problem) reducedCosts(d []float64) {
	n := p.n
	y := make([]float64, p.m)
	for i, j := range p.head {
		if j < n {
			y[i] = -p.cost[j]
		}
	}
	p.btran(y)
	for j := range d {
		switch {
		case p.pos[j] >= 0:
			d[j] = 0
		case j < n:
			d[j] = p.reduced(-p.cost[j], y, j)
		default:
			d[j] = p.reduced(0, y, j)
		}
	}
}

// reduced is base − y·a_j, a_j variable j's column (a unit column for a
// slack): the reduced cost of j at prices y, with base its cost.
func (p *Problem) reduced(base float64, y []float64, j int) float64 {
	if j >= p.n {
		return base - y[j-p.n]
	}
	for k, r := range p.colIdx[j] {
		base -= y[r] * p.colVal[j][k]
	}
	return base
}

// makeDualFeasible moves each boxed nonbasic variable whose reduced cost
// has the wrong sign for its bound to its other bound (the basics follow);
// false when a variable without a finite other bound has one (the primal
// simplex then takes over).
func (p *Problem) makeDualFeasible(d []float64) bool {
	ok, flipped := true, false
	for j, dj := range d {
		if p.pos[j] >= 0 || p.lo[j] == p.up[j] {
			continue
		}
		atLo := p.x[j] <= p.lo[j]
		switch {
		case atLo && dj < -dualTol:
			if math.IsInf(p.up[j], 1) {
				ok = false
				continue
			}
			p.x[j], flipped = p.up[j], true
		case !atLo && dj > dualTol:
			p.x[j], flipped = p.lo[j], true
		}
	}
	if flipped {
		p.computeBasics()
	}
	return ok
}

// dual runs the dual simplex from a dual feasible basis until no basic
// variable is out of its bounds (it returns Optimal: the primal simplex
// then confirms), the rows are found infeasible, or it stops. A basis
// that is not dual feasible, or a pivot that goes numerically wrong,
// returns Optimal at once without claiming anything: the primal simplex
// goes on from wherever this left the basis.
func (p *Problem) dual(ctx context.Context, deadline time.Time, maxIt int, it *int) Status {
	n, m := p.n, p.m
	d := make([]float64, n+m)
	p.reducedCosts(d)
	if !p.makeDualFeasible(d) {
		return Optimal
	}
	rho := make([]float64, m)
	alpha := make([]float64, m)
	acc := make([]float64, n+m) // pivotRow's accumulator, kept zeroed
	var touched []int
	var rowJ []int
	var rowA []float64
	for ; ; *it++ {
		if *it >= maxIt {
			return Stopped
		}
		if *it%64 == 0 && (ctx.Err() != nil || !deadline.IsZero() && time.Now().After(deadline)) {
			return Stopped
		}
		if len(p.etas)-p.base >= refactor {
			p.reinvert()
			p.reducedCosts(d)
			if !p.makeDualFeasible(d) {
				return Optimal
			}
		}
		// Leaving: the basic variable farthest outside its bounds.
		r, worst, toLo := -1, feasTol, false
		for i, j := range p.head {
			if v := p.lo[j] - p.x[j]; v > worst {
				r, worst, toLo = i, v, true
			}
			if v := p.x[j] - p.up[j]; v > worst {
				r, worst, toLo = i, v, false
			}
		}
		if r < 0 {
			return Optimal
		}
		// Row r of B⁻¹A over the nonbasic variables.
		clear(rho)
		rho[r] = 1
		p.btran(rho)
		rowJ, rowA = p.pivotRow(rho, rowJ[:0], rowA[:0], acc, &touched)
		q, ratio, qa := -1, math.Inf(1), 0.0
		for k, j := range rowJ {
			a := rowA[k]
			// Candidates move x_r towards the bound it leaves at
			// while their reduced cost keeps its sign longest (ties:
			// the larger pivot, then the lower index).
			atLo := p.x[j] <= p.lo[j]
			var t float64
			switch {
			case toLo && atLo && a < 0, !toLo && atLo && a > 0:
				t = d[j] / math.Abs(a)
			case toLo && !atLo && a > 0, !toLo && !atLo && a < 0:
				t = -d[j] / math.Abs(a)
			default:
				continue
			}
			t = max(t, 0)
			if t < ratio-1e-12 || t <= ratio+1e-12 && (math.Abs(a) > math.Abs(qa) || math.Abs(a) == math.Abs(qa) && j < q) {
				q, ratio, qa = j, t, a
			}
		}
		if q < 0 {
			return Infeasible // the row's dual ray: x_r cannot reach its bound
		}
		clear(alpha)
		p.column(q, alpha)
		p.ftran(alpha)
		if math.Abs(alpha[r]-qa) > 1e-6*(1+math.Abs(qa)) {
			return Optimal // inaccurate: leave it to the primal simplex
		}
		// Dual step: q's reduced cost becomes 0, the leaving variable's −t.
		t := d[q] / qa
		for k, j := range rowJ {
			d[j] -= t * rowA[k]
		}
		leave := p.head[r]
		d[q], d[leave] = 0, -t
		// Primal step: x_r lands on its bound.
		bound := p.up[leave]
		if toLo {
			bound = p.lo[leave]
		}
		delta := (p.x[leave] - bound) / alpha[r]
		for i, j := range p.head {
			if a := alpha[i]; a != 0 {
				p.x[j] -= delta * a
			}
		}
		p.x[q] += delta
		p.x[leave] = bound
		p.Iterations++
		p.DualIterations++
		p.pushEta(r, alpha)
		p.pos[leave] = -1
		p.head[r] = q
		p.pos[q] = r
	}
}

// denseRho: a ρ whose rows of A hold more than a denseRho-th of its
// entries is priced column by column (a variable so that the tests can
// send every row down either path).
var denseRho = 2

// pivotRow appends to rowJ/rowA the entries of ρA (ρ a row of B⁻¹) on the
// nonbasic, non-fixed variables whose magnitude is a pivot. When ρ is
// sparse it goes through the rows of A that ρ touches (the row-wise copy,
// made on first use), else through every column.
func (p *Problem) pivotRow(rho []float64, rowJ []int, rowA []float64, acc []float64, touched *[]int) ([]int, []float64) {
	n, m := p.n, p.m
	keep := func(j int) bool { return p.pos[j] < 0 && p.lo[j] != p.up[j] }
	if p.rowIdx == nil {
		p.rowIdx, p.rowVal = make([][]int32, m), make([][]float64, m)
		for j := 0; j < n; j++ {
			p.nnz += len(p.colIdx[j])
			for k, i := range p.colIdx[j] {
				p.rowIdx[i] = append(p.rowIdx[i], int32(j))
				p.rowVal[i] = append(p.rowVal[i], p.colVal[j][k])
			}
		}
	}
	// Through the rows ρ touches when they hold fewer entries than a
	// denseRho-th of A, else through every column.
	work := 0
	for i, v := range rho {
		if v != 0 {
			work += 1 + len(p.rowIdx[i])
		}
	}
	if work*denseRho > p.nnz+m {
		for j := 0; j < n+m; j++ {
			if !keep(j) {
				continue
			}
			if a := -p.reduced(0, rho, j); math.Abs(a) >= pivotTol {
				rowJ, rowA = append(rowJ, j), append(rowA, a)
			}
		}
		return rowJ, rowA
	}
	ts := (*touched)[:0]
	add := func(j int, v float64) {
		if acc[j] == 0 {
			ts = append(ts, j)
		}
		acc[j] += v
		if acc[j] == 0 {
			acc[j] = math.SmallestNonzeroFloat64 // still listed once
		}
	}
	for i, v := range rho {
		if v == 0 {
			continue
		}
		add(n+i, v)
		for k, j := range p.rowIdx[i] {
			add(int(j), v*p.rowVal[i][k])
		}
	}
	for _, j := range ts {
		if a := acc[j]; keep(j) && math.Abs(a) >= pivotTol {
			rowJ, rowA = append(rowJ, j), append(rowA, a)
		}
		acc[j] = 0
	}
	*touched = ts
	return rowJ, rowA
}

// Duals returns the row prices of the current basis for the maximisation:
// at an optimum, y ≥ 0 on ≤ rows and Σ_i b_i y_i + Σ_j max over
// [lo_j, up_j] of (c_j − y·a_j)·x_j equals the objective (DualBound).
func (p *Problem) Duals() []float64 {
	y := make([]float64, p.m)
	for i, j := range p.head {
		if j < p.n {
			y[i] = p.cost[j]
		}
	}
	p.btran(y)
	return y
}

// DualBound is the Lagrangian bound of prices y (negative prices of ≤
// rows count as zero): every feasible point's objective is at most it,
// whatever y, so it is a bound that does not trust the simplex.
func (p *Problem) DualBound(y []float64) float64 {
	rows, reduced := p.DualTerms(y)
	var z float64
	for _, t := range rows {
		z += t
	}
	for j, d := range reduced {
		lo, up := p.lo[j], p.up[j]
		switch {
		case d > 1e-9 && math.IsInf(up, 1):
			return math.Inf(1)
		case d > 0 && !math.IsInf(up, 1):
			z += d * up
		default:
			z += d * lo
		}
	}
	return z
}

// DualTerms are DualBound's parts at prices y: each row's b_i y_i, and
// each variable's reduced cost c_j − y·a_j (negative prices of ≤ rows
// count as zero). A caller that bounds parts of the problem with other
// variable bounds sums them itself.
func (p *Problem) DualTerms(y []float64) (rows, reduced []float64) {
	price := func(i int) float64 {
		if !p.eq[i] {
			return max(y[i], 0)
		}
		return y[i]
	}
	rows = make([]float64, p.m)
	for i := range rows {
		rows[i] = p.rhs[i] * price(i)
	}
	reduced = make([]float64, p.n)
	for j := range reduced {
		d := p.cost[j]
		for k, r := range p.colIdx[j] {
			d -= price(int(r)) * p.colVal[j][k]
		}
		reduced[j] = d
	}
	return rows, reduced
}
