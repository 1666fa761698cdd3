package alloc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/model"
)

// The configuration relaxation's bound is never below the brute-force
// optimum (it is what proves optimality at scale, so an unsound bound would
// pass off a poor allocation as optimal), and best-fit at its prices only
// produces allocations the independent checker accepts, never worse than
// nothing and never above the optimum.
func TestRelaxationBoundAndBestFit(t *testing.T) {
	weight := func(c *model.Claim) int64 { return c.Weight }
	for seed := uint64(1); seed <= 200; seed++ {
		for _, compat := range []string{model.CompatKEP5963, model.CompatWildcard} {
			objs := randomInstance(seed)
			p := build(t, objs, compat)
			want := newBruteForce(p).best()
			rel := relaxationOf(t, p, p.Claims, weight)
			lr := rel.Solve(context.Background(), 0, time.Now().Add(time.Minute), bound.Options{Patience: 40})
			if lr.Bound < want {
				t.Fatalf("seed %d %s: relaxation bound %d (L=%.4f) below the optimum %d", seed, compat, lr.Bound, lr.Value, want)
			}
			for _, price := range lr.Snapshots {
				as := bestFit(context.Background(), p, sortBySize(p, p.Claims, false), rel, price, time.Now().Add(time.Minute), DefaultLimits)
				var got int64
				for _, a := range as {
					got += a.Claim.Weight
				}
				if got > want {
					t.Fatalf("seed %d %s: best-fit admitted weight %d above the optimum %d", seed, compat, got, want)
				}
				res := &Result{Assignments: as, Rejected: map[int]error{}}
				checkAllocations(t, p, objs, res, compat)
			}
		}
	}
}

// With shared devices the relaxation prices their capacities: on the
// random capacity instances the bound is never below the brute-force
// optimum (soundness), and it proves the optimum on most of those where
// capacity limits the claims, which pricing shares as free never did.
// A hand instance: four claims of 4G on one NIC of 10G admit two, and the
// bound is two (the LP value 2.5, floored).
func TestRelaxationPricesCapacity(t *testing.T) {
	weight := func(c *model.Claim) int64 { return c.Weight }
	ctx := context.Background()
	nic := `
apiVersion: v1
kind: Node
metadata: {name: node-1}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nic}
spec: {selectors: [{cel: {expression: 'device.driver == "nic.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: nics}
spec:
  driver: nic.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: nic-0, allowMultipleAllocations: true, capacity: {bandwidth: {value: 10G}}}
`
	for i := 0; i < 4; i++ {
		nic += fmt.Sprintf(`---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c%d, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: nic, capacity: {requests: {bandwidth: 4G}}}}]}}
`, i)
	}
	p := build(t, load(t, nic), "")
	rel := relaxationOf(t, p, p.Claims, weight)
	if lr := rel.Solve(ctx, 0, time.Now().Add(time.Minute), bound.Options{Patience: 40}); lr.Bound != 2 {
		t.Fatalf("bound %d (L=%.4f), want 2: four shares of 4G on 10G", lr.Bound, lr.Value)
	}

	limited, proven := 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		p := build(t, RandomCapacityInstance(seed), "")
		want := newBruteForce(p).best()
		lr := relaxationOf(t, p, p.Claims, weight).Solve(ctx, want, time.Now().Add(time.Minute), bound.Options{Patience: 40})
		if lr.Bound < want {
			t.Fatalf("seed %d: bound %d below the optimum %d", seed, lr.Bound, want)
		}
		var all int64
		for _, c := range p.Claims {
			if c.Err == nil {
				all += c.Weight
			}
		}
		if want < all {
			limited++
			if lr.Bound == want {
				proven++
			}
		}
	}
	t.Logf("%d instances where not every claim fits: the bound proves the optimum on %d", limited, proven)
	if limited == 0 || proven*2 < limited {
		t.Errorf("the bound proves the optimum on %d of %d instances where capacity limits the claims, want at least half", proven, limited)
	}
}
