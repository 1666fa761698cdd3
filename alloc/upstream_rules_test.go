package alloc

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Rules found by running upstream's allocator table (tools/conformance).
// Each test fails when its rule breaks; solve also runs check/ on the
// output.

// plainPool publishes devices on a node; attrs holds extra device YAML
// (attributes, taints, ...) per device name.
func plainPool(node, pool string, n int, attrs map[string]string, sliceExtra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %[2]s}
spec:
  driver: gpu.example.com
  nodeName: %[1]s
  pool: {name: %[2]s, generation: 1, resourceSliceCount: 1}
%[3]s  devices:
`, node, pool, sliceExtra)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("dev-%d", i)
		fmt.Fprintf(&b, "  - name: %s\n", name)
		if e, ok := attrs[name]; ok {
			b.WriteString(e)
		}
	}
	return b.String()
}

func pendingClaim(name, spec string) string {
	return fmt.Sprintf(`
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: %s, namespace: default}
spec:
  devices:
%s`, name, spec)
}

func rejectedWith(t *testing.T, res *Result, objsClaim string, p func(string) bool) string {
	t.Helper()
	for _, why := range res.Rejected {
		if p(why.Error()) {
			return why.Error()
		}
	}
	t.Fatalf("claim %s: no rejection reason as expected: %v", objsClaim, res.Rejected)
	return ""
}

func TestListTypeAttributesInConstraints(t *testing.T) {
	// dev-0..2 share a value pairwise but no value is common to all three;
	// dev-3's list is empty (it cannot take part); dev-4 shares nothing.
	numa := map[string]string{
		"dev-0": "    attributes: {numa: {ints: [0, 1]}}\n",
		"dev-1": "    attributes: {numa: {ints: [1, 2]}}\n",
		"dev-2": "    attributes: {numa: {ints: [0, 2]}}\n",
		"dev-3": "    attributes: {numa: {ints: []}}\n",
		"dev-4": "    attributes: {numa: {ints: [5]}}\n",
	}
	claimOf := func(name, kind string, count int) string {
		return pendingClaim(name, fmt.Sprintf(`    requests: [{name: r, exactly: {deviceClassName: gpu, count: %d}}]
    constraints: [{%s: gpu.example.com/numa}]
`, count, kind))
	}
	for _, tc := range []struct {
		kind  string
		count int
		ok    bool
		from  []string // the devices must be among these
	}{
		{"matchAttribute", 2, true, []string{"dev-0", "dev-1", "dev-2"}},
		{"matchAttribute", 3, false, nil},
		{"distinctAttribute", 2, true, []string{"dev-0", "dev-1", "dev-2", "dev-4"}},
		{"distinctAttribute", 3, false, nil},
	} {
		t.Run(fmt.Sprintf("%s-%d", tc.kind, tc.count), func(t *testing.T) {
			objs := load(t, node1, plainPool("node-1", "p", 5, numa, ""), claimOf("c", tc.kind, tc.count))
			got, _ := solve(t, objs, Options{}, "")
			a := got["default/c"]
			if (a != nil) != tc.ok {
				t.Fatalf("allocated: %v, want %v", devicesOf(a), tc.ok)
			}
			if a == nil {
				return
			}
			for _, r := range a.Devices.Results {
				if !slices.Contains(tc.from, r.Device) {
					t.Fatalf("%s cannot take part: %v", r.Device, devicesOf(a))
				}
			}
		})
	}
}

func TestClaimResultLimit(t *testing.T) {
	pool := plainPool("node-1", "p", 40, nil, "")
	over := pendingClaim("over", `    requests:
    - {name: a, exactly: {deviceClassName: gpu, count: 20}}
    - {name: b, exactly: {deviceClassName: gpu, count: 13}}
`)
	firstAvail := pendingClaim("fa", `    requests:
    - {name: a, exactly: {deviceClassName: gpu, count: 20}}
    - name: b
      firstAvailable:
      - {name: big, deviceClassName: gpu, count: 13}
      - {name: huge, deviceClassName: gpu, count: 500}
      - {name: small, deviceClassName: gpu, count: 12}
