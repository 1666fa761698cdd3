package explain

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

const header = `apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: counters}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0
    counters: {memory: {value: 40Gi}}
  - name: gpu-1
    counters: {memory: {value: 40Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: devices}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 2}
  devices:
  - name: whole-0
    attributes: {profile: {string: full}}
    consumesCounters: [{counterSet: gpu-0, counters: {memory: {value: 40Gi}}}]
  - name: half-0-0
    attributes: {profile: {string: half}}
    consumesCounters: [{counterSet: gpu-0, counters: {memory: {value: 20Gi}}}]
  - name: half-0-1
    attributes: {profile: {string: half}}
    consumesCounters: [{counterSet: gpu-0, counters: {memory: {value: 20Gi}}}]
  - name: half-1-0
    attributes: {profile: {string: half}}
    consumesCounters: [{counterSet: gpu-1, counters: {memory: {value: 20Gi}}}]
  - name: mig-1
    attributes: {profile: {string: mig}}
    consumesCounters: [{counterSet: gpu-1, counters: {memory: {value: 10Gi}}, compatibilityGroups: [mig]}]
  - name: mps-1
    attributes: {profile: {string: mps}}
    consumesCounters: [{counterSet: gpu-1, counters: {memory: {value: 10Gi}}, compatibilityGroups: [mps]}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: nics-1}
spec:
  driver: nic.example.com
  nodeName: n1
  pool: {name: nics-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: nic-a
    attributes: {numa: {int: 0}}
  - name: nic-b
    attributes: {numa: {int: 1}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: nics-2}
spec:
  driver: nic.example.com
  nodeName: n2
  pool: {name: nics-2, generation: 1, resourceSliceCount: 1}
  devices:
  - name: nic-c
    attributes: {numa: {int: 0}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nic}
spec:
  selectors:
  - cel: {expression: "device.driver == 'nic.example.com'"}
`

// claim is a pending claim ns/NAME with one request "r"; exactly holds the
// request's exactly block (indented 8 spaces), constraints the claim's.
func claim(name, exactly, constraints string) string {
	return `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ` + name + `, namespace: ns}
spec:
  devices:
    requests:
    - name: r
      exactly:
` + exactly + constraints
}

// held is an existing claim ns/NAME holding one device.
func held(name, driver, pool, device string) string {
	return `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ` + name + `, namespace: ns}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: ` + map[string]string{"gpu.example.com": "gpu", "nic.example.com": "nic"}[driver] + `}
status:
  allocation:
    devices:
      results:
      - {request: r, driver: ` + driver + `, pool: ` + pool + `, device: ` + device + `}
`
}

func profile(p string) string {
	return "        deviceClassName: gpu\n        selectors:\n        - cel: {expression: \"device.attributes['gpu.example.com'].profile == '" + p + "'\"}\n"
}

// explainFree explains ns/x the way the CLI does: every claim pending in the
// problem, existing allocations passed as allocations.
func explainFree(t *testing.T, docs string, whatIf bool) *Explanation {
	t.Helper()
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(header+docs))
	if err != nil {
		t.Fatal(err)
	}
	var allocs []Allocation
	for _, c := range objs.Claims {
		if c.Status.Allocation == nil {
			continue
		}
		a := Allocation{Claim: c.Namespace + "/" + c.Name, Existing: true}
		for _, r := range c.Status.Allocation.Devices.Results {
			a.Devices = append(a.Devices, input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device})
			a.Requests = append(a.Requests, r.Request)
		}
		allocs = append(allocs, a)
		c.Status.Allocation = nil
	}
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var target *model.Claim
	for _, c := range p.Claims {
		if c.Key == "ns/x" {
			target = c
		}
	}
	x, err := Explain(context.Background(), p, target, allocs, Options{WhatIf: whatIf})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// want checks that the explanation is exactly one reason per kind given,
// each message containing the substrings.
func want(t *testing.T, x *Explanation, kinds []string, subs ...string) {
	t.Helper()
	var got []string
	var text strings.Builder
	for _, r := range x.Reasons {
		got = append(got, r.Kind)
		text.WriteString(r.Message + "\n")
	}
	if strings.Join(got, ",") != strings.Join(kinds, ",") {
		t.Fatalf("reason kinds %v, want %v:\n%s", got, kinds, text.String())
	}
	for _, s := range subs {
		if !strings.Contains(text.String(), s) {
			t.Errorf("reasons lack %q:\n%s", s, text.String())
		}
	}
	if !x.Minimal {
		t.Errorf("explanation not minimal")
	}
}

