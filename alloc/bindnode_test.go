package alloc

import (
	"testing"

	"github.com/drasat/drasat/model"
)

// TestBindsToNodeOnAllNodesDevice: a device of an allNodes slice with
// bindsToNode: true. No candidate is node-local, so the engine chooses no
// node for the claim, yet the allocator pins the result to the node it
// allocates on (createNodeSelector). The result must name a node, the first
// one in name order, for a claim of one device and for one of two.
func TestBindsToNodeOnAllNodesDevice(t *testing.T) {
	slice := `
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: net}
spec:
  driver: gpu.example.com
  allNodes: true
  pool: {name: net, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: a, bindsToNode: true}
  - {name: b}
`
	for _, count := range []int{1, 2} {
		c := `
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: gpu, count: ` + map[int]string{1: "1", 2: "2"}[count] + `, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].?x.orValue(true)'}}]}
`
		objs := load(t, node1, slice, c)
		if count == 1 {
			// Only device a: make b unusable.
			objs.Slices[0].Spec.Devices = objs.Slices[0].Spec.Devices[:1]
		}
		got, _ := solve(t, objs, Options{}, model.CompatKEP5963)
		a := got["default/c"]
		if a == nil {
			t.Fatalf("count %d: not allocated", count)
		}
		ns := a.NodeSelector
		if ns == nil || len(ns.NodeSelectorTerms) != 1 || len(ns.NodeSelectorTerms[0].MatchFields) != 1 ||
			ns.NodeSelectorTerms[0].MatchFields[0].Values[0] != "node-1" {
			t.Errorf("count %d: nodeSelector = %v, want metadata.name In [node-1]", count, ns)
		}
	}
}
