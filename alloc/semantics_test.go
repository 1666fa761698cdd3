package alloc

import (
	"fmt"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// Test fixtures in YAML: one node pool with a GPU split into halves and
// quarters, and helpers to add claims.
const node1 = `
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {zone: a}}
---
apiVersion: v1
kind: Node
metadata: {name: node-2, labels: {zone: b}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
  config:
  - opaque: {driver: gpu.example.com, parameters: {mode: class}}
`

// gpuPool publishes one GPU (4 slices) on a node: whole, two halves, four
// quarters, with optional extra device YAML fields per device name.
func gpuPool(node string, extra map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %[1]s-counters}
spec:
  driver: gpu.example.com
  nodeName: %[1]s
  pool: {name: %[1]s, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0
    counters: {memory: {value: 40Gi}, s0: {value: "1"}, s1: {value: "1"}, s2: {value: "1"}, s3: {value: "1"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %[1]s-devices}
spec:
  driver: gpu.example.com
  nodeName: %[1]s
  pool: {name: %[1]s, generation: 1, resourceSliceCount: 2}
  devices:
`, node)
	dev := func(name string, size int, slices ...int) {
		fmt.Fprintf(&b, "  - name: %s\n    attributes: {size: {int: %d}, gpu: {string: %s-gpu-0}}\n", name, size, node)
		fmt.Fprintf(&b, "    consumesCounters:\n    - counterSet: gpu-0\n      counters: {memory: {value: %dGi}", size*10)
		for _, s := range slices {
			fmt.Fprintf(&b, ", s%d: {value: \"1\"}", s)
		}
		b.WriteString("}\n")
		if e, ok := extra[name]; ok {
			b.WriteString(e)
		}
	}
	dev("whole", 4, 0, 1, 2, 3)
	dev("half-0", 2, 0, 1)
	dev("half-1", 2, 2, 3)
	for i := 0; i < 4; i++ {
		dev(fmt.Sprintf("quarter-%d", i), 1, i)
	}
	return b.String()
}

// claim returns a pending claim asking count devices of a size.
func claim(name string, size, count int) string {
	return fmt.Sprintf(`
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: %s, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly:
        deviceClassName: gpu
        count: %d
        selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].size == %d'}}]
`, name, count, size)
}

// inUse is a claim "old" already allocated the given "pool/device"s
// (request r, count ignored: an allocated claim is taken as it is).
func inUse(devices ...string) string {
	var b strings.Builder
	b.WriteString(`
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: old, namespace: default}
spec:
  devices:
    requests: [{name: r, exactly: {deviceClassName: gpu}}]
status:
  allocation:
    devices:
      results:
`)
	for _, d := range devices {
		pool, dev, _ := strings.Cut(d, "/")
		fmt.Fprintf(&b, "      - {request: r, driver: gpu.example.com, pool: %s, device: %s}\n", pool, dev)
	}
	return b.String()
}

func load(t *testing.T, docs ...string) *input.Objects {
	t.Helper()
	l := &input.Loader{Stdin: strings.NewReader(strings.Join(docs, "\n"))}
	objs, err := l.Load([]string{"-"})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// solve runs the engine and returns claim key -> allocation (nil if none).
func solve(t *testing.T, objs *input.Objects, opts Options, compat string) (map[string]*resourceapi.AllocationResult, *Result) {
	t.Helper()
	p := build(t, objs, compat)
	res := run(t, p, opts)
	claims, err := Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*resourceapi.AllocationResult{}
	for _, c := range claims {
		out[c.Namespace+"/"+c.Name] = c.Status.Allocation
	}
	checkAllocations(t, p, objs, res, compat)
	return out, res
}

func devicesOf(a *resourceapi.AllocationResult) []string {
	if a == nil {
		return nil
	}
	var out []string
	for _, r := range a.Devices.Results {
		out = append(out, r.Request+"="+r.Device)
	}
	return out
}

func TestOptimalBeatsFirstFit(t *testing.T) {
	// First-fit gives the first half to "small" (quarter-0), stranding a
	// half; the optimum packs small into a quarter beside... there is no
	// room for both halves and a quarter, so it admits the two halves.
	objs := load(t, node1, gpuPool("node-1", nil), claim("small", 1, 1), claim("h1", 2, 1), claim("h2", 2, 1), claim("q2", 1, 1))
	got, res := solve(t, objs, Options{}, "")
	if res.Stats.Admitted != 3 {
		t.Fatalf("admitted %d, want 3 (half + two quarters)", res.Stats.Admitted)
	}
	_ = got
}

func TestCountersIncludeExistingAllocations(t *testing.T) {
	existing := inUse("node-1/quarter-1")
	objs := load(t, node1, gpuPool("node-1", nil), existing, claim("h", 2, 2))
	got, _ := solve(t, objs, Options{}, "")
	if got["default/h"] != nil {
		t.Fatalf("two halves allocated although quarter-1 is in use: %v", devicesOf(got["default/h"]))
	}
	objs = load(t, node1, gpuPool("node-1", nil), existing, claim("h", 2, 1))
	got, _ = solve(t, objs, Options{}, "")
	if d := devicesOf(got["default/h"]); len(d) != 1 || d[0] != "r=half-1" {
		t.Fatalf("got %v, want the half not overlapping quarter-1", d)
	}
}

func TestExactCountAndAllOrNothing(t *testing.T) {
	objs := load(t, node1, gpuPool("node-1", nil), claim("three-halves", 2, 3), claim("two", 1, 2))
	got, _ := solve(t, objs, Options{}, "")
	if got["default/three-halves"] != nil {
		t.Fatal("a claim for 3 halves of a 2-half GPU was allocated")
	}
	if n := len(devicesOf(got["default/two"])); n != 2 {
		t.Fatalf("count 2 gave %d devices", n)
	}
}

func TestAllocationModeAll(t *testing.T) {
	all := `
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: all-quarters, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly:
        deviceClassName: gpu
        allocationMode: All
        selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].size == 1'}}]
