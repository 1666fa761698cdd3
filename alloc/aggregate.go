package alloc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

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
//     the same time (docs/history/performance.md).

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
		return aggregateStage(ctx, cs, end, cs.plan.aggregate, solveCBC)
	case !cs.opts.UseCBC && cs.opts.AggregateSAT && plainDevices(cs):
		return aggregateStage(ctx, cs, end, cs.plan.aggregate, searchNodes)
	}
	return skipped
}

// aggregateDive is the default aggregate stage: diving on the per-node
// model's LP relaxation (bound.NodeAggregate.Dive, pure Go) for an answer
// above the incumbent, realised like the others. It runs only where the
// model is a relaxation (plainDevices), which is where the LP's value
// says what is within reach, after best-fit's first round and before the
// others: where the LP is tight (the MIG batches) the realised answer
// meets the relaxation's bound and ends the pipeline in a fraction of
// what best-fit takes. Components above Limits.DiveLPRows rows dive on
// the global model and spread its answer over the nodes (diveLP); a node
// whose realisation falls short keeps the incumbent's claims
// (mergeNodes), so on a loaded machine the stage costs best-fit time but
// not the first round's answer.
func aggregateDive(ctx context.Context, cs *componentState, end time.Time) outcome {
	if cs.opts.NoAggregateDive || !plainDevices(cs) || cs.rel == nil || !cs.short() || !cs.rel.Enumerated() {
		return skipped
	}
	// The model is built within the stage's share too (a stage whose
	// model cannot be built in it is skipped, untimed).
	if _, err := cs.aggregateModel(ctx, share(end, cs.plan.dive)); err != nil {
		return skipped
	}
	return aggregateStage(ctx, cs, end, cs.plan.dive, diveLP)
}

// aggregateModel builds the per-node model once per component.
func (cs *componentState) aggregateModel(ctx context.Context, end time.Time) (*bound.NodeAggregate, error) {
	if cs.agg == nil {
		na, err := cs.rel.NodeAggregateBy(ctx, end)
		if err != nil {
			return nil, err
		}
		cs.agg = na
	}
	return cs.agg, nil
}

// aggregateStage builds the per-node model, solves it with solve and
// realises the answer, within stageShare of the time left. Skipped when the
// relaxation could not enumerate layouts, when the incumbent meets the
// bound, or when little time is left.
func aggregateStage(ctx context.Context, cs *componentState, end time.Time, stageShare float64, solve aggregateSolver) outcome {
	if cs.rel == nil || !cs.short() || !cs.rel.Enumerated() || time.Until(end) < cs.plan.aggregateMin {
		return skipped
	}
	// The stage takes at most its share of the time left (enumerating the
	// patterns included): the neighbourhood search follows when the
	// realisation fails, and on large batches it needs the time.
	end = share(end, stageShare)
	na, err := cs.aggregateModel(ctx, end)
	if err != nil {
		return outcome{}
	}
	if time.Until(end) < cs.plan.aggregateMin/2 {
		return outcome{}
	}
	sctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	ans, err := solve(sctx, cs, na, share(end, cs.plan.aggregateSolver))
	var out outcome
	if err == nil && ans.hasBnd && plainDevices(cs) {
		out = outcome{bound: ans.bound, hasBnd: true}
	}
	if err != nil || ans.values == nil || ans.objective <= cs.value {
		return out
	}
	re, err := na.Realise(ans.values, cs.claims)
	if err != nil {
		return out
	}
	groups := realisationGroups(cs, re)
	got, err := realiseGroups(ctx, cs, groups, re.Keep, end)
	if err != nil {
		return out
	}
	// Claims the merge dropped, or the incumbent's nodes have room for.
	as := mergeRealised(ctx, cs, groups, got)
	if cs.valueOf(as) <= cs.value {
		return out
	}
	out.found, out.alloc = true, as
	return out
}

