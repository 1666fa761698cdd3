package alloc

import (
	"context"
	"sync"
	"time"

	"github.com/go-air/gini/logic"
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// The stages of the pipelines (pipeline.go), in pipeline order. Each reads
// the shared state, may leave data for later stages (the fitting claims,
// the relaxation, the SAT model), and returns what it found as an outcome;
// none writes the incumbent or the bound.

// aloneBound places every claim alone: the claims that fit nowhere even
// alone never fit (taking devices only removes placements), and the weight
// of the others bounds the component. A claim whose search ran out of
// budget counts as fitting, so the bound stays sound. Claims the model
// cannot allocate but that are not proven unallocatable (undecided) are
// counted apart, in cs.undecided.
func aloneBound(ctx context.Context, cs *componentState, _ time.Time) outcome {
	// The state is the whole problem's: made only when a claim needs a
	// search, so that a component of claims that cannot be served (no
	// candidates, errors; thousands of them when a short --timeout ends
	// the build) costs nothing per device.
	var s *model.State
	steps := cs.limits().SearchSteps
	var b, undecided int64
	for _, c := range cs.claims {
		if cs.undecidedClaim(c) {
			undecided += cs.claimValue(c)
		}
	}
	cs.undecided = undecided
	// Claims of one class fit alone or not alike (search is
	// deterministic): one search per class, not per claim. Claims of
	// pods, or kept off nodes, are searched each.
	type alone struct{ ok, decided bool }
	byClass := map[string]alone{}
	for i, c := range cs.claims {
		if i%64 == 0 && ctx.Err() != nil {
			return outcome{}
		}
		perClaim := c.Group != nil || len(c.ExcludedNodes) > 0
		r, seen := alone{}, false
		if !perClaim {
			r, seen = byClass[c.ClassKey()]
		}
		if !seen {
			if s == nil && c.Err == nil && servable(c) {
				s = model.NewState(cs.p)
			}
			a, ok, decided := search(s, c, nil, steps)
			if ok {
				a.release(s)
			}
			r = alone{ok, decided}
			if !perClaim {
				byClass[c.ClassKey()] = r
			}
		}
		ok, decided := r.ok, r.decided
		switch {
		case ok:
		case decided:
			if c.Err == nil {
				cs.unplaceable = append(cs.unplaceable, c)
			}
			continue
		}
		cs.fitting = append(cs.fitting, c)
		b += cs.claimValue(c)
	}
	if !cs.ordered {
		// The nodes' resources bound the pods' claims' weight too
		// (pods.go), once for the whole run: the bound only falls after
		// this. Not a bound of the ordered objective, where reaching a
		// count says nothing of which claims.
		b = min(b, podBound(cs.p, cs.claims, cs.claimValue))
	}
	return outcome{bound: b, hasBnd: true, stop: b == 0}
}

// greedyIncumbent is the first incumbent: first-fit in arrival order and,
// under max-claims, smallest first.
func greedyIncumbent(ctx context.Context, cs *componentState, _ time.Time) outcome {
	steps := cs.limits().SearchSteps
	best := firstFitInOrder(ctx, cs.p, cs.fitting, steps)
	cs.bySize = sortBySize(cs.p, cs.fitting, false)
	if !cs.ordered {
		if alt := firstFitInOrder(ctx, cs.p, cs.bySize, steps); cs.valueOf(alt) > cs.valueOf(best) {
			best = alt
		}
	}
	out := answer(best)
	out.fromGreedy = true
	return out
}

// relaxation bounds the component with the configuration relaxation and
// keeps its prices at several stages of the descent for best-fit.
func relaxation(ctx context.Context, cs *componentState, _ time.Time) outcome {
	if !cs.short() {
		return skipped
	}
	rel, err := bound.New(ctx, cs.p, cs.claims, cs.claimValue)
	if err != nil {
		return skipped
	}
	cs.rel = rel
	lr := rel.Solve(ctx, cs.value, cs.until(cs.plan.descent), bound.Options{})
	cs.counts.boundIterations += lr.Iterations
	out := outcome{bound: lr.Bound, hasBnd: lr.Iterations > 0}
	if lr.Price == nil || out.hasBnd && cs.value >= min(cs.bound, lr.Bound) {
		return out
	}
	// Best-fit at prices from several stages of the descent. Fully
	// converged prices are degenerate (many placements tie exactly) and
	// pack worst; the stages just after the first halving pack best, so
	// they go first and the first stage goes last. Best-fit is sensitive
	// to the prices, so when descents are cheap (every bin priced from its
	// layouts) two more, halving sooner and later, add stages of their
	// own. Every descent's bound is sound.
	lists := [][][]float64{lr.Snapshots}
	if rel.Enumerated() {
		for _, patience := range []int{6, 40} {
			more := rel.Solve(ctx, cs.value, cs.until(cs.plan.descent), bound.Options{Patience: patience})
			cs.counts.boundIterations += more.Iterations
			if more.Iterations > 0 && more.Bound < out.bound {
				out.bound = more.Bound
			}
			lists = append(lists, more.Snapshots)
		}
	}
	cs.prices = interleave(lists)
	return out
}

// bestFitTries runs price-guided best-fit at the relaxation's price
// stages, each with claims ordered by price and by size. A fixed number of
// tries keeps the result deterministic; tries run side by side, a batch
// per worker, and the first try (in try order) with the most weight wins,
// so the answer does not depend on the number of cores.
func bestFitTries(ctx context.Context, cs *componentState, end time.Time) outcome {
	return bestFitUpTo(ctx, cs, end, -1)
}

// bestFitFirst is best-fit's first tries (firstBestFitTries), before the
// aggregate dive: on the batches it already solves to the bound it takes a
// fraction of the dive's time, and the dive is then skipped.
func bestFitFirst(ctx context.Context, cs *componentState, end time.Time) outcome {
	return bestFitUpTo(ctx, cs, end, firstBestFitTries)
}

// firstBestFitTries is the number of tries bestFitFirst makes: the first
// price stage, by price and by size. A number of tries, not one try per
// worker: with one try per worker a run on more cores tried more and could
// answer differently (TestAnswersIndependentOfWorkers).
const firstBestFitTries = 2

// bestFitUpTo runs up to limit more best-fit tries (all when negative),
// continuing after the tries an earlier stage made, one try per worker
// side by side.
func bestFitUpTo(ctx context.Context, cs *componentState, end time.Time, limit int) outcome {
	if cs.rel == nil || len(cs.prices) == 0 || !cs.short() {
		return skipped
	}
	lim := cs.limits()
	tries := min(max(2, lim.BestFitWork/len(cs.claims)), len(cs.prices)*2)
	if limit >= 0 {
		tries = min(tries, cs.bestFitTried+limit)
	}
	try := func(i int) []*Assignment {
		price := cs.prices[i/2]
		order := cs.bySize
		if i%2 == 0 {
			order = byPrice(cs.rel, cs.bySize, price, cs.claimValue)
		}
		return bestFit(ctx, cs.p, order, cs.rel, price, end, lim)
	}
	best, val := cs.best, cs.value
	for cs.bestFitTried < tries && val < cs.bound && ctx.Err() == nil && time.Now().Before(end) {
		i := cs.bestFitTried
		n := min(max(cs.workers, 1), tries-i)
		for _, alt := range parallel(n, func(k int) []*Assignment { return try(i + k) }) {
			if v := cs.valueOf(alt); v > val {
				best, val = alt, v
			}
		}
		cs.bestFitTried = i + n
	}
	return answer(best)
}

// parallel runs f(0..n-1), side by side when n > 1, and returns the
// results in order.
func parallel(n int, f func(k int) []*Assignment) [][]*Assignment {
	out := make([][]*Assignment, n)
	if n == 1 {
		out[0] = f(0)
		return out
	}
	var wg sync.WaitGroup
	for k := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[k] = f(k)
		}()
	}
	wg.Wait()
	return out
}