`
	objs := load(t, node1, gpuPool("node-1", nil), all)
	got, _ := solve(t, objs, Options{}, "")
	if n := len(devicesOf(got["default/all-quarters"])); n != 4 {
		t.Fatalf("All gave %d devices, want 4", n)
	}
	// One quarter taken by an existing claim: All cannot be satisfied.
	existing := inUse("node-1/quarter-2")
	objs = load(t, node1, gpuPool("node-1", nil), all, existing)
	got, _ = solve(t, objs, Options{}, "")
	if got["default/all-quarters"] != nil {
		t.Fatalf("All allocated although a matching device is in use: %v", devicesOf(got["default/all-quarters"]))
	}
}

func TestFirstAvailablePrefersEarlier(t *testing.T) {
	fa := `
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: fa, namespace: default}
spec:
  devices:
    requests:
    - name: r
      firstAvailable:
      - {name: whole, deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].size == 4'}}]}
      - {name: half, deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].size == 2'}}]}
`
	objs := load(t, node1, gpuPool("node-1", nil), fa)
	got, _ := solve(t, objs, Options{}, "")
	if d := devicesOf(got["default/fa"]); len(d) != 1 || d[0] != "r/whole=whole" {
		t.Fatalf("got %v, want r/whole=whole", d)
	}
	// With a quarter claim present, the whole GPU no longer fits both; the
	// optimum admits both using the second subrequest.
	objs = load(t, node1, gpuPool("node-1", nil), fa, claim("q", 1, 1))
	got, _ = solve(t, objs, Options{}, "")
	if d := devicesOf(got["default/fa"]); len(d) != 1 || !strings.HasPrefix(d[0], "r/half=") {
		t.Fatalf("got %v, want r/half", d)
	}
}

func TestMatchAndDistinctAttribute(t *testing.T) {
	match := `
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: same, namespace: default}
spec:
  devices:
    requests:
    - {name: a, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].size == 1'}}]}}
    - {name: b, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].size == 2'}}]}}
    constraints: [{matchAttribute: gpu.example.com/gpu}]