func TestCounterUsedByClaims(t *testing.T) {
	// Two halves of gpu-0 are taken; either one alone blocks the whole GPU,
	// so the minimal core names one of them, not both.
	x := explainFree(t, claim("x", profile("full"), "")+held("a", "gpu.example.com", "n1", "half-0-0")+held("b", "gpu.example.com", "n1", "half-0-1"), false)
	want(t, x, []string{KindCounter}, "counter memory of counter set gpu-0 (node n1) is used by ns/")
	if r := x.Reasons[0]; len(r.Claims) != 1 || r.CounterSet != "gpu-0" || r.Counters[0] != "memory" {
		t.Errorf("want exactly one blocking claim on gpu-0/memory, got %+v", r)
	}
}

func TestWhatIfMovesAllocation(t *testing.T) {
	x := explainFree(t, claim("x", profile("full"), "")+held("a", "gpu.example.com", "n1", "half-0-0"), true)
	w := x.WhatIf
	if w == nil || !w.Possible || !w.Optimal || len(w.Release) != 1 {
		t.Fatalf("want one allocation to release, got %+v", w)
	}
	r := w.Release[0]
	if r.Claim != "ns/a" || !r.Existing || len(r.MovedTo) != 1 || strings.Contains(r.MovedTo[0], "-0-") {
		t.Errorf("want ns/a moved off gpu-0, got %+v", r)
	}
	if len(w.Devices) != 1 || w.Devices[0] != "gpu.example.com/n1/whole-0" {
		t.Errorf("claim gets %v, want whole-0", w.Devices)
	}
}

func TestWhatIfEvicts(t *testing.T) {
	// x needs 2 GPUs' worth: both halves of gpu-1 are unavailable to it
	// (mig/mps groups aside), so the holder of whole-0 must go and cannot
	// move anywhere (it asks for the full profile).
	x := explainFree(t, claim("x", profile("full"), "")+claim("a", profile("full"), "")[0:0]+
		`---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: a, namespace: ns}
spec:
  devices:
    requests:
    - name: r
      exactly:
`+profile("full")+`status:
  allocation:
    devices:
      results:
      - {request: r, driver: gpu.example.com, pool: n1, device: whole-0}
`, true)
	w := x.WhatIf
	if w == nil || !w.Possible || len(w.Release) != 1 || len(w.Release[0].MovedTo) != 0 {
		t.Fatalf("want ns/a evicted, got %+v", w)
	}
}

func TestDeviceInUse(t *testing.T) {
	x := explainFree(t, claim("x", "        deviceClassName: nic\n        selectors:\n        - cel: {expression: \"device.attributes['nic.example.com'].numa == 1\"}\n", "")+
		held("a", "nic.example.com", "nics-1", "nic-b"), false)
	want(t, x, []string{KindDevice}, "device nic.example.com/nics-1/nic-b is allocated to ns/a")
}

func TestCompatConflict(t *testing.T) {
	x := explainFree(t, claim("x", profile("mig"), "")+held("a", "gpu.example.com", "n1", "mps-1"), false)
	want(t, x, []string{KindCompat}, "compatibility group conflict on counter set gpu-1 (node n1) with device mps-1 allocated to ns/a (groups [mps])", "have groups [mig]")
}

func TestNodeImpossible(t *testing.T) {
	// Three NICs exist, but at most two on one node.
	x := explainFree(t, claim("x", "        deviceClassName: nic\n        count: 3\n", ""), false)
	want(t, x, []string{KindNode}, "the claim's 3 devices must all be reachable from one node; at most 2 candidates are on one node (n1)")
}

func TestMatchAttribute(t *testing.T) {
	// nic-a and nic-c share numa 0 but not a node; nic-a and nic-b share
	// n1 but not numa: both rules together are the reason.
	x := explainFree(t, claim("x", "        deviceClassName: nic\n        count: 2\n", "    constraints:\n    - matchAttribute: nic.example.com/numa\n"), false)
	want(t, x, []string{KindNode, KindConstraint}, "matchAttribute nic.example.com/numa (all requests): the claim's 2 devices must share one value of it", "at most 2 candidates are on one node (n1)")
}

