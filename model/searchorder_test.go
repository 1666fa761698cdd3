package model

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// nodeOneGPUClass starts the YAML of the tests here: node-1 and the
// device class gpu (every device of driver gpu.example.com), then a
// document separator.
const nodeOneGPUClass = `
apiVersion: v1
kind: Node
metadata: {name: node-1}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
`

// searchOrderYAML: node-1 publishes a (numa 0), b (numa 1), both kind one,
// and c (numa cNuma), kind all; with twoNodes node-2 publishes d (numa 1,
// kind one) and e (numa 1, kind all). The claim asks for one device of kind
// one, then for all devices of kind all, under matchAttribute numa.
func searchOrderYAML(aNuma, cNuma int, twoNodes bool) string {
	docs := fmt.Sprintf(nodeOneGPUClass+`apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: a, attributes: {numa: {int: %d}, kind: {string: one}}}
  - {name: b, attributes: {numa: {int: 1}, kind: {string: one}}}
  - {name: c, attributes: {numa: {int: %d}, kind: {string: all}}}
`, aNuma, cNuma)
	if twoNodes {
		docs += `---
apiVersion: v1
kind: Node
metadata: {name: node-2}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s2}
spec:
  driver: gpu.example.com
  nodeName: node-2
  pool: {name: p2, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: d, attributes: {numa: {int: 1}, kind: {string: one}}}
  - {name: e, attributes: {numa: {int: 1}, kind: {string: all}}}
`
	}
	return docs + `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default}
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
`
}

// TestSearchOrderAllAfterRequest: the allocator picks a for the first
// request (its first fitting device), then adding c for All breaks the
// constraint: an error, so the claim fails, although b with c would
// satisfy it; an error on one node fails the claim even when another node
// fits. When the allocator's first choice works, the claim is held to it.
func TestSearchOrderAllAfterRequest(t *testing.T) {
	const want = "request all: cannot add device gpu.example.com/p1/c because a claim constraint would not be satisfied on node node-1"
	for _, two := range []bool{false, true} {
		p := buildYAML(t, searchOrderYAML(0, 1, two))
		if err := p.Claims[0].Err; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("two nodes %t: claim error %v, want %q", two, err, want)
		}
	}

	// a and c on numa 0: the allocator takes a, then c; b is never used.
	p := buildYAML(t, searchOrderYAML(0, 0, true))
	c := p.Claims[0]
	if c.Err != nil {
		t.Fatalf("claim error %v, want none", c.Err)
	}
	var got []string
	for _, r := range c.Requests {
		for _, d := range r.Alternatives[0].Candidates {
			got = append(got, p.Devices[d].ID.Device)
		}
	}
	if strings.Join(got, ",") != "a,c" || !c.ExcludedNodes[1] || c.ExcludedNodes[0] {
		t.Fatalf("held to devices %v, excluded nodes %v; want a,c on node-1 only", got, c.ExcludedNodes)
	}

	// a in use by an existing claim: the allocator takes b, then c.
	existing := `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: old, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}
status: {allocation: {devices: {results: [{request: r, driver: gpu.example.com, pool: p1, device: a}]}}}
`
	p = buildYAML(t, searchOrderYAML(0, 1, false)+existing)
	if err := p.Claims[0].Err; err != nil {
		t.Fatalf("a in use: claim error %v, want none (b then c)", err)
	}
}

// A selector failing on b2 (no opt): node-1's search takes a1, node-2's
// takes b1 before it reaches b2. Alone, the claim is held to a1. With a
// rival that could take b1 and is itself held (its selector fails on b2
// too), one of the two must be placed second; if the rival came first,
// node-2's search would reach b2 and fail: the claim fails.
func TestSearchOrderSelectorErrorRival(t *testing.T) {
	docs := `
apiVersion: v1
kind: Node
metadata: {name: node-1}
---
apiVersion: v1
kind: Node
metadata: {name: node-2}
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
  devices: [{name: a1, attributes: {opt: {int: 1}}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s2}
spec:
  driver: gpu.example.com
  nodeName: node-2
  pool: {name: p2, generation: 1, resourceSliceCount: 1}
  devices: [{name: b1, attributes: {opt: {int: 1}}}, {name: b2}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly:
        deviceClassName: gpu
        selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].opt >= 1'}}]
`
	p := buildYAML(t, docs)
	c := p.Claims[0]
	if c.Err != nil {
		t.Fatalf("alone: claim error %v", c.Err)
	}
	if got := c.Requests[0].Alternatives[0].Candidates; len(got) != 1 || p.Devices[got[0]].ID.Device != "a1" || !c.ExcludedNodes[1] {
		t.Fatalf("alone: want the claim held to a1 on node-1, got candidates %v, excluded %v", got, c.ExcludedNodes)
	}
	// A plain claim can always be placed after it.
	if err := buildYAML(t, docs+claimYAML("plain", "gpu", "")).Claims[0].Err; err != nil {
		t.Fatalf("with a plain claim for b1: claim error %v", err)
	}
	rival := claimYAML("rival", "gpu", "        selectors: [{cel: {expression: 'device.attributes[\"gpu.example.com\"].opt >= 0'}}]\n")
	p = buildYAML(t, docs+rival)
	want := "the scheduler's outcome depends on the order of the pending claims: if claim default/rival came first, the allocator could go past its first placement on node node-2"
	if err := p.Claims[0].Err; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("with a rival for b1: claim error %v, want %q", err, want)
	}
}

