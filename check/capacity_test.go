package check

import (
	"strings"
	"testing"

	"github.com/drasat/drasat/input"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// capFixture: node-1 has a shared NIC nic-0 (bandwidth 100G: default 10G,
// validRange min 5G step 5G max 80G; queues 8 without policy) drawing one
// "port" from counter set ports (1 port), a plain NIC nic-1 drawing the same
// port, and a plain device plain-0 with a capacity "bandwidth: 40G".
// Pending claims a (37G) and b (two requests of 20G) hold valid shares.
func capFixture() (*input.Objects, map[string]*resourceapi.ResourceClaim) {
	q := resource.MustParse
	bw := resourceapi.DeviceCapacity{Value: q("100G"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
		Default:    ptr.To(q("10G")),
		ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(q("5G")), Max: ptr.To(q("80G")), Step: ptr.To(q("5G"))},
	}}
	port := []resourceapi.DeviceCounterConsumption{{CounterSet: "ports", Counters: map[string]resourceapi.Counter{"port": {Value: q("1")}}}}
	slices := []*resourceapi.ResourceSlice{{
		ObjectMeta: metav1.ObjectMeta{Name: "counters"},
		Spec: resourceapi.ResourceSliceSpec{Driver: netDriver, NodeName: ptr.To("node-1"), Pool: resourceapi.ResourcePool{Name: "p", Generation: 1, ResourceSliceCount: 2},
			SharedCounters: []resourceapi.CounterSet{{Name: "ports", Counters: map[string]resourceapi.Counter{"port": {Value: q("1")}}}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "devices"},
		Spec: resourceapi.ResourceSliceSpec{Driver: netDriver, NodeName: ptr.To("node-1"), Pool: resourceapi.ResourcePool{Name: "p", Generation: 1, ResourceSliceCount: 2},
			Devices: []resourceapi.Device{
				{Name: "nic-0", AllowMultipleAllocations: ptr.To(true), ConsumesCounters: port,
					Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bandwidth": bw, "queues": {Value: q("8")}}},
				{Name: "nic-1", ConsumesCounters: port},
				{Name: "plain-0", Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bandwidth": {Value: q("40G")}}},
			}},
	}}
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic"}}
	req := func(name, bwq, queues string) resourceapi.DeviceRequest {
		r := resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic",
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.allowMultipleAllocations == true`}}}}}
		caps := map[resourceapi.QualifiedName]resource.Quantity{}
		if bwq != "" {
			caps["bandwidth"] = q(bwq)
		}
		if queues != "" {
			caps["queues"] = q(queues)
		}
		r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: caps}
		return r
	}
	claim := func(name string, reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}}}
	}
	a := claim("a", req("r", "37G", "2"))
	b := claim("b", req("x", "20G", "1"), req("y", "20G", "1"))
	objs := &input.Objects{Slices: slices, Classes: []*resourceapi.DeviceClass{class}, Claims: []*resourceapi.ResourceClaim{a, b}}
	share := func(request, id, bandwidth, queues string) resourceapi.DeviceRequestAllocationResult {
		uid := types.UID(id)
		return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: netDriver, Pool: "p", Device: "nic-0", ShareID: &uid,
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": q(bandwidth), "queues": q(queues)}}
	}
	out := map[string]*resourceapi.ResourceClaim{}
	for _, c := range []*resourceapi.ResourceClaim{a, b} {
		out[c.Name] = c.DeepCopy()
	}
	out["a"].Status.Allocation = &resourceapi.AllocationResult{NodeSelector: nodeSel("node-1"),
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{share("r", "0f6a8a62-2bd4-4b1c-9d4e-2f1a6c1b7a01", "40G", "2")}}}
	out["b"].Status.Allocation = &resourceapi.AllocationResult{NodeSelector: nodeSel("node-1"),
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			share("x", "0f6a8a62-2bd4-4b1c-9d4e-2f1a6c1b7a02", "20G", "1"), share("y", "0f6a8a62-2bd4-4b1c-9d4e-2f1a6c1b7a03", "20G", "1")}}}
	return objs, out
}

func TestCheckCapacity(t *testing.T) {
	q := resource.MustParse
	cases := []struct {
		name   string
		mutate func(objs *input.Objects, out map[string]*resourceapi.ResourceClaim)
		want   string // "" means valid
	}{
		{name: "valid shares", mutate: func(*input.Objects, map[string]*resourceapi.ResourceClaim) {}},
		{name: "over capacity", mutate: func(objs *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			for _, c := range []*resourceapi.ResourceClaim{objs.Claims[0], out["a"]} {
				c.Spec.Devices.Requests[0].Exactly.Capacity.Requests["bandwidth"] = q("65G")
			}
			out["a"].Status.Allocation.Devices.Results[0].ConsumedCapacity["bandwidth"] = q("65G")
		}, want: "device net.example.com/p/nic-0: shares together: capacity bandwidth: 105G consumed, more than its value 100G"},
		// a's share is admin access (65G): the allocated state does not
		// know it, so b (40G) placed after it fits; a placed first sees
		// only the existing shares and its own.
		{name: "admin-access share unseen by later claims", mutate: func(objs *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			for _, c := range []*resourceapi.ResourceClaim{objs.Claims[0], out["a"]} {
				c.Spec.Devices.Requests[0].Exactly.Capacity.Requests["bandwidth"] = q("65G")
				c.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
			}
			out["a"].Status.Allocation.Devices.Results[0].ConsumedCapacity["bandwidth"] = q("65G")
			out["a"].Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
		}},
		{name: "admin-access share beside an existing share", mutate: func(objs *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			for _, c := range []*resourceapi.ResourceClaim{objs.Claims[0], out["a"]} {
				c.Spec.Devices.Requests[0].Exactly.Capacity.Requests["bandwidth"] = q("65G")
				c.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
			}
			out["a"].Status.Allocation.Devices.Results[0].ConsumedCapacity["bandwidth"] = q("65G")
			out["a"].Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
			uid := types.UID("0f6a8a62-2bd4-4b1c-9d4e-2f1a6c1b7a09")
			objs.Claims = append(objs.Claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "default"},
				Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
					Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: netDriver, Pool: "p", Device: "nic-0", ShareID: &uid,
						ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": q("40G")}}}}}}})
		}, want: "claim default/a with its admin-access share, after the claims with other admin-access shares: capacity bandwidth: 105G consumed"},
		{name: "existing share counts", mutate: func(objs *input.Objects, _ map[string]*resourceapi.ResourceClaim) {
			uid := types.UID("0f6a8a62-2bd4-4b1c-9d4e-2f1a6c1b7a09")
			objs.Claims = append(objs.Claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "default"},
				Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
					Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: netDriver, Pool: "p", Device: "nic-0", ShareID: &uid,
						ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": q("25G")}}}}}}})
		}, want: "device net.example.com/p/nic-0: shares together: capacity bandwidth: 105G consumed, more than its value 100G"},
		{name: "existing holder", mutate: func(objs *input.Objects, _ map[string]*resourceapi.ResourceClaim) {
			objs.Claims = append(objs.Claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "default"},
				Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
					Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: netDriver, Pool: "p", Device: "nic-0"}}}}}})
		}, want: "is also allocated to claim(s) default/old"},
		{name: "not rounded up", mutate: func(_ *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			out["a"].Status.Allocation.Devices.Results[0].ConsumedCapacity["bandwidth"] = q("37G")
		}, want: "consumedCapacity is {bandwidth: 37G, queues: 2}, the request consumes {bandwidth: 40G, queues: 2}"},
		{name: "missing shareID", mutate: func(_ *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			out["a"].Status.Allocation.Devices.Results[0].ShareID = nil
		}, want: "needs a shareID"},
		{name: "shareID not a UUID", mutate: func(_ *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			out["a"].Status.Allocation.Devices.Results[0].ShareID = ptr.To(types.UID("share-1"))
		}, want: `shareID "share-1" is not a UUID`},
		{name: "shareID twice", mutate: func(_ *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			out["b"].Status.Allocation.Devices.Results[1].ShareID = out["b"].Status.Allocation.Devices.Results[0].ShareID
		}, want: "shareID 0f6a8a62-2bd4-4b1c-9d4e-2f1a6c1b7a02 is used by"},
		{name: "above policy max", mutate: func(objs *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			for _, c := range []*resourceapi.ResourceClaim{objs.Claims[0], out["a"]} {
				c.Spec.Devices.Requests[0].Exactly.Capacity.Requests["bandwidth"] = q("85G")
			}
			out["a"].Status.Allocation.Devices.Results[0].ConsumedCapacity["bandwidth"] = q("85G")
		}, want: "violates its requestPolicy"},
		{name: "missing capacity", mutate: func(objs *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			for _, c := range []*resourceapi.ResourceClaim{objs.Claims[0], out["a"]} {
				c.Spec.Devices.Requests[0].Exactly.Capacity.Requests["vlans"] = q("1")
			}
		}, want: "lacks a requested capacity"},
		{name: "same request twice on a shared device", mutate: func(objs *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			out["b"].Status.Allocation.Devices.Results[1].Request = "x"
		}, want: "device net.example.com/p/nic-0 for request x is allocated 2 times within the claim"},
		{name: "counters once per shared device", mutate: func(objs *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			// nic-1 draws the port the shared NIC already draws.
			c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"},
				Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
					Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic"}}}}}}
			objs.Claims = append(objs.Claims, c)
			done := c.DeepCopy()
			done.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: nodeSel("node-1"), Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: netDriver, Pool: "p", Device: "nic-1"}}}}
			out["c"] = done
		}, want: "counter set ports, counter port: allocated devices consume 2"},
		{name: "shareID on a plain device", mutate: func(objs *input.Objects, out map[string]*resourceapi.ResourceClaim) {
			r := &out["a"].Status.Allocation.Devices.Results[0]
			r.Device = "plain-0"
			objs.Claims[0].Spec.Devices.Requests[0].Exactly.Selectors = nil
			out["a"].Spec.Devices.Requests[0].Exactly.Selectors = nil
			delete(objs.Claims[0].Spec.Devices.Requests[0].Exactly.Capacity.Requests, "queues")
			delete(out["a"].Spec.Devices.Requests[0].Exactly.Capacity.Requests, "queues")
		}, want: "shareID and consumedCapacity are only for devices with allowMultipleAllocations"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, out := capFixture()
			tc.mutate(objs, out)
			var allocated []*resourceapi.ResourceClaim
			for _, name := range []string{"a", "b", "c"} {
				if c := out[name]; c != nil {
					allocated = append(allocated, c)
				}
			}
			err := Check(objs, allocated, Options{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid allocation rejected: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("no error, want %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error does not mention %q:\n%v", tc.want, err)
			}
		})
	}
}
