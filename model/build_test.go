package model

import (
	"context"
	"fmt"
	"github.com/drasat/drasat/input"
	"strings"
	"testing"
)

// buildFixture: one node with two exclusive GPUs (gpu-0, gpu-1) and three
// shared ones (shared-0..2, allowMultipleAllocations), and a class per kind.
const buildFixture = `
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {kind: {string: exclusive}}
  - name: gpu-1
    attributes: {kind: {string: exclusive}}
  - name: shared-0
    allowMultipleAllocations: true
    attributes: {kind: {string: shared}}
  - name: shared-1
    allowMultipleAllocations: true
    attributes: {kind: {string: shared}}
  - name: shared-2
    allowMultipleAllocations: true
    attributes: {kind: {string: shared}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: shared.example.com}
spec:
  selectors:
  - cel: {expression: "device.attributes['gpu.example.com'].kind == 'shared'"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: broken.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
  - cel: {expression: "device.driver =="}
`

// claimYAML is a claim with one request; extra is appended to the request.
func claimYAML(name, class, extra string) string {
	return `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ` + name + `, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: ` + class + `
` + extra
}

// claimName is the metadata.name of a claimYAML document.
func claimName(doc string) string {
	rest := strings.SplitN(doc, "metadata: {name: ", 2)[1]
	return rest[:strings.Index(rest, ",")]
}

func buildYAML(t *testing.T, docs string) *Problem {
	t.Helper()
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(docs))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	p, err := Build(context.Background(), objs, Options{})
	if err != nil {
		t.Fatalf("Build: %v (want per-claim errors only)", err)
	}
	return p
}

func claimErr(t *testing.T, p *Problem, key string) error {
	t.Helper()
	for _, c := range p.Claims {
		if c.Key == key {
			return c.Err
		}
	}
	t.Fatalf("claim %s not in problem", key)
	return nil
}

func TestBuildClaimErrors(t *testing.T) {
	sharedSel := "        selectors:\n        - cel: {expression: \"device.attributes['gpu.example.com'].kind == 'shared'\"}\n"
	tests := []struct {
		name  string
		claim string
		want  []string // substrings of the claim's Err; none: no error
	}{
		{name: "exclusive devices", claim: claimYAML("ok", "gpu.example.com", "")},
		{name: "shared devices besides exclusive ones", claim: claimYAML("mixed", "gpu.example.com", "        count: 2\n")},
		{name: "only shared devices (class)", claim: claimYAML("shared", "shared.example.com", "")},
		{name: "only shared devices (selector)", claim: claimYAML("shared-sel", "gpu.example.com", sharedSel)},
		{name: "allocationMode All, only shared devices", claim: claimYAML("shared-one", "gpu.example.com",
			"        selectors:\n        - cel: {expression: \"device.attributes['gpu.example.com'].kind == 'shared' && device.driver == 'gpu.example.com'\"}\n        allocationMode: All\n")},
		{name: "no device at all", claim: claimYAML("none", "gpu.example.com",
			"        selectors:\n        - cel: {expression: \"device.attributes['gpu.example.com'].kind == 'other'\"}\n")},
		{name: "capacity request no device has", claim: claimYAML("capacity", "shared.example.com",
			"        capacity: {requests: {memory: 1Gi}}\n")},
		{name: "missing class", claim: claimYAML("noclass", "nope.example.com", ""),
			want: []string{`request gpu: device class "nope.example.com" not found`}},
		{name: "claim selector does not compile", claim: claimYAML("badsel", "gpu.example.com",
			"        selectors:\n        - cel: {expression: \"device.driver == 'a'\"}\n        - cel: {expression: \"device.nosuchfield(\"}\n"),
			want: []string{"request gpu: field selectors[1].cel.expression: CEL expression \"device.nosuchfield(\""}},
		{name: "class selector does not compile", claim: claimYAML("badclass", "broken.example.com", ""),
			want: []string{"request gpu: device class broken.example.com: field spec.selectors[1].cel.expression: CEL expression \"device.driver ==\""}},
		{name: "firstAvailable with a shared-only subrequest", claim: `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: fa, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      firstAvailable:
      - {name: shared, deviceClassName: shared.example.com}
      - {name: exclusive, deviceClassName: gpu.example.com}
`},
	}
	// All claims in one run: one claim's error must not affect the others,
	// and the run itself must not fail.
	docs := buildFixture
	for _, tt := range tests {
		docs += tt.claim
	}
	p := buildYAML(t, docs)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "default/" + claimName(tt.claim)
			err := claimErr(t, p, key)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("claim %s: unexpected error %v", key, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("claim %s: no error, want %q", key, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("claim %s: error %q does not contain %q", key, err, w)
				}
			}
		})
	}
}

