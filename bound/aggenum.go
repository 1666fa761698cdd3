package bound

import (
	"math"
	"math/rand/v2"
)

// enumStep is the exact step of Search over one or two bins of one node:
// every pattern (pair) of the free bins is tried, and for each the node's
// best claim counts are read from per-shape knapsack tables. The classes
// whose claims need one shape (most: a claim held to one GPU is one item)
// are re-chosen; those needing several shapes (claims split into
// single-device items) keep their counts, which the SAT steps change.
// A step costs a few milliseconds where the SAT model of the same step
// spends its time on counting refutations. It writes the improvement into
// pat and y and tells whether there was one (weight at least target).
//
// Among the best combinations it takes one at random (rng): a step asked
// for no more than the node has (a sideways step) moves the search
// along a plateau, and may free claims that another node can use.
func (na *NodeAggregate) enumStep(ni int, free [][2]int, pat, y [][]int, avail []int, target int64, rng *rand.Rand) bool {
	node := na.Nodes[ni]
	isFree := map[[2]int]bool{}
	for _, f := range free {
		isFree[f] = true
	}
	// What the fixed part of the node supplies, and what the classes kept
	// as they are need.
	rest := make([]int, na.Shapes)
	for gi, g := range na.Groups {
		if g.Node != node {
			continue
		}
		for b := 0; b < g.Bins; b++ {
			if !isFree[[2]int{gi, b}] {
				for _, sc := range g.Patterns[pat[gi][b]] {
					rest[sc.Shape] += sc.N
				}
			}
		}
	}
	type simple struct {
		ki, mult, avail int
		w               int64
	}
	byShape := make([][]simple, na.Shapes)
	var kept int64
	for ki, k := range na.Classes {
		if !containsInt(k.Nodes, node) {
			continue
		}
		w := int64(math.Round(k.Weight))
		if len(k.Demand) == 1 && k.Demand[0].N == math.Trunc(k.Demand[0].N) {
			if a := avail[ki]; a > 0 {
				d := k.Demand[0]
				byShape[d.Shape] = append(byShape[d.Shape], simple{ki, int(d.N), a, w})
			}
			continue
		}
		for _, d := range k.Demand {
			rest[d.Shape] -= int(math.Ceil(float64(y[ki][ni]) * d.N))
		}
		kept += int64(y[ki][ni]) * w
	}
	// The most any shape can get from the free bins.
	most := make([]int, na.Shapes)
	for _, f := range free {
		g := &na.Groups[f[0]]
		for _, p := range g.Patterns {
			for _, sc := range p {
				most[sc.Shape] = max(most[sc.Shape], sc.N)
			}
		}
	}
	// table[s][c]: the most weight of shape s's simple classes in c units.
	table := make([][]int64, na.Shapes)
	for s := range table {
		capS := max(0, rest[s]+len(free)*most[s])
		t := make([]int64, capS+1)
		for _, sm := range byShape[s] {
			for n := 0; n < sm.avail; n++ { // bounded: one copy at a time
				for c := capS; c >= sm.mult; c-- {
					t[c] = max(t[c], t[c-sm.mult]+sm.w)
				}
			}
		}
		table[s] = t
	}
	// Only the shapes some claim here needs count.
	var needed []int
	for s := range table {
		if len(byShape[s]) > 0 || rest[s] < 0 {
			needed = append(needed, s)
		}
	}
	value := func(sup []int) (int64, bool) {
		v := kept
		for _, s := range needed {
			c := sup[s]
			if c < 0 {
				return 0, false
			}
			t := table[s]
			v += t[min(c, len(t)-1)]
		}
		return v, true
	}
	sup := make([]int, na.Shapes)
	add := func(p []ShapeCount, sign int) {
		for _, sc := range p {
			sup[sc.Shape] += sign * sc.N
		}
	}
	copy(sup, rest)
	best, bestP, ties := int64(-1), [2]int{}, 0
	consider := func(v int64, p0, p1 int) {
		switch {
		case v > best:
			best, bestP, ties = v, [2]int{p0, p1}, 1
		case v == best:
			if ties++; rng.IntN(ties) == 0 {
				bestP = [2]int{p0, p1}
			}
		}
	}
	g0 := &na.Groups[free[0][0]]
	for p0 := range g0.Patterns {
		add(g0.Patterns[p0], 1)
		if len(free) == 1 {
			if v, ok := value(sup); ok {
				consider(v, p0, -1)
			}
		} else {
			g1 := &na.Groups[free[1][0]]
			from := 0
			if free[1][0] == free[0][0] {
				from = p0 // identical bins: unordered pairs
			}
			for p1 := from; p1 < len(g1.Patterns); p1++ {
				add(g1.Patterns[p1], 1)
				if v, ok := value(sup); ok {
					consider(v, p0, p1)
				}
				add(g1.Patterns[p1], -1)
			}
		}
		add(g0.Patterns[p0], -1)
	}
	if best < target {
		return false
	}
	for i, f := range free {
		pat[f[0]][f[1]] = bestP[i]
		add(na.Groups[f[0]].Patterns[bestP[i]], 1)
	}
	// Read the counts back from the tables, shape by shape.
	for s, sms := range byShape {
		c := min(sup[s], len(table[s])-1)
		for _, sm := range sms {
			y[sm.ki][ni] = 0
		}
		// Recompute the table class by class to trace the choice.
		tabs := make([][]int64, len(sms)+1)
		tabs[0] = make([]int64, c+1)
		for j, sm := range sms {
			t := append([]int64(nil), tabs[j]...)
			for n := 0; n < sm.avail; n++ {
				for cc := c; cc >= sm.mult; cc-- {
					t[cc] = max(t[cc], t[cc-sm.mult]+sm.w)
				}
			}
			tabs[j+1] = t
		}
		for j := len(sms) - 1; j >= 0; j-- {
			sm := sms[j]
			// The most copies of class j that keep the optimum.
			for n := min(sm.avail, c/max(sm.mult, 1)); n >= 0; n-- {
				if tabs[j][c-n*sm.mult]+int64(n)*sm.w == tabs[j+1][c] {
					y[sm.ki][ni] = n
					c -= n * sm.mult
					break
				}
			}
		}
	}
	return true
}
