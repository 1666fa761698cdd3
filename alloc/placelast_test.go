package alloc

import (
	"context"
	"strings"
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
	objs := load(t, node1, placeLastSlice, placeLastFree, placeLastSel)
	p := build(t, objs, model.CompatKEP5963)
	free, sel := claimByKey(p, "default/free"), claimByKey(p, "default/sel")
	if !free.OrderFree() || !sel.Retryable() {
		t.Fatalf("free order-free %v, sel retryable %v", free.OrderFree(), sel.Retryable())
	}
	dev, node := deviceIndex(p), nodeIndex(p, "node-1")
	admitted := []*Assignment{{Claim: free, Node: node, Picks: []Pick{{Dev: dev["b"]}}}}
	admitted, late := placeLast(context.Background(), p, admitted)
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

// TestPlaceLastBesideAdminAccess: as above, with free admitted on a and
// claim adm on b with admin access. The scheduler's allocated state leaves
// admin-access results out, so sel placed after both passes over the held
// a and takes b; an admitted admin-access claim does not keep placeLast
// from trying.
func TestPlaceLastBesideAdminAccess(t *testing.T) {
	adm := strings.NewReplacer("name: free", "name: adm", "deviceClassName: gpu}", "deviceClassName: gpu, adminAccess: true}").Replace(placeLastFree)
	objs := load(t, node1, placeLastSlice, placeLastFree, adm, placeLastSel)
	p := build(t, objs, model.CompatKEP5963)
	free, sel, admin := claimByKey(p, "default/free"), claimByKey(p, "default/sel"), claimByKey(p, "default/adm")
	if admin == nil || !admin.Requests[0].Alternatives[0].AdminAccess {
		t.Fatal("adm has no admin access")
	}
	dev, node := deviceIndex(p), nodeIndex(p, "node-1")
	admitted := []*Assignment{{Claim: free, Node: node, Picks: []Pick{{Dev: dev["a"]}}}, {Claim: admin, Node: node, Picks: []Pick{{Dev: dev["b"]}}}}
	admitted, late := placeLast(context.Background(), p, admitted)
	if len(late) != 1 || late[0].Claim != sel || len(late[0].Picks) != 1 || late[0].Picks[0].Dev != dev["b"] {
		t.Fatalf("placed last: %v, want sel on b", late)
	}
	got, _ := solve(t, objs, Options{Objective: MaxClaims}, model.CompatKEP5963)
	for _, k := range []string{"default/free", "default/adm", "default/sel"} {
		if got[k] == nil {
			t.Errorf("%s not admitted", k)
		}
	}
}

func claimByKey(p *model.Problem, key string) *model.Claim {
	for _, c := range p.Claims {
		if c.Key == key {
			return c
		}
	}
	return nil
}

func deviceIndex(p *model.Problem) map[string]int {
	dev := map[string]int{}
	for _, d := range p.Devices {
		dev[d.ID.Device] = d.Index
	}
	return dev
}

func nodeIndex(p *model.Problem, name string) int {
	for i, n := range p.Nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

const placeLastSlice = `
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
`

const placeLastFree = `
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: free, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: gpu}
`

const placeLastSel = `
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: sel, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].opt >= 0'}}]}
`

// TestPlaceLastMovesAdmittedToAnotherNode: as
// TestPlaceLastMovesAdmittedOntoErrorDevice, with node-2 offering c and
// free admitted there: sel's search on node-1 still meets the error on
// a, so free moves to node-1 and takes a (no pod pins it to node-2).
func TestPlaceLastMovesAdmittedToAnotherNode(t *testing.T) {
	other := strings.NewReplacer("name: s1", "name: s2", "node-1", "node-2", "name: p1", "name: p2",
		"  - {name: a}\n", "", "{name: b, attributes: {opt: {int: 1}}}", "{name: c, attributes: {opt: {int: 1}}}").Replace(placeLastSlice)
	objs := load(t, node1, placeLastSlice, other, placeLastFree, placeLastSel)
	p := build(t, objs, model.CompatKEP5963)
	free, sel := claimByKey(p, "default/free"), claimByKey(p, "default/sel")
	dev := deviceIndex(p)
	admitted := []*Assignment{{Claim: free, Node: nodeIndex(p, "node-2"), Picks: []Pick{{Dev: dev["c"]}}}}
	admitted, late := placeLast(context.Background(), p, admitted)
	if len(late) != 1 || late[0].Claim != sel || len(late[0].Picks) != 1 || late[0].Picks[0].Dev != dev["b"] {
		t.Fatalf("placed last: %v, want sel on b", late)
	}
	if a := admitted[0]; a.Node != nodeIndex(p, "node-1") || len(a.Picks) != 1 || a.Picks[0].Dev != dev["a"] {
		t.Errorf("free now on node %d, %v; want node-1, a", a.Node, a.Picks)
	}
}

// TestPlaceLastYieldsHeldDevices: node-1 has dx and dy (opt 1; dx tagged f)
// and dz (no opt). Claim h asks for one device whose opt is at least 0, a
// selector failing on dz: its search from the existing allocations
// takes dx, so it is held to dx. Claim f asks for the device tagged f.
// With h admitted on dx, f is left out; the scheduler taking f first gives it
// dx, and h's search then takes dy. placeLast lets h yield dx to f and
// places h last, on dy.
func TestPlaceLastYieldsHeldDevices(t *testing.T) {
	slice := strings.Replace(placeLastSlice, "  - {name: a}\n  - {name: b, attributes: {opt: {int: 1}}}\n",
		"  - {name: dx, attributes: {opt: {int: 1}, tag: {string: f}}}\n  - {name: dy, attributes: {opt: {int: 1}}}\n  - {name: dz}\n", 1)
	h := strings.Replace(placeLastSel, "name: sel", "name: h", 1)
	f := strings.NewReplacer("name: free", "name: f", "deviceClassName: gpu}",
		`deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].?tag.orValue("") == "f"'}}]}`).Replace(placeLastFree)
	objs := load(t, node1, slice, h, f)
	p := build(t, objs, model.CompatKEP5963)
	hc, fc := claimByKey(p, "default/h"), claimByKey(p, "default/f")
	if !hc.Retryable() || !fc.OrderFree() {
		t.Fatalf("h retryable %v, f order-free %v", hc.Retryable(), fc.OrderFree())
	}
	dev, node := deviceIndex(p), nodeIndex(p, "node-1")
	kept, late := placeLast(context.Background(), p, []*Assignment{{Claim: hc, Node: node, Picks: []Pick{{Dev: dev["dx"]}}}})
	if len(kept) != 1 || kept[0].Claim != fc || len(kept[0].Picks) != 1 || kept[0].Picks[0].Dev != dev["dx"] {
		t.Fatalf("kept %v, want f on dx", kept)
	}
	if len(late) != 1 || late[0].Claim != hc || len(late[0].Picks) != 1 || late[0].Picks[0].Dev != dev["dy"] {
		t.Fatalf("placed last %v, want h on dy", late)
	}
	got, _ := solve(t, objs, Options{Objective: MaxClaims}, model.CompatKEP5963)
	if got["default/f"] == nil || got["default/h"] == nil {
		t.Errorf("admitted %v", got)
	}
}