// Shared devices are candidates like any other; the match cache is shared by
// claims with the same class and selectors, and so is the record of what
// they consume of shared devices (Alternative.Shared, uses per device).
func TestBuildSharedCandidates(t *testing.T) {
	docs := buildFixture + claimYAML("a", "shared.example.com", "") + claimYAML("b", "gpu.example.com", "") +
		claimYAML("c", "shared.example.com", "")
	p := buildYAML(t, docs)
	want := map[string]int{"default/a": 3, "default/b": 5, "default/c": 3}
	for _, c := range p.Claims {
		if c.Err != nil {
			t.Errorf("claim %s: unexpected error %v", c.Key, c.Err)
		}
		a := c.Requests[0].Alternatives[0]
		if got := len(a.Candidates); got != want[c.Key] || !a.Shared {
			t.Errorf("claim %s: %d candidates (shared %t), want %d shared ones among them", c.Key, got, a.Shared, want[c.Key])
		}
	}
}

// Shared devices that are also tainted are not skipped "only" because they
// are shared: the claim keeps the ordinary outcome (no candidates, no Err).
func TestBuildSharedTaintedNotBlamed(t *testing.T) {
	docs := strings.Replace(buildFixture, "  - name: shared-0\n", "  - name: shared-0\n    taints: [{key: broken, effect: NoSchedule}]\n", 1)
	docs = strings.Replace(docs, "  - name: shared-1\n", "  - name: shared-1\n    taints: [{key: broken, effect: NoSchedule}]\n", 1)
	docs = strings.Replace(docs, "  - name: shared-2\n", "  - name: shared-2\n    taints: [{key: broken, effect: NoExecute}]\n", 1)
	p := buildYAML(t, docs+claimYAML("a", "shared.example.com", ""))
	if err := claimErr(t, p, "default/a"); err != nil {
		t.Errorf("claim default/a: error %v, want none (tainted devices are not candidates anyway)", err)
	}
}

