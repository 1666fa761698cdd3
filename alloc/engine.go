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
	Refine(p *model.Problem, res *Result, deadline time.Time) *Result
}

// lookaheadReserve is the part of a run's Timeout kept for the look-ahead
// after the engine: a fifth, at most 2 s, so that a frag run, like any
// other, returns within its Timeout.
func lookaheadReserve(timeout time.Duration) time.Duration {
	return min(timeout/5, 2*time.Second)
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
	// the stages after it (docs/performance.md, issue 13).
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
	// Rejected gives each claim not admitted a one-line reason. For the
	// claims in Unplaceable it only says that no placement was found;
	// explain.Reasons says why, within a budget the caller chooses.
	Rejected    map[int]string
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
		plan := newPlan(useSAT)
		plan.lowerMin, plan.lowerMax, plan.hint = opts.Limits.LowerMin, opts.Limits.LowerMax, opts.Limits.LowerMin
		cs := &componentState{p: p, claims: comps[i], opts: opts, ordered: opts.Objective == Ordered,
			deadline: deadline, plan: plan, workers: workers, noSAT: !useSAT}
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := gather(p, opts, results)
	if lookahead && opts.Lookahead != nil {
		if refined := opts.Lookahead.Refine(p, res, end); len(podViolations(p, refined.Assignments)) == 0 {
			res = refined
		}
	}
	return res, nil
}

// gather sums the components' results.
func gather(p *model.Problem, opts Options, results []*componentResult) *Result {
	res := &Result{Rejected: map[int]string{}}
	st := &res.Stats
	st.Pending = len(p.Claims)
	st.Components = len(results)
	st.Optimal = true
	unplaceable := map[int]bool{}
	for _, r := range results {
		res.Assignments = append(res.Assignments, r.assignments...)
		st.Objective += r.objective
		st.Bound += r.bound
		st.Greedy += r.greedy
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
		if !r.optimal {
			st.Optimal = false
			st.ComponentsNotProven++
		}
		if r.noSAT {
			st.ComponentsWithoutSAT++
		}
		for _, c := range r.unplaceable {
			unplaceable[c.Index] = true
		}
	}
	if opts.Objective == MaxClaims {
		// Beyond the model the bound was proven for: they add to both.
		before := weight(res.Assignments)
		kept, late := placeLast(p, res.Assignments)
		kept, late = podSafeLate(p, res.Assignments, kept, late)
		res.Assignments = append(kept, late...)
		gain := weight(res.Assignments) - before
		st.Objective += gain
		st.Bound += gain
	}
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
			res.Rejected[c.Index] = c.Err.Error()
		case unplaceable[c.Index]:
			res.Rejected[c.Index] = NoPlacementReason
			res.Unplaceable = append(res.Unplaceable, c.Index)
		default:
			res.Rejected[c.Index] = fitsAloneReason(opts.Objective)
		}
	}
	podReasons(p, res)
	return res
}

// placeLast: claims whose outcome depends on the allocator's search order
// were decided from the existing allocations alone (held to the devices
// found there, or failed with an error there). Those left out may still be
// placed as the scheduler would place them after every admitted claim:
// their search, run with the admitted claims allocated, must meet no error
// on any node, and they get the devices it picks on the first node where
// it succeeds. In input order, each after the ones placed before.
//
// Where such a search meets an error on a device (a selector or derived
// attribute failing there, a device breaking the constraint of an All
// request), an admitted claim whose allocation does not depend on the
// search order may take that device instead of one of its own (any valid
// devices are ones the scheduler could give it, on its node or another
// that reaches the device): the scheduler placing it
// first holds the device, and the later search passes over it, as it
// does when the scheduler takes the claims in input order. Such a change
// is kept when the claims placed last then weigh more.
//
// Before that, an admitted claim held to the devices its search found
// from the existing allocations may yield them to a left-out claim whose
// allocation does not depend on the search order (which takes devices
// its own search picks among the admitted ones) and be placed last
// itself, where the allocator's search may find it others: kept when all
// claims then weigh more.
//
// It returns the admitted claims (changed as above) and those placed last.
func placeLast(p *model.Problem, admitted []*Assignment) (kept, late []*Assignment) {
	admitted = slices.Clone(admitted)
	admitted, out := yieldHeld(p, admitted)
	_, blocked := lastPass(p, admitted)
	for tries := 0; len(blocked) > 0 && tries < maxReplaceTries; {
		improved := false
	search:
		for _, d := range blocked {
			for i, a := range admitted {
				if !usesCandidate(a, d) {
					continue
				}
				s := stateWithout(p, admitted, i) // Replace takes nothing in it
				for _, n := range moveNodes(p, a, d) {
					tries++
					picks, ok := p.Replace(a.Claim, s, n, d)
					if ok && plainMove(p, a.Picks, picks) {
						na := assignmentOf(a.Claim, n, picks)
						trial := slices.Clone(admitted)
						trial[i] = na
						o2, b2 := lastPass(p, trial)
						if weight(o2) > weight(out) {
							admitted[i] = na
							out, blocked, improved = o2, b2, true
							break search
						}
					}
					if tries >= maxReplaceTries {
						break search
					}
				}
			}
		}
		if !improved {
			break
		}
	}
	return admitted, out
}

