package alloc

import (
	"context"
	"errors"
	"k8s.io/klog/v2"
	"math"
	"sort"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/model"
)

// A component is solved by one pipeline: a list of stages over one shared
// state, run in order by a driver (the way a SAT solver's search loop runs
// propagation, decisions and restarts over one trail). A stage reads the
// state and returns an outcome: an allocation it found, a bound it proved,
// whether the incumbent is now proven optimal, whether the pipeline may
// stop. Only the driver writes the incumbent and the bound, so their two
// invariants live in one place (accept): an allocation below the
// incumbent is never taken, and the bound only falls. The driver also
// gives every stage its deadline from the budget plan, times it for
// --report, and stops when the context ends.
//
// Adding a stage is adding one entry to maxClaimsStages or orderedStages
// (with its budget) and one function returning an outcome.

// componentState is what the stages of one component share.
type componentState struct {
	p        *model.Problem
	claims   []*model.Claim // the component, input order
	opts     Options
	ordered  bool
	started  time.Time
	deadline time.Time
	plan     budgetPlan
	// workers is how many best-fit tries may run side by side: the cores
	// when this component is the only one, else 1 (the components already
	// run side by side).
	workers int

	// Written by the stages for the later ones.
	fitting      []*model.Claim       // claims that fit alone (or whose search ran out)
	unplaceable  []*model.Claim       // claims that fit nowhere, even alone
	bySize       []*model.Claim       // fitting, smallest first
	rel          *bound.Relaxation    // the configuration relaxation, once built
	prices       [][]float64          // best-fit's price stages, from the relaxation
	bestFitTried int                  // best-fit tries made so far (stages best-fit-first, best-fit)
	sat          *satModel            // the whole component's SAT model, once built
	agg          *bound.NodeAggregate // the aggregated per-node model, once built
	noSAT        bool                 // no whole SAT model: too large or not encodable
	// undecided is the weight of the claims that no stage can allocate
	// but that are not proven unallocatable (undecidedClaim): the run's
	// bound counts them, so it stays a bound of what the scheduler could
	// admit, and a component with any is never optimal but by placeLast.
	undecided int64
	counts    componentCounts // the stages' counters, for --report

	// Written by the driver only.
	best        []*Assignment
	value       int64       // of best
	bound       int64       // proven upper bound of value
	optimal     bool        // best is proven optimal in the primary objective
	greedyValue int64       // the greedy incumbent's value
	stages      []StageTime // time per stage
}

// componentCounts are the stages' counters for --report.
type componentCounts struct {
	vars, clauses, calls, implied int
	boundIterations, lnsSteps     int
}

// outcome is what one stage returns to the driver.
type outcome struct {
	found      bool          // alloc is an answer (possibly empty)
	alloc      []*Assignment // the answer, when found
	tie        bool          // alloc may replace an incumbent of equal value
	bound      int64         // a proven upper bound, when hasBnd
	hasBnd     bool          // bound is set
	proven     bool          // the incumbent, after alloc, is optimal
	stop       bool          // nothing the later stages can add
	fromGreedy bool          // alloc is the greedy incumbent (for --report)
	skip       bool          // the stage had nothing to do (not timed)
}

// skipped is the outcome of a stage with nothing to do.
var skipped = outcome{skip: true}

func answer(as []*Assignment) outcome { return outcome{found: true, alloc: as} }

// stage is one step of a pipeline.
type stage struct {
	name   string
	budget budget // which entry of the plan gives its deadline
	run    func(ctx context.Context, cs *componentState, end time.Time) outcome
}

// StageTime is the wall time one pipeline stage took, summed over the
// components.
type StageTime struct {
	Stage string        `json:"stage"`
	Time  time.Duration `json:"-"`
	// Seconds is Time for --report.
	Seconds float64 `json:"seconds"`
	Runs    int     `json:"runs"`
	// Overrun is the most a run of the stage went past the deadline the
	// budget plan gave it (0 for untimed stages): stages check their
	// deadline as they go, so it stays small; the tests bound it.
	Overrun        time.Duration `json:"-"`
	OverrunSeconds float64       `json:"overrunSeconds,omitempty"`
}

// claimValue is c's share of the primary objective: its weight under
// max-claims, 1 under ordered.
func (cs *componentState) claimValue(c *model.Claim) int64 {
	if cs.ordered {
		return 1
	}
	return c.Weight
}

