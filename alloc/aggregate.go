package alloc

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// aggregateMinTime is the least time left for which the aggregated stage
// is worth starting: writing the model, CBC and the realisation.
const aggregateMinTime = 500 * time.Millisecond

// The aggregate stages solve the aggregated claim-pattern model per node
// (bound.NodeAggregate) and realise its answer: every GPU keeps the
// devices of a layout holding its pattern, every admitted claim is held to
// its node, and the SAT model over just those claims and devices places
// them exactly. The patterns and nodes are the search the SAT model cannot
// do on large batches; what is left per node is small. Two solvers sit
// behind the same realisation:
//
//   - solveCBC (opt-in, Options.UseCBC): CBC on the model's LP file;
//     CBC's proven optimum is a bound;
//   - searchNodes (opt-in, Options.AggregateSAT, pure Go): neighbourhood
//     search over patterns (bound.NodeAggregate.Search) from the
//     incumbent; it proves no bound, and reaching the relaxation's bound
//     is what would prove its answer optimal. Off by default: on the
//     batches measured it finds less than the stages after it would in
//     the same time (docs/performance.md).

// aggregateAnswer is a solver's answer to the per-node model: the
// solution's counts (named as in the LP), its weight, and a bound on the
// model's optimum when the solver proved one.
type aggregateAnswer struct {
	values    map[string]float64
	objective int64
	bound     int64
	hasBnd    bool
}

// aggregateSolver solves the per-node model within end.
type aggregateSolver func(ctx context.Context, cs *componentState, na *bound.NodeAggregate, end time.Time) (aggregateAnswer, error)

// aggregateRealise is the aggregate stage: CBC with Options.UseCBC
// (skipped when cbc is not on PATH), the in-house search with
// Options.AggregateSAT; skipped otherwise. The search starts from the
// incumbent, which is a solution of the model only where the model is a
// relaxation (plainDevices).
func aggregateRealise(ctx context.Context, cs *componentState, end time.Time) outcome {
	switch {
	case cs.opts.UseCBC && mip.CBCPath() != "":
		return aggregateStage(ctx, cs, end, 2.0/3, solveCBC)
	case !cs.opts.UseCBC && cs.opts.AggregateSAT && plainDevices(cs):
		return aggregateStage(ctx, cs, end, 2.0/3, searchNodes)
	}
	return skipped
}

// aggregateDive is the default aggregate stage: diving on the per-node
// model's LP relaxation (bound.NodeAggregate.Dive, pure Go) for an answer
// above the incumbent, realised like the others. It runs only where the
// model is a relaxation (plainDevices), which is where the LP's value
// says what is within reach.
//
// On components whose per-node model the dive solves as it is (up to
// Limits.DiveLPRows rows: up to about 16 nodes) it runs before best-fit: where
// the LP is tight (the MIG batches) the realised answer meets the
// relaxation's bound and ends the pipeline in a fraction of what best-fit
// takes. On larger ones it runs after best-fit (aggregateDiveLate): their
// realisation takes seconds, and under load it could leave best-fit
// without time.
func aggregateDive(ctx context.Context, cs *componentState, end time.Time) outcome {
	return aggregateDiveIf(ctx, cs, end, func(rows int) bool { return rows <= cs.limits().DiveLPRows })
}

// diveLateMinTime is the least time left for which the late dive is
// started: realising 64 nodes takes 2–6 s, and a dive that runs out of
// time only takes it from the neighbourhood search (with 4 s it cost
// count 64x8/2000 36 claims on a machine at load 4: 1,502 against 1,538).
const diveLateMinTime = 6 * time.Second

// aggregateDiveLate is the dive after best-fit, on the large components,
// when at least diveLateMinTime is left.
func aggregateDiveLate(ctx context.Context, cs *componentState, end time.Time) outcome {
	if time.Until(end) < diveLateMinTime {
		return skipped
	}
	return aggregateDiveIf(ctx, cs, end, func(rows int) bool { return rows > cs.limits().DiveLPRows })
}

func aggregateDiveIf(ctx context.Context, cs *componentState, end time.Time, here func(rows int) bool) outcome {
	if cs.opts.NoAggregateDive || !plainDevices(cs) || cs.rel == nil || !cs.short() || !cs.rel.Enumerated() {
		return skipped
	}
	na, err := cs.aggregateModel(end)
	if err != nil || !here(na.Rows()) {
		return skipped
	}
	return aggregateStage(ctx, cs, end, cs.plan.dive, diveLP)
}