// yieldHeld: placeLast's first step, at most maxReplaceTries searches.
func yieldHeld(p *model.Problem, admitted []*Assignment) ([]*Assignment, []*Assignment) {
	out, _ := lastPass(p, admitted)
	tries := 0
	for restart := true; restart && tries < maxReplaceTries; {
		restart = false
		in := map[int]bool{}
		for _, a := range admitted {
			in[a.Claim.Index] = true
		}
	search:
		for i, h := range admitted {
			if !h.Claim.Retryable() {
				continue
			}
			for _, f := range p.Claims {
				if in[f.Index] || f.Err != nil || !f.OrderFree() || !wantsAny(f, h.Picks) {
					continue
				}
				if tries >= maxReplaceTries {
					break search
				}
				rest := slices.Delete(slices.Clone(admitted), i, i+1)
				s := stateWithout(p, rest, -1)
				for _, n := range claimNodes(p, f) {
					if tries >= maxReplaceTries {
						break search
					}
					tries++
					picks, ok := p.Replace(f, s, n, -1)
					if !ok {
						continue
					}
					// The first node where it fits, as the scheduler.
					if plainMove(p, nil, picks) {
						trial := append(rest, assignmentOf(f, n, picks))
						o2, _ := lastPass(p, trial)
						if weight(trial)+weight(o2) > weight(admitted)+weight(out) {
							admitted, out, restart = trial, o2, true
							break search
						}
					}
					break
				}
			}
		}
	}
	return admitted, out
}

// stateWithout is the state with the devices of as taken, but for as[skip]
// (skip < 0: all of them).
func stateWithout(p *model.Problem, as []*Assignment, skip int) *model.State {
	s := model.NewState(p)
	for j, a := range as {
		if j != skip {
			a.take(s)
		}
	}
	return s
}

// assignmentOf is c on node with the picks (request, alternative, device)
// of the model's searches.
func assignmentOf(c *model.Claim, node int, picks [][3]int) *Assignment {
	a := &Assignment{Claim: c, Node: node}
	for _, pk := range picks {
		a.Picks = append(a.Picks, Pick{Req: pk[0], Alt: pk[1], Dev: pk[2]})
	}
	return a
}

// wantsAny tells whether some alternative of c may use a device of picks.
func wantsAny(c *model.Claim, picks []Pick) bool {
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			for _, pk := range picks {
				if slices.Contains(a.Candidates, pk.Dev) {
					return true
				}
			}
		}
	}
	return false
}

// moveNodes are the nodes a may move to for taking d: its own, then (for a
// claim on a node that no pod has pinned) the others that reach d and a
// may use, in order.
func moveNodes(p *model.Problem, a *Assignment, d int) []int {
	nodes := []int{a.Node}
	if a.Node < 0 || a.Claim.FixedNode >= 0 {
		return nodes
	}
	for n := range p.Nodes {
		if n != a.Node && p.Devices[d].Reaches(n) && !a.Claim.ExcludedNodes[n] {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// maxReplaceTries bounds the admitted claims placeLast moves onto a device
// a later search met an error on (each try runs the pass again).
const maxReplaceTries = 32

// usesCandidate tells whether a, an admitted claim whose allocation does
// not depend on the search order, could take d for a request it serves
// (and does not hold it already).
func usesCandidate(a *Assignment, d int) bool {
	if !a.Claim.OrderFree() {
		return false
	}
	for _, pk := range a.Picks {
		if pk.Dev == d {
			return false
		}
	}
	for _, pk := range a.Picks {
		if slices.Contains(a.Claim.Requests[pk.Req].Alternatives[pk.Alt].Candidates, d) {
			return true
		}
	}
	return false
}

// plainMove: the devices of picks not among held exclude no other device
// (no name repeated across nodes' slices, no other pool generation): what
// the model counts for them is what the scheduler's search for a later
// claim sees on every node.
func plainMove(p *model.Problem, held []Pick, picks [][3]int) bool {
	for _, pk := range picks {
		had := slices.ContainsFunc(held, func(o Pick) bool { return o.Dev == pk[2] })
		if !had && len(p.Devices[pk[2]].Incompatible) > 0 {
			return false
		}
	}
	return true
}

// weight is the claim weight of as.
func weight(as []*Assignment) int64 {
	var w int64
	for _, a := range as {
		w += a.Claim.Weight
	}
	return w
}

// lastPass places the claims left out after the admitted ones (placeLast)
// and returns them, with the devices where the searches of those it could
// not place met an error. The searches run on the state the scheduler
// sees: admin-access results neither hold their devices nor count for
// counters, compatibility groups or the capacity of shared devices there
// (its allocated state leaves them out), though the claim that gets them
// was checked with them.
func lastPass(p *model.Problem, admitted []*Assignment) (out []*Assignment, blocked []int) {
	in := map[int]bool{}
	var s *model.State
	for _, c := range p.Claims {
		if !c.Retryable() {
			continue
		}
		if s == nil {
			s = model.NewState(p)
			for _, a := range admitted {
				for _, pk := range a.Picks {
					if exclusive(a.Claim, pk) {
						TakePick(s, a.Claim, pk)
					}
				}
				in[a.Claim.Index] = true
			}
		}
		if in[c.Index] {
			continue
		}
		node, picks, ok, blocker := p.PlaceLast(c, s)
		if !ok {
			if blocker >= 0 && !slices.Contains(blocked, blocker) {
				blocked = append(blocked, blocker)
			}
			continue
		}
		a := assignmentOf(c, node, picks)
		if slices.ContainsFunc(a.Picks, func(pk Pick) bool { return !exclusive(c, pk) }) {
			// As the scheduler sees it: without the admin-access results.
			a.release(s)
			for _, pk := range a.Picks {
				if exclusive(c, pk) {
					TakePick(s, c, pk)
				}
			}
		}
		out = append(out, a)
	}
	return out, blocked
}