// realisationGroup is a part of a realisation that the SAT model can
// place on its own: bins of one node and the claims whose items the
// realisation put in them.
type realisationGroup struct {
	node   int
	claims []*model.Claim // held to node (copies with FixedNode)
	bins   []int          // Bin.Index
}

// realisationGroups splits a realisation into independent groups: with
// layouts, nodes and bins fixed, bins that no claim shares share nothing
// (plain devices, counters within a bin), so the claims of each group of
// bins linked by claims are placed alone, a GPU or two at a time instead
// of a node's packing. A claim the realisation has a node but no bins for
// joins all of its node's bins.
func realisationGroups(cs *componentState, re *bound.Realisation) []realisationGroup {
	bins := cs.rel.Bins
	uf := model.NewDisjointSets(len(bins))
	find, union := uf.Find, uf.Union
	nodeBins := map[int][]int{}
	for b := range bins {
		n := cs.p.CommonNode(bins[b].Devices)
		nodeBins[n] = append(nodeBins[n], b)
	}
	binsOf := func(c *model.Claim) []int {
		if bs, ok := re.Bins[c.Index]; ok && len(bs) > 0 {
			return bs
		}
		return nodeBins[re.Nodes[c.Index]]
	}
	for _, c := range cs.claims {
		if _, ok := re.Nodes[c.Index]; !ok || c.Err != nil {
			continue
		}
		bs := binsOf(c)
		for _, b := range bs[1:] {
			union(bs[0], b)
		}
	}
	index := map[int]int{}
	var groups []realisationGroup
	for _, c := range cs.claims {
		n, ok := re.Nodes[c.Index]
		if !ok || c.Err != nil {
			continue
		}
		bs := binsOf(c)
		if len(bs) == 0 {
			continue
		}
		root := find(bs[0])
		gi, ok := index[root]
		if !ok {
			gi = len(groups)
			index[root] = gi
			groups = append(groups, realisationGroup{node: n})
		}
		cc := *c
		cc.FixedNode = n
		groups[gi].claims = append(groups[gi].claims, &cc)
	}
	for b := range bins {
		if gi, ok := index[find(b)]; ok {
			groups[gi].bins = append(groups[gi].bins, b)
		}
	}
	return groups
}

// realiseGroups places every group's claims (realiseGroup) on the
// component's workers. got[i] is groups[i]'s answer, its assignments
// naming the component's claims.
func realiseGroups(ctx context.Context, cs *componentState, groups []realisationGroup, keep []bool, end time.Time) ([][]*Assignment, error) {
	got := make([][]*Assignment, len(groups))
	errs := make([]error, len(groups))
	workers := max(cs.workers, 1)
	orig := map[int]*model.Claim{}
	for _, c := range cs.claims {
		orig[c.Index] = c
	}
	// pass realises the groups of order side by side, each with a share
	// of the time left in proportion to its claims among those not yet
	// started (times the workers).
	pass := func(order []int) {
		left := 0
		for _, i := range order {
			left += len(groups[i].claims)
		}
		var mu sync.Mutex
		next := 0
		take := func() (int, time.Time) {
			mu.Lock()
			defer mu.Unlock()
			if next == len(order) {
				return -1, time.Time{}
			}
			i := order[next]
			next++
			// The realisation paces itself within its part of the stage
			// (budgetPlan.aggregateSolver): a group's part is in
			// proportion to its claims among those not started.
			part := min(1, float64(workers*len(groups[i].claims))/float64(max(left, 1)))
			left -= len(groups[i].claims)
			return i, share(end, part)
		}
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i, groupEnd := take(); i >= 0; i, groupEnd = take() {
					g := &groups[i]
					allowed := []int{} // none allowed is not nil: nil allows all
					for _, b := range g.bins {
						for _, d := range cs.rel.Bins[b].Devices {
							if keep[d] {
								allowed = append(allowed, d)
							}
						}
					}
					slices.Sort(allowed)
					got[i], errs[i] = realiseGroup(ctx, cs, g.claims, slices.Compact(allowed), groupEnd)
					for _, a := range got[i] {
						a.Claim = orig[a.Claim.Index]
					}
				}
			}()
		}
		wg.Wait()
	}
	// Larger groups first: most groups are one GPU and done in a
	// millisecond, and what they leave goes to the larger ones. Groups
	// that ran out of their share get a second pass with what is left.
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(groups[order[a]].claims) > len(groups[order[b]].claims) })
	pass(order)
	var again []int
	for _, i := range order {
		if errs[i] == nil && len(got[i]) < len(groups[i].claims) {
			again = append(again, i)
		}
	}
	if len(again) > 0 && ctx.Err() == nil && time.Now().Before(end) {
		first := slices.Clone(got)
		pass(again)
		for _, i := range again {
			if errs[i] == nil && cs.valueOf(got[i]) < cs.valueOf(first[i]) {
				got[i] = first[i]
			}
		}
	}
	return got, errors.Join(errs...)
}

