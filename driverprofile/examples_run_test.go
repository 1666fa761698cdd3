package driverprofile_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// TestExamplesAsTheirREADMEsSay: what each example's README states about
// the kube-scheduler's allocator (claims one at a time, in arrival order)
// and drasat holds.
func TestExamplesAsTheirREADMEsSay(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		dir      string
		stranded []string // claims the scheduler's allocator leaves out
	}{
		{"mig-a100", []string{"default/mig-devices"}},
		{"gpu-nic", []string{"default/train-4"}},
		{"mixed-versions", []string{"default/mig-devices"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			objs, _, err := input.Load([]string{filepath.Join("..", "examples", tc.dir)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			served := *objs
			served.Claims = nil
			for _, c := range objs.Claims {
				served.Claims = append(served.Claims, apiDefaults(c))
			}
			up, err := baseline.Upstream(ctx, &served, baseline.UpstreamFeaturesFor(&served))
			if err != nil {
				t.Fatal(err)
			}
			var rejected []string
			for _, r := range up.Rejected {
				rejected = append(rejected, r.Key)
			}
			if !slices.Equal(rejected, tc.stranded) {
				t.Errorf("the scheduler's allocator leaves out %v, the README says %v", rejected, tc.stranded)
			}
			p, err := model.Build(ctx, objs, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stats.Admitted != res.Stats.Pending || !res.Stats.Optimal {
				t.Fatalf("drasat admits %d of %d (optimal %v)", res.Stats.Admitted, res.Stats.Pending, res.Stats.Optimal)
			}
			claims, err := alloc.Allocated(p, res)
			if err != nil {
				t.Fatal(err)
			}
			if err := check.Check(objs, claims, check.Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The mixed fleet runs the claims of mig-a100 unchanged.
	a, errA := os.ReadFile(filepath.Join("..", "examples", "mig-a100", "30-claims.yaml"))
	b, errB := os.ReadFile(filepath.Join("..", "examples", "mixed-versions", "30-claims.yaml"))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Fatalf("examples/mixed-versions/30-claims.yaml differs from examples/mig-a100's (%v, %v)", errA, errB)
	}
}

// apiDefaults fills in what the API server defaults in a claim's requests
// (allocationMode ExactCount, count 1), as the scheduler sees them.
func apiDefaults(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	for i := range c.Spec.Devices.Requests {
		if e := c.Spec.Devices.Requests[i].Exactly; e != nil && e.AllocationMode == "" {
			e.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			if e.Count == 0 {
				e.Count = 1
			}
		}
	}
	return c
}
