package alloc

import (
	"context"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/go-air/gini/logic"
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

type componentResult struct {
	assignments           []*Assignment
	objective, bound      int64
	greedy                int64
	optimal, noSAT        bool
	vars, clauses, calls  int
	implied               int
	encodeTime, solveTime time.Duration
	penalty               int64
	touched               int
	boundTime             time.Duration
	heuristicTime         time.Duration
	boundIterations       int
	lnsSteps              int
	lnsTime               time.Duration
	fitsAlone             []*model.Claim
}

// solveComponent allocates one independent group of claims.
func solveComponent(ctx context.Context, p *model.Problem, claims []*model.Claim, opts Options, deadline time.Time) *componentResult {
	r := &componentResult{}
	started := time.Now()
	ordered := opts.Objective == Ordered
	weight := func(c *model.Claim) int64 {
		if ordered {
			return 1
		}
		return c.Weight
	}
	value := func(as []*Assignment) (v int64) {
		for _, a := range as {
			v += weight(a.Claim)
		}
		return v
	}
	// Upper bound: claims that fit at all, alone. The others never fit
	// (taking devices only removes placements): the greedy passes skip
	// them, and their reasons need not place them again.
	alone := model.NewState(p)
	var fitting []*model.Claim
	for _, c := range claims {
		if a, ok := place(alone, c); ok {
			r.bound += weight(c)
			a.release(alone)
			fitting = append(fitting, c)
		}
	}
	r.fitsAlone = fitting
	// Incumbents: first-fit in arrival order and smallest first.
	best := greedy(p, fitting)
	bySize := sortBySize(p, fitting, false)
	if !ordered {
		if alt := greedy(p, bySize); value(alt) > value(best) {
			best = alt
		}
	}
	r.greedy = value(best)
	// The configuration relaxation bounds max-claims and prices devices;
	// best-fit at those prices packs far better than first-fit.
	var rel *bound.Relaxation
	if !ordered && value(best) < r.bound {
		best, rel = r.relax(ctx, p, claims, best, bySize, weight, value, deadline)
	}
	// Short of the bound: neighbourhood search, with half of what is left
	// when the whole SAT model comes next, else all of it.
	if rel != nil && value(best) < r.bound {
		start := time.Now()
		end := deadline
		if estimateVariables(claims) <= opts.MaxVariables {
			end = start.Add(time.Until(deadline) / 2)
		}
		best, r.lnsSteps = neighbourhoodSearch(ctx, p, claims, best, rel, weight, r.bound, end)
		r.lnsTime = time.Since(start)
	}
	finish := func(as []*Assignment) *componentResult {
		sort.Slice(as, func(i, j int) bool { return as[i].Claim.Index < as[j].Claim.Index })
		r.assignments = as
		r.objective = value(as)
		r.penalty, r.touched = secondary(p, as)
		if r.optimal {
			r.bound = r.objective
		}
		return r
	}
	if r.bound == 0 {
		r.optimal = true
		return finish(nil)
	}
	// An optimum on devices without counters, whose lower levels are
	// provably optimal too, needs no SAT model: no firstAvailable fallback
	// is used and no more fresh counter sets are touched than any
	// allocation of that weight must touch. (With counters the SAT model
	// still runs: which partitions claims take decides what fits later;
	// see below.)
	if !ordered && opts.Policy == Binpack && value(best) == r.bound && !drawsOnCounters(p, best) {
		if pen, tv := secondary(p, best); pen == 0 && tv <= touchFloor(p, claims, value(best), weight) {
			r.optimal = true
			return finish(best)
		}
	}
	if estimateVariables(claims) > opts.MaxVariables {
		r.noSAT = true
		r.optimal = !ordered && value(best) == r.bound
		if ordered {
			if alt := orderedRepack(ctx, p, claims, deadline); value(alt) > value(best) {
				best = alt
			}
		}
		return finish(best)
	}
	start := time.Now()
	m, err := encode.Encode(p, claims, encode.Options{Symmetry: !ordered})
	if err != nil {
		r.noSAT = true
		r.optimal = !ordered && value(best) == r.bound
		return finish(best)
	}
	obj := objectiveSorter(m, weight)
	pen := penaltySorter(m)
	touch := logic.NewCardSort(m.Touched, m.C)
	s := solver.New(m.C, m.Clauses)
	r.vars, r.clauses, r.implied = s.Vars, s.Clauses, m.ImpliedCounters
	r.encodeTime = time.Since(start)
	start = time.Now()
	defer func() { r.solveTime = time.Since(start); r.calls = s.Calls }()

	var base []z.Lit // assumptions that fix the levels optimised so far
	cur := best
	haveModel := false
	if ordered {
		admitted := map[*encode.Unit]int{}
		unitOf := unitsByClaim(m)
		decided := true
		for i, c := range claims {
			u := unitOf[c.Index]
			lit := u.AtLeast(m.C, admitted[u]+1)
			left := time.Until(deadline)
			callEnd := time.Now().Add(2 * left / time.Duration(len(claims)-i))
			if callEnd.After(deadline) {
				callEnd = deadline
			}
			switch s.Solve(ctx, callEnd, append(base, lit)...) {
			case solver.Sat:
				base = append(base, lit)
				admitted[u]++
				cur, haveModel = decode(p, m, s), true
			case solver.Unknown:
				decided = false
			}
		}
		if !haveModel {
			cur = nil
		}
		r.optimal = decided
	} else {
		val := value(cur)
		r.optimal = val >= r.bound
		for !r.optimal {
			res := s.Solve(ctx, deadline, obj.Geq(int(val)+1))
			if res == solver.Unknown {
				break
			}
			if res == solver.Unsat {
				r.optimal = true
				break
			}
			cur, haveModel = decode(p, m, s), true
			val = value(cur)
			r.optimal = val >= r.bound
		}
		base = append(base, obj.Geq(int(val)))
		// When best-fit found the optimum, the SAT model has no model of it
		// yet, and finding one can be as hard as the proof was: it and the
		// lower levels below get a bounded share of the budget. The
		// solver's own model goes first, not best-fit's allocation: which
		// placements a GPU's claims take decides what fits on it later,
		// and on the Alibaba replay (drasat bench -s openb) keeping
		// first-fit's placements admitted 420 tasks where the solver's
		// admit 487. Only when the solver finds none in time is best-fit's
		// allocation handed over as assumptions, so that the lower levels
		// still run.
		deadline = secondaryDeadline(deadline, started)
		if !haveModel {
			if s.Solve(ctx, deadline, base...) == solver.Sat {
				cur, haveModel = decode(p, m, s), true
			} else if h, ok := hint(m, cur); ok && s.Solve(ctx, time.Now().Add(secondaryMin), append(base, h...)...) == solver.Sat {
				cur, haveModel = decode(p, m, s), true
			}
		}
	}
	if !haveModel {
		return finish(cur)
	}
	// Secondary levels: earlier firstAvailable subrequests, then packing.
	pv, _ := secondary(p, cur)
	for pv > 0 {
		if s.Solve(ctx, deadline, append(base, pen.Leq(int(pv)-1))...) != solver.Sat {
			break
		}
		cur = decode(p, m, s)
		pv, _ = secondary(p, cur)
	}
	base = append(base, pen.Leq(int(pv)))
	_, tv := secondary(p, cur)
	floor := 0
	if opts.Policy == Binpack {
		floor = touchFloor(p, claims, value(cur), weight)
	}
	for {
		goal := touch.Leq(tv - 1)
		if opts.Policy == Spread {
			goal = touch.Geq(tv + 1)
		}
		settled := opts.Policy == Binpack && tv <= floor || opts.Policy == Spread && tv >= len(m.Touched)
		if settled || s.Solve(ctx, deadline, append(base, goal)...) != solver.Sat {
			break
		}
		cur = decode(p, m, s)
		_, tv = secondary(p, cur)
	}
	return finish(cur)
}

// drawsOnCounters tells whether some pick consumes from a counter set.
func drawsOnCounters(p *model.Problem, as []*Assignment) bool {
	for _, a := range as {
		for _, pk := range a.Picks {
			if len(p.Devices[pk.Dev].Consumes) > 0 {
				return true
			}
		}
	}
	return false
}

// The lower objective levels (firstAvailable preference and packing)
// refine an answer that is already optimal in what counts. Once the
// admitted weight is settled they get as long as settling it took, at least
// secondaryMin and at most secondaryMax: proving a packing optimal can take
// SAT far longer than finding it, and a batch should not wait for that.
const (
	secondaryMin = 100 * time.Millisecond
	secondaryMax = 2 * time.Second
)

func secondaryDeadline(deadline, started time.Time) time.Time {
	budget := min(max(time.Since(started), secondaryMin), secondaryMax)
	if end := time.Now().Add(budget); end.Before(deadline) {
		return end
	}
	return deadline
}

func estimateVariables(claims []*model.Claim) int {
	n := 0
	for _, c := range claims {
		for _, r := range c.Requests {
			for _, a := range r.Alternatives {
				n += len(a.Candidates)
			}
		}
	}
	return n
}

func unitsByClaim(m *encode.Model) map[int]*encode.Unit {
	out := map[int]*encode.Unit{}
	for _, u := range m.Units {
		for _, c := range u.Claims {
			out[c.Index] = u
		}
	}
	return out
}

// objectiveSorter counts admitted weight in unary: each unit contributes
// "at least j of its claims" literals, repeated by weight.
func objectiveSorter(m *encode.Model, weight func(*model.Claim) int64) *logic.CardSort {
	var lits []z.Lit
	for _, u := range m.Units {
		w := weight(u.Claims[0])
		n := len(u.Claims)
		if u.Simple {
			n = min(n, len(u.X))
		}
		for j := 1; j <= n; j++ {
			l := u.AtLeast(m.C, j)
			for k := int64(0); k < w; k++ {
				lits = append(lits, l)
			}
		}
	}
	return logic.NewCardSort(lits, m.C)
}

// penaltySorter counts, per firstAvailable request, the index of the chosen
// subrequest.
func penaltySorter(m *encode.Model) *logic.CardSort {
	var lits []z.Lit
	for _, u := range m.Units {
		for _, sels := range u.Sel {
			for i, l := range sels {
				for k := 0; k < i; k++ {
					lits = append(lits, l)
				}
			}
		}
	}
	return logic.NewCardSort(lits, m.C)
}

// decode reads the assignments from the last satisfiable model.
func decode(p *model.Problem, m *encode.Model, s *solver.S) []*Assignment {
	var out []*Assignment
	for _, u := range m.Units {
		if u.Simple {
			i := 0
			for _, x := range u.X {
				if i < len(u.Claims) && s.Value(x.Lit) {
					out = append(out, &Assignment{Claim: u.Claims[i], Node: deviceNode(p, x.Dev), Picks: []Pick{{0, 0, x.Dev}}})
					i++
				}
			}
			continue
		}
		if !s.Value(u.Admit) {
			continue
		}
		a := &Assignment{Claim: u.Claims[0], Node: -1}
		for _, x := range u.X {
			if s.Value(x.Lit) {
				a.Picks = append(a.Picks, Pick{x.Req, x.Alt, x.Dev})
			}
		}
		for i, l := range u.NodeLit {
			if s.Value(l) {
				a.Node = u.NodeIdx[i]
			}
		}
		if u.NodeLit == nil && len(a.Picks) > 0 {
			a.Node = deviceNode(p, a.Picks[0].Dev)
		}
		out = append(out, a)
	}
	return out
}

// deviceNode is the node a lone device pins its claim to (-1: any).
func deviceNode(p *model.Problem, d int) int {
	dev := p.Devices[d]
	if dev.All || len(dev.Reach) == 0 {
		return -1
	}
	return dev.Reach[0]
}

// secondary measures the lower levels of the objective: the summed index of
// chosen firstAvailable subrequests, and the untouched counter sets newly
// touched.
func secondary(p *model.Problem, as []*Assignment) (penalty int64, touched int) {
	sets := map[int]bool{}
	for _, a := range as {
		seen := map[int]bool{}
		for _, pk := range a.Picks {
			if !seen[pk.Req] {
				seen[pk.Req] = true
				penalty += int64(pk.Alt)
			}
			alt := a.Claim.Requests[pk.Req].Alternatives[pk.Alt]
			if alt.AdminAccess {
				continue
			}
			for _, c := range p.Devices[pk.Dev].Consumes {
				cs := p.CounterSets[c.Set]
				if len(cs.ExistingGroups) == 0 && equalInts(cs.Free, cs.Capacity) {
					sets[c.Set] = true
				}
			}
		}
	}
	return penalty, len(sets)
}

func equalInts(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// bestFitWork bounds the best-fit tries of a component: tries × claims.
const bestFitWork = 16000

// byPrice orders claims by what serving them costs at prices π per unit of
// weight, cheapest first (ties in size order).
func byPrice(rel *bound.Relaxation, claims, bySize []*model.Claim, price []float64, weight func(*model.Claim) int64) []*model.Claim {
	out := append([]*model.Claim(nil), bySize...)
	cost := map[int]float64{}
	for _, c := range out {
		cost[c.Index] = rel.ClaimCost(c, price) / float64(max(weight(c), 1))
	}
	sort.SliceStable(out, func(i, j int) bool { return cost[out[i].Index] < cost[out[j].Index] })
	return out
}

// relax bounds the component with the configuration relaxation and improves
// best with price-guided best-fit.
func (r *componentResult) relax(ctx context.Context, p *model.Problem, claims []*model.Claim, best []*Assignment,
	bySize []*model.Claim, weight func(*model.Claim) int64, value func([]*Assignment) int64, deadline time.Time) ([]*Assignment, *bound.Relaxation) {
	start := time.Now()
	rel := bound.New(p, claims, weight)
	lr := rel.Solve(ctx, value(best), start.Add(time.Until(deadline)/3), bound.Options{})
	r.bound = min(r.bound, lr.Bound)
	r.boundTime = time.Since(start)
	defer func() { r.heuristicTime = time.Since(start) - r.boundTime }()
	r.boundIterations += lr.Iterations
	if lr.Price == nil || value(best) >= r.bound {
		return best, rel
	}
	// Best-fit at prices from several stages of the descent, each with
	// claims ordered by price and by size. Fully converged prices are
	// degenerate (many placements tie exactly) and pack worst; the stages
	// just after the first halving pack best, so they go first and the
	// first stage goes last. Best-fit is sensitive to the prices, so when
	// descents are cheap (every bin priced from its layouts) two more,
	// halving sooner and later, add stages of their own. A fixed number of
	// tries keeps the result deterministic.
	lists := [][][]float64{lr.Snapshots}
	more := []int{6, 40}
	if !rel.Enumerated() {
		more = nil
	}
	for _, patience := range more {
		more := rel.Solve(ctx, value(best), time.Now().Add(time.Until(deadline)/3), bound.Options{Patience: patience})
		r.boundIterations += more.Iterations
		r.bound = min(r.bound, more.Bound) // every descent's bound is sound
		lists = append(lists, more.Snapshots)
	}
	stages := interleave(lists)
	tries := min(max(2, bestFitWork/len(claims)), len(stages)*2)
	try := func(i int) []*Assignment {
		price := stages[i/2]
		order := bySize
		if i%2 == 0 {
			order = byPrice(rel, claims, bySize, price, weight)
		}
		return bestFit(ctx, p, order, rel, price, deadline)
	}
	// Tries run side by side, a batch per core; the first try (in try
	// order) with the most weight wins, so the answer does not depend on
	// the number of cores.
	workers := runtime.GOMAXPROCS(0)
	for i := 0; i < tries && value(best) < r.bound && ctx.Err() == nil && time.Now().Before(deadline); i += workers {
		batch := make([][]*Assignment, min(workers, tries-i))
		var wg sync.WaitGroup
		for k := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				batch[k] = try(i + k)
			}()
		}
		wg.Wait()
		for _, alt := range batch {
			if value(alt) > value(best) {
				best = alt
			}
		}
	}
	return best, rel
}

// interleave orders the stages of several descents for best-fit: the
// second stages of each, then the third ones, and so on, the first stages
// (prices barely moved from the start) last.
func interleave(lists [][][]float64) [][]float64 {
	var out [][]float64
	for k := 1; ; k++ {
		added := false
		for _, l := range lists {
			if k < len(l) {
				out = append(out, l[k])
				added = true
			}
		}
		if !added {
			break
		}
	}
	for _, l := range lists {
		if len(l) > 0 {
			out = append(out, l[0])
		}
	}
	return out
}