// A counter too large for exact int64 arithmetic leaves its pool out (with a
// reason and a validate finding); the run and the other pools go on. A value
// larger than all consumptions together is taken as their sum and stays.
func TestCounterTooLargeExcludesItsPool(t *testing.T) {
	pool := func(name, capacity, big string) string {
		return `
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: ` + name + `-counters}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: ` + name + `, generation: 1, resourceSliceCount: 2}
  sharedCounters: [{name: gpu, counters: {c: {value: "` + capacity + `"}}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: ` + name + `-devices}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: ` + name + `, generation: 1, resourceSliceCount: 2}
  devices:
  - {name: big, consumesCounters: [{counterSet: gpu, counters: {c: {value: "` + big + `"}}}]}
  - {name: one, consumesCounters: [{counterSet: gpu, counters: {c: {value: "1"}}}]}
`
	}
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(pool("huge", "100E", "90E")+pool("capped", "10E", "1k")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(context.Background(), objs, Options{})
	if err != nil {
		t.Fatalf("a too large quantity aborted the run: %v", err)
	}
	if len(p.Issues) != 1 || p.Issues[0].Pool != "huge" || !strings.Contains(p.Issues[0].Reason, "64-bit") {
		t.Fatalf("want pool huge left out, got issues %v", p.Issues)
	}
	var names []string
	for _, d := range p.Devices {
		names = append(names, d.ID.String())
	}
	if strings.Join(names, " ") != "gpu.example.com/capped/big gpu.example.com/capped/one" {
		t.Fatalf("devices %v: want capped's only", names)
	}
	// allocationMode All is blocked only where a device of the left-out
	// pool matches (the scheduler would use that pool).
	all := func(name, driver string) string {
		return `
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: ` + name + `}
spec: {selectors: [{cel: {expression: 'device.driver == "` + driver + `"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: all-` + name + `, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: ` + name + `, allocationMode: All}}]}}
`
	}
	withAll, _, err := input.Load([]string{"-"}, strings.NewReader(pool("huge", "100E", "90E")+all("gpu", "gpu.example.com")+all("net", "net.example.com")))
	if err != nil {
		t.Fatal(err)
	}
	pa, err := Build(context.Background(), withAll, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pa.Claims {
		blocked := c.Err != nil && strings.Contains(c.Err.Error(), "needs every pool usable")
		if want := c.Obj.Name == "all-gpu"; blocked != want {
			t.Errorf("claim %s: blocked by the left-out pool: %v, want %v (%v)", c.Obj.Name, blocked, want, c.Err)
		}
	}
	fs, err := Validate(context.Background(), objs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(findingsText(fs), "64-bit") {
		t.Fatalf("no validate finding for the too large quantity:\n%s", findingsText(fs))
	}
}

// allocationMode All as a claim's first request: the allocator adds the
// matching devices in publication order, a broken constraint is an error
// (the claim fails), and a device that cannot be taken stops the walk
// first without one (only the node does not fit).
func TestAllModeConstraintError(t *testing.T) {
	slice := func(firstTaken bool) string {
		taint := ""
		if firstTaken {
			taint = ", taints: [{key: k, effect: NoSchedule}]"
		}
		return nodeOneGPUClass + `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: a, attributes: {numa: {int: 0}}` + taint + `}
  - {name: b, attributes: {numa: {int: 1}}}
  - {name: c, attributes: {numa: {int: 1}}}
`
	}
	claim := claimYAML("all", "gpu", "        allocationMode: All\n") + "    constraints: [{distinctAttribute: gpu.example.com/numa}]\n"
	p := buildYAML(t, slice(false)+claim)
	if err := p.Claims[0].Err; err == nil || !strings.Contains(err.Error(), "cannot add device gpu.example.com/p/c because a claim constraint would not be satisfied") {
		t.Fatalf("claim error %v, want the constraint error on device c", err)
	}
	if err := buildYAML(t, slice(true)+claim).Claims[0].Err; err != nil {
		t.Fatalf("a tainted first device stops the walk before the constraint: got error %v", err)
	}
}

// TestResultLimitPerNode: on every node it tries, before searching, the
// allocator adds up each request's fewest results there, allocationMode
// All counting every matching device the node sees, and fails past 32: an
// error that aborts the pod's scheduling attempt even where another node
// would fit. node-a has `wide` devices of kind y and one of kind x, node-b
// one of each; the claim asks for one x, then all y.
func TestResultLimitPerNode(t *testing.T) {
	slice := func(node string, ys int) string {
		out := "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: " + node + "}\nspec:\n  driver: gpu.example.com\n  nodeName: " + node +
			"\n  pool: {name: " + node + ", generation: 1, resourceSliceCount: 1}\n  devices:\n  - {name: x, attributes: {k: {string: x}}}\n"
		for i := 0; i < ys; i++ {
			out += fmt.Sprintf("  - {name: y-%d, attributes: {k: {string: \"y\"}}}\n", i)
		}
		return out
	}
	claim := `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default}
spec:
  devices:
    requests:
    - name: one
      exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].k == "x"'}}]}
    - name: all
      exactly: {deviceClassName: gpu, allocationMode: All, selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].k == "y"'}}]}
`
	for _, tc := range []struct {
		wide int
		want string // "" for no error
	}{
		{31, ""},
		{32, "request all: adding 32 devices exceeds the claim limit of 32 results, with 1 already accounted for on node node-a"},
	} {
		p := buildYAML(t, genNodes+slice("node-a", tc.wide)+slice("node-b", 1)+claim)
		got := ""
		if err := p.Claims[0].Err; err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%d devices on node-a: claim error %q, want %q", tc.wide, got, tc.want)
		}
	}
}
