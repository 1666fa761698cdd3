package bench

import (
	"context"
	"github.com/drasat/drasat/bench/gen"
	"testing"
	"time"
)

// TestGPUNIC: the generated fleet is the driver profiles' (8 GPUs and 4
// NICs per node), every policy's allocation passes the checker (Run fails
// otherwise), and drasat admits at least what the kube-scheduler's
// allocator admits on the same arrivals.
func TestGPUNIC(t *testing.T) {
	objs := gen.GPUNIC(gen.GPUNICConfig{Nodes: 2, Claims: 12, Seed: 1})
	gpus, nics := 0, 0
	for _, s := range objs.Slices {
		for range s.Spec.Devices {
			if s.Spec.Driver == "gpu.nvidia.com" {
				gpus++
			} else {
				nics++
			}
		}
	}
	if gpus != 16 || nics != 8 {
		t.Fatalf("%d GPUs and %d NICs on 2 nodes, want 16 and 8", gpus, nics)
	}
	rep, err := Run(context.Background(), Config{Scenarios: []string{"gpu-nic"}, Sizes: map[string][]Size{"gpu-nic": {{Nodes: 2, Claims: 12}}},
		Policies: []string{PolicyUpstream, PolicyDrasat}, Timeout: 20 * time.Second, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	admitted := map[string]int{}
	for _, r := range rep.Rows {
		admitted[r.Policy] = r.Admitted
	}
	if admitted[PolicyDrasat] < admitted[PolicyUpstream] || admitted[PolicyDrasat] == 0 {
		t.Fatalf("admitted %v", admitted)
	}
}
