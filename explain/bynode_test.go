package explain

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// TestSplitCoreIsMinimalForTheWholeCluster checks the node-by-node core
// against the whole cluster's model, which it is meant to replace: for
// every claim an allocation run leaves out, on generated MIG clusters of
// several families, the split's verdict (fits or not) is the whole model's,
// its groups are unsatisfiable together in the whole model, and each one is
// needed there (dropping it makes the claim fit).
func TestSplitCoreIsMinimalForTheWholeCluster(t *testing.T) {
	ctx := context.Background()
	checked := 0
	for _, family := range []string{"default", "independent", "count"} {
		for seed := uint64(1); seed <= 2; seed++ {
			insts, err := bench.Generate("mig", bench.Size{Nodes: 3, GPUs: 2, Claims: 40}, seed, bench.GenerateOptions{MIGGPU: "a100", MIGFamily: family})
			if err != nil {
				t.Fatal(err)
			}
			p, err := model.Build(ctx, insts[0].Objs, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			allocs, placed := allocateFor(t, p, 5*time.Second)
			e := newExplainer(p, allocs)
			for _, c := range p.Claims {
				if placed[c.Index] {
					continue
				}
				if _, ok := e.static(ctx, c, nil); ok {
					continue
				}
				nodes, ok := e.splitNodes(c)
				if !ok {
					t.Fatalf("%s/%d %s: MIG devices are node-local, yet the claim is not split (fixed %d, nodes %v)", family, seed, c.Key, c.FixedNode, c.CandidateNodes(p))
				}
				name := fmt.Sprintf("%s/%d %s", family, seed, c.Key)
				opts := Options{Deadline: time.Now().Add(20 * time.Second)}
				sc, err := e.splitCore(ctx, c, nodes, opts)
				if err != nil || sc.unknown || !sc.minimal && !sc.fits {
					t.Fatalf("%s: %+v %v", name, sc, err)
				}
				checkAgainstWhole(t, name, e, c, sc)
				checked++
			}
		}
	}
	t.Logf("%d claims checked", checked)
	if checked < 10 {
		t.Fatalf("only %d claims checked; the instances no longer leave claims out", checked)
	}
}

// checkAgainstWhole decides sc's claims with the whole cluster's model.
func checkAgainstWhole(t *testing.T, name string, e *explainer, c *model.Claim, sc splitResult) {
	t.Helper()
	m, err := e.encode(context.Background(), []*model.Claim{c})
	if err != nil {
		t.Fatal(err)
	}
	s := solver.New(m.C, m.Clauses)
	lit := map[groupKey]z.Lit{}
	var all []z.Lit
	for _, g := range m.Groups {
		lit[keyOf(g)] = g.Lit
		all = append(all, g.Lit)
	}
	solve := func(ls []z.Lit) solver.Result {
		return s.Solve(context.Background(), time.Now().Add(20*time.Second), append(goal(m, nil), ls...)...)
	}
	if sc.fits {
		if r := solve(all); r != solver.Sat {
			t.Errorf("%s: split says it fits, the whole model says %v", name, r)
		}
		return
	}
	var core []z.Lit
	for _, g := range sc.groups {
		l, ok := lit[keyOf(g)]
		if !ok {
			t.Fatalf("%s: core group %+v is not in the whole model", name, g)
		}
		core = append(core, l)
	}
	if r := solve(core); r != solver.Unsat {
		t.Errorf("%s: the split core (%d groups) is not a core of the whole model: %v", name, len(core), r)
		return
	}
	for i := range core {
		rest := append(append([]z.Lit(nil), core[:i]...), core[i+1:]...)
		if r := solve(rest); r != solver.Sat {
			t.Errorf("%s: group %+v of the split core is not needed in the whole model (%v without it)", name, sc.groups[i], r)
		}
	}
}

// allocateFor runs the engine on p and returns its allocations as Explain
// takes them, and which claims it placed.
func allocateFor(t testing.TB, p *model.Problem, timeout time.Duration) ([]Allocation, map[int]bool) {
	t.Helper()
	res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	var allocs []Allocation
	placed := map[int]bool{}
	for _, as := range res.Assignments {
		placed[as.Claim.Index] = true
		a := Allocation{Claim: as.Claim.Key}
		for _, pk := range as.Picks {
			a.Devices = append(a.Devices, p.Devices[pk.Dev].ID)
			a.Requests = append(a.Requests, as.Claim.Requests[pk.Req].Alternatives[pk.Alt].Name)
		}
		allocs = append(allocs, a)
	}
	return allocs, placed
}
