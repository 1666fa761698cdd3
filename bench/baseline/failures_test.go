package baseline

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/input"
)

// TestKnownFailuresChangeNothing runs the simulation with and without the
// memo of failed nodes on oversubscribed instances of several kinds
// (partitionable MIG GPUs with multi-device and whole-GPU claims, pods with
// CPU, shared NICs by consumable capacity, compatibility groups) and wants
// the same allocations, claim for claim, from fewer Allocate calls.
func TestKnownFailuresChangeNothing(t *testing.T) {
	mig := func(seed uint64, pods bool) *input.Objects {
		cfg := gen.DefaultMIG(4, 4, 120, seed)
		cfg.MultiDevice, cfg.WholeGPU, cfg.TwoGPU, cfg.Count = 0.15, 0.1, 0.05, 0.1
		objs := gen.MIG(cfg)
		if pods {
			gen.AddPods(objs, 24, seed)
		}
		return objs
	}
	cases := map[string]*input.Objects{
		"mig seed 1":     mig(1, false),
		"mig seed 2":     mig(2, false),
		"mig, pods":      mig(3, true),
		"nic":            gen.NIC(gen.NICConfig{Nodes: 4, NICsPerNode: 2, Claims: 90, Seed: 1, Running: 0.3}),
		"modes (groups)": gen.Modes(gen.ModesConfig{Nodes: 3, GPUsPerNode: 4, Claims: 80, Seed: 1}),
	}
	for name, objs := range cases {
		t.Run(name, func(t *testing.T) {
			feats := UpstreamFeaturesFor(objs)
			with, err := Upstream(context.Background(), objs, feats)
			if err != nil {
				t.Fatal(err)
			}
			feats.forgetFailures = true
			without, err := Upstream(context.Background(), objs, feats)
			if err != nil {
				t.Fatal(err)
			}
			if len(without.Rejected) == 0 {
				t.Fatalf("every claim admitted: the instance does not exercise failures")
			}
			got, want := summary(with), summary(without)
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("line %d with the memo:\n%s\nwithout:\n%s", i, got[i], want[i])
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d lines with the memo, %d without", len(got), len(want))
			}
			if with.KnownFailures == 0 || with.AllocateCalls >= without.AllocateCalls {
				t.Errorf("memo skipped %d nodes, %d calls against %d without it", with.KnownFailures, with.AllocateCalls, without.AllocateCalls)
			}
			t.Logf("%d admitted, %d rejected; %d calls with the memo, %d without", with.Admitted(), len(with.Rejected), with.AllocateCalls, without.AllocateCalls)
		})
	}
}

// summary is every allocated claim with its devices, and every rejected one.
func summary(r *UpstreamResult) []string {
	var out []string
	for _, c := range r.Allocated {
		a := c.Status.Allocation.DeepCopy()
		for i := range a.Devices.Results {
			a.Devices.Results[i].ShareID = nil // the allocator draws a random one
		}
		b, err := json.Marshal(a)
		if err != nil {
			panic(err)
		}
		out = append(out, c.Namespace+"/"+c.Name+" "+string(b))
	}
	for _, rej := range r.Rejected {
		out = append(out, "rejected "+rej.Key)
	}
	return out
}