// neighbourhood repacks a few bins at a time by SAT (lns.go).
func neighbourhood(ctx context.Context, cs *componentState, end time.Time) outcome {
	if cs.rel == nil || !cs.short() {
		return skipped
	}
	best, steps := neighbourhoodSearch(ctx, cs.p, cs.claims, cs.best, cs.rel, cs.claimValue, cs.bound, end, cs.limits())
	cs.counts.lnsSteps += steps
	return answer(best)
}

// settledWithoutSAT ends the pipeline when the SAT model has nothing to
// add: it is too large to build (the answer stands as it is), or the
// incumbent is optimal on devices without counters and its lower levels
// are provably optimal too: no firstAvailable fallback is used and no more
// fresh counter sets are touched than any allocation of that weight must
// touch. (With counters the SAT model still runs: which partitions claims
// take decides what fits later.)
func settledWithoutSAT(_ context.Context, cs *componentState, _ time.Time) outcome {
	if cs.opts.Policy == Binpack && cs.value >= cs.bound && !drawsOnCounters(cs.p, cs.best) {
		if pen, tv := secondary(cs.p, cs.best); pen == 0 && tv <= touchFloor(cs.p, cs.claims, cs.value, cs.claimValue) {
			return outcome{proven: true, stop: true}
		}
	}
	return outcome{stop: cs.noSAT}
}

