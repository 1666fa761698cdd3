package alloc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

const nicDriver = "nic.example.com"

// RandomCapacityInstance builds a small instance with consumable capacity:
// one or two nodes, each with NICs that allow multiple allocations
// (bandwidth with no policy, a validRange with steps, or validValues; some
// with a second capacity "queues" that a share takes whole unless it asks),
// a plain NIC with a bandwidth capacity, a per-node counter set of ports
// some NICs draw on, sometimes existing shares or holders, and claims with
// capacity requests, two requests (matchAttribute / distinctAttribute on
// the NIC), count 2, firstAvailable, allocationMode All and admin access.
// Exported for the differential test against the upstream allocator.
func RandomCapacityInstance(seed uint64) *input.Objects {
	rng := rand.New(rand.NewPCG(seed, 11))
	q := resource.MustParse
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Classes = append(objs.Classes, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "` + nicDriver + `"`}}}}})
	nodes := 1 + rng.IntN(2)
	var existing []*resourceapi.ResourceClaim
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("node-%d", n)
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		pool := resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}
		ports := int64(1 + rng.IntN(2))
		counters := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-counters"},
			Spec: resourceapi.ResourceSliceSpec{Driver: nicDriver, NodeName: ptr.To(node), Pool: pool,
				SharedCounters: []resourceapi.CounterSet{{Name: "ports", Counters: map[string]resourceapi.Counter{"port": {Value: *resource.NewQuantity(ports, resource.DecimalSI)}}}}}}
		devices := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-devices"},
			Spec: resourceapi.ResourceSliceSpec{Driver: nicDriver, NodeName: ptr.To(node), Pool: pool}}
		port := []resourceapi.DeviceCounterConsumption{{CounterSet: "ports", Counters: map[string]resourceapi.Counter{"port": {Value: q("1")}}}}
		nics := 1 + rng.IntN(2)
		for i := 0; i < nics; i++ {
			name := fmt.Sprintf("nic-%d", i)
			value := []string{"10G", "20G"}[rng.IntN(2)]
			bw := resourceapi.DeviceCapacity{Value: q(value)}
			switch rng.IntN(3) {
			case 1:
				bw.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(q("2G")),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(q("2G")), Step: ptr.To(q("2G")), Max: ptr.To(q(value))}}
			case 2:
				bw.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(q("2G")), ValidValues: []resource.Quantity{q("2G"), q("5G"), q("10G")}}
			}
			d := resourceapi.Device{Name: name, AllowMultipleAllocations: ptr.To(true),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"nic":    {StringValue: ptr.To(node + "/" + name)},
					"shared": {BoolValue: ptr.To(true)},
				},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bandwidth": bw}}
			if rng.IntN(3) == 0 {
				d.Capacity["queues"] = resourceapi.DeviceCapacity{Value: q("4")}
			}
			if rng.IntN(2) == 0 {
				d.ConsumesCounters = port
			}
			devices.Spec.Devices = append(devices.Spec.Devices, d)
			if rng.IntN(5) == 0 {
				// An existing share of this NIC (sometimes an admin one,
				// which does not count).
				uid := types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", seed*10+uint64(n*3+i)))
				r := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: nicDriver, Pool: node, Device: name, ShareID: &uid,
					ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": q("4G")}}
				if rng.IntN(4) == 0 {
					r.AdminAccess = ptr.To(true)
				}
				existing = append(existing, existingClaim(fmt.Sprintf("old-%s-%s", node, name), node, r))
			}
		}
		plain := resourceapi.Device{Name: "plain-0",
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"nic":    {StringValue: ptr.To(node + "/plain-0")},
				"shared": {BoolValue: ptr.To(false)},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bandwidth": {Value: q("10G")}}}
		if rng.IntN(2) == 0 {
			plain.ConsumesCounters = port
		}
		devices.Spec.Devices = append(devices.Spec.Devices, plain)
		if rng.IntN(6) == 0 {
			existing = append(existing, existingClaim("old-"+node+"-plain", node,
				resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: nicDriver, Pool: node, Device: "plain-0"}))
		}
		objs.Slices = append(objs.Slices, counters, devices)
	}
	objs.Claims = append(objs.Claims, existing...)
	bandwidths := []string{"", "1G", "3G", "5G", "7G", "12G"}
	capReq := func() *resourceapi.CapacityRequirements {
		bw := bandwidths[rng.IntN(len(bandwidths))]
		switch {
		case bw == "" && rng.IntN(2) == 0:
			return nil
		case bw == "":
			return &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"queues": q("1")}}
		}
		r := &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": q(bw)}}
		if rng.IntN(4) == 0 {
			r.Requests["queues"] = q("1")
		}
		return r
	}
	var sharedOnly []resourceapi.DeviceSelector
	if rng.IntN(2) == 0 {
		sharedOnly = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.allowMultipleAllocations == true`}}}
	}
	exact := func(name string) resourceapi.DeviceRequest {
		// As the API server defaults them (the allocator needs them set).
		return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic", Selectors: sharedOnly, Capacity: capReq(),
			AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}
	}
	attr := resourceapi.FullyQualifiedName(nicDriver + "/nic")
	nClaims := 2 + rng.IntN(5)
	for i := 0; i < nClaims; i++ {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i))}}
		switch rng.IntN(8) {
		case 0, 1: // two requests, maybe on the same NIC
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{exact("a"), exact("b")}
			switch rng.IntN(3) {
			case 0:
				c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(attr)}}
			case 1:
				c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{DistinctAttribute: ptr.To(attr)}}
			}
		case 2: // count 2
			r := exact("r")
			r.Exactly.Count = 2
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{r}
		case 3: // firstAvailable: much bandwidth, else a little
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "big", DeviceClassName: "nic", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1, Selectors: sharedOnly, Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": q("15G")}}},
				{Name: "small", DeviceClassName: "nic", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1, Selectors: sharedOnly, Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": q("3G")}}},
			}}}
		case 4: // every shared NIC of the node
			r := exact("r")
			r.Exactly.AllocationMode, r.Exactly.Count = resourceapi.DeviceAllocationModeAll, 0
			r.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.allowMultipleAllocations == true`}}}
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{r}
		case 5: // admin access
			r := exact("r")
			r.Exactly.AdminAccess = ptr.To(true)
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{r}
		default:
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{exact("r")}
		}
		objs.Claims = append(objs.Claims, c)
	}
	return objs
}

func existingClaim(name, node string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: results},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
		}},
	}
}

// With consumable capacity the solver's optimum equals brute force over
// the feasibility kernel, is proven, and every allocation passes the
// independent checker (which re-derives capacity, shares and counters).
func TestCapacityOptimumEqualsBruteForce(t *testing.T) {
	shared := 0
	for seed := uint64(1); seed <= 200; seed++ {
		objs := RandomCapacityInstance(seed)
		p := build(t, objs, "")
		res := run(t, p, Options{})
		want := newBruteForce(p).best()
		if res.Stats.Objective != want {
			t.Fatalf("seed %d: solver admitted weight %d, brute force %d", seed, res.Stats.Objective, want)
		}
		if !res.Stats.Optimal {
			t.Errorf("seed %d: optimum %d not proven (bound %d)", seed, want, res.Stats.Bound)
		}
		checkAllocations(t, p, objs, res, "")
		// The greedy passes and best-fit place through model.State: their
		// allocations must be valid too.
		for _, order := range [][]*model.Claim{p.Claims, sortBySize(p, p.Claims, false)} {
			as := firstFitInOrder(context.Background(), p, order, DefaultLimits.SearchSteps)
			checkAllocations(t, p, objs, &Result{Assignments: as}, "")
		}
		for _, a := range res.Assignments {
			seen := map[int]bool{}
			for _, pk := range a.Picks {
				if seen[pk.Dev] {
					shared++
				}
				seen[pk.Dev] = true
			}
		}
	}
	if shared == 0 {
		t.Error("no claim took one shared device for two requests: the instances do not exercise it")
	}
}

// The ordered objective admits exactly the claims that fit together with
// every earlier admitted claim, with capacity too.
func TestCapacityOrderedEqualsBruteForce(t *testing.T) {
	for seed := uint64(1); seed <= 80; seed++ {
		objs := RandomCapacityInstance(seed)
		p := build(t, objs, "")
		res := run(t, p, Options{Objective: Ordered})
		want := newBruteForce(p).ordered()
		if len(res.Assignments) != len(want) {
			t.Fatalf("seed %d: ordered admitted %d claims, brute force %v", seed, len(res.Assignments), want)
		}
		checkAllocations(t, p, objs, res, "")
	}
}

// With shared devices the relaxation's bound stays at or above the optimum,
// and best-fit at its prices and the neighbourhood search from first-fit
// only produce allocations the independent checker accepts.
func TestCapacityRelaxationAndHeuristics(t *testing.T) {
	weight := func(c *model.Claim) int64 { return c.Weight }
	ctx := context.Background()
	for seed := uint64(1); seed <= 120; seed++ {
		objs := RandomCapacityInstance(seed)
		p := build(t, objs, "")
		want := newBruteForce(p).best()
		rel := relaxationOf(t, p, p.Claims, weight)
		lr := rel.Solve(ctx, 0, time.Now().Add(time.Minute), bound.Options{Patience: 40})
		if lr.Bound < want {
			t.Fatalf("seed %d: relaxation bound %d (L=%.4f) below the optimum %d", seed, lr.Bound, lr.Value, want)
		}
		for _, price := range lr.Snapshots {
			as := bestFit(ctx, p, sortBySize(p, p.Claims, false), rel, price, time.Now().Add(time.Minute), DefaultLimits)
			checkAllocations(t, p, objs, &Result{Assignments: as}, "")
		}
		start := firstFitInOrder(ctx, p, p.Claims, DefaultLimits.SearchSteps)
		as, _ := neighbourhoodSearch(ctx, p, p.Claims, start, rel, weight, int64(len(p.Claims)), time.Now().Add(2*time.Second), DefaultLimits)
		checkAllocations(t, p, objs, &Result{Assignments: as}, "")
	}
}
