// Package alloc is drasat's allocation engine: it splits the problem into
// independent components, finds a greedy incumbent, improves it with the SAT
// model to a proven optimum where the budget allows, and returns one
// assignment per admitted claim.
package alloc

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/drasat/drasat/model"
)

// Objective names.
const (
	MaxClaims = "max-claims"
	Ordered   = "ordered"
	Binpack   = "binpack"
	Spread    = "spread"
	// Frag places the admitted claims where they leave the cluster least
	// fragmented for the workload to come (Options.Lookahead); below it the
	// engine runs as binpack.
	Frag = "frag"
)

// Lookahead re-places an allocation among those admitting the same claims,
// for the workload to come (package frag). It returns res itself when it
// finds nothing better; what it returns must admit exactly res's claims.
// It returns by deadline (the end of the run's Timeout) with the best it
// has.
type Lookahead interface {
	Refine(ctx context.Context, p *model.Problem, res *Result, deadline time.Time) *Result
}

// MaxLookahead is the most a run keeps for the look-ahead after the
// engine, and the most one look-ahead's re-placement takes (package frag
// stops there too): on a large cluster its local search would otherwise
// take the batch's time.
const MaxLookahead = 2 * time.Second

// lookaheadReserve is the part of a run's Timeout kept for the look-ahead
// after the engine: a fifth, at most MaxLookahead, so that a frag run,
// like any other, returns within its Timeout.
func lookaheadReserve(timeout time.Duration) time.Duration {
	return min(timeout/5, MaxLookahead)
}

// TimeLeft is what timeout, counted from start, leaves a run (Options.
// Timeout) after what building its problem took: at least a millisecond,
// with which the engine returns its greedy result. A timeout of 0 or less
// stays as it is (Run's default, or its error).
func TimeLeft(timeout time.Duration, start time.Time) time.Duration {
	if timeout <= 0 {
		return timeout
	}
	return max(timeout-time.Since(start), time.Millisecond)
}

// Options steer one run.
type Options struct {
	Objective string        // max-claims (default) or ordered
	Policy    string        // binpack (default), spread or frag
	Timeout   time.Duration // for the whole run; 0 means 30s, negative is an error
	// Lookahead is the frag policy's measure; without it frag is binpack.
	Lookahead Lookahead
	// MaxVariables bounds one component's SAT model (estimated as
	// claim-device pairs); larger components keep what the heuristics
	// found (max-claims) or the ordered repack (ordered) and report the
	// gap. 0 means 40,000; negative means no component gets the model.
	MaxVariables int
	// Limits are the other thresholds and work bounds of the pipeline's
	// stages; zero fields mean the defaults (DefaultLimits).
	Limits Limits
	// UseCBC lets the aggregate stage solve the per-node pattern model
	// with CBC (the coinor-cbc executable on PATH). Off by default: drasat
	// is pure Go and its answers depend on the input only (and the budget);
	// with CBC they also depend on an external program's version and speed.
	UseCBC bool
	// AggregateSAT lets the aggregate stage search the per-node pattern
	// model in Go instead (neighbourhoods of a node's bins, encoded for
	// gini). Off by default: on the batches measured it finds less than
	// the stages after it (docs/history/performance.md, "An in-house solver for the
	// aggregated model").
	AggregateSAT bool
	// NoAggregateDive turns off the default aggregate stage after
	// best-fit (diving on the per-node pattern model's LP relaxation,
	// pure Go); for comparisons and tests of the stages after it.
	NoAggregateDive bool
	// Workers solving components concurrently; 0 means GOMAXPROCS.
	Workers int
	// Progress, when set, is called after each component.
	Progress func(done, total int)
}

// Result of a run.
type Result struct {
	Assignments []*Assignment // admitted claims, input order
	// Rejected gives each claim not admitted its rejection: a
	// *model.Rejection, whose Reason callers act on (model.ReasonOf) and
	// whose message is one line for people. For the claims in Unplaceable
	// it only says that no placement was found; explain.FillReasons says
	// why, within a budget the caller chooses.
	Rejected    map[int]error
	Unplaceable []int // claims that fit nowhere even alone, input order
	Stats       Stats
}

// Stats summarise the run for --report.
type Stats struct {
	Pending, Admitted     int
	Objective             int64 // admitted weight (max-claims) or count (ordered)
	Bound                 int64 // proven upper bound of Objective
	Optimal               bool
	Greedy                int64 // best greedy objective
	Components            int
	Variables, Clauses    int
	SolverCalls           int
	ImpliedCounters       int
	EncodeTime, SolveTime time.Duration
	// BoundTime is spent in the configuration relaxation, HeuristicTime in
	// best-fit; BoundIterations counts the relaxation's descent steps.
	BoundTime, HeuristicTime time.Duration
	BoundIterations          int
	// NeighbourhoodSteps counts the neighbourhood search's steps, which
	// took NeighbourhoodTime.
	NeighbourhoodSteps    int
	NeighbourhoodTime     time.Duration
	FirstAvailablePenalty int64
	CounterSetsTouched    int
	ComponentsWithoutSAT  int
	ComponentsNotProven   int
	// FragExact: the frag policy's look-ahead placed the admitted claims
	// where they leave the cluster least fragmented of all their
	// placements, proven (package frag, the exact level).
	FragExact bool
	// Stages is the time of each pipeline stage, summed over the
	// components, in pipeline order.
	Stages []StageTime
}

