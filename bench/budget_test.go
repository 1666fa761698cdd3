package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// sweepBudgets are the run budgets TestBudgetSweep tries, shortest first.
// Each covers building the problem too, as drasat allocate counts it: the
// shortest end inside the build (selectors not evaluated), the middle ones
// inside the engine's stages.
var sweepBudgets = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	300 * time.Millisecond, time.Second,
}

// sweepInstance is one instance of the sweep, with its compatibility
// semantics.
type sweepInstance struct {
	name   string
	objs   *input.Objects
	compat string
}

// sweepInstances draws instances of every bench family and of the
// independent generator (differential_indep_test.go), which makes claims
// and inventories bench's generators never do.
func sweepInstances(t *testing.T, short bool) []sweepInstance {
	t.Helper()
	var out []sweepInstance
	sweep := func(scenario, size string, opts GenerateOptions) {
		sz, err := ParseSize(size)
		if err != nil {
			t.Fatal(err)
		}
		ins, err := Generate(scenario, sz, 3, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range ins {
			out = append(out, sweepInstance{in.Name(), in.Objs, in.Compat})
		}
	}
	families := gen.MIGFamilies
	if short {
		families = []string{"default", "count"}
	}
	for _, f := range families {
		sweep("mig", "4x8:150", GenerateOptions{MIGFamily: f})
	}
	sweep("mig", "2x8:60", GenerateOptions{MIGGPU: "mixed"})
	if !short {
		sweep("tpu", "32:20", GenerateOptions{})
		sweep("modes", "4x4:80", GenerateOptions{})
		sweep("nic", "16:150", GenerateOptions{})
	}
	seeds := 12
	if short {
		seeds = 3
	}
	// The independent generator's rich family (firstAvailable, claims of
	// several devices on one GPU, distinctAttribute, mixed fleets).
	for seed := uint64(1); seed <= uint64(min(seeds, 2)); seed++ {
		objs := scalegen.Generate(scalegen.Config{Nodes: 4, GPUs: 8, Claims: 150, Seed: seed, Family: "rich"})
		out = append(out, sweepInstance{fmt.Sprintf("scalegen rich 4x8:150 seed %d", seed), objs, model.CompatKEP5963})
	}
	// Its pods: two claims to a pod, zones, a tainted and a cordoned node.
	for seed := uint64(1); seed <= uint64(min(seeds, 2)); seed++ {
		objs := scalegen.Generate(scalegen.Config{Nodes: 8, GPUs: 4, Claims: 150, Seed: seed})
		scalegen.AddPods(objs, 24, seed)
		out = append(out, sweepInstance{fmt.Sprintf("scalegen pods 8x4:150 seed %d", seed), objs, model.CompatKEP5963})
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		objs, pending := indepInstance(seed)
		objs.Claims = append(objs.Claims, pending...)
		out = append(out, sweepInstance{fmt.Sprintf("independent seed %d", seed), objs, model.CompatKEP5963})
	}
	return out
}

// sweepRun is one run at one budget, as drasat allocate makes it: the
// problem built within the budget, the engine given what is left.
func sweepRun(t *testing.T, in sweepInstance, objective, policy string, budget time.Duration) (*model.Problem, *alloc.Result) {
	t.Helper()
	start := time.Now()
	bctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	p, err := model.Build(bctx, in.objs, model.Options{Compat: in.compat})
	if err != nil {
		t.Fatalf("%s: build: %v", in.name, err)
	}
	opts := alloc.Options{Objective: objective, Policy: policy}
	if policy == alloc.Frag {
		if opts.Lookahead, err = frag.For(bctx, in.objs, p, nil); err != nil {
			t.Fatalf("%s: look-ahead: %v", in.name, err)
		}
	}
	opts.Timeout = alloc.TimeLeft(budget, start)
	res, err := alloc.Run(context.Background(), p, opts)
	if err != nil {
		t.Fatalf("%s %s %s at %v: %v", in.name, objective, policy, budget, err)
	}
	return p, res
}

// TestBudgetSweep runs every instance at every budget from 1 ms to 1 s
// (and 10 s where a run is proven: it then returns early), under both
// objectives and every policy, and checks what the engine may say:
//   - the allocation is valid (package check, which shares no code with
//     the engine);
//   - the bound is never below the value, and never below any value a run
//     at another budget reached: a bound is a bound of the problem, not
//     of one run;
//   - under max-claims the value is never below the greedy incumbent's;
//   - optimal only where bound == value, and then the value is what every
//     other optimal run of the instance reached, and no run at any budget
//     found more;
//   - no stage returns later than stageOverrunLimit after the deadline
//     the budget plan gave it.
//
// A proof said wrongly at a short budget (a bound from a stage that had
// not run, or a claim whose selectors were not evaluated in time left out
// of the bound) fails here.
func TestBudgetSweep(t *testing.T) {
	short := testing.Short()
	runs := []struct{ objective, policy string }{
		{alloc.MaxClaims, alloc.Binpack}, {alloc.MaxClaims, alloc.Frag}, {alloc.Ordered, alloc.Binpack},
	}
	if short {
		runs = runs[:1]
	}
	worstOverrun := map[string]time.Duration{}
	defer func() { t.Logf("the most each stage ran past its planned deadline: %v", worstOverrun) }()
	for _, in := range sweepInstances(t, short) {
		for _, r := range runs {
			if r.policy == alloc.Frag && in.name[:3] != "mig" {
				continue // the look-ahead measures GPUs
			}
			type outcome struct {
				budget           time.Duration
				value, bound     int64
				optimal          bool
				admitted, greedy int64
			}
			var seen []outcome
			began := time.Now()
			budgets := sweepBudgets
			if short {
				budgets = []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond, time.Second}
			}
			for i := 0; i < len(budgets); i++ {
				budget := budgets[i]
				runStart := time.Now()
				p, res := sweepRun(t, in, r.objective, r.policy, budget)
				if took := time.Since(runStart); took > budget+budget/2+200*time.Millisecond {
					t.Logf("%s, %s/%s at %v took %v", in.name, r.objective, r.policy, budget, took)
				}
				st := res.Stats
				label := fmt.Sprintf("%s, %s/%s at %v", in.name, r.objective, r.policy, budget)
				claims, err := alloc.Allocated(p, res)
				if err != nil {
					t.Fatalf("%s: %v", label, err)
				}
				if err := check.Check(in.objs, allocatedOnly(claims), check.Options{Compat: in.compat}); err != nil {
					t.Fatalf("%s: invalid allocation: %v", label, err)
				}
				if st.Bound < st.Objective {
					t.Errorf("%s: bound %d below the value %d", label, st.Bound, st.Objective)
				}
				if st.Optimal && st.Bound != st.Objective {
					t.Errorf("%s: optimal with bound %d and value %d", label, st.Bound, st.Objective)
				}
				if r.objective == alloc.MaxClaims && st.Objective < st.Greedy {
					t.Errorf("%s: value %d below greedy's %d", label, st.Objective, st.Greedy)
				}
				for _, sg := range st.Stages {
					if sg.Overrun > worstOverrun[sg.Stage] {
						worstOverrun[sg.Stage] = sg.Overrun
					}
					if sg.Overrun > overrunLimit() {
						t.Errorf("%s: stage %s ran %v past its planned deadline", label, sg.Stage, sg.Overrun)
					}
				}
				seen = append(seen, outcome{budget, st.Objective, st.Bound, st.Optimal, int64(st.Admitted), st.Greedy})
				if budget == time.Second && st.Optimal && !short {
					budgets = append(budgets, 10*time.Second) // proven: returns as soon as it is
				}
			}
			t.Logf("%s, %s/%s: %d budgets in %v", in.name, r.objective, r.policy, len(seen), time.Since(began).Round(time.Millisecond))
			for _, a := range seen {
				for _, b := range seen {
					// Under ordered, a value is the count of one answer and
					// only the ordered optimum's count is bounded.
					if r.objective == alloc.MaxClaims && a.bound < b.value {
						t.Errorf("%s, %s/%s: bound %d at %v below the value %d reached at %v",
							in.name, r.objective, r.policy, a.bound, a.budget, b.value, b.budget)
					}
					if a.optimal && b.optimal && a.value != b.value {
						t.Errorf("%s, %s/%s: optimal %d at %v, optimal %d at %v",
							in.name, r.objective, r.policy, a.value, a.budget, b.value, b.budget)
					}
				}
			}
		}
	}
}

// stageOverrunLimit is how far past the deadline the budget plan gave it
// a stage may return: stages check their deadline as they go (the SAT
// solver between restarts, the relaxation per step), and a loaded CI
// machine delays them.
const stageOverrunLimit = 500 * time.Millisecond

// overrunLimit is stageOverrunLimit, scaled by the race detector's
// slowdown of a step that cannot stop midway (loading the solver is about
// 8 times slower under -race): the plain run holds the 500 ms.
func overrunLimit() time.Duration {
	if raceDetector {
		return 4 * stageOverrunLimit
	}
	return stageOverrunLimit
}

// allocatedOnly keeps the claims given an allocation.
func allocatedOnly(claims []*resourceapi.ResourceClaim) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for _, c := range claims {
		if c.Status.Allocation != nil {
			out = append(out, c)
		}
	}
	return out
}