`)
	objs := load(t, node1, pool, over, firstAvail)
	got, res := solve(t, objs, Options{}, "")
	if got["default/over"] != nil {
		t.Fatal("33 results allocated to one claim")
	}
	rejectedWith(t, res, "over", func(s string) bool { return strings.Contains(s, "claim limit of 32") })
	a := got["default/fa"]
	if a == nil {
		t.Fatalf("firstAvailable claim not allocated: %v", res.Rejected)
	}
	if n := len(a.Devices.Results); n != 32 || a.Devices.Results[31].Request != "b/small" {
		t.Fatalf("want 20 + 12 results with b/small, got %d: %v", n, devicesOf(a))
	}
}

func TestSelectorWithoutCELFailsTheClaim(t *testing.T) {
	unknown := pendingClaim("unknown", `    requests: [{name: r, exactly: {deviceClassName: gpu, selectors: [{}]}}]
`)
	objs := load(t, node1, plainPool("node-1", "p", 2, nil, ""), unknown, pendingClaim("other", `    requests: [{name: r, exactly: {deviceClassName: gpu}}]
`))
	got, res := solve(t, objs, Options{}, "")
	if got["default/unknown"] != nil {
		t.Fatal("a selector without cel matched all devices")
	}
	rejectedWith(t, res, "unknown", func(s string) bool { return strings.Contains(s, "unknown selector type") })
	if got["default/other"] == nil {
		t.Fatal("an unrelated claim was blocked")
	}
}

func TestCELErrorWhereTheSearchReachesIt(t *testing.T) {
	// node-2's device lacks the attribute: the allocator's search on
	// node-2 evaluates the selector there and fails, which aborts the
	// pod's scheduling attempt although node-1 fits.
	good := plainPool("node-1", "p1", 1, map[string]string{"dev-0": "    attributes: {a: {int: 1}}\n"}, "")
	bad := plainPool("node-2", "p2", 1, nil, "")
	sel := pendingClaim("c", `    requests: [{name: r, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].a == 1'}}]}}]
`)
	objs := load(t, node1, good, bad, sel)
	got, res := solve(t, objs, Options{}, "")
	if got["default/c"] != nil {
		t.Fatalf("claim allocated although the search on node-2 meets the selector error: %v", devicesOf(got["default/c"]))
	}
	rejectedWith(t, res, "c", func(s string) bool {
		return strings.Contains(s, "no such key") && strings.Contains(s, "on node node-2")
	})
	// node-2's search takes its dev-0 before it reaches dev-1, which lacks
	// the attribute: no error, and the claim is held to that placement.
	bad = plainPool("node-2", "p2", 2, map[string]string{"dev-0": "    attributes: {a: {int: 1}}\n"}, "")
	objs = load(t, node1, good, bad, sel)
	got, res = solve(t, objs, Options{}, "")
	if a := got["default/c"]; a == nil || a.Devices.Results[0].Pool != "p1" {
		t.Fatalf("want p1/dev-0 (the first node where the search succeeds), got %v (%v)", devicesOf(a), res.Rejected)
	}
}

func TestResultFieldsCopiedAsUpstream(t *testing.T) {
	dev := map[string]string{"dev-0": "    bindingConditions: [ready]\n    bindingFailureConditions: [failed]\n    taints: [{key: k, effect: NoSchedule}]\n"}
	pool := plainPool("node-1", "p", 1, dev, "  skipNodeOperations: ['*']\n")
	c := pendingClaim("c", `    requests: [{name: r, exactly: {deviceClassName: gpu, tolerations: [{key: k, operator: Exists}]}}]
`)
	// node-1 does not declare DRAOptionalNodeOperations: the device cannot
	// be used there.
	objs := load(t, node1, pool, c)
	got, _ := solve(t, objs, Options{}, "")
	if got["default/c"] != nil {
		t.Fatal("skipNodeOperations device allocated for a node without DRAOptionalNodeOperations")
	}
	declaring := strings.Replace(node1, "metadata: {name: node-1, labels: {zone: a}}", "metadata: {name: node-1, labels: {zone: a}}\nstatus: {declaredFeatures: [DRAOptionalNodeOperations]}", 1)
	objs = load(t, declaring, pool, c)
	got, res := solve(t, objs, Options{}, "")
	a := got["default/c"]
	if a == nil {
		t.Fatalf("not allocated: %v", res.Rejected)
	}
	r := a.Devices.Results[0]
	if !slices.Equal(r.BindingConditions, []string{"ready"}) || !slices.Equal(r.BindingFailureConditions, []string{"failed"}) {
		t.Errorf("binding conditions not copied: %+v", r)
	}
	if len(r.Tolerations) != 1 || r.Tolerations[0].Key != "k" {
		t.Errorf("tolerations not copied: %+v", r)
	}
	if len(r.SkipNodeOperations) != 1 || r.SkipNodeOperations[0] != "*" {
		t.Errorf("skipNodeOperations not copied: %+v", r)
	}
}

func TestDerivedAttributesInConstraints(t *testing.T) {
	// Devices publish numa under different names; the claim derives one.
	dev := map[string]string{
		"dev-0": "    attributes: {numaA: {int: 0}}\n",
		"dev-1": "    attributes: {numaB: {int: 1}}\n",
		"dev-2": "    attributes: {numaB: {int: 0}}\n",
	}
	derive := `derivedAttributes: [{name: derived/numa, expression: 'has(device.attributes["gpu.example.com"].numaA) ? device.attributes["gpu.example.com"].numaA : device.attributes["gpu.example.com"].numaB'}]`
	c := pendingClaim("c", fmt.Sprintf(`    requests:
    - {name: a, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'has(device.attributes["gpu.example.com"].numaA)'}}], %[1]s}}
    - {name: b, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'has(device.attributes["gpu.example.com"].numaB)'}}], %[1]s}}
    constraints: [{matchAttribute: derived/numa}]