// mergeNodes joins the realised groups with the incumbent node by node: a
// node keeps the realisation when its groups placed all their claims or
// have at least the incumbent's weight on that node, else the
// incumbent's assignments there
// (a node the realisation ran out of time on, or whose SAT model found
// less than the aggregated answer), without the claims a realised node
// already holds. Every node's assignments use only that node's devices,
// and dropping claims keeps an allocation valid, so the merge is an
// allocation; the driver keeps it only when it beats the incumbent.
func mergeNodes(cs *componentState, groups []realisationGroup, got [][]*Assignment) []*Assignment {
	inc := map[int][]*Assignment{}
	var incNodes []int
	for _, a := range cs.best {
		n := assignmentNode(cs, a)
		if inc[n] == nil {
			incNodes = append(incNodes, n)
		}
		inc[n] = append(inc[n], a)
	}
	byNode := map[int][]*Assignment{}
	complete := map[int]bool{}
	var order []int
	for i, g := range groups {
		if _, ok := byNode[g.node]; !ok {
			order = append(order, g.node)
			byNode[g.node] = []*Assignment{}
			complete[g.node] = true
		}
		byNode[g.node] = append(byNode[g.node], got[i]...)
		complete[g.node] = complete[g.node] && len(got[i]) == len(g.claims)
	}
	held := map[int]bool{}
	var as []*Assignment
	realised := map[int]bool{}
	for _, n := range order {
		if complete[n] || cs.valueOf(byNode[n]) >= cs.valueOf(inc[n]) {
			realised[n] = true
			as = append(as, byNode[n]...)
			for _, a := range byNode[n] {
				held[a.Claim.Index] = true
			}
		}
	}
	for _, n := range incNodes {
		if realised[n] {
			continue
		}
		for _, a := range inc[n] {
			if !held[a.Claim.Index] {
				held[a.Claim.Index] = true
				as = append(as, a)
			}
		}
	}
	return as
}

// assignmentNode is the node an assignment's devices are on (every
// device of a component the aggregated model covers lies on one node),
// -1 for an assignment without devices.
func assignmentNode(cs *componentState, a *Assignment) int {
	if len(a.Picks) > 0 {
		if r := cs.p.Devices[a.Picks[0].Dev].Reach; len(r) == 1 {
			return r[0]
		}
	}
	return a.Node
}

