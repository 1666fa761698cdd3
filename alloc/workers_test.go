package alloc

import (
	"fmt"
	"testing"
	"time"

	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// TestAnswersIndependentOfWorkers: the same batch gives the same
// allocation, device for device, with one, two or three workers (the
// cores a run uses), on batches that are proven within the budget: one
// component (scalegen, the mig generator's multi-device claims, pods whose
// CPU binds) and many (claims pinned to their nodes). Only time may
// depend on the cores; a stage that did more work with more cores (one
// best-fit try per worker) changed the answer.
func TestAnswersIndependentOfWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("solves 5 batches 3 times")
	}
	withPods := func(cfg gen.MIGConfig, cpus int64) *input.Objects {
		objs := gen.MIG(cfg)
		gen.AddPods(objs, cpus, cfg.Seed)
		return objs
	}
	cases := map[string]*input.Objects{
		"scalegen 8x8:300":     scalegen.Generate(scalegen.Config{Nodes: 8, GPUs: 8, Claims: 300, Seed: 1}),
		"scalegen 16x8:600 s2": scalegen.Generate(scalegen.Config{Nodes: 16, GPUs: 8, Claims: 600, Seed: 2}),
		"mig 8x8:300":          gen.MIG(gen.DefaultMIG(8, 8, 300, 1)),
		"mig 8x8:300, 48 CPUs": withPods(gen.DefaultMIG(8, 8, 300, 3), 48),
		"mig 4x4:80, 8 CPUs":   withPods(gen.DefaultMIG(4, 4, 80, 2), 8),
	}
	for name, objs := range cases {
		t.Run(name, func(t *testing.T) {
			var want []string
			for _, workers := range []int{1, 2, 3} {
				p := build(t, objs, model.CompatKEP5963)
				res := run(t, p, Options{Workers: workers, Timeout: 2 * time.Minute})
				if !res.Stats.Optimal {
					t.Skipf("%d workers: not proven within the budget (%d, bound %d): the answer may depend on time", workers, res.Stats.Objective, res.Stats.Bound)
				}
				got := describe(res)
				if want == nil {
					want = got
					t.Logf("%d admitted, proven", len(res.Assignments))
					continue
				}
				if len(got) != len(want) {
					t.Fatalf("%d workers: %d claims admitted, with one worker %d", workers, len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%d workers: %s; with one worker %s", workers, got[i], want[i])
					}
				}
			}
		})
	}
}

// describe is every assignment: the claim, its node and devices.
func describe(res *Result) []string {
	var out []string
	for _, a := range res.Assignments {
		out = append(out, fmt.Sprintf("%s on node %d: %v", a.Claim.Obj.Name, a.Node, a.Picks))
	}
	return out
}

// UntilGreedy sums the stages up to and including greedy, and none after.
func TestUntilGreedy(t *testing.T) {
	st := Stats{Stages: []StageTime{
		{Stage: "alone-bound", Time: time.Millisecond},
		{Stage: "greedy", Time: 10 * time.Millisecond},
		{Stage: "relaxation", Time: time.Second},
	}}
	if got := st.UntilGreedy(); got != 11*time.Millisecond {
		t.Fatalf("UntilGreedy %v, want 11ms", got)
	}
}