`, derive))
	objs := load(t, node1, plainPool("node-1", "p", 3, dev, ""), c)
	got, res := solve(t, objs, Options{}, "")
	if got := devicesOf(got["default/c"]); !slices.Equal(got, []string{"a=dev-0", "b=dev-2"}) {
		t.Fatalf("got %v, want a=dev-0 b=dev-2 (%v)", got, res.Rejected)
	}
}

func TestDeviceTaintRules(t *testing.T) {
	rule := func(name, selector string) string {
		return fmt.Sprintf(`
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: %s}
spec:
  %s
  taint: {key: maintenance, effect: NoSchedule}
`, name, selector)
	}
	pool := plainPool("node-1", "p", 2, nil, "")
	c := pendingClaim("c", `    requests: [{name: r, exactly: {deviceClassName: gpu, count: 2}}]
`)
	for _, tc := range []struct {
		name, selector string
		ok             bool
	}{
		{"one device", "deviceSelector: {driver: gpu.example.com, pool: p, device: dev-1}", false},
		{"whole pool", "deviceSelector: {pool: p}", false},
		{"other pool", "deviceSelector: {pool: q}", true},
		{"other driver", "deviceSelector: {driver: net.example.com}", true},
		{"no selector", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := load(t, node1, pool, rule("r", tc.selector), c)
			if len(objs.TaintRules) != 1 {
				t.Fatalf("DeviceTaintRule not loaded: %d", len(objs.TaintRules))
			}
			got, _ := solve(t, objs, Options{}, "")
			if (got["default/c"] != nil) != tc.ok {
				t.Fatalf("allocated %v, want %v", devicesOf(got["default/c"]), tc.ok)
			}
			if objs.Slices[0].Spec.Devices[1].Taints != nil {
				t.Fatal("the input slice was modified")
			}
		})
	}
	// A toleration in the request lets the claim use the tainted devices.
	tolerating := strings.Replace(c, "count: 2}", "count: 2, tolerations: [{key: maintenance, operator: Exists}]}", 1)
	objs := load(t, node1, pool, rule("r", "deviceSelector: {pool: p}"), tolerating)
	if got, _ := solve(t, objs, Options{}, ""); got["default/c"] == nil {
		t.Fatal("tolerated taint rule still blocks the devices")
	}
}

func TestPoolGenerationSeenPerNode(t *testing.T) {
	// Generation 1 of the pool is on node-1, generation 2 moved to node-2.
	gen := func(g int, node string) string {
		return strings.Replace(strings.Replace(plainPool(node, "p", 1, nil, ""), "generation: 1", fmt.Sprintf("generation: %d", g), 1),
			"metadata: {name: p}", fmt.Sprintf("metadata: {name: p-%d}", g), 1)
	}
	c := pendingClaim("c", `    requests: [{name: r, exactly: {deviceClassName: gpu}}]
