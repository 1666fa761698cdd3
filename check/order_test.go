package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drasat/drasat/input"
	resourceapi "k8s.io/api/resource/v1"
)

// orderObjects: node-1 publishes a, b (kind one) and c (kind all) with the
// given numa values; claim x asks for one device of kind one, then for all
// devices of kind all, under matchAttribute numa.
func orderObjects(t *testing.T, a, b, c int) *input.Objects {
	t.Helper()
	docs := fmt.Sprintf(`
apiVersion: v1
kind: Node
metadata: {name: node-1}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: a, attributes: {numa: {int: %d}, kind: {string: one}}}
  - {name: b, attributes: {numa: {int: %d}, kind: {string: one}}}
  - {name: c, attributes: {numa: {int: %d}, kind: {string: all}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x, namespace: default}
spec:
  devices:
    requests:
    - name: one
      exactly:
        deviceClassName: gpu
        selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].kind == "one"'}}]
    - name: all
      exactly:
        deviceClassName: gpu
        allocationMode: All
        selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].kind == "all"'}}]
    constraints: [{matchAttribute: gpu.example.com/numa}]
`, a, b, c)
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(docs))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func orderAllocation(objs *input.Objects, one string) []*resourceapi.ResourceClaim {
	out := objs.Claims[0].DeepCopy()
	res := func(req, dev string) resourceapi.DeviceRequestAllocationResult {
		return resourceapi.DeviceRequestAllocationResult{Request: req, Driver: gpuDriver, Pool: "p1", Device: dev}
	}
	out.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: nodeSel("node-1"),
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{res("one", one), res("all", "c")}}}
	return []*resourceapi.ResourceClaim{out}
}

// Rule 10: the allocator takes a for the first request, then c for All.
func TestCheckSearchOrder(t *testing.T) {
	// a on numa 0, c on numa 1: adding c after a is an error, so even b
	// with c (which satisfies the constraint) is not an allocation the
	// scheduler makes.
	objs := orderObjects(t, 0, 1, 1)
	err := Check(objs, orderAllocation(objs, "b"), Options{})
	if err == nil || !strings.Contains(err.Error(), "the scheduler's allocator fails on node node-1: request all: adding device gpu.example.com/p1/c breaks a claim constraint") {
		t.Errorf("b with c after an error on a: Check = %v", err)
	}
	// All on numa 0: the allocator picks a, never b.
	objs = orderObjects(t, 0, 0, 0)
	if err := Check(objs, orderAllocation(objs, "a"), Options{}); err != nil {
		t.Errorf("a with c: %v", err)
	}
	err = Check(objs, orderAllocation(objs, "b"), Options{})
	if err == nil || !strings.Contains(err.Error(), "must be what it picks from the existing allocations (on node node-1: all=gpu.example.com/p1/c,one=gpu.example.com/p1/a)") {
		t.Errorf("b with c where the allocator picks a: Check = %v", err)
	}
}

// Rule 10 for selector errors: the allocator evaluates a request's
// selectors on the devices it reaches, so an error on a device after the
// one it takes does not matter, one before it fails the claim.
func TestCheckSearchOrderSelectorError(t *testing.T) {
	objs := func(first, second string) *input.Objects {
		docs := `
apiVersion: v1
kind: Node
metadata: {name: node-1}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p1, generation: 1, resourceSliceCount: 1}
  devices:
  - ` + first + `
  - ` + second + `
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x, namespace: default}
spec:
  devices:
    requests:
    - name: one
      exactly:
        deviceClassName: gpu
        selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].opt >= 1'}}]
`
		o, _, err := input.Load([]string{"-"}, strings.NewReader(docs))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	alloc := func(o *input.Objects) []*resourceapi.ResourceClaim {
		out := o.Claims[0].DeepCopy()
		out.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: nodeSel("node-1"), Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "one", Driver: gpuDriver, Pool: "p1", Device: "a"}}}}
		return []*resourceapi.ResourceClaim{out}
	}
	withOpt, without := "{name: a, attributes: {opt: {int: 1}}}", "{name: b}"
	if o := objs(withOpt, without); Check(o, alloc(o), Options{}) != nil {
		t.Errorf("a taken before b is reached: %v", Check(o, alloc(o), Options{}))
	}
	o := objs(without, withOpt)
	if err := Check(o, alloc(o), Options{}); err == nil || !strings.Contains(err.Error(), "fails on node node-1: request one: a selector fails on device gpu.example.com/p1/b") {
		t.Errorf("b reached before a: Check = %v", err)
	}
}