func (cs *componentState) valueOf(as []*Assignment) (v int64) {
	for _, a := range as {
		v += cs.claimValue(a.Claim)
	}
	return v
}

// limits are the run's limits (defaults where the options leave them zero).
func (cs *componentState) limits() Limits { return cs.opts.Limits.withDefaults() }

// short tells whether the incumbent is below the bound.
func (cs *componentState) short() bool { return !cs.optimal && cs.value < cs.bound }

// solve runs the pipeline and returns the component's result. Each stage
// that ran is logged through the context's logger at verbosity 1 (the
// controller's --log-level debug), as the scheduler logs its slow paths.
func (cs *componentState) solve(ctx context.Context) *componentResult {
	// Asked once: at scale a run has thousands of components, and a
	// logger with values costs an allocation even when nothing is logged.
	logger := klog.FromContext(ctx).V(1)
	verbose := logger.Enabled()
	cs.started = time.Now()
	cs.bound = math.MaxInt64
	stages := maxClaimsStages
	if cs.ordered {
		stages = orderedStages
	}
	for _, st := range stages {
		if ctx.Err() != nil {
			break
		}
		end, ok := st.budget.end(cs)
		if !ok {
			continue // out of time: only untimed stages still run
		}
		start := time.Now()
		out := st.run(ctx, cs, end)
		if !out.skip {
			var over time.Duration
			if st.budget != untimed {
				over = max(time.Since(end), 0)
			}
			cs.stages = addStageTime(cs.stages, StageTime{Stage: st.name, Time: time.Since(start), Runs: 1, Overrun: over})
		}
		stop := cs.accept(out)
		if verbose && !out.skip {
			logger.Info("stage done", "claims", len(cs.claims), "stage", st.name, "took", time.Since(start), "value", cs.value, "bound", cs.bound, "optimal", cs.optimal)
		}
		if stop {
			break
		}
	}
	return cs.result()
}

// accept applies a stage's outcome and tells whether the pipeline ends.
// It is the one place that writes the incumbent and the bound.
func (cs *componentState) accept(out outcome) bool {
	if out.found {
		if as, broke := podRepair(cs.p, out.alloc); broke {
			// An answer of a stage that does not know the pod rules.
			out.alloc, out.proven, out.stop = as, false, false
		}
		c := cs.compare(out.alloc)
		if c > 0 || c == 0 && out.tie {
			cs.best, cs.value = out.alloc, cs.valueOf(out.alloc)
		}
		if out.fromGreedy {
			cs.greedyValue = cs.value
		}
	}
	// The bound is only ever what a stage proved: never raised to the
	// incumbent. A bound below the incumbent is a bug in that stage, and
	// the tests look for it (TestBudgetSweep); repairing it here would
	// hide it.
	if out.hasBnd && out.bound < cs.bound {
		cs.bound = out.bound
	}
	if out.proven || cs.value >= cs.bound {
		cs.optimal = true
	}
	return out.stop
}

// undecidedClaim tells whether c is a claim the stages cannot allocate
// although the scheduler might: one whose selectors were not evaluated
// within the build's budget (model.BudgetError: drasat's limit, not the
// claim's fault), or, under max-claims, one whose outcome depends on the
// allocator's search order (model.Claim.Retryable), which the model
// decides from the existing allocations alone and placeLast may place
// after the model's answer. The latter may also be counted as fitting:
// the model's bound covers what the model admits, and the claims placed
// last come on top of it, so counting them twice keeps the bound sound.
func (cs *componentState) undecidedClaim(c *model.Claim) bool {
	if be := (*model.BudgetError)(nil); errors.As(c.Err, &be) {
		return true
	}
	return !cs.ordered && c.Retryable()
}

// compare tells whether as is better (1), as good (0) or worse (-1) than
// the incumbent: by weight under max-claims; under ordered by the admitted
// claims in input order, the first claim where they differ deciding.
func (cs *componentState) compare(as []*Assignment) int {
	if !cs.ordered {
		v := cs.valueOf(as)
		switch {
		case v > cs.value:
			return 1
		case v < cs.value:
			return -1
		}
		return 0
	}
	a, b := admittedIndexes(as), admittedIndexes(cs.best)
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return 1
			}
			return -1
		}
	}
	switch {
	case len(a) > len(b):
		return 1
	case len(a) < len(b):
		return -1
	}
	return 0
}

