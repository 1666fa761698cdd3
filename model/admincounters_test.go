package model

import "testing"

// A counter value above the sum of all consumptions is capped to keep
// values exact, but admin access consumes the counters of a device even
// while another claim holds it: with dev-1 (3 of 7) held, an admin-access
// claim for dev-1 needs 3 more, which fit (6 of 7).
func TestAdminAccessCountsCountersAgain(t *testing.T) {
	docs := nodeOneGPUClass + `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p, generation: 1, resourceSliceCount: 1}
  sharedCounters: [{name: mem, counters: {m: {value: "7"}}}]
  devices:
  - {name: dev-0, consumesCounters: [{counterSet: mem, counters: {m: {value: "1"}}}]}
  - {name: dev-1, consumesCounters: [{counterSet: mem, counters: {m: {value: "3"}}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: old, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}
status: {allocation: {devices: {results: [{request: r, driver: gpu.example.com, pool: p, device: dev-1}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: admin, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu, adminAccess: true}}]}}
`
	p := buildYAML(t, docs)
	c := p.Claims[0]
	found := false
	for _, d := range c.Requests[0].Alternatives[0].Candidates {
		if p.Devices[d].ID.Device == "dev-1" {
			found = true
		}
	}
	if !found || !NewState(p).FitsFor(1, c.Requests[0].Alternatives[0], false) {
		t.Fatalf("admin access to held dev-1 (3 more of 7, 3 used): candidate %t; counter set %v", found, p.CounterSets[0].Free)
	}
}
