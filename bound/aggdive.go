package bound

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
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
		// Distinct rows' δs (distinct.go) last: they follow the claim
		// counts, and fixed first they steered the dive into failure
		// after failure (rich 64x8/2,000: no answer in 60 s).
		j, bestF, bestC, bestD := -1, -1.0, false, true
		for k := 0; k < prob.Columns(); k++ {
			v := prob.Value(k)
			f := v - math.Floor(v)
			if f < 1e-6 || f > 1-1e-6 {
				continue
			}
			d := cols[k].group < 0 && cols[k].class < 0
			if d && !bestD {
				continue
			}
			if !d && bestD && j >= 0 {
				j = -1 // a count outranks any δ
			}
			bestD = d
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
	if len(na.Nodes) == 1 && na.Nodes[0] == -1 || na.oneNode {
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
		switch {
		case c.group >= 0:
			vals[na.Groups[c.group].Var(c.index)] = v
		case c.class >= 0:
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
	p, cols, _ := na.lpRows()
	return p, cols
}

// lpRow tells what a row of the model's LP is, for SolveRoot to split
// the dual bound by node and class: a group's bins, a class's claims, a
// shape's supply on a node, a node's capacity of a resource, or a
// distinct row's link, order or cover row (distinct.go).
type lpRow struct {
	kind byte // 'g', 'k', 's', 'r'; 'l', 'o', 'v'
	a, b int  // group type and node; class index; shape and node; resource and node; distinct row and node or step
}

// lpRows is lp with the names of its rows.
func (na *NodeAggregate) lpRows() (*lp.Problem, []lpCol, []lpRow) {
	var rhs []float64
	var eq []bool
	var names []lpRow
	row := func(b float64, e bool, name lpRow) int {
		rhs = append(rhs, b)
		eq = append(eq, e)
		names = append(names, name)
		return len(rhs) - 1
	}
	groupRow := make([]int, len(na.Groups))
	for gi, g := range na.Groups {
		groupRow[gi] = row(float64(g.Bins), true, lpRow{'g', g.Type, g.Node})
	}
	classRow := make([]int, len(na.Classes))
	type sn struct{ s, n int }
	shapeRow := map[sn]int{}
	for ki, k := range na.Classes {
		classRow[ki] = row(float64(k.Max), false, lpRow{'k', ki, 0})
		for _, n := range k.Nodes {
			for _, d := range k.Demand {
				if _, ok := shapeRow[sn{d.Shape, n}]; !ok {
					shapeRow[sn{d.Shape, n}] = row(0, false, lpRow{'s', d.Shape, n})
				}
			}
		}
	}
	// Capacity rows, scaled to keep the simplex's numbers near 1 (the
	// bound does not rely on them: DualBound re-checks).
	type cn struct{ j, n int }
	capRow, capScale := map[cn]int{}, map[cn]float64{}
	for _, c := range na.Capacities {
		scale := max(1, float64(c.Free)/1024)
		capRow[cn{c.Resource, c.Node}] = row(float64(c.Free)/scale, false, lpRow{'r', c.Resource, c.Node})
		capScale[cn{c.Resource, c.Node}] = scale
	}
	// Distinct rows (distinct.go): per row, the link of its classes'
	// counts to its δs, the δs' order, and the cover row of each t.
	drs := na.distinctRows()
	type dRows struct{ link, order, cover []int }
	dr := make([]dRows, len(drs))
	for i, r := range drs {
		dr[i].link = []int{row(0, true, lpRow{'l', i, r.Node})}
		for t := 1; t <= r.Steps; t++ {
			if t > 1 {
				dr[i].order = append(dr[i].order, row(0, false, lpRow{'o', i, t}))
			}
			dr[i].cover = append(dr[i].cover, row(0, false, lpRow{'v', i, t}))
		}
		if r.Most > r.Steps { // Rest ≤ (Most − Steps)·δ_Steps
			dr[i].order = append(dr[i].order, row(0, false, lpRow{'o', i, r.Steps + 1}))
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
			for i, r := range drs {
				if r.Node != g.Node {
					continue
				}
				if sl := slotsOf(pat, r.Shape); sl > 0 {
					for t := 1; t <= r.Steps; t++ {
						rows = append(rows, dr[i].cover[t-1])
						vals = append(vals, -float64(min(sl, t)))
					}
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
			for j, v := range k.Requests {
				if r, ok := capRow[cn{j, n}]; ok && v > 0 {
					rows = append(rows, r)
					vals = append(vals, float64(v)/capScale[cn{j, n}])
				}
			}
			for i, r := range drs {
				if r.Node == n && slices.Contains(r.Classes, ki) {
					rows = append(rows, dr[i].link[0])
					vals = append(vals, 1)
				}
			}
			p.AddColumn(k.Weight, 0, float64(k.Max), rows, vals)
			cols = append(cols, lpCol{group: -1, class: ki, index: n})
		}
	}
	for i, r := range drs {
		// order[t-2] is δ_t − δ_{t−1} ≤ 0 (t ≥ 2); order[Steps-1], when
		// Most > Steps, is Rest − (Most − Steps)·δ_Steps ≤ 0.
		rest := float64(r.Most - r.Steps)
		for t := 1; t <= r.Steps; t++ {
			rows, vals := []int{dr[i].link[0], dr[i].cover[t-1]}, []float64{-1, float64(r.Items * t)}
			if t > 1 {
				rows = append(rows, dr[i].order[t-2])
				vals = append(vals, 1)
			}
			switch {
			case t < r.Steps:
				rows = append(rows, dr[i].order[t-1])
				vals = append(vals, -1)
			case rest > 0:
				rows = append(rows, dr[i].order[t-1])
				vals = append(vals, -rest)
			}
			p.AddColumn(0, 0, 1, rows, vals)
			cols = append(cols, lpCol{group: -1, class: -1, index: r.Node})
		}
		if rest > 0 {
			p.AddColumn(0, 0, rest, []int{dr[i].link[0], dr[i].order[r.Steps-1]}, []float64{-1, 1})
			cols = append(cols, lpCol{group: -1, class: -1, index: r.Node})
		}
	}
	return p, cols, names
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
	// The cluster's capacity of a resource is what its rows' nodes have
	// free, plus, for a class that may use a node without a row (the
	// node does not limit the resource, or it holds whatever the classes
	// could ask), all the class asks: a relaxation of the per-node rows.
	free := map[int]int64{}
	unit := map[int]int64{}
	rowNodes := map[int]map[int]bool{}
	for _, c := range na.Capacities {
		free[c.Resource] += c.Free
		unit[c.Resource] = c.Unit
		if rowNodes[c.Resource] == nil {
			rowNodes[c.Resource] = map[int]bool{}
		}
		rowNodes[c.Resource][c.Node] = true
	}
	for j := range free {
		for _, k := range na.Classes {
			if j < len(k.Requests) && k.Requests[j] > 0 && slices.ContainsFunc(k.Nodes, func(n int) bool { return !rowNodes[j][n] }) {
				free[j] += k.Requests[j] * int64(k.Max)
			}
		}
	}
	for j := range len(na.r.p.Resources) {
		if _, ok := free[j]; ok {
			g.Capacities = append(g.Capacities, NodeCapacity{Node: -1, Resource: j, Free: free[j], Unit: unit[j]})
		}
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
// per-node model without node resources (with them, DistributeByNode).
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

// DistributeByNode turns a solution of the global model (Global) into one
// of this per-node model node by node: each node, in order, takes the
// most weight it can of the global answer's claims not taken yet, by a
// dive on the model of that node alone (its bins, its capacity rows, the
// classes' counts left); then the nodes, in order again, take what they
// still can of the other claims. Where the pods' node resources bind, a
// greedy spread (Distribute, checking each node's capacity) loses claims
// that each node's own model keeps: the nodes' patterns are chosen for the claims they get. While
// time is left, pairs of nodes then trade: the model of both, with their
// claims and those no node took, dived for more than they hold, the
// pairs of the node left with the most room first, then triples when no
// pair gains, until neither gains or the spread holds goal (the caller's
// bound: no trade gains past it). With root (the per-node LP, solved on
// another goroutine while the first pass runs; the trades wait for it;
// nil or failed: none), sets of up to four nodes trade, only those its
// prices leave room in, the most room first, and its bound lowers goal.
// The answer is a solution of the per-node model; it bounds nothing.
func (na *NodeAggregate) DistributeByNode(ctx context.Context, deadline time.Time, global *NodeAggregate, values map[string]float64, goal int64, root *RootLater) (map[string]float64, int64) {
	// The node order decides what the first nodes take: while the
	// answer weighs less than the global one and than goal (no start
	// can do better than the bound), and time is left, the
	// spread starts again from the next node (on 8x8 batches with pods
	// one start in eight met the global answer where the first missed it
	// by one claim).
	var target float64
	for ki := range na.Classes {
		target += values[global.Classes[ki].Var(-1)] * na.Classes[ki].Weight
	}
	var best map[string]float64
	var bestW int64 = -1
	for k := 0; k < len(na.Nodes); k++ {
		if k > 0 && (ctx.Err() != nil || time.Now().After(deadline)) {
			break
		}
		order := append(slices.Clone(na.Nodes[k:]), na.Nodes[:k]...)
		vals, w := na.distributeFrom(ctx, deadline, order, global, values, goal, root)
		if w > bestW {
			best, bestW = vals, w
		}
		if r := root.Wait(); r != nil {
			goal = min(goal, r.Bound)
		}
		if float64(bestW) >= target-1e-6 || bestW >= goal {
			break
		}
	}
	return best, bestW
}

// distributeFrom is one spread of DistributeByNode, nodes taken in order.
func (na *NodeAggregate) distributeFrom(ctx context.Context, deadline time.Time, order []int, global *NodeAggregate, values map[string]float64, goal int64, later *RootLater) (map[string]float64, int64) {
	// on[n] is node n's part of the answer, held[n] its claims by class.
	on := map[int]AggregateSolution{}
	held := map[int][]int{}
	for _, n := range order {
		held[n] = make([]int, len(na.Classes))
	}
	unheld := make([]int, len(na.Classes)) // claims no node holds
	for ki, k := range na.Classes {
		unheld[ki] = k.Max
	}
	// take dives on the model of nodes with at most most[k] claims of
	// each class k and keeps its answer when it weighs more than the
	// nodes' parts do.
	take := func(nodes []int, most []int) bool {
		var now int64
		for _, n := range nodes {
			now += on[n].Objective
		}
		sub := na.onNodes(nodes, most)
		if len(sub.Classes) == 0 {
			return false
		}
		sol, _, err := sub.Dive(ctx, deadline, now+1)
		if err != nil || sol.Values == nil || sol.Objective <= now {
			return false
		}
		for _, n := range nodes {
			for ki, v := range held[n] {
				unheld[ki] += v
			}
			part := AggregateSolution{Values: map[string]float64{}}
			for _, g := range sub.Groups {
				if g.Node != n {
					continue
				}
				for p := range g.Patterns {
					if v := sol.Values[g.Var(p)]; v > 0 {
						part.Values[g.Var(p)] = v
					}
				}
			}
			for ki, k := range na.Classes {
				v := int(math.Round(sol.Values[k.Var(n)]))
				if v > 0 {
					part.Values[k.Var(n)] = float64(v)
				}
				held[n][ki] = v
				unheld[ki] -= v
				part.Objective += int64(v) * int64(k.Weight)
			}
			on[n] = part
		}
		return true
	}
	expired := func() bool { return ctx.Err() != nil || time.Now().After(deadline) }
	// The global answer's claims, then any.
	wanted := make([]int, len(na.Classes))
	for ki := range na.Classes {
		wanted[ki] = int(math.Round(values[global.Classes[ki].Var(-1)]))
	}
	for i, n := range order {
		if expired() {
			break
		}
		// A node's fair share of each class first, so that the first
		// nodes do not take all the claims that pack best and leave the
		// last ones what fits nowhere.
		share := make([]int, len(wanted))
		for ki, w := range wanted {
			share[ki] = min(w, int(math.Ceil(fairShare*float64(w)/float64(len(order)-i))))
		}
		if take([]int{n}, share) {
			for ki, v := range held[n] {
				wanted[ki] -= v
			}
		}
	}
	for _, n := range order {
		if expired() {
			break
		}
		if _, ok := on[n]; !ok {
			take([]int{n}, unheld)
		}
	}
	heldWeight := func() (w int64) {
		for _, n := range order {
			w += on[n].Objective
		}
		return w
	}
	// used is what node n's claims ask of resource j.
	used := func(n, j int) int64 {
		var u int64
		for ki, k := range na.Classes {
			if j < len(k.Requests) {
				u += int64(held[n][ki]) * k.Requests[j]
			}
		}
		return u
	}
	// slack is the share of node n's capacity rows that its claims leave
	// free: pairs with the node of most slack are tried first (the last
	// nodes of the first pass hold what the others left, and room; at
	// 16x8 a round in node order took seconds to reach them).
	slack := func(n int) float64 {
		var s float64
		for _, c := range na.Capacities {
			if c.Node == n && c.Free > 0 {
				s += float64(c.Free-used(n, c.Resource)) / float64(c.Free)
			}
		}
		return s
	}
	// The trades wait for the per-node LP: taken up whenever it came,
	// the answer would depend on the machine's speed even with time to
	// spare.
	root := later.Wait()
	if root != nil {
		goal = min(goal, root.Bound)
	}
	done := func() bool { return expired() || heldWeight() >= goal }
	// mostOf is what the model of nodes may hold of each class: their
	// claims and those no node holds.
	mostOf := func(nodes []int) []int {
		most := slices.Clone(unheld)
		for ki := range most {
			for _, n := range nodes {
				most[ki] += held[n][ki]
			}
		}
		return most
	}
	// A trade that failed fails again while its nodes hold the same
	// claims and no class has more claims unheld than it had then (the
	// model of the nodes is only tighter): failed keeps, by set of nodes,
	// their versions and the unheld counts of that try. The rounds after
	// a gain retry every set, most of them untouched by it.
	version := map[int]int{}
	type tried struct {
		versions []int
		unheld   []int
	}
	failed := map[string]tried{}
	trade := func(nodes ...int) bool {
		key := fmt.Sprint(nodes)
		vs := make([]int, len(nodes))
		for i, n := range nodes {
			vs[i] = version[n]
		}
		if f, ok := failed[key]; ok && slices.Equal(f.versions, vs) && dominated(unheld, f.unheld) {
			return false
		}
		if take(nodes, mostOf(nodes)) {
			for _, n := range nodes {
				version[n]++
			}
			return true
		}
		failed[key] = tried{vs, slices.Clone(unheld)}
		return false
	}
	// ranked is the sets of size nodes to try, the node of most slack
	// first; with the root LP's prices, only the sets whose bound by
	// them (RootLP.BoundOn) leaves room for one more claim, the most
	// room first. Without them, on a 16x8 batch with pods, 353 of 357
	// pair trades solved an LP (9 ms each) only to find it could not
	// gain, and triples (17 ms) were tried in an order that reached the
	// one that gained after seconds; the prices cost microseconds a set.
	ranked := func(size int) [][]int {
		byslack := slices.Clone(order)
		sl := map[int]float64{}
		for _, n := range byslack {
			sl[n] = slack(n)
		}
		sort.SliceStable(byslack, func(i, j int) bool { return sl[byslack[i]] > sl[byslack[j]] })
		type candidate struct {
			nodes []int
			room  float64 // by the prices; 0 without them
		}
		var cands []candidate
		var walk func(from int, set []int)
		walk = func(from int, set []int) {
			if len(set) == size {
				c := candidate{nodes: slices.Clone(set)}
				if root != nil {
					var now int64
					for _, n := range set {
						now += on[n].Objective
					}
					if c.room = root.BoundOn(set, mostOf(set)) - float64(now); c.room < 1-1e-6 {
						return
					}
				}
				cands = append(cands, c)
				return
			}
			for i := from; i < len(byslack); i++ {
				walk(i+1, append(set, byslack[i]))
			}
		}
		walk(0, nil)
		slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.room, a.room) })
		sets := make([][]int, len(cands))
		for i, c := range cands {
			sets[i] = c.nodes
		}
		return sets
	}
	// Pairs trade until no pair gains, or the spread holds goal (a bound:
	// no trade gains past it). When a round of pairs gains nothing,
	// larger sets trade until one gains, and the pairs start again: a
	// claim that needs a chain of moves (a to b, b to c) is out of every
	// pair's reach (on a 16x8 batch with pods pairs stopped at 490 of the
	// bound 493, triples reached 492). Sets of four only where the
	// prices rank them: without, there are too many to try.
	for gained := !done(); gained; {
		gained = false
		largest := 3
		if root != nil {
			largest = 4
		}
	sizes:
		for size := 2; size <= largest && size <= len(order); size++ {
			for _, set := range ranked(size) {
				if done() {
					break sizes
				}
				if trade(set...) {
					gained = true
					if size > 2 {
						break sizes
					}
				}
			}
			if gained {
				break
			}
		}
	}
	out := map[string]float64{}
	var weight int64
	for _, n := range na.Nodes {
		for name, v := range on[n].Values {
			out[name] = v
		}
		weight += on[n].Objective
	}
	return out, weight
}

// dominated tells whether no count of a exceeds b's.
func dominated(a, b []int) bool {
	for i := range a {
		if a[i] > b[i] {
			return false
		}
	}
	return true
}

// fairShare is how many times its even share of a class's claims left a
// node may take in DistributeByNode's first pass: 1, 2 and 3 did the same
// within a claim on the measured batches (docs/performance.md).
const fairShare = 2.0

// onNodes is the model of the given nodes alone, with at most most[k]
// claims of each class k (classes with none left are dropped).
func (na *NodeAggregate) onNodes(nodes []int, most []int) *NodeAggregate {
	sub := &NodeAggregate{Stats: na.Stats, Shapes: na.Shapes, Nodes: nodes, r: na.r, ag: na.ag, oneNode: true, spread: na.spread}
	for _, g := range na.Groups {
		if slices.Contains(nodes, g.Node) {
			sub.Groups = append(sub.Groups, g)
		}
	}
	for ki, k := range na.Classes {
		if most[ki] <= 0 {
			continue
		}
		var ns []int
		for _, n := range k.Nodes {
			if slices.Contains(nodes, n) {
				ns = append(ns, n)
			}
		}
		if len(ns) == 0 {
			continue
		}
		k.Nodes, k.Max = ns, most[ki]
		sub.Classes = append(sub.Classes, k)
	}
	for _, c := range na.Capacities {
		if slices.Contains(nodes, c.Node) {
			sub.Capacities = append(sub.Capacities, c)
		}
	}
	return sub
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
	return len(na.Groups) + len(na.Classes) + len(shape) + len(na.Capacities)
}