func admittedIndexes(as []*Assignment) []int {
	out := make([]int, len(as))
	for i, a := range as {
		out[i] = a.Claim.Index
	}
	sort.Ints(out)
	return out
}

// addStageTime adds t to the entry of its stage in list, or appends it.
func addStageTime(list []StageTime, t StageTime) []StageTime {
	for i := range list {
		if list[i].Stage == t.Stage {
			list[i].Time += t.Time
			list[i].Runs += t.Runs
			list[i].Seconds = list[i].Time.Seconds()
			list[i].Overrun = max(list[i].Overrun, t.Overrun)
			list[i].OverrunSeconds = list[i].Overrun.Seconds()
			return list
		}
	}
	t.Seconds = t.Time.Seconds()
	t.OverrunSeconds = t.Overrun.Seconds()
	return append(list, t)
}

func (cs *componentState) result() *componentResult {
	as := append([]*Assignment(nil), cs.best...)
	sort.Slice(as, func(i, j int) bool { return as[i].Claim.Index < as[j].Claim.Index })
	r := &componentResult{
		assignments: as,
		objective:   cs.value,
		bound:       cs.bound,
		greedyValue: cs.greedyValue,
		noSAT:       cs.noSAT,
		stages:      cs.stages,
		counts:      cs.counts,
		unplaceable: cs.unplaceable,
	}
	switch {
	case r.bound == math.MaxInt64:
		// Stopped before the alone bound (the context ended): every
		// claim's weight bounds the component.
		r.bound = 0
		for _, c := range cs.claims {
			r.bound += cs.claimValue(c)
		}
	case cs.optimal:
		// Proven: by a stage (the SAT model's unsat above the value, the
		// ordered sequence) or by value reaching the bound.
		r.bound = r.objective + cs.undecided
		r.proven = true
	default:
		r.bound += cs.undecided
	}
	r.penalty, r.touched = secondary(cs.p, as)
	return r
}

// componentResult is one component's answer.
type componentResult struct {
	assignments      []*Assignment
	objective, bound int64
	greedyValue      int64
	noSAT            bool
	// proven: the stages proved the answer optimal among what they can
	// allocate; the run is optimal besides only with no undecided claims
	// (the bound counts them), or placeLast placing them all (gather).
	proven      bool
	penalty     int64
	touched     int
	stages      []StageTime
	counts      componentCounts
	unplaceable []*model.Claim
}

// budget says which entry of the budget plan gives a stage its deadline.
type budget int

const (
	// untimed stages are bounded work and run even when the deadline has
	// passed: the alone bound and the greedy incumbent (a result is never
	// worse than greedy), and checks that cost no search.
	untimed budget = iota
	// allLeft: until the component's deadline.
	allLeft
	// lnsShare: the plan's share for the neighbourhood search.
	lnsShare
	// quickShare: the plan's share for best-fit's first round.
	quickShare
	// lowerShare: three times as long as the pipeline has run so far,
	// clamped to the plan's lowerMin and lowerMax (the lower objective
	// levels).
	lowerShare
)

// budgetPlan is the one table of time shares: every stage takes its
// deadline from it, and nothing else cuts the budget.
type budgetPlan struct {
	// descent: each descent of the configuration relaxation gets this
	// share of the time left.
	descent float64
	// repackDescent: the ordered repack's one descent.
	repackDescent float64
	// lns: the neighbourhood search's share; half when the whole SAT
	// model comes next, all when it does not.
	lns float64
	// lowerScale times the pipeline's time so far, clamped by lowerMin
	// and lowerMax, is the lower levels' time (see lowerShare).
	lowerScale         float64
	lowerMin, lowerMax time.Duration
	// dive: the aggregate dive's share of the time left (the pattern
	// enumeration, the LP, the dive and the realisation); best-fit and
	// the neighbourhood search get the rest.
	dive float64
	// quick: best-fit's first round, before the dive, gets this share of
	// the time left; the rounds after the dive get what the dive left.
	quick float64
	// hint bounds the solve that hands the incumbent to the SAT model.
	hint time.Duration
	// orderedCall: each call of the ordered SAT sequence gets this many
	// times its even share of the time left.
	orderedCall float64
	// aggregate: the opt-in aggregate stage's share of the time left
	// (UseCBC, AggregateSAT), the pattern enumeration included.
	aggregate float64
	// aggregateMin: the least time left for which an aggregate stage is
	// worth starting (writing the model, the solver, the realisation);
	// after the model is built, half of it must still be left.
	aggregateMin time.Duration
	// aggregateSolver: within an aggregate stage, the solver's part of
	// the time left once the model is built; the realisation, fast once
	// nodes and layouts are fixed, gets the rest. The realisation paces
	// itself inside its part: each group of claims gets a part in
	// proportion to its claims among those not started (times the
	// workers), and a group's first solve (all its claims) half of that.
	aggregateSolver float64
	// groupAll: a realised group's first solve's part of the group's
	// time (all its claims at once); the ascent gets the rest.
	groupAll float64
	// rootBound: where pods' node resources bind, the per-node LP gets
	// this share of the dive's time, on another goroutine; the spread's
	// trades wait for it (docs/encoding.md).
	rootBound float64
}