// Rule 10 for derived attributes: the allocator evaluates them only on
// devices a node's search tries (after the device's nodes are checked), so
// one failing on a device no node reaches (u, for zone a, where no node
// is; its slice is published for node-1 through v) does not make the claim depend on the search order: b, which the
// search (taking a first) never picks, is as valid as a.
func TestCheckDerivedErrorUnreachableDevice(t *testing.T) {
	docs := `
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {zone: b}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: a, attributes: {opt: {int: 0}}}
  - {name: b, attributes: {opt: {int: 1}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: zoned}
spec:
  driver: gpu.example.com
  perDeviceNodeSelection: true
  pool: {name: zoned, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: v, allNodes: true, attributes: {opt: {int: 2}}}
  - name: u
    nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x, namespace: default}
spec:
  devices:
    requests:
    - name: one
      exactly:
        deviceClassName: gpu
        derivedAttributes: [{name: gpu.example.com/numa, expression: 'device.attributes["gpu.example.com"].opt'}]
    constraints: [{matchAttribute: gpu.example.com/numa}]
`
	// On a node that reaches u, the claim is order-dependent again: the
	// search takes a, never b.
	checkBUntilZoneA(t, docs, "the derived attribute failing only on a device no node reaches", "must be what it picks")
}

// checkBUntilZoneA allocates the claim of docs device p1/b on node-1: valid
// (what fails at run time is on a device no node's search looks at, why),
// and rejected with wantErr once node-1 is relabelled into zone a, where
// its search looks at that device too and takes p1/a.
func checkBUntilZoneA(t *testing.T, docs, why, wantErr string) {
	t.Helper()
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(docs))
	if err != nil {
		t.Fatal(err)
	}
	out := objs.Claims[0].DeepCopy()
	out.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: nodeSel("node-1"),
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "one", Driver: gpuDriver, Pool: "p1", Device: "b"}}}}
	if err := Check(objs, []*resourceapi.ResourceClaim{out}, Options{}); err != nil {
		t.Errorf("b, %s: %v", why, err)
	}
	objs.Nodes[0].Labels["zone"] = "a"
	err = Check(objs, []*resourceapi.ResourceClaim{out}, Options{})
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Errorf("b in zone a: Check = %v", err)
	}
}

// Rule 10 for selector errors on devices no node's search looks at: the
// allocator evaluates selectors only on the devices of the slices gathered
// for the node (GatherPools keeps those whose node selection matches it),
// so a selector failing on c, whose slice is for zone a where no node is
// (its pool p2 is seen by node-1 through another slice), does not make
// the claim depend on the search order: b, which the search (taking a
// first) never picks, is as valid as a.
func TestCheckSelectorErrorUnseenSlice(t *testing.T) {
	docs := `
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {zone: b}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: a, attributes: {opt: {int: 1}}}
  - {name: b, attributes: {opt: {int: 1}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: here}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p2, generation: 1, resourceSliceCount: 2}
  devices: [{name: d, attributes: {opt: {int: 1}}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: zoned}
spec:
  driver: gpu.example.com
  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}
  pool: {name: p2, generation: 1, resourceSliceCount: 2}
  devices: [{name: c}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x, namespace: default}
spec:
  devices:
    requests:
    - name: one
      exactly:
        deviceClassName: gpu
        selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].opt >= 1'}}]
`
	// Where node-1 sees c's slice, the claim is order-dependent: the
	// search takes a (p1 comes before p2, so it never reaches c), never b.
	checkBUntilZoneA(t, docs, "the selector failing only on a device of a slice no node sees",
		"must be what it picks from the existing allocations (on node node-1: one=gpu.example.com/p1/a)")
}

// Rule 10 with a device that binds to its node on an allNodes slice: the
// search's partial allocations, like the allocator's results, are pinned
// to the node (createNodeSelector), so the search takes a, the first
// device, and a's allocation is what the scheduler makes. c, after it,
// lacks the attribute, so the outcome depends on the search order.
func TestCheckSearchOrderBindsToNodeEverywhere(t *testing.T) {
	docs := `
apiVersion: v1
kind: Node
metadata: {name: node-1}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec:
  driver: gpu.example.com
  allNodes: true
  pool: {name: p1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: a, bindsToNode: true, attributes: {opt: {int: 1}}}
  - {name: b, attributes: {opt: {int: 1}}}
  - {name: c}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x, namespace: default}
spec:
  devices:
    requests:
    - name: one
      exactly:
        deviceClassName: gpu
        selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].opt >= 1'}}]
`
	o, _, err := input.Load([]string{"-"}, strings.NewReader(docs))
	if err != nil {
		t.Fatal(err)
	}
	out := o.Claims[0].DeepCopy()
	out.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: nodeSel("node-1"), Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "one", Driver: gpuDriver, Pool: "p1", Device: "a"}}}}
	if err := Check(o, []*resourceapi.ResourceClaim{out}, Options{}); err != nil {
		t.Errorf("a, which the search takes first: %v", err)
	}
}
