package alloc

import (
	"context"
	"fmt"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// lexCompare compares two sets of admitted claim indexes as the ordered
// objective does: the first claim where they differ decides.
func lexCompare(a, b []int) int {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return 1
			}
			return -1
		}
	}
	return len(a) - len(b)
}

func indexes(as []*Assignment) []int {
	out := make([]int, 0, len(as))
	for _, a := range as {
		out = append(out, a.Claim.Index)
	}
	sort.Ints(out)
	return out
}

// Every stage of both pipelines, and the paths without the SAT model
// (MaxVariables < 0: relaxation, best-fit and neighbourhood search for
// max-claims, the repack for ordered), runs under budgets from 1 ms to
// seconds; every answer passes the independent checker, is never below
// the greedy incumbent, and has a bound never below the brute-force
// optimum (equal to it when the answer says it is optimal).
func TestPipelineUnderBudgets(t *testing.T) {
	budgets := []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, 2 * time.Second}
	ran := map[string]bool{}
	noSATOptimal, noSATRuns := 0, 0
	for seed := uint64(1); seed <= 12; seed++ {
		for _, objs := range []*input.Objects{randomInstance(seed), sharesInstance(seed)} {
			p := build(t, objs, "")
			bf := newBruteForce(p)
			best, order := bf.best(), bf.ordered()
			arrival := firstFitInOrder(context.Background(), p, p.Claims, DefaultLimits.SearchSteps)
			bySize := firstFitInOrder(context.Background(), p, sortBySize(p, p.Claims, false), DefaultLimits.SearchSteps)
			incumbent := max(claimWeight(arrival), claimWeight(bySize))
			for _, budget := range budgets {
				for _, maxVars := range []int{0, -1} {
					for _, objective := range []string{MaxClaims, Ordered} {
						res := run(t, p, Options{Objective: objective, Timeout: budget, MaxVariables: maxVars})
						for _, st := range res.Stats.Stages {
							ran[st.Stage] = true
						}
						checkAllocations(t, p, objs, res, "")
						st := res.Stats
						where := func() string {
							return fmt.Sprintf("%s seed %d budget %v maxVars %d", objective, seed, budget, maxVars)
						}
						if objective == MaxClaims {
							if st.Objective < incumbent || st.Objective > best || st.Bound < best || st.Optimal && st.Objective != best {
								t.Fatalf("%s: admitted %d (greedy %d, optimum %d), bound %d, optimal %v", where(), st.Objective, incumbent, best, st.Bound, st.Optimal)
							}
							if maxVars < 0 {
								noSATRuns++
								if st.Objective == best {
									noSATOptimal++
								}
							}
							continue
						}
						got := indexes(res.Assignments)
						if lexCompare(got, indexes(arrival)) < 0 || lexCompare(got, order) > 0 ||
							st.Bound < int64(len(order)) || st.Optimal && !slices.Equal(got, order) {
							t.Fatalf("%s: admitted %v (greedy %v, brute force %v), bound %d, optimal %v", where(), got, indexes(arrival), order, st.Bound, st.Optimal)
						}
					}
				}
			}
		}
	}
	for _, st := range append(slices.Clone(maxClaimsStages), orderedStages...) {
		// aggregate: opt-in (UseCBC), TestAggregateStageAgainstBruteForce.
		if !ran[st.name] && st.name != "aggregate" {
			t.Errorf("stage %s never ran", st.name)
		}
	}
	// The paths above the SAT model's size limit, forced onto small
	// instances: the heuristics alone reach the optimum on most.
	t.Logf("without the SAT model: optimum on %d of %d runs", noSATOptimal, noSATRuns)
	if noSATOptimal*10 < noSATRuns*8 {
		t.Errorf("without the SAT model the optimum is reached on only %d of %d runs", noSATOptimal, noSATRuns)
	}
}

// The ordered repack (used above the SAT model's size limit) compared with
// brute force on small instances: never past the exact answer, never below
// arrival-order greedy, exact on most.
func TestOrderedRepackAgainstBruteForce(t *testing.T) {
	exact, runs := 0, 0
	for seed := uint64(1); seed <= 60; seed++ {
		for _, objs := range []*input.Objects{randomInstance(seed), sharesInstance(seed)} {
			p := build(t, objs, "")
			want := newBruteForce(p).ordered()
			res := run(t, p, Options{Objective: Ordered, MaxVariables: -1})
			if res.Stats.ComponentsWithoutSAT != res.Stats.Components {
				t.Fatalf("seed %d: %d of %d components without SAT; MaxVariables < 0 should skip the model", seed, res.Stats.ComponentsWithoutSAT, res.Stats.Components)
			}
			checkAllocations(t, p, objs, res, "")
			got := indexes(res.Assignments)
			if lexCompare(got, want) > 0 || lexCompare(got, indexes(firstFitInOrder(context.Background(), p, p.Claims, DefaultLimits.SearchSteps))) < 0 {
				t.Fatalf("seed %d: repack admitted %v, brute force %v", seed, got, want)
			}
			runs++
			if slices.Equal(got, want) {
				exact++
			}
		}
	}
	t.Logf("ordered repack exact on %d of %d instances", exact, runs)
	if exact*10 < runs*8 {
		t.Errorf("ordered repack exact on only %d of %d instances", exact, runs)
	}
}