// newPlan computes the budget plan of a component up front, with the
// run's limits. The lower objective levels (firstAvailable preference
// and packing) refine an answer that is already optimal in what counts.
// Once the admitted weight is settled they get three times as long as
// settling it took, at least Limits.LowerMin and at most Limits.LowerMax:
// proving a packing optimal can take SAT far longer than finding it, and a
// batch should not wait for that. The time scales with what came before,
// so that a machine slowed down as a whole (load, the race detector) still
// finishes the lower levels of a batch a quiet one finishes: a level cut by
// its deadline makes the answer depend on timing.
func newPlan(useSAT bool, lim Limits) budgetPlan {
	pl := budgetPlan{
		descent: 1.0 / 3, repackDescent: 1.0 / 4, lns: 1,
		lowerScale: 3, lowerMin: lim.LowerMin, lowerMax: lim.LowerMax, hint: lim.LowerMin,
		dive: 3.0 / 4, quick: 1.0 / 8, orderedCall: 2,
		aggregate: 2.0 / 3, aggregateMin: 500 * time.Millisecond, aggregateSolver: 4.0 / 5, groupAll: 1.0 / 2,
		rootBound: 1.0 / 2,
	}
	if useSAT {
		pl.lns = 0.5
	}
	return pl
}

// share is the deadline of a step that gets share of the time left
// before end.
func share(end time.Time, share float64) time.Time {
	return minTime(end, time.Now().Add(time.Duration(float64(time.Until(end))*share)))
}

// end is the stage's deadline; false when the stage has no time at all.
func (b budget) end(cs *componentState) (time.Time, bool) {
	now := time.Now()
	if b == untimed {
		return cs.deadline, true
	}
	if !now.Before(cs.deadline) {
		return now, false
	}
	switch b {
	case lnsShare:
		return cs.until(cs.plan.lns), true
	case quickShare:
		return cs.until(cs.plan.quick), true
	case lowerShare:
		d := min(max(time.Duration(cs.plan.lowerScale*float64(now.Sub(cs.started))), cs.plan.lowerMin), cs.plan.lowerMax)
		return minTime(now.Add(d), cs.deadline), true
	}
	return cs.deadline, true
}

// until is the deadline of a step that gets share of the component's
// time left.
func (cs *componentState) until(s float64) time.Time { return share(cs.deadline, s) }

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// maxClaimsStages is the pipeline of max-claims.
var maxClaimsStages = []stage{
	{"alone-bound", untimed, aloneBound},
	{"greedy", untimed, greedyIncumbent},
	{"relaxation", allLeft, relaxation},
	{"aggregate", allLeft, aggregateRealise},
	{"best-fit-first", quickShare, bestFitFirst},
	{"aggregate-dive", allLeft, aggregateDive},
	{"best-fit", allLeft, bestFitTries},
	{"neighbourhood", lnsShare, neighbourhood},
	{"settled", untimed, settledWithoutSAT},
	{"encode", allLeft, encodeModel},
	{"sat-maximise", allLeft, satMaximise},
	{"lower-levels", lowerShare, lowerLevels},
}

// orderedStages is the pipeline of ordered: the same first two stages,
// then the exact SAT sequence or, above the SAT model's size limit, the
// repack heuristic.
var orderedStages = []stage{
	{"alone-bound", untimed, aloneBound},
	{"greedy", untimed, greedyIncumbent},
	{"ordered-repack", allLeft, orderedRepackStage},
	{"encode", allLeft, encodeModel},
	{"ordered-sat", allLeft, orderedSAT},
	{"lower-levels", lowerShare, lowerLevels},
}
