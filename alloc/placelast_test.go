package alloc

import (
	"testing"

	"github.com/drasat/drasat/model"
)

// TestPlaceLastMovesAdmittedOntoErrorDevice: node-1 has a (no attribute
// opt) and b (opt 1). Claim free asks for any one device; claim sel for
// one whose opt is at least 0, a selector failing at run time on a. From
// the existing allocations alone sel's search meets the error on a. With
// free admitted on b, placed last it still does; the scheduler taking
// free first gives it a (its first fit), and sel's search then passes
// over the held a and takes b. placeLast moves free onto a (free's
// allocation does not depend on the search order) and places sel on b.
func TestPlaceLastMovesAdmittedOntoErrorDevice(t *testing.T) {
	objs := load(t, node1, `
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: a}
  - {name: b, attributes: {opt: {int: 1}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: free, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: gpu}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: sel, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].opt >= 0'}}]}
`)
	p := build(t, objs, model.CompatKEP5963)
	var free, sel *model.Claim
	for _, c := range p.Claims {
		switch c.Key {
		case "default/free":
			free = c
		case "default/sel":
			sel = c
		}
	}
	if !free.OrderFree() || !sel.Retryable() {
		t.Fatalf("free order-free %v, sel retryable %v", free.OrderFree(), sel.Retryable())
	}
	dev := map[string]int{}
	for _, d := range p.Devices {
		dev[d.ID.Device] = d.Index
	}
	node := -1
	for i, n := range p.Nodes {
		if n.Name == "node-1" {
			node = i
		}
	}
	admitted := []*Assignment{{Claim: free, Node: node, Picks: []Pick{{Dev: dev["b"]}}}}
	late := placeLast(p, admitted)
	if len(late) != 1 || late[0].Claim != sel || len(late[0].Picks) != 1 || late[0].Picks[0].Dev != dev["b"] {
		t.Fatalf("placed last: %v, want sel on b", late)
	}
	if got := admitted[0].Picks; len(got) != 1 || got[0].Dev != dev["a"] {
		t.Errorf("free now on %v, want a", got)
	}
	// The whole run admits both.
	got, _ := solve(t, objs, Options{Objective: MaxClaims}, model.CompatKEP5963)
	if got["default/free"] == nil || got["default/sel"] == nil {
		t.Errorf("admitted %v", got)
	}
}