// UntilGreedy is the time until the greedy incumbent, the run's first
// complete answer: the stages up to greedy, which run before any timed
// one, summed over components.
func (s Stats) UntilGreedy() time.Duration {
	var d time.Duration
	for _, st := range s.Stages {
		d += st.Time
		if st.Stage == "greedy" {
			break
		}
	}
	return d
}

// Gap is (bound - objective) / bound.
func (s Stats) Gap() float64 {
	if s.Bound == 0 {
		return 0
	}
	return float64(s.Bound-s.Objective) / float64(s.Bound)
}

// defaultMaxVariables bounds the whole-component SAT model (estimated as
// claim-device pairs). Larger components are solved by the relaxation and
// best-fit: a whole model that large neither improves on them nor proves
// anything within a batch's budget (docs/encoding.md, "Scale").
const defaultMaxVariables = 40_000

// CheckOptions tells whether objective and policy are known; empty means
// the default.
func CheckOptions(objective, policy string) error {
	if objective != "" && objective != MaxClaims && objective != Ordered {
		return fmt.Errorf("objective %q: want %s or %s", objective, MaxClaims, Ordered)
	}
	if policy != "" && policy != Binpack && policy != Spread && policy != Frag {
		return fmt.Errorf("policy %q: want %s, %s or %s", policy, Binpack, Spread, Frag)
	}
	return nil
}

// Run allocates the pending claims of p. It returns the best allocation
// found within opts.Timeout, or ctx's error when ctx ends first.
func Run(ctx context.Context, p *model.Problem, opts Options) (*Result, error) {
	if err := CheckOptions(opts.Objective, opts.Policy); err != nil {
		return nil, err
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("timeout %v: want a positive duration", opts.Timeout)
	}
	if opts.Objective == "" {
		opts.Objective = MaxClaims
	}
	if opts.Policy == "" {
		opts.Policy = Binpack
	}
	lookahead := opts.Policy == Frag
	if lookahead {
		opts.Policy = Binpack // the levels below the look-ahead
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxVariables == 0 {
		opts.MaxVariables = defaultMaxVariables
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	end := time.Now().Add(opts.Timeout)
	deadline := end
	if lookahead && opts.Lookahead != nil {
		deadline = end.Add(-lookaheadReserve(opts.Timeout))
	}
	comps := components(p)
	results := make([]*componentResult, len(comps))
	solve := func(i, workers int) {
		useSAT := opts.MaxVariables > 0 && estimateVariables(comps[i]) <= opts.MaxVariables
		cs := &componentState{p: p, claims: comps[i], opts: opts, ordered: opts.Objective == Ordered,
			deadline: deadline, plan: newPlan(useSAT, opts.Limits), workers: workers, noSAT: !useSAT}
		results[i] = cs.solve(ctx)
	}
	if len(comps) == 1 {
		// One component: it alone uses the workers (for best-fit's tries).
		solve(0, opts.Workers)
		if opts.Progress != nil {
			opts.Progress(1, 1)
		}
	} else {
		var wg sync.WaitGroup
		next := make(chan int)
		var mu sync.Mutex
		done := 0
		for w := 0; w < opts.Workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					solve(i, 1)
					if opts.Progress != nil {
						mu.Lock()
						done++
						opts.Progress(done, len(comps))
						mu.Unlock()
					}
				}
			}()
		}
		// Largest components first, so they get the most time.
		order := make([]int, len(comps))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return len(comps[order[a]]) > len(comps[order[b]]) })
		for _, i := range order {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("allocating stopped: %w", context.Cause(ctx))
	}
	res := gather(ctx, p, opts, results)
	if ctx.Err() != nil { // placeLast stopped part way
		return nil, fmt.Errorf("allocating stopped: %w", context.Cause(ctx))
	}
	if lookahead && opts.Lookahead != nil {
		refined := opts.Lookahead.Refine(ctx, p, res, end)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("allocating stopped in the look-ahead: %w", context.Cause(ctx))
		}
		// The look-ahead does not know the pod rules: a re-placement
		// that breaks them is not taken.
		if len(podViolations(p, refined.Assignments)) == 0 {
			if err := sameOutcome(res, refined); err != nil {
				return nil, fmt.Errorf("the look-ahead broke the engine's result: %w", err)
			}
			res = refined
		}
	}
	return res, nil
}