// satModel is the whole component's SAT model and the solver on it, shared
// by the SAT stages.
type satModel struct {
	m     *encode.Model
	s     *solver.S
	obj   *logic.CardSort // admitted weight
	pen   *logic.CardSort // firstAvailable penalty
	touch *logic.CardSort // fresh counter sets touched
	// base fixes the levels optimised so far.
	base []z.Lit
	// cur is the allocation of the solver's last model, when have.
	cur  []*Assignment
	have bool
}

// encodeModel builds the whole component's SAT model.
func encodeModel(ctx context.Context, cs *componentState, end time.Time) outcome {
	if cs.noSAT {
		out := skipped
		out.stop = true
		return out
	}
	ectx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	m, err := encode.Encode(ectx, cs.p, cs.claims, encode.Options{Symmetry: !cs.ordered})
	if err != nil {
		cs.noSAT = true
		return outcome{stop: true}
	}
	// The sorters and loading the solver take as long as encoding on large
	// components: each step only starts within the stage's deadline.
	sm := &satModel{m: m, obj: objectiveSorter(m, cs.claimValue)}
	if time.Now().After(end) {
		return outcome{stop: true}
	}
	sm.pen = penaltySorter(m)
	sm.touch = logic.NewCardSort(m.Touched, m.C)
	if time.Now().After(end) {
		return outcome{stop: true}
	}
	sm.s = solver.New(m.C, m.Clauses)
	cs.sat = sm
	cs.counts.vars, cs.counts.clauses, cs.counts.implied = sm.s.Vars, sm.s.Clauses, m.ImpliedCounters
	return outcome{}
}

// satMaximise asks the solver for ever more admitted weight until it
// proves the bound or that nothing better exists.
func satMaximise(ctx context.Context, cs *componentState, end time.Time) outcome {
	sm := cs.sat
	if sm == nil {
		return skipped
	}
	defer func() { cs.counts.calls = sm.s.Calls }()
	val := cs.value
	proven := val >= cs.bound
	for !proven {
		res := sm.s.Solve(ctx, end, sm.obj.Geq(int(val)+1))
		if res == solver.Unknown {
			break
		}
		if res == solver.Unsat {
			proven = true
			break
		}
		sm.cur, sm.have = decode(cs.p, sm.m, sm.s), true
		val = cs.valueOf(sm.cur)
		proven = val >= cs.bound
	}
	sm.base = append(sm.base, sm.obj.Geq(int(val)))
	out := outcome{proven: proven}
	if sm.have {
		out.found, out.alloc = true, sm.cur
	}
	return out
}

