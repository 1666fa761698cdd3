package alloc_test

import (
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/model"
)

// Differential test against the scheduler's allocator on random small
// instances with consumable capacity: for every single pending claim (with
// the existing allocations), drasat allocates it exactly when the upstream
// allocator can, and drasat's allocation passes the independent checker.
func TestCapacitySingleClaimsAgreeWithUpstream(t *testing.T) {
	ctx := context.Background()
	claims, allocated := 0, 0
	for seed := uint64(1); seed <= 150; seed++ {
		objs := alloc.RandomCapacityInstance(seed)
		var existing, pending []*resourceapi.ResourceClaim
		for _, c := range objs.Claims {
			if c.Status.Allocation != nil {
				existing = append(existing, c)
			} else {
				pending = append(pending, c)
			}
		}
		for _, c := range pending {
			one := *objs
			one.Claims = append(append([]*resourceapi.ResourceClaim(nil), existing...), c)
			up, err := baseline.Upstream(ctx, &one, baseline.UpstreamFeaturesFor(&one))
			if err != nil {
				t.Fatalf("seed %d claim %s: upstream: %v", seed, c.Name, err)
			}
			p, err := model.Build(context.Background(), &one, model.Options{})
			if err != nil {
				t.Fatalf("seed %d claim %s: %v", seed, c.Name, err)
			}
			res, err := alloc.Run(ctx, p, alloc.Options{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			claims++
			upOK, ours := len(up.Allocated) == 1, len(res.Assignments) == 1
			if upOK != ours {
				reason := ""
				if len(up.Rejected) > 0 {
					reason = up.Rejected[0].Reason
				}
				t.Errorf("seed %d claim %s: upstream allocates: %t (%s), drasat: %t (%s)", seed, c.Name, upOK, reason, ours, res.Rejected[0])
				continue
			}
			if !ours {
				continue
			}
			allocated++
			out, err := alloc.Allocated(p, res)
			if err != nil {
				t.Fatal(err)
			}
			if err := check.Check(&one, out, check.Options{}); err != nil {
				t.Errorf("seed %d claim %s: drasat's allocation violates the rules:\n%v", seed, c.Name, err)
			}
			// Upstream's allocation passes the checker too (so the checker
			// agrees with the allocator it re-derives).
			if err := check.Check(&one, up.Allocated, check.Options{}); err != nil {
				t.Errorf("seed %d claim %s: upstream's allocation fails the checker:\n%v", seed, c.Name, err)
			}
		}
	}
	if allocated == 0 || allocated == claims {
		t.Errorf("%d of %d claims allocated: the instances do not discriminate", allocated, claims)
	}
	t.Logf("%d claims, %d allocatable", claims, allocated)
}