`
	// Node 1 has only a half left, node 2 only quarters: no single GPU
	// offers both, so the claim must fail.
	busy := inUse("node-1/quarter-0", "node-1/quarter-1", "node-2/half-0", "node-2/half-1")
	objs := load(t, node1, gpuPool("node-1", nil), gpuPool("node-2", nil), match, busy)
	got, _ := solve(t, objs, Options{}, "")
	if got["default/same"] != nil {
		t.Fatalf("matchAttribute violated: %v", devicesOf(got["default/same"]))
	}
	distinct := strings.Replace(strings.Replace(match, "matchAttribute", "distinctAttribute", 1), "name: same", "name: diff", 1)
	objs = load(t, node1, gpuPool("node-1", nil), gpuPool("node-2", nil), distinct, busy)
	got, _ = solve(t, objs, Options{}, "")
	// Distinct GPUs are on distinct nodes here, and a claim needs one
	// node: it cannot be allocated either.
	if got["default/diff"] != nil {
		t.Fatalf("claim spans two nodes: %v", devicesOf(got["default/diff"]))
	}
	objs = load(t, node1, gpuPool("node-1", nil), match)
	got, _ = solve(t, objs, Options{}, "")
	if len(devicesOf(got["default/same"])) != 2 {
		t.Fatal("matchAttribute claim not allocated on a free GPU")
	}
}

func TestTaintsNeedTolerations(t *testing.T) {
	taint := map[string]string{"whole": "    taints: [{key: broken, value: \"yes\", effect: NoSchedule}]\n"}
	objs := load(t, node1, gpuPool("node-1", taint), claim("w", 4, 1))
	got, _ := solve(t, objs, Options{}, "")
	if got["default/w"] != nil {
		t.Fatal("tainted device allocated without toleration")
	}
	tolerating := strings.Replace(claim("w", 4, 1), "count: 1", "count: 1\n        tolerations: [{key: broken, operator: Exists}]", 1)
	objs = load(t, node1, gpuPool("node-1", taint), tolerating)
	got, _ = solve(t, objs, Options{}, "")
	if got["default/w"] == nil {
		t.Fatal("tolerated taint still blocks the device")
	}
}

func TestAdminAccessMayUseDevicesInUse(t *testing.T) {
	nic := `
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: nics}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: nics, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: nic, attributes: {size: {int: 9}}}
` + inUse("nics/nic")
	admin := strings.Replace(claim("admin", 9, 1), "count: 1", "count: 1\n        adminAccess: true", 1)
	objs := load(t, node1, nic, admin, claim("normal", 9, 1))
	got, _ := solve(t, objs, Options{}, "")
	if got["default/admin"] == nil || got["default/normal"] != nil {
		t.Fatalf("admin=%v normal=%v", devicesOf(got["default/admin"]), devicesOf(got["default/normal"]))
	}
	if r := got["default/admin"].Devices.Results[0]; r.AdminAccess == nil || !*r.AdminAccess {
		t.Fatal("result lacks adminAccess: true")
	}
}

func TestCompatibilityGroups(t *testing.T) {
	groups := func(g string) string {
		return "      compatibilityGroups: [" + g + "]\n"
	}
	_ = groups
	// whole in group full, halves in mig, quarter-0 without groups.
	pool := gpuPool("node-1", nil)
	withGroups := addGroups(pool, map[string]string{"half-0": "[mig]", "half-1": "[mig]", "quarter-1": "[mig, ts]", "quarter-2": "[ts]"})
	objs := load(t, node1, withGroups, claim("h", 2, 1), claim("q", 1, 3))
	for _, compat := range []string{model.CompatKEP5963, model.CompatWildcard} {
		p := build(t, objs, compat)
		res := run(t, p, Options{})
		checkAllocations(t, p, objs, res, compat)
		// Brute force agrees on the optimum under both semantics.
		if want := newBruteForce(p).best(); res.Stats.Objective != want {
			t.Fatalf("%s: %d, brute force %d", compat, res.Stats.Objective, want)
		}
	}
	// KEP-5963: quarter-0 (no groups) never goes with a grouped device.
	objs = load(t, node1, withGroups, claim("h", 2, 1), `
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: q0, namespace: default}
spec:
  devices:
    requests: [{name: r, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].size == 1 && device.attributes["gpu.example.com"].gpu == "node-1-gpu-0"'}}]}}]
`)
	got, _ := solve(t, objs, Options{}, model.CompatKEP5963)
	if got["default/h"] != nil && got["default/q0"] != nil {
		for _, d := range devicesOf(got["default/q0"]) {
			if d == "r=quarter-0" || d == "r=quarter-3" {
				t.Fatalf("group-less %s allocated beside a grouped half", d)
			}
		}
	}
}

// addGroups adds compatibilityGroups to the named devices' consumption.
func addGroups(pool string, groups map[string]string) string {
	lines := strings.Split(pool, "\n")
	var out []string
	current := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "  - name: ") {
			current = strings.TrimPrefix(l, "  - name: ")
		}
		out = append(out, l)
		if strings.HasPrefix(l, "    - counterSet: ") {
			if g, ok := groups[current]; ok {
				out = append(out, "      compatibilityGroups: "+g)
			}
		}
	}
	return strings.Join(out, "\n")
}