// lowerLevels refines the incumbent's lower objective levels with the SAT
// model: earlier firstAvailable subrequests, then packing (binpack: fewer
// fresh counter sets touched; spread: more).
//
// When best-fit found the optimum, the SAT model has no model of it yet,
// and finding one can be as hard as the proof was. The solver's own model
// goes first, not best-fit's allocation: which placements a GPU's claims
// take decides what fits on it later, and on the Alibaba replay (drasat
// bench -s openb) keeping first-fit's placements admitted 420 tasks where
// the solver's admit 487. Only when the solver finds none in time is the
// incumbent handed over as assumptions (hint), so that the lower levels
// still run.
func lowerLevels(ctx context.Context, cs *componentState, end time.Time) outcome {
	sm := cs.sat
	if sm == nil {
		return skipped
	}
	defer func() { cs.counts.calls = sm.s.Calls }()
	s, m := sm.s, sm.m
	if sm.have && cs.compare(sm.cur) != 0 {
		return skipped // the incumbent is not the solver's (ordered: greedy did better in time)
	}
	if !sm.have {
		if cs.ordered {
			return skipped
		}
		if s.Solve(ctx, end, sm.base...) == solver.Sat {
			sm.cur, sm.have = decode(cs.p, m, s), true
		} else if h, ok := hint(m, cs.best); ok && s.Solve(ctx, minTime(time.Now().Add(cs.plan.hint), cs.deadline), append(sm.base, h...)...) == solver.Sat {
			sm.cur, sm.have = decode(cs.p, m, s), true
		} else {
			return outcome{}
		}
	}
	cur := sm.cur
	pv, _ := secondary(cs.p, cur)
	for pv > 0 {
		if s.Solve(ctx, end, append(sm.base, sm.pen.Leq(int(pv)-1))...) != solver.Sat {
			break
		}
		cur = decode(cs.p, m, s)
		pv, _ = secondary(cs.p, cur)
	}
	sm.base = append(sm.base, sm.pen.Leq(int(pv)))
	_, tv := secondary(cs.p, cur)
	floor := 0
	if cs.opts.Policy == Binpack {
		floor = touchFloor(cs.p, cs.claims, cs.valueOf(cur), cs.claimValue)
	}
	for {
		goal := sm.touch.Leq(tv - 1)
		if cs.opts.Policy == Spread {
			goal = sm.touch.Geq(tv + 1)
		}
		settled := cs.opts.Policy == Binpack && tv <= floor || cs.opts.Policy == Spread && tv >= len(m.Touched)
		if settled || s.Solve(ctx, end, append(sm.base, goal)...) != solver.Sat {
			break
		}
		cur = decode(cs.p, m, s)
		_, tv = secondary(cs.p, cur)
	}
	sm.cur = cur
	return outcome{found: true, alloc: cur, tie: true}
}

// orderedSAT admits claims in input order, each iff the SAT model finds
// room for it together with every claim admitted before it. Each call
// gets twice its even share of the time left; a call that runs out leaves
// its claim out and the result unproven.
func orderedSAT(ctx context.Context, cs *componentState, end time.Time) outcome {
	sm := cs.sat
	if sm == nil {
		return skipped
	}
	defer func() { cs.counts.calls = sm.s.Calls }()
	admitted := map[*encode.Unit]int{}
	unitOf := unitsByClaim(sm.m)
	decided := true
	for i, c := range cs.claims {
		if ctx.Err() != nil || !time.Now().Before(end) {
			decided = false
			break
		}
		u := unitOf[c.Index]
		lit := u.AtLeast(sm.m.C, admitted[u]+1)
		share := time.Duration(cs.plan.orderedCall * float64(time.Until(end)) / float64(len(cs.claims)-i))
		switch sm.s.Solve(ctx, minTime(time.Now().Add(share), end), append(sm.base, lit)...) {
		case solver.Sat:
			sm.base = append(sm.base, lit)
			admitted[u]++
			sm.cur, sm.have = decode(cs.p, sm.m, sm.s), true
		case solver.Unknown:
			decided = false
		}
	}
	out := outcome{proven: decided}
	if sm.have {
		out.found, out.alloc = true, sm.cur
	}
	return out
}

// orderedRepackStage is ordered's answer above the SAT model's size limit.
func orderedRepackStage(ctx context.Context, cs *componentState, end time.Time) outcome {
	if !cs.noSAT {
		return skipped
	}
	out := answer(orderedRepack(ctx, cs.p, cs.claims, cs.until(cs.plan.repackDescent), end, cs.limits()))
	out.stop = true
	return out
}
