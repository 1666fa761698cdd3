package model

import (
	"slices"
	"testing"
)

// TestOverdrawnCounterBlocksPool: existing allocations overdraw counter
// units of counter set a (two devices of 1 against 1). The allocator's
// checkAvailableCounters compares every counter of the pool for each device
// that consumes counters, so it refuses b-only (consuming from set b, which
// is free) and zero (consuming 0 of set b) as well; free (consuming
// nothing) stays a candidate.
func TestOverdrawnCounterBlocksPool(t *testing.T) {
	p := buildYAML(t, `
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: counters}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - {name: a, counters: {units: {value: "1"}}}
  - {name: b, counters: {units: {value: "4"}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: devices}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p, generation: 1, resourceSliceCount: 2}
  devices:
  - {name: held-0, consumesCounters: [{counterSet: a, counters: {units: {value: "1"}}}]}
  - {name: held-1, consumesCounters: [{counterSet: a, counters: {units: {value: "1"}}}]}
  - {name: b-only, consumesCounters: [{counterSet: b, counters: {units: {value: "1"}}}]}
  - {name: zero, consumesCounters: [{counterSet: b, counters: {units: {value: "0"}}}]}
  - {name: free}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: any}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: old, namespace: default}
spec:
  devices:
    requests: [{name: r, exactly: {deviceClassName: any, count: 2}}]
status:
  allocation:
    devices:
      results:
      - {request: r, driver: gpu.example.com, pool: p, device: held-0}
      - {request: r, driver: gpu.example.com, pool: p, device: held-1}
---
`+claimYAML("c", "any", ""))
	var got []string
	for _, c := range p.Claims {
		for _, d := range c.Requests[0].Alternatives[0].Candidates {
			got = append(got, p.Devices[d].ID.Device)
		}
	}
	if !slices.Equal(got, []string{"free"}) {
		t.Errorf("candidates = %v, want [free]", got)
	}
}
