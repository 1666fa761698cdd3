// Package alloc is drasat's allocation engine: it splits the problem into
// independent components, finds a greedy incumbent, improves it with the SAT
// model to a proven optimum where the budget allows, and returns one
// assignment per admitted claim.
package alloc

import (
	"context"
	"fmt"
	"runtime"
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
type Lookahead interface {
	Refine(p *model.Problem, res *Result) *Result
}

// Options steer one run.
type Options struct {
	Objective string // max-claims (default) or ordered
	Policy    string // binpack (default), spread or frag
	// Lookahead is the frag policy's measure; without it frag is binpack.
	Lookahead Lookahead
	Timeout   time.Duration // for the whole run; 0 means 30s
	// MaxVariables bounds one component's SAT model; larger components keep
	// the greedy result and report the gap.
	MaxVariables int
	// Workers solving components concurrently; 0 means GOMAXPROCS.
	Workers int
	// Progress, when set, is called after each component.
	Progress func(done, total int)
}

// Result of a run.
type Result struct {
	Assignments []*Assignment // admitted claims, input order
	Rejected    map[int]string
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
// anything (solver findings, 1).
const defaultMaxVariables = 40_000

// Run allocates the pending claims of p.
func Run(ctx context.Context, p *model.Problem, opts Options) (*Result, error) {
	if opts.Objective == "" {
		opts.Objective = MaxClaims
	}
	if opts.Policy == "" {
		opts.Policy = Binpack
	}
	if opts.Objective != MaxClaims && opts.Objective != Ordered {
		return nil, fmt.Errorf("objective %q: want %s or %s", opts.Objective, MaxClaims, Ordered)
	}
	if opts.Policy != Binpack && opts.Policy != Spread && opts.Policy != Frag {
		return nil, fmt.Errorf("policy %q: want %s, %s or %s", opts.Policy, Binpack, Spread, Frag)
	}
	lookahead := opts.Policy == Frag
	if lookahead {
		opts.Policy = Binpack // the levels below the look-ahead
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxVariables <= 0 {
		opts.MaxVariables = defaultMaxVariables
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	deadline := time.Now().Add(opts.Timeout)
	comps := components(p)
	results := make([]*componentResult, len(comps))
	var wg sync.WaitGroup
	next := make(chan int)
	var mu sync.Mutex
	done := 0
	for w := 0; w < opts.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = solveComponent(ctx, p, comps[i], opts, deadline)
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &Result{Rejected: map[int]string{}}
	st := &res.Stats
	st.Pending = len(p.Claims)
	st.Components = len(comps)
	st.Optimal = true
	for _, r := range results {
		res.Assignments = append(res.Assignments, r.assignments...)
		st.Objective += r.objective
		st.Bound += r.bound
		st.Greedy += r.greedy
		st.Variables += r.vars
		st.Clauses += r.clauses
		st.SolverCalls += r.calls
		st.ImpliedCounters += r.implied
		st.EncodeTime += r.encodeTime
		st.SolveTime += r.solveTime
		st.BoundTime += r.boundTime
		st.HeuristicTime += r.heuristicTime
		st.BoundIterations += r.boundIterations
		st.NeighbourhoodSteps += r.lnsSteps
		st.NeighbourhoodTime += r.lnsTime
		st.FirstAvailablePenalty += r.penalty
		st.CounterSetsTouched += r.touched
		if !r.optimal {
			st.Optimal = false
			st.ComponentsNotProven++
		}
		if r.noSAT {
			st.ComponentsWithoutSAT++
		}
	}
	sort.Slice(res.Assignments, func(i, j int) bool { return res.Assignments[i].Claim.Index < res.Assignments[j].Claim.Index })
	st.Admitted = len(res.Assignments)
	admitted := map[int]bool{}
	for _, a := range res.Assignments {
		admitted[a.Claim.Index] = true
	}
	fitsAlone := map[int]bool{}
	for _, r := range results {
		for _, c := range r.fitsAlone {
			fitsAlone[c.Index] = true
		}
	}
	for _, c := range p.Claims {
		if !admitted[c.Index] {
			res.Rejected[c.Index] = claimReason(p, c, opts.Objective, fitsAlone[c.Index])
		}
	}
	if lookahead && opts.Lookahead != nil {
		res = opts.Lookahead.Refine(p, res)
	}
	return res, nil
}