// With a budget too short for any SAT call, ordered keeps the greedy
// incumbent (it used to return no allocation at all).
func TestOrderedShortBudgetKeepsGreedy(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		objs := randomInstance(seed)
		p := build(t, objs, "")
		arrival := firstFitInOrder(context.Background(), p, p.Claims, DefaultLimits.SearchSteps)
		res := run(t, p, Options{Objective: Ordered, Timeout: time.Nanosecond})
		if got := indexes(res.Assignments); lexCompare(got, indexes(arrival)) < 0 {
			t.Fatalf("seed %d: 1 ns budget admitted %v, greedy %v", seed, got, indexes(arrival))
		}
		checkAllocations(t, p, objs, res, "")
	}
}

// A negative timeout is an error, not a silent default.
func TestNegativeTimeout(t *testing.T) {
	p := build(t, randomInstance(1), "")
	if _, err := Run(context.Background(), p, Options{Timeout: -time.Second}); err == nil {
		t.Fatal("Run accepted a negative timeout")
	}
}

// A cancelled context stops the run with its error.
func TestCancelledContext(t *testing.T) {
	p := build(t, sharesInstance(3), "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, p, Options{}); err == nil {
		t.Fatal("Run ignored a cancelled context")
	}
}

// With a budget too short for anything but the untimed stages, max-claims
// keeps the greedy incumbent and reports a bound no lower than the
// optimum (a relaxation cut off before its first step reported
// math.MinInt64).
func TestTinyBudgetSoundBound(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		for _, objs := range []*input.Objects{randomInstance(seed), sharesInstance(seed)} {
			p := build(t, objs, "")
			best := newBruteForce(p).best()
			ff := claimWeight(firstFitInOrder(context.Background(), p, p.Claims, DefaultLimits.SearchSteps))
			res := run(t, p, Options{Timeout: time.Nanosecond})
			if st := res.Stats; st.Objective < ff || st.Bound < best || st.Gap() < 0 {
				t.Fatalf("seed %d: 1 ns budget admitted %d (greedy %d), bound %d (optimum %d), gap %v", seed, st.Objective, ff, st.Bound, best, st.Gap())
			}
			checkAllocations(t, p, objs, res, "")
		}
	}
}

// tinyLimits drive small instances down the paths large ones take: the
// first-fit search and best-fit run out of steps, best-fit makes the
// fewest tries, the neighbourhood search takes a few one-bin steps, the
// lower levels get a millisecond.
var tinyLimits = Limits{SearchSteps: 3, BestFitSteps: 2, BestFitMinSteps: 1, BestFitWork: 1,
	LNSSteps: 3, LNSPatience: 1, LNSGiveUp: 1, LNSMinBins: 1, LNSMaxBins: 2, LNSOthers: 1, LNSClassCap: 1,
	LNSQuick: time.Nanosecond, LNSStepTime: time.Millisecond, LowerMin: time.Millisecond, LowerMax: 2 * time.Millisecond}

// Every threshold of Limits, and the SAT model's size limit (MaxVariables
// 1: only components of at most one claim-device pair get the model, as
// components above 40,000 pairs do not), forced down on small instances:
// every answer is valid, never below the greedy incumbent (with the same
// search steps), never past the brute-force optimum, with a bound never
// below it (equal when the answer says it is optimal); ordered never past
// the brute-force order.
func TestPipelineUnderSmallLimits(t *testing.T) {
	undecided := 0
	for seed := uint64(1); seed <= 12; seed++ {
		for _, objs := range []*input.Objects{randomInstance(seed), sharesInstance(seed)} {
			p := build(t, objs, "")
			bf := newBruteForce(p)
			best, order := bf.best(), bf.ordered()
			s := model.NewState(p)
			for _, c := range p.Claims {
				if _, _, decided := search(s, c, nil, tinyLimits.SearchSteps); !decided {
					undecided++
				}
			}
			arrival := firstFitInOrder(context.Background(), p, p.Claims, tinyLimits.SearchSteps)
			bySize := firstFitInOrder(context.Background(), p, sortBySize(p, p.Claims, false), tinyLimits.SearchSteps)
			incumbent := max(claimWeight(arrival), claimWeight(bySize))
			for _, maxVars := range []int{1, -1, 0} {
				for _, objective := range []string{MaxClaims, Ordered} {
					where := fmt.Sprintf("%s seed %d maxVars %d", objective, seed, maxVars)
					res := run(t, p, Options{Objective: objective, Timeout: time.Second, MaxVariables: maxVars, Limits: tinyLimits})
					checkAllocations(t, p, objs, res, "")
					st := res.Stats
					if maxVars == 1 && st.ComponentsWithoutSAT == 0 && st.Variables > 1 {
						t.Fatalf("%s: every component got the SAT model (%d variables)", where, st.Variables)
					}
					if st.NeighbourhoodSteps > tinyLimits.LNSSteps*st.Components {
						t.Fatalf("%s: %d neighbourhood steps, limit %d per component", where, st.NeighbourhoodSteps, tinyLimits.LNSSteps)
					}
					if objective == MaxClaims {
						if st.Objective < incumbent || st.Objective > best || st.Bound < best || st.Optimal && st.Objective != best {
							t.Fatalf("%s: admitted %d (greedy %d, optimum %d), bound %d, optimal %v", where, st.Objective, incumbent, best, st.Bound, st.Optimal)
						}
						continue
					}
					got := indexes(res.Assignments)
					if lexCompare(got, indexes(arrival)) < 0 || lexCompare(got, order) > 0 || st.Optimal && !slices.Equal(got, order) {
						t.Fatalf("%s: admitted %v (greedy %v, brute force %v), optimal %v", where, got, indexes(arrival), order, st.Optimal)
					}
				}
			}
		}
	}
	// The search steps limit must bite somewhere, or the test proves
	// nothing about the undecided path.
	if undecided == 0 {
		t.Error("no search ran out of its steps: the limit is not exercised")
	}
}

