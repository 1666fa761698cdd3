package bound

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/drasat/drasat/bound/lp"
)

// RootLP is the per-node model's LP relaxation, solved: its bound, and
// the parts of its dual bound by node and class, which bound the model
// of any of its nodes with any claims left (BoundOn) without solving it.
type RootLP struct {
	// Bound is the weight no solution of the model exceeds.
	Bound int64
	na    *NodeAggregate
	// nodeTerm is, by node, its rows' b·y and its pattern counts'
	// positive reduced costs at their upper bounds; classPrice the price
	// of each class's row (by index in na.Classes), classReduced the
	// positive reduced cost of each class's count on a node.
	nodeTerm     map[int]float64
	classPrice   []float64
	classReduced []map[int]float64
}

// SolveRoot solves the per-node model's LP relaxation. Where pods' node
// resources bind on nodes that differ (zones, taints, cordons, what runs
// there), the global model (Global), which pools every node's capacity
// into one row a resource, bounds far above it: on a 16-node batch of
// the independent generator with pods 536 against 524, with 523 found.
func (na *NodeAggregate) SolveRoot(ctx context.Context, deadline time.Time) (*RootLP, error) {
	prob, cols, rows := na.lpRows()
	if s := prob.Solve(ctx, deadline); s != lp.Optimal {
		return nil, errors.New("aggregated LP: " + s.String())
	}
	y := prob.Duals()
	b := prob.DualBound(y)
	if b >= math.MaxInt64/2 {
		return nil, errors.New("aggregated LP: no finite dual bound")
	}
	root := &RootLP{
		Bound:        int64(math.Floor(b + 1e-6)),
		na:           na,
		nodeTerm:     map[int]float64{},
		classPrice:   make([]float64, len(na.Classes)),
		classReduced: make([]map[int]float64, len(na.Classes)),
	}
	rowTerm, reduced := prob.DualTerms(y)
	for ki := range na.Classes {
		root.classReduced[ki] = map[int]float64{}
	}
	for i, r := range rows {
		switch r.kind {
		case 'g', 'r': // a node's bins, a node's capacity
			root.nodeTerm[r.b] += rowTerm[i]
		case 'k':
			root.classPrice[r.a] = max(y[i], 0) // a ≤ row
		}
	}
	for j, c := range cols {
		d := max(reduced[j], 0)
		_, up := prob.Bounds(j)
		switch {
		case c.group >= 0:
			root.nodeTerm[na.Groups[c.group].Node] += d * up
		case c.class >= 0:
			root.classReduced[c.class][c.index] = d
		default: // a distinct row's δ (distinct.go), of node c.index
			root.nodeTerm[c.index] += d * up
		}
	}
	return root, nil
}

// BoundOn bounds the LP relaxation of the model of nodes with at most
// most[k] claims of each class k (onNodes) by the root's prices. Weak
// duality holds for any prices, so it is a bound whatever claims are
// left, and it costs a sum, not an LP: DistributeByNode skips the trades
// it shows cannot gain. The sub-model lacks the shape rows no class of
// it needs, which only lowers its patterns' reduced costs: the root's
// bound them.
func (r *RootLP) BoundOn(nodes []int, most []int) float64 {
	var z float64
	for _, n := range nodes {
		z += r.nodeTerm[n]
	}
	for ki := range r.na.Classes {
		if most[ki] <= 0 {
			continue
		}
		in := false
		for _, n := range nodes {
			if d, ok := r.classReduced[ki][n]; ok {
				in = true
				z += d * float64(most[ki])
			}
		}
		if in {
			z += r.classPrice[ki] * float64(most[ki])
		}
	}
	return z
}

// RootLater is a RootLP being solved on another goroutine
// (SolveRootLater), for a search that has work to do before it needs the
// prices.
type RootLater struct {
	done chan struct{}
	root *RootLP
}

// SolveRootLater starts SolveRoot on another goroutine. The model must
// not change until it is done (Wait).
func (na *NodeAggregate) SolveRootLater(ctx context.Context, deadline time.Time) *RootLater {
	r := &RootLater{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if root, err := na.SolveRoot(ctx, deadline); err == nil {
			r.root = root
		}
	}()
	return r
}

// Wait waits until the LP is done and gives it, nil when it failed (or
// for a nil RootLater).
func (r *RootLater) Wait() *RootLP {
	if r == nil {
		return nil
	}
	<-r.done
	return r.root
}