func TestSelectorMismatch(t *testing.T) {
	x := explainFree(t, claim("x", profile("3g.20gb"), ""), false)
	want(t, x, []string{KindNoMatch}, "no device of class gpu matches the request's selectors (0 of 6 devices of the class)",
		"closest fail on `device.attributes['gpu.example.com'].profile == '3g.20gb'` (6 fail only on it)")
}

func TestCountTooLarge(t *testing.T) {
	x := explainFree(t, claim("x", profile("half")+"        count: 4\n", ""), false)
	want(t, x, []string{KindCount}, "request r asks for 4 devices, but only 3 can serve it")
}

func TestClaimError(t *testing.T) {
	x := explainFree(t, claim("x", "        deviceClassName: tpu\n", ""), false)
	want(t, x, []string{KindClaim}, `device class "tpu" not found`)
}

func TestFits(t *testing.T) {
	x := explainFree(t, claim("x", profile("half"), ""), false)
	want(t, x, []string{KindFits}, "fits with the current allocations")
}

func TestCompatibleOnlyWith(t *testing.T) {
	docs := strings.Replace(header, "  - name: nic-b\n", "  - name: nic-b\n    compatibleOnlyWith: {expression: \"device.attributes['nic.example.com'].numa == 1\"}\n", 1)
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(docs+claim("x", "        deviceClassName: nic\n        selectors:\n        - cel: {expression: \"device.attributes['nic.example.com'].numa == 1\"}\n", "")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	allocs := []Allocation{{Claim: "ns/a", Existing: true, Devices: []input.DeviceID{{Driver: "nic.example.com", Pool: "nics-1", Device: "nic-a"}}}}
	x, err := Explain(context.Background(), p, p.Claims[0], allocs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want(t, x, []string{KindCompatibleOnlyWith}, "nic.example.com/nics-1/nic-a and nic.example.com/nics-1/nic-b cannot be allocated together (compatibleOnlyWith); one of them is allocated to ns/a")
}

// TestShortBaked: the engine's path, existing allocations inside the
// problem; the reason still names the claim holding the counter.
func TestShortBaked(t *testing.T) {
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(header+claim("x", profile("full"), "")+held("a", "gpu.example.com", "n1", "half-0-0")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reason, ok := Short(context.Background(), p, p.Claims[0], time.Now().Add(5*time.Second))
	if !ok || !strings.Contains(reason, "whole-0") || !strings.Contains(reason, "ns/a") {
		t.Fatalf("Short = %q, %v; want the counter/in-use reason naming ns/a", reason, ok)
	}
	objs, _, _ = input.Load([]string{"-"}, strings.NewReader(header+claim("x", profile("half"), "")))
	p, _ = model.Build(context.Background(), objs, model.Options{})
	if reason, ok := Short(context.Background(), p, p.Claims[0], time.Now().Add(5*time.Second)); ok {
		t.Fatalf("Short on a fitting claim = %q, want ok false", reason)
	}
}

// TestMinimize: with an oracle whose failed assumptions never shrink, the
// deletion loop alone must reach a minimal core.
func TestMinimize(t *testing.T) {
	has := func(set []z.Lit, l z.Lit) bool {
		for _, x := range set {
			if x == l {
				return true
			}
		}
		return false
	}
	// Unsatisfiable iff the set holds {1, 2} or {3}.
	solve := func(set []z.Lit) solver.Result {
		if (has(set, 1) && has(set, 2)) || has(set, 3) {
			return solver.Unsat
		}
		return solver.Sat
	}
	same := func(set []z.Lit) []z.Lit { return set }
	got, minimal := minimize([]z.Lit{1, 2, 3, 4}, solve, same)
	if !minimal || len(got) != 1 || got[0] != 3 {
		t.Fatalf("minimize = %v, %v; want [3], true", got, minimal)
	}
	got, _ = minimize([]z.Lit{4, 2, 1}, solve, same)
	if len(got) != 2 || got[0] != 2 || got[1] != 1 {
		t.Fatalf("minimize = %v; want [2 1]", got)
	}
	unknown := func([]z.Lit) solver.Result { return solver.Unknown }
	if _, minimal := minimize([]z.Lit{1, 2}, unknown, same); minimal {
		t.Fatal("minimal after the budget ran out")
	}
}

// Reasons explains within the caller's budget: nothing once the deadline
// has passed or the context has ended, the reason otherwise.
func TestReasonsHonourBudget(t *testing.T) {
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(header+claim("x", "        deviceClassName: nic\n        selectors:\n        - cel: {expression: \"device.attributes['nic.example.com'].numa == 7\"}\n", "")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for _, c := range p.Claims {
		if c.Key == "ns/x" {
			idx = append(idx, c.Index)
		}
	}
	reasons := func(ctx context.Context, deadline time.Time) map[int]error {
		got := map[int]error{}
		FillReasons(ctx, p, idx, got, deadline)
		return got
	}
	if got := reasons(context.Background(), time.Now().Add(-time.Second)); len(got) != 0 {
		t.Errorf("past deadline: %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := reasons(ctx, time.Now().Add(time.Minute)); len(got) != 0 {
		t.Errorf("cancelled: %v", got)
	}
	got := reasons(context.Background(), time.Now().Add(time.Minute))
	if len(got) != 1 || got[idx[0]] == nil || got[idx[0]].Error() == "" || model.ReasonOf(got[idx[0]]) != model.ReasonNoPlacement {
		t.Errorf("with time: %v, want one reason of kind %s", got, model.ReasonNoPlacement)
	}
}

// A shared device's capacity used by another claim's share: the share's
// consumption is held in place (from the claim's own request) and named.
func TestSharedCapacityUsed(t *testing.T) {
	shared := `---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: shared}
spec:
  driver: nic.example.com
  nodeName: n1
  pool: {name: shared, generation: 1, resourceSliceCount: 1}
  devices:
  - name: vnic
    allowMultipleAllocations: true
    capacity: {bandwidth: {value: 10G}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: a, namespace: ns}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: nic, capacity: {requests: {bandwidth: 6G}}}
status:
  allocation:
    devices:
      results:
      - {request: r, driver: nic.example.com, pool: shared, device: vnic, shareID: 2a6f0e55-3c1b-4d7e-9f10-6b8d2c4e1a01, consumedCapacity: {bandwidth: 6G}}
`
	x := explainFree(t, shared+claim("x", "        deviceClassName: nic\n        selectors: [{cel: {expression: \"device.allowMultipleAllocations\"}}]\n        capacity: {requests: {bandwidth: 5G}}\n", ""), false)
	want(t, x, []string{KindCapacity}, "capacity bandwidth of shared device nic.example.com/shared/vnic is used by ns/a")
}

// The selectors the static reasons evaluate run under the caller's
// context and the explanation's deadline: cancelled or out of time, the
// reason says so instead of evaluating them (drasat explain honours
// --timeout and Ctrl-C), and an unfinished reason is not memoised for
// the next claim of the same shape.
func TestStaticReasonHonoursContext(t *testing.T) {
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(header+claim("x", profile("3g.20gb"), "")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var target *model.Claim
	for _, c := range p.Claims {
		if c.Key == "ns/x" {
			target = c
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		deadline time.Time
		want     string
	}{
		{"cancelled", cancelled, time.Now().Add(time.Minute), "interrupted while its selectors were evaluated"},
		{"past deadline", context.Background(), time.Now().Add(-time.Second), "the time budget ran out while its selectors were evaluated"},
	} {
		x, err := Explain(tc.ctx, p, target, nil, Options{Deadline: tc.deadline})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(x.Reasons) != 1 || x.Reasons[0].Kind != KindUnknown || !strings.Contains(x.Reasons[0].Message, tc.want) {
			t.Errorf("%s: reasons %+v, want one %s reason saying %q", tc.name, x.Reasons, KindUnknown, tc.want)
		}
		if why, _ := Short(tc.ctx, p, target, tc.deadline); !strings.Contains(why, tc.want) {
			t.Errorf("%s: short reason %q, want %q", tc.name, why, tc.want)
		}
	}
	// With time, the full reason; the unfinished ones were not memoised.
	if why, ok := Short(context.Background(), p, target, time.Now().Add(time.Minute)); !ok || !strings.Contains(why, "no device of class gpu matches") {
		t.Errorf("with time: %q, %v; want the selector reason", why, ok)
	}
}