`)
	onlyNode1 := strings.SplitN(node1, "---", 2)[0] + "---" + strings.SplitN(node1, "---", 3)[2]
	// Only node-1 is known: it sees generation 1 complete, as upstream's
	// per-node view of the pool does.
	objs := load(t, onlyNode1, gen(1, "node-1"), gen(2, "node-2"), c)
	got, res := solve(t, objs, Options{}, "")
	a := got["default/c"]
	if a == nil || a.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0] != "node-1" {
		t.Fatalf("want the generation-1 device on node-1, got %v (%v)", a, res.Rejected)
	}
	// Both nodes known: each uses the generation published for it, but
	// dev-0 is one device for the allocated state whatever the generation:
	// of two claims, one gets it (on either node), never both.
	d := pendingClaim("d", `    requests: [{name: r, exactly: {deviceClassName: gpu}}]
`)
	objs = load(t, node1, gen(1, "node-1"), gen(2, "node-2"), c, d)
	got, _ = solve(t, objs, Options{}, "")
	if (got["default/c"] == nil) == (got["default/d"] == nil) {
		t.Fatalf("want exactly one of c and d allocated, got %v and %v", got["default/c"], got["default/d"])
	}
	// Each generation alone serves the claim on its node.
	for _, node := range []string{"node-1", "node-2"} {
		pinned := pendingClaim("c", `    requests: [{name: r, exactly: {deviceClassName: gpu}}]
`) + "status: {reservedFor: [{resource: pods, name: pod, uid: u}]}\n" + `---
apiVersion: v1
kind: Pod
metadata: {name: pod, namespace: default}
spec: {nodeName: ` + node + `, containers: [{name: c, image: x}]}
`
		objs = load(t, node1, gen(1, "node-1"), gen(2, "node-2"), pinned)
		got, res := solve(t, objs, Options{}, "")
		if a := got["default/c"]; a == nil || a.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0] != node {
			t.Fatalf("claim bound to %s: got %v (%v)", node, a, res.Rejected)
		}
	}
}

// allocationMode All takes what the chosen node sees. A matching device on
// node-1 that cannot be taken (tainted) rules node-1 out, not the claim:
// on node-2 only the all-nodes device matches, and upstream allocates it
// there. The claim's candidates are all on all nodes, yet the node matters.
func TestAllModeNodeMattersWithAllNodesCandidates(t *testing.T) {
	local := plainPool("node-1", "local", 1, map[string]string{"dev-0": "    taints: [{key: k, effect: NoSchedule}]\n"}, "")
	everywhere := strings.Replace(plainPool("node-1", "everywhere", 1, nil, ""), "nodeName: node-1", "allNodes: true", 1)
	c := pendingClaim("c", `    requests: [{name: r, exactly: {deviceClassName: gpu, allocationMode: All}}]
`)
	got, res := solve(t, load(t, node1, local, everywhere, c), Options{}, "")
	a := got["default/c"]
	if a == nil {
		t.Fatalf("claim not allocated (%v); upstream allocates it on node-2", res.Rejected)
	}
	if len(a.Devices.Results) != 1 || a.Devices.Results[0].Pool != "everywhere" || a.NodeSelector != nil {
		t.Fatalf("want the all-nodes device alone, no node selector; got %v", a)
	}
}