// The ordered repack with every limit small (its placement and best-fit
// run out of steps) against brute force: never past the exact answer,
// never below arrival-order greedy with the same steps.
func TestOrderedRepackSmallLimitsAgainstBruteForce(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		for _, objs := range []*input.Objects{randomInstance(seed), sharesInstance(seed)} {
			p := build(t, objs, "")
			want := newBruteForce(p).ordered()
			res := run(t, p, Options{Objective: Ordered, MaxVariables: -1, Limits: tinyLimits})
			checkAllocations(t, p, objs, res, "")
			got := indexes(res.Assignments)
			arrival := indexes(firstFitInOrder(context.Background(), p, p.Claims, tinyLimits.SearchSteps))
			if lexCompare(got, want) > 0 || lexCompare(got, arrival) < 0 {
				t.Fatalf("seed %d: repack admitted %v, brute force %v, greedy %v", seed, got, want, arrival)
			}
		}
	}
}

// Zero limits are the defaults; a field set keeps its value.
func TestLimitsDefaults(t *testing.T) {
	if got := (Limits{}).withDefaults(); got != DefaultLimits {
		t.Errorf("zero limits = %+v, want the defaults %+v", got, DefaultLimits)
	}
	if got := (Limits{SearchSteps: 7, LNSMaxBins: 1}).withDefaults(); got.SearchSteps != 7 || got.LNSMaxBins != DefaultLimits.LNSMinBins || got.BestFitSteps != DefaultLimits.BestFitSteps {
		t.Errorf("partial limits = %+v", got)
	}
}

// TestStagesAreLogged: each stage that ran is logged through the context's
// logger at verbosity 1, and nothing is logged below it.
func TestStagesAreLogged(t *testing.T) {
	objs, _, err := input.Load([]string{filepath.Join("..", "examples", "mig-a100")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := build(t, objs, model.CompatKEP5963)
	for _, verbosity := range []int{0, 1} {
		var lines []string
		logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: verbosity})
		res, err := Run(klog.NewContext(context.Background(), logger), p, Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		logged := 0
		for _, l := range lines {
			if strings.Contains(l, `"stage done"`) {
				logged++
			}
		}
		switch {
		case verbosity == 0 && logged > 0:
			t.Errorf("verbosity 0: %d stage lines logged", logged)
		case verbosity == 1 && logged < len(res.Stats.Stages):
			t.Errorf("verbosity 1: %d stage lines for %d stages: %q", logged, len(res.Stats.Stages), lines)
		}
	}
}

// The lower levels' deadline scales with the time the pipeline took, so
// that a uniformly slower machine still finishes what a quiet one does,
// within LowerMin and LowerMax and never past the component's deadline.
func TestLowerLevelsTimeScalesWithPipeline(t *testing.T) {
	plan := newPlan(true, DefaultLimits)
	for _, c := range []struct {
		ran, left, want time.Duration
	}{
		{ran: 10 * time.Millisecond, left: time.Minute, want: DefaultLimits.LowerMin},
		{ran: 200 * time.Millisecond, left: time.Minute, want: 600 * time.Millisecond},
		{ran: 5 * time.Second, left: time.Minute, want: DefaultLimits.LowerMax},
		{ran: 200 * time.Millisecond, left: 300 * time.Millisecond, want: 300 * time.Millisecond},
	} {
		now := time.Now()
		cs := &componentState{started: now.Add(-c.ran), deadline: now.Add(c.left), plan: plan}
		end, ok := lowerShare.end(cs)
		if !ok {
			t.Fatalf("ran %v: no time for the lower levels", c.ran)
		}
		if got := end.Sub(now); got < c.want || got > c.want+50*time.Millisecond {
			t.Errorf("ran %v, %v left: lower levels get %v, want %v", c.ran, c.left, got, c.want)
		}
	}
}
