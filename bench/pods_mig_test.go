package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/model"
)

// The MIG batches with a pod per claim and CPUs that bind: the result
// passes check/ (pod rules included). DRASAT_PODS_MIG=1 also runs
// 16x8/1,000 and 96 CPUs a node and logs the outcome and time of each
// (DRASAT_PODS_MIG_STAGES=1: and the stages' times).
func TestMIGWithPods(t *testing.T) {
	sizes := [][3]int{{8, 8, 300}}
	cpuss := []int64{48}
	if os.Getenv("DRASAT_PODS_MIG") != "" {
		sizes = append(sizes, [3]int{16, 8, 1000})
		cpuss = append(cpuss, 96)
	}
	for _, sz := range sizes {
		for _, cpus := range cpuss {
			objs := gen.MIG(gen.DefaultMIG(sz[0], sz[1], sz[2], 1))
			gen.AddPods(objs, cpus, 1)
			start := time.Now()
			p, err := model.Build(context.Background(), objs, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			claims, err := alloc.Allocated(p, res)
			if err != nil {
				t.Fatal(err)
			}
			if err := check.Check(objs, claims, check.Options{}); err != nil {
				t.Fatalf("%dx%d/%d, %d CPUs a node: %v", sz[0], sz[1], sz[2], cpus, err)
			}
			if os.Getenv("DRASAT_PODS_MIG_STAGES") != "" {
				t.Logf("%+v", res.Stats.Stages)
			}
			t.Logf("%dx%d/%d, %d CPUs a node: admitted %d, bound %d, optimal %v, %.2fs", sz[0], sz[1], sz[2], cpus,
				res.Stats.Admitted, res.Stats.Bound, res.Stats.Optimal, took.Seconds())
		}
	}
}

// TestBenchBaselinesWithPods runs every policy on MIG batches whose
// nodes' CPU binds (Run validates every answer with the pod rules, so a
// baseline blind to the pods fails it), and drasat is never behind one.
func TestBenchBaselinesWithPods(t *testing.T) {
	rep, err := Run(context.Background(), Config{Scenarios: []string{"mig"}, Sizes: map[string][]Size{"mig": {{Nodes: 4, GPUs: 4, Claims: 60}}},
		Seed: 1, Timeout: 3 * time.Second, MIGMix: map[string]float64{"pod-cpus": 16}})
	if err != nil {
		t.Fatal(err)
	}
	assertDrasatBest(t, rep)
	devicesOnly := gen.MIG(gen.DefaultMIG(4, 4, 60, 1))
	p, err := model.Build(context.Background(), devicesOnly, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ff := baseline.FirstFit(p, p.Claims).Stats.Admitted
	for _, r := range rep.Rows {
		if r.Policy == PolicyFirstFit && r.Admitted >= ff {
			t.Errorf("first-fit admits %d with pods, %d by devices alone: the pods' CPU does not bind", r.Admitted, ff)
		}
	}
}