// sameOutcome tells whether after (the look-ahead's re-placement) keeps
// what the engine decided: as many claims, of the same weight, and the
// same value, bound and proof. A post-pass moves claims (and, with frag's
// Upgrade, trades one for another of the same weight); it never changes
// what was admitted in value or what was proven.
func sameOutcome(before, after *Result) error {
	if after == before {
		return nil
	}
	if len(after.Assignments) != len(before.Assignments) || claimWeight(after.Assignments) != claimWeight(before.Assignments) {
		return fmt.Errorf("%d claims of weight %d admitted, want %d of weight %d",
			len(after.Assignments), claimWeight(after.Assignments), len(before.Assignments), claimWeight(before.Assignments))
	}
	x, y := before.Stats, after.Stats
	if x.Objective != y.Objective || x.Bound != y.Bound || x.Optimal != y.Optimal {
		return fmt.Errorf("objective %d, bound %d, optimal %v; want %d, %d, %v", y.Objective, y.Bound, y.Optimal, x.Objective, x.Bound, x.Optimal)
	}
	return nil
}

// gather sums the components' results.
func gather(ctx context.Context, p *model.Problem, opts Options, results []*componentResult) *Result {
	res := &Result{Rejected: map[int]error{}}
	st := &res.Stats
	st.Pending = len(p.Claims)
	st.Components = len(results)
	proven := true
	unplaceable := map[int]bool{}
	for _, r := range results {
		res.Assignments = append(res.Assignments, r.assignments...)
		st.Objective += r.objective
		st.Bound += r.bound
		st.Greedy += r.greedyValue
		st.Variables += r.counts.vars
		st.Clauses += r.counts.clauses
		st.SolverCalls += r.counts.calls
		st.ImpliedCounters += r.counts.implied
		st.BoundIterations += r.counts.boundIterations
		st.NeighbourhoodSteps += r.counts.lnsSteps
		st.FirstAvailablePenalty += r.penalty
		st.CounterSetsTouched += r.touched
		for _, t := range r.stages {
			st.Stages = addStageTime(st.Stages, t)
		}
		if !r.proven {
			st.ComponentsNotProven++
		}
		proven = proven && r.proven
		if r.noSAT {
			st.ComponentsWithoutSAT++
		}
		for _, c := range r.unplaceable {
			unplaceable[c.Index] = true
		}
	}
	if opts.Objective == MaxClaims {
		// The claims placed last are among the undecided ones, which the
		// bound already counts: they add to the objective only.
		before := claimWeight(res.Assignments)
		kept, late := placeLast(ctx, p, res.Assignments)
		kept, late = podSafeLate(p, res.Assignments, kept, late)
		res.Assignments = append(kept, late...)
		st.Objective += claimWeight(res.Assignments) - before
	}
	// Optimal: every component proven, and nothing left between the
	// value and the bound (no undecided claim, or all placed last).
	st.Optimal = proven && st.Objective == st.Bound
	// In pipeline order, whichever component reached a stage first.
	pipeline := maxClaimsStages
	if opts.Objective == Ordered {
		pipeline = orderedStages
	}
	rank := func(name string) int {
		return slices.IndexFunc(pipeline, func(s stage) bool { return s.name == name })
	}
	sort.SliceStable(st.Stages, func(i, j int) bool { return rank(st.Stages[i].Stage) < rank(st.Stages[j].Stage) })
	for _, t := range st.Stages {
		switch t.Stage {
		case "relaxation":
			st.BoundTime += t.Time
		case "best-fit-first", "best-fit", "ordered-repack":
			st.HeuristicTime += t.Time
		case "neighbourhood":
			st.NeighbourhoodTime += t.Time
		case "encode":
			st.EncodeTime += t.Time
		case "sat-maximise", "ordered-sat", "lower-levels":
			st.SolveTime += t.Time
		}
	}
	sort.Slice(res.Assignments, func(i, j int) bool { return res.Assignments[i].Claim.Index < res.Assignments[j].Claim.Index })
	st.Admitted = len(res.Assignments)
	admitted := map[int]bool{}
	for _, a := range res.Assignments {
		admitted[a.Claim.Index] = true
	}
	for _, c := range p.Claims {
		switch {
		case admitted[c.Index]:
		case c.Err != nil:
			res.Rejected[c.Index] = model.RejectionOf(c.Err)
		case unplaceable[c.Index]:
			res.Rejected[c.Index] = errNoPlacement
			res.Unplaceable = append(res.Unplaceable, c.Index)
		default:
			res.Rejected[c.Index] = fitsAloneReason(opts.Objective)
		}
	}
	podReasons(p, res)
	return res
}