// realiseGroup places the most weight of a group's held claims on the
// devices allowed: all of them first (usually at once), else more and
// more from nothing, until the deadline.
func realiseGroup(ctx context.Context, cs *componentState, held []*model.Claim, allowed []int, end time.Time) ([]*Assignment, error) {
	m, err := encode.Encode(ctx, cs.p, held, encode.Options{Symmetry: true, DeviceSymmetry: true, AllowedDevices: allowed})
	if err != nil {
		return nil, err
	}
	obj := objectiveSorter(m, cs.claimValue)
	s := solver.New(m.C, m.Clauses)
	var all int64
	for _, c := range held {
		all += cs.claimValue(c)
	}
	// All of them gets the plan's part of the group's time (groupAll): a
	// group whose claims do not all fit (the model relaxes matchAttribute
	// and kinds) can take its whole time to refute, and the ascent needs
	// some.
	if s.Solve(ctx, share(end, cs.plan.groupAll), obj.Geq(int(all))) == solver.Sat {
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
		n := assignmentNode(cs, a)
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
	// with the nodes, and 64 nodes' LP does not solve in seconds. So it
	// does where pods' node resources bind (the model has capacity
	// rows): the per-node dive then fails fixing after fixing, and the
	// global model with the cluster's capacity proves the same bound on
	// the measured batches in milliseconds (docs/performance.md).
	if na.Rows() > cs.limits().DiveLPRows || len(na.Capacities) > 0 {
		// The per-node LP's bound, where pods' node resources bind and
		// its rows are few enough to solve: on nodes that differ the
		// global model's pooled capacity bounds far above it, and the
		// spread would trade towards a weight no answer has. It is solved
		// on another goroutine while the global model dives and the
		// spread's first pass runs (on 16x8 batches with pods the LP
		// takes 1-3 s, the global dive about 1.5 s): one after the
		// other, the LP ran out of its quarter of the time under load,
		// and the spread traded without its prices.
		var root *bound.RootLater
		if len(na.Capacities) > 0 && na.Rows() <= cs.limits().DiveLPRows {
			rootCtx, cancel := context.WithCancel(ctx)
			root = na.SolveRootLater(rootCtx, share(end, cs.plan.rootBound))
			defer root.Wait() // after cancel: the goroutine ends with the stage
			defer cancel()
		}
		g := na.Global()
		sol, _, err := g.Dive(ctx, end, cs.value+1)
		ans := withBound(aggregateAnswer{}, sol)
		if err != nil || sol.Values == nil {
			return ans, err
		}
		if len(na.Capacities) > 0 {
			ans.values, ans.objective = na.DistributeByNode(ctx, end, g, sol.Values, sol.Bound, root)
			if r := root.Wait(); r != nil && r.Bound < sol.Bound {
				ans.bound, ans.hasBnd = r.Bound, true
			}
		} else {
			ans.values, ans.objective = na.Distribute(g, sol.Values)
		}
		return ans, nil
	}
	sol, _, err := na.Dive(ctx, end, cs.value+1)
	ans := withBound(aggregateAnswer{}, sol)
	if err != nil || sol.Values == nil {
		return ans, err
	}
	ans.values, ans.objective = sol.Values, sol.Objective
	return ans, nil
}

// withBound adds the root LP's bound of a dive to ans: the global model
// relaxes the per-node one, so either bounds the model's optimum (and the
// admitted weight where aggregateStage takes model bounds at all).
func withBound(ans aggregateAnswer, sol bound.AggregateSolution) aggregateAnswer {
	if sol.Bound != math.MaxInt64 {
		ans.bound, ans.hasBnd = sol.Bound, true
	}
	return ans
}

func isOptimal(status string) bool { return len(status) >= 7 && status[:7] == "Optimal" }

// plainDevices tells whether the component's claims ask only for
// exclusive devices by count: the aggregated model is a relaxation only
// then. Shared devices, allocationMode All and admin access are modelled
// loosely by the relaxation's items, which is sound for its Lagrangian
// bound but not for the integer optimum (seen on consumable-capacity
// instances), so their optimum is no bound.
func plainDevices(cs *componentState) bool {
	// Claims of one class share their candidate list: each list is
	// looked at once, not once per claim.
	type list struct {
		first *int
		n     int
	}
	seen := map[list]bool{}
	for _, c := range cs.claims {
		for _, r := range c.Requests {
			for _, a := range r.Alternatives {
				if a.All || a.AdminAccess {
					return false
				}
				k := list{unsafe.SliceData(a.Candidates), len(a.Candidates)}
				if seen[k] {
					continue
				}
				seen[k] = true
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