// aggregateModel builds the per-node model once per component.
func (cs *componentState) aggregateModel(end time.Time) (*bound.NodeAggregate, error) {
	if cs.agg == nil {
		na, err := cs.rel.NodeAggregateBy(end)
		if err != nil {
			return nil, err
		}
		cs.agg = na
	}
	return cs.agg, nil
}

// aggregateStage builds the per-node model, solves it with solve and
// realises the answer, within share of the time left. Skipped when the
// relaxation could not enumerate layouts, when the incumbent meets the
// bound, or when little time is left.
func aggregateStage(ctx context.Context, cs *componentState, end time.Time, share float64, solve aggregateSolver) outcome {
	if cs.rel == nil || !cs.short() || !cs.rel.Enumerated() || time.Until(end) < aggregateMinTime {
		return skipped
	}
	// The stage takes at most its share of the time left (enumerating the
	// patterns included): the neighbourhood search follows when the
	// realisation fails, and on large batches it needs the time.
	end = minTime(end, time.Now().Add(time.Duration(float64(time.Until(end))*share)))
	na, err := cs.aggregateModel(end)
	if err != nil {
		return outcome{}
	}
	// The solver gets most of the stage, the realisation (fast once nodes
	// and layouts are fixed) the rest.
	if time.Until(end) < aggregateMinTime/2 {
		return outcome{}
	}
	sctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	ans, err := solve(sctx, cs, na, time.Now().Add(time.Until(end)*4/5))
	var out outcome
	if err == nil && ans.hasBnd && plainDevices(cs) {
		out = outcome{bound: ans.bound, hasBnd: true}
	}
	if err != nil || ans.values == nil || ans.objective <= cs.value {
		return out
	}
	keep, err := na.RealiseLayouts(ans.values)
	if err != nil {
		return out
	}
	nodes := cs.rel.NodesOf(ans.values, cs.claims)
	orig := map[int]*model.Claim{}
	var held []*model.Claim
	for _, c := range cs.claims {
		n, ok := nodes[c.Index]
		if !ok || c.Err != nil {
			continue
		}
		cc := *c
		cc.FixedNode = n
		orig[c.Index] = c
		held = append(held, &cc)
	}
	// With layouts and nodes fixed the nodes are independent (every bin
	// of the model lies on one node, and plain devices share nothing
	// across bins of different nodes): the SAT model of each node's
	// claims and devices alone, each asked for all its claims first.
	byNode := map[int][]*model.Claim{}
	var order []int
	for _, c := range held {
		if byNode[c.FixedNode] == nil {
			order = append(order, c.FixedNode)
		}
		byNode[c.FixedNode] = append(byNode[c.FixedNode], c)
	}
	var as []*Assignment
	for i, n := range order {
		nodeEnd := time.Now().Add(time.Until(end) / time.Duration(len(order)-i))
		got, err := realiseNode(ctx, cs, byNode[n], keep, nodeEnd)
		if err != nil {
			return out
		}
		as = append(as, got...)
	}
	val := cs.valueOf(as)
	if val <= cs.value {
		return out
	}
	for _, a := range as {
		a.Claim = orig[a.Claim.Index]
	}
	out.found, out.alloc = true, as
	return out
}

// realiseNode places the most weight of one node's held claims on the
// devices kept: all of them first (usually at once), else more and more
// from nothing, until the deadline.
func realiseNode(ctx context.Context, cs *componentState, held []*model.Claim, keep []bool, end time.Time) ([]*Assignment, error) {
	m, err := encode.Encode(cs.p, held, encode.Options{Symmetry: true, DeviceSymmetry: true, Allowed: func(d int) bool { return keep[d] }})
	if err != nil {
		return nil, err
	}
	obj := objectiveSorter(m, cs.weight)
	s := solver.New(m.C, m.Clauses)
	var all int64
	for _, c := range held {
		all += cs.weight(c)
	}
	if s.Solve(ctx, end, obj.Geq(int(all))) == solver.Sat {
		return decode(cs.p, m, s), nil
	}
	var as []*Assignment
	for val := int64(0); val < all; val = cs.valueOf(as) {
		if s.Solve(ctx, end, obj.Geq(int(val+1))) != solver.Sat {
			break
		}
		as = decode(cs.p, m, s)
	}
	return as, nil
}