// A derived attribute (alpha) a constraint uses is evaluated when the
// search tries a device: failing on b, which the search tries first, it
// fails the claim; tried after a, which it takes, it does not matter.
func TestSearchOrderDerivedAttributeError(t *testing.T) {
	docs := func(devices string) string {
		return nodeOneGPUClass + `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p1, generation: 1, resourceSliceCount: 1}
  devices: ` + devices + `
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly:
        deviceClassName: gpu
        derivedAttributes: [{name: gpu.example.com/numa, expression: 'device.attributes["gpu.example.com"].opt'}]
    constraints: [{matchAttribute: gpu.example.com/numa}]
`
	}
	p := buildYAML(t, docs("[{name: b}, {name: a, attributes: {opt: {int: 1}}}]"))
	if err := p.Claims[0].Err; err == nil || !strings.Contains(err.Error(), "request r: device gpu.example.com/p1/b: derived attribute gpu.example.com/numa") {
		t.Errorf("b tried first: claim error %v, want the derived attribute's error on b", err)
	}
	p = buildYAML(t, docs("[{name: a, attributes: {opt: {int: 1}}}, {name: b}]"))
	if err := p.Claims[0].Err; err != nil {
		t.Errorf("a taken first: claim error %v", err)
	}
}

// All over shared devices: the allocator checks a device's constraints
// before the capacity left, so n1, whose capacity an existing share has
// taken, still breaks matchAttribute with n0: an error, not a miss.
func TestSearchOrderAllConstraintBeforeCapacity(t *testing.T) {
	docs := nodeOneGPUClass + `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: nics}
spec:
  driver: gpu.example.com
  allNodes: true
  pool: {name: nics, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: n0, allowMultipleAllocations: true, attributes: {numa: {int: 0}}, capacity: {bw: {value: "4"}}}
  - {name: n1, allowMultipleAllocations: true, attributes: {numa: {int: 1}}, capacity: {bw: {value: "4"}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: old, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu, capacity: {requests: {bw: "1"}}}}]}}
status: {allocation: {devices: {results: [{request: r, driver: gpu.example.com, pool: nics, device: n1, shareID: 00000000-0000-4000-8000-000000000001, consumedCapacity: {bw: "1"}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x, namespace: default}
spec:
  devices:
    requests:
    - {name: all, exactly: {deviceClassName: gpu, allocationMode: All}}
    constraints: [{matchAttribute: gpu.example.com/numa}]
`
	p := buildYAML(t, docs)
	if err := p.Claims[0].Err; err == nil || !strings.Contains(err.Error(), "cannot add device gpu.example.com/nics/n1 because a claim constraint would not be satisfied") {
		t.Fatalf("claim error %v, want the constraint error on n1", err)
	}
}

// TestSearchOrderResultLimitUnwinds: ../testdata/order/limit-unwind.yaml.
// Past the result limit the allocator unwinds to the firstAvailable
// request without trying other devices for it; backtracking there would
// meet a selector error. The claim is held to subrequest one's x-00 and
// all y.
func TestSearchOrderResultLimitUnwinds(t *testing.T) {
	docs, err := os.ReadFile("../testdata/order/limit-unwind.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := buildYAML(t, string(docs))
	c := p.Claims[0]
	if c.Err != nil {
		t.Fatalf("claim error %v, want none", c.Err)
	}
	var held []string
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			for _, d := range a.Candidates {
				held = append(held, a.Name+"="+p.Devices[d].ID.Device)
			}
		}
	}
	if got := strings.Join(held, " "); !strings.HasPrefix(got, "first/one=x-00 all=y-00 ") || len(held) != 14 {
		t.Errorf("held to %s, want first/one=x-00 and all 13 y", got)
	}
}