// solveCBC solves the model with CBC (one thread, through a temporary LP
// file, at most the stage's time as wall time).
func solveCBC(ctx context.Context, cs *componentState, na *bound.NodeAggregate, end time.Time) (aggregateAnswer, error) {
	var buf bytes.Buffer
	if err := na.WriteLP(&buf); err != nil {
		return aggregateAnswer{}, err
	}
	dir, err := os.MkdirTemp("", "drasat-aggregate-")
	if err != nil {
		return aggregateAnswer{}, err
	}
	defer os.RemoveAll(dir)
	lp := filepath.Join(dir, "aggregate.lp")
	if err := os.WriteFile(lp, buf.Bytes(), 0o600); err != nil {
		return aggregateAnswer{}, err
	}
	// CBC's limit is whole seconds: the context ends it at the stage's end
	// whatever it makes of the limit.
	sol, err := mip.SolveCBC(ctx, lp, time.Until(end))
	if err != nil {
		return aggregateAnswer{}, err
	}
	ans := aggregateAnswer{values: sol.Values, objective: int64(math.Floor(sol.Objective + 1e-6))}
	if sol.Status != "" && isOptimal(sol.Status) {
		ans.bound, ans.hasBnd = ans.objective, true
	}
	return ans, nil
}

// searchNodes solves the model with the in-house node neighbourhood
// search, from the incumbent, towards the component's bound.
func searchNodes(ctx context.Context, cs *componentState, na *bound.NodeAggregate, end time.Time) (aggregateAnswer, error) {
	start := map[int]int{}
	for _, a := range cs.best {
		n := a.Node
		if len(a.Picks) > 0 {
			if r := cs.p.Devices[a.Picks[0].Dev].Reach; len(r) == 1 {
				n = r[0]
			}
		}
		if n < 0 {
			return aggregateAnswer{}, fmt.Errorf("claim %s: no node", a.Claim.Key)
		}
		start[a.Claim.Index] = n
	}
	sol, err := na.Search(ctx, end, start, cs.claims, cs.bound)
	if err != nil {
		return aggregateAnswer{}, err
	}
	ans := aggregateAnswer{values: sol.Values, objective: sol.Objective}
	if sol.Bound != math.MaxInt64 {
		ans.bound, ans.hasBnd = sol.Bound, true
	}
	return ans, nil
}

// diveLP dives on the model's LP relaxation for more than the incumbent.
func diveLP(ctx context.Context, cs *componentState, na *bound.NodeAggregate, end time.Time) (aggregateAnswer, error) {
	// Above Limits.DiveLPRows the dive solves the global model and
	// distributes its answer over the nodes: the per-node LP's rows grow
	// with the nodes, and 64 nodes' LP does not solve in seconds.
	if na.Rows() > cs.limits().DiveLPRows {
		g := na.Global()
		sol, _, err := g.Dive(ctx, end, cs.value+1)
		if err != nil || sol.Values == nil {
			return aggregateAnswer{}, err
		}
		vals, w := na.Distribute(g, sol.Values)
		return aggregateAnswer{values: vals, objective: w}, nil
	}
	sol, _, err := na.Dive(ctx, end, cs.value+1)
	if err != nil || sol.Values == nil {
		return aggregateAnswer{}, err
	}
	return aggregateAnswer{values: sol.Values, objective: sol.Objective}, nil
}

func isOptimal(status string) bool { return len(status) >= 7 && status[:7] == "Optimal" }

// plainDevices tells whether the component's claims ask only for
// exclusive devices by count: the aggregated model is a relaxation only
// then. Shared devices, allocationMode All and admin access are modelled
// loosely by the relaxation's items, which is sound for its Lagrangian
// bound but not for the integer optimum (seen on consumable-capacity
// instances), so their optimum is no bound.
func plainDevices(cs *componentState) bool {
	for _, c := range cs.claims {
		for _, r := range c.Requests {
			for _, a := range r.Alternatives {
				if a.All || a.AdminAccess {
					return false
				}
				for _, d := range a.Candidates {
					if cs.p.Devices[d].MultiAlloc {
						return false
					}
				}
			}
		}
	}
	return true
}
