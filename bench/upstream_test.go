package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

const upDriver = "gpu.example.com"

func upClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "` + upDriver + `"`}}}},
	}
}

func upSel(expr string) []resourceapi.DeviceSelector {
	return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
}

func upSizeSel(size int) []resourceapi.DeviceSelector {
	return upSel(fmt.Sprintf(`"size" in device.attributes["%[1]s"] && device.attributes["%[1]s"].size == %[2]d`, upDriver, size))
}

func upClaim(name string, reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}},
	}
}

func upExact(name string, count int64, sel []resourceapi.DeviceSelector) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: "gpu", Selectors: sel, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
}

// upGPUs publishes, per node, GPUs with four memory slices each as one pool
// of two slices: counter sets (one per GPU: memory-slice-0..3) and devices,
// in the order full (size 4), half-0, half-1 (size 2), q-0..q-3 (size 1).
// skip drops devices by name; groups, when set, gives compatibility groups
// per device size.
func upGPUs(node string, gpus int, skip map[string]bool, groups map[int][]string) []*resourceapi.ResourceSlice {
	pool := resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}
	counters := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-counters"},
		Spec: resourceapi.ResourceSliceSpec{Driver: upDriver, NodeName: ptr.To(node), Pool: pool}}
	devices := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-devices"},
		Spec: resourceapi.ResourceSliceSpec{Driver: upDriver, NodeName: ptr.To(node), Pool: pool}}
	for g := 0; g < gpus; g++ {
		set := fmt.Sprintf("gpu-%d", g)
		cs := resourceapi.CounterSet{Name: set, Counters: map[string]resourceapi.Counter{}}
		for s := 0; s < 4; s++ {
			cs.Counters[fmt.Sprintf("memory-slice-%d", s)] = resourceapi.Counter{Value: resource.MustParse("1")}
		}
		counters.Spec.SharedCounters = append(counters.Spec.SharedCounters, cs)
		for _, size := range []int{4, 2, 1} {
			for start := 0; start+size <= 4; start += size {
				name := fmt.Sprintf("gpu-%d-full", g)
				switch size {
				case 2:
					name = fmt.Sprintf("gpu-%d-half-%d", g, start/2)
				case 1:
					name = fmt.Sprintf("gpu-%d-q-%d", g, start)
				}
				if skip[name] {
					continue
				}
				cons := resourceapi.DeviceCounterConsumption{CounterSet: set, Counters: map[string]resourceapi.Counter{},
					CompatibilityGroups: groups[size]}
				for s := start; s < start+size; s++ {
					cons.Counters[fmt.Sprintf("memory-slice-%d", s)] = resourceapi.Counter{Value: resource.MustParse("1")}
				}
				devices.Spec.Devices = append(devices.Spec.Devices, resourceapi.Device{
					Name: name,
					Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
						"size": {IntValue: ptr.To(int64(size))},
						"gpu":  {StringValue: ptr.To(fmt.Sprintf("%s/%s", node, set))},
					},
					ConsumesCounters: []resourceapi.DeviceCounterConsumption{cons},
				})
			}
		}
	}
	return []*resourceapi.ResourceSlice{counters, devices}
}

func runUpstream(t *testing.T, objs *input.Objects, feats baseline.UpstreamFeatures) *baseline.UpstreamResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := baseline.Upstream(ctx, objs, feats)
	if err != nil {
		t.Fatalf("Upstream: %v", err)
	}
	validateAllocations(t, "upstream", objs, res.Allocated)
	return res
}

// placement maps admitted claim names to their devices.
func placement(claims []*resourceapi.ResourceClaim) map[string][]string {
	out := map[string][]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			out[c.Name] = append(out[c.Name], r.Device)
		}
	}
	return out
}

func runDrasat(t *testing.T, objs *input.Objects, compat string) []*resourceapi.ResourceClaim {
	t.Helper()
	return runDrasatAs(t, "drasat", objs, compat)
}

// runDrasatAs is runDrasat naming the run in its failures.
func runDrasatAs(t *testing.T, label string, objs *input.Objects, compat string) []*resourceapi.ResourceClaim {
	t.Helper()
	p, err := model.Build(context.Background(), objs, model.Options{Compat: compat})
	if err != nil {
		t.Fatalf("model.Build: %v", err)
	}
	res, err := alloc.Run(context.Background(), p, alloc.Options{Objective: alloc.MaxClaims, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("alloc.Run: %v", err)
	}
	all, err := alloc.Allocated(p, res)
	if err != nil {
		t.Fatalf("alloc.Allocated: %v", err)
	}
	var out []*resourceapi.ResourceClaim
	for _, c := range all {
		if c.Status.Allocation != nil {
			out = append(out, c)
		}
	}
	validateAllocations(t, label, objs, out)
	return out
}

// TestUpstreamFirstFitStrands: one node, one GPU of four memory slices
// (devices full, half-0, half-1, q-0..q-3 in that order), claims for one
// device of size 4, 1, 1 and 2.
//
// Arrival order [c4, c1a, c1b, c2]: c4 takes gpu-0-full, which consumes all
// four memory-slice counters; every other device consumes at least one, so
// c1a, c1b and c2 are all stranded. Upstream admits exactly {c4}; the
// optimum admits three (c1a q-0, c1b q-1, c2 half-1).
//
// Arrival order [c1a, c1b, c2, c4]: c1a takes the first size-1 device,
// q-0 (slice 0); c1b skips q-0 (in use) and takes q-1 (slice 1); c2 tries
// half-0 (slices 0-1, counters exhausted) and takes half-1 (slices 2-3); c4
// needs all four slices and fails. Upstream admits {c1a, c1b, c2}.
func TestUpstreamFirstFitStrands(t *testing.T) {
	c4 := upClaim("c4", upExact("r", 1, upSizeSel(4)))
	c1a := upClaim("c1a", upExact("r", 1, upSizeSel(1)))
	c1b := upClaim("c1b", upExact("r", 1, upSizeSel(1)))
	c2 := upClaim("c2", upExact("r", 1, upSizeSel(2)))
	for _, tc := range []struct {
		name   string
		claims []*resourceapi.ResourceClaim
		want   map[string][]string
	}{
		{"big-first", []*resourceapi.ResourceClaim{c4, c1a, c1b, c2}, map[string][]string{"c4": {"gpu-0-full"}}},
		{"small-first", []*resourceapi.ResourceClaim{c1a, c1b, c2, c4}, map[string][]string{
			"c1a": {"gpu-0-q-0"}, "c1b": {"gpu-0-q-1"}, "c2": {"gpu-0-half-1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := &input.Objects{Slices: upGPUs("node-0", 1, nil, nil), Classes: []*resourceapi.DeviceClass{upClass()}, Claims: tc.claims}
			res := runUpstream(t, objs, baseline.UpstreamFeatures{})
			if got := placement(res.Allocated); !equalPlacement(got, tc.want) {
				t.Errorf("upstream placement = %v, want %v", got, tc.want)
			}
			if res.Implementation != "incubating" {
				t.Errorf("implementation = %q, want incubating", res.Implementation)
			}
			if len(res.Rejected)+len(res.Allocated) != len(tc.claims) {
				t.Errorf("%d allocated + %d rejected != %d claims", len(res.Allocated), len(res.Rejected), len(tc.claims))
			}
			for _, c := range res.Allocated {
				ns := c.Status.Allocation.NodeSelector
				if ns == nil || len(ns.NodeSelectorTerms) != 1 || ns.NodeSelectorTerms[0].MatchFields[0].Values[0] != "node-0" {
					t.Errorf("claim %s: node selector %v, want node-0", c.Name, ns)
				}
			}
			// The optimum admits three claims in either order.
			if got := len(runDrasat(t, objs, "")); got != 3 {
				t.Errorf("drasat admits %d, want 3", got)
			}
		})
	}
}

func equalPlacement(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// upModelSel selects devices by their model attribute.
func upModelSel(model string) []resourceapi.DeviceSelector {
	return upSel(fmt.Sprintf(`"model" in device.attributes["%[1]s"] && device.attributes["%[1]s"].model == %[2]q`, upDriver, model))
}

// upIdentical publishes n identical devices without counters on node-0.
func upIdentical(n int) []*resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-0-devices"},
		Spec: resourceapi.ResourceSliceSpec{Driver: upDriver, NodeName: ptr.To("node-0"),
			Pool: resourceapi.ResourcePool{Name: "node-0", Generation: 1, ResourceSliceCount: 1}}}
	for i := 0; i < n; i++ {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("dev-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("x")}}})
	}
	return []*resourceapi.ResourceSlice{s}
}

// TestUpstreamPathological: a request for k of n identical devices plus a
// request nothing matches. The allocator backtracks through every k-subset
// of the n devices before giving up; at n=8, k=3 that is 56 subsets and the
// claim is reported unallocatable well within the 10s deadline. At n=32,
// k=8 (10.5M subsets) it hits its timeout, which is reported as such.
func TestUpstreamPathological(t *testing.T) {
	pathological := func(n, k int) *input.Objects {
		c := upClaim("patho",
			upExact("a", int64(k), upModelSel("x")),
			upExact("b", 1, upModelSel("y")))
		ok := upClaim("ok", upExact("r", 1, nil))
		return &input.Objects{Slices: upIdentical(n), Classes: []*resourceapi.DeviceClass{upClass()},
			Claims: []*resourceapi.ResourceClaim{c, ok}}
	}

	objs := pathological(8, 3)
	start := time.Now()
	res := runUpstream(t, objs, baseline.UpstreamFeatures{Timeout: 10 * time.Second})
	if len(res.Rejected) != 1 || res.Rejected[0].Key != "default/patho" || res.Rejected[0].TimedOut {
		t.Fatalf("rejected = %+v, want default/patho, not timed out", res.Rejected)
	}
	if got := placement(res.Allocated); !equalPlacement(got, map[string][]string{"ok": {"dev-0"}}) {
		t.Errorf("placement = %v, want ok on dev-0", got)
	}
	if time.Since(start) >= 10*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	t.Logf("n=8 k=3: %v, %d allocateOne calls", res.Wall, res.AllocateOneCalls)
	if got := len(runDrasat(t, objs, "")); got != 1 {
		t.Errorf("drasat admits %d, want 1", got)
	}

	if testing.Short() {
		return
	}
	res = runUpstream(t, pathological(32, 8), baseline.UpstreamFeatures{Timeout: 300 * time.Millisecond})
	if len(res.Rejected) != 1 || !res.Rejected[0].TimedOut || res.Timeouts != 1 {
		t.Fatalf("n=32 k=8: rejected = %+v, timeouts %d; want one timed-out claim", res.Rejected, res.Timeouts)
	}
	if !strings.Contains(res.Rejected[0].Reason, "timed out") {
		t.Errorf("reason %q does not say it timed out", res.Rejected[0].Reason)
	}
}

// TestUpstreamRespectsExisting: a claim allocated before the run holds
// gpu-0-q-0 (slice 0) and plain device dev-0. The size-4 claim cannot get
// the full GPU (slice 0's counter is taken), the size-1 claim gets q-1, and
// of two claims for a plain device only one fits (dev-1).
func TestUpstreamRespectsExisting(t *testing.T) {
	plain := upIdentical(2)[0]
	plain.Spec.NodeName = ptr.To("node-0")
	plain.Name, plain.Spec.Pool.Name = "plain", "plain"
	existing := upClaim("existing", upExact("a", 1, upSizeSel(1)), upExact("b", 1, nil))
	existing.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "a", Driver: upDriver, Pool: "node-0", Device: "gpu-0-q-0"},
		{Request: "b", Driver: upDriver, Pool: "plain", Device: "dev-0"},
	}}}
	modelX := upModelSel("x")
	objs := &input.Objects{
		Slices:  append(upGPUs("node-0", 1, nil, nil), plain),
		Classes: []*resourceapi.DeviceClass{upClass()},
		Claims: []*resourceapi.ResourceClaim{
			upClaim("c4", upExact("r", 1, upSizeSel(4))),
			existing,
			upClaim("c1", upExact("r", 1, upSizeSel(1))),
			upClaim("p1", upExact("r", 1, modelX)),
			upClaim("p2", upExact("r", 1, modelX)),
		},
	}
	res := runUpstream(t, objs, baseline.UpstreamFeatures{})
	want := map[string][]string{"c1": {"gpu-0-q-1"}, "p1": {"dev-1"}}
	if got := placement(res.Allocated); !equalPlacement(got, want) {
		t.Errorf("placement = %v, want %v", got, want)
	}
	var rejected []string
	for _, r := range res.Rejected {
		rejected = append(rejected, r.Key)
	}
	if !slices.Equal(rejected, []string{"default/c4", "default/p2"}) {
		t.Errorf("rejected = %v", res.Rejected)
	}
	if existing.Status.Allocation == nil || len(objs.Claims) != 5 {
		t.Error("input modified")
	}
}

// upRandom builds a small random instance: one or two nodes with one or two
// four-slice GPUs each (sometimes with compatibility groups, sometimes a
// missing quarter), perhaps an existing allocation, and two to eight claims
// of one to two devices with matchAttribute, distinctAttribute and
// firstAvailable.
func upRandom(seed uint64) (*input.Objects, bool) {
	rng := rand.New(rand.NewPCG(seed, 11))
	objs := &input.Objects{Classes: []*resourceapi.DeviceClass{upClass()}}
	var groups map[int][]string
	if rng.IntN(3) == 0 {
		groups = map[int][]string{4: {"full"}, 2: {"mig", "half"}, 1: {"mig"}}
	}
	nodes, gpus := 1+rng.IntN(2), 1+rng.IntN(2)
	var devices []resourceapi.DeviceRequestAllocationResult
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("node-%d", n)
		skip := map[string]bool{}
		if rng.IntN(2) == 0 {
			skip["gpu-0-q-3"] = true
		}
		ss := upGPUs(node, gpus, skip, groups)
		objs.Slices = append(objs.Slices, ss...)
		if rng.IntN(2) == 0 {
			objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		}
		for _, d := range ss[1].Spec.Devices {
			if len(devices) == 0 && rng.IntN(10) == 0 {
				devices = append(devices, resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: upDriver, Pool: node, Device: d.Name})
			}
		}
	}
	if len(objs.Nodes) > 0 && len(objs.Nodes) < nodes {
		objs.Nodes = nil // all or nothing
	}
	if len(devices) > 0 {
		c := upClaim("existing", upExact("r", 1, nil))
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: devices}}
		objs.Claims = append(objs.Claims, c)
	}
	gpuAttr := resourceapi.FullyQualifiedName(upDriver + "/gpu")
	sizes := []int{1, 1, 1, 2, 2, 4}
	for i, n := 0, 2+rng.IntN(7); i < n; i++ {
		name := fmt.Sprintf("claim-%d", i)
		var c *resourceapi.ResourceClaim
		switch rng.IntN(6) {
		case 0:
			c = upClaim(name, upExact("a", 1, upSizeSel(1)), upExact("b", 1, upSizeSel(sizes[rng.IntN(5)])))
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: &gpuAttr}}
		case 1:
			c = upClaim(name, upExact("r", 2, upSizeSel(sizes[rng.IntN(5)])))
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{DistinctAttribute: &gpuAttr}}
		case 2:
			c = upClaim(name, resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "big", DeviceClassName: "gpu", Selectors: upSizeSel(4), AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
				{Name: "small", DeviceClassName: "gpu", Selectors: upSizeSel(2), AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
			}})
		default:
			c = upClaim(name, upExact("r", 1, upSizeSel(sizes[rng.IntN(len(sizes))])))
		}
		objs.Claims = append(objs.Claims, c)
	}
	return objs, groups != nil
}

// TestUpstreamVersusDrasat: on random small instances drasat (max-claims)
// admits at least as many claims as upstream first fit, admits all of the
// claims upstream admitted when given only those, and both results are
// valid.
func TestUpstreamVersusDrasat(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	var upTotal, drTotal, better, grouped int
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		objs, usesGroups := upRandom(seed)
		feats := baseline.UpstreamFeaturesFor(objs)
		if feats.CompatibilityGroups != usesGroups {
			t.Fatalf("seed %d: UpstreamFeaturesFor = %+v, instance uses groups: %v", seed, feats, usesGroups)
		}
		res := runUpstream(t, objs, feats)
		want := "incubating"
		if usesGroups {
			want = "experimental"
			grouped++
		}
		if res.Implementation != want {
			t.Errorf("seed %d: implementation %q, want %q", seed, res.Implementation, want)
		}
		dr := runDrasat(t, objs, model.CompatKEP5963)
		up := len(res.Allocated)
		if len(dr) < up {
			t.Errorf("seed %d: drasat admits %d < upstream %d\nupstream: %v\ndrasat:   %v\nrejected by upstream: %+v",
				seed, len(dr), up, placement(res.Allocated), placement(dr), res.Rejected)
		}
		if len(dr) > up {
			better++
		}
		// drasat must find the claims upstream admitted jointly feasible.
		sub := *objs
		sub.Claims = nil
		admitted := map[string]bool{}
		for _, c := range res.Allocated {
			admitted[c.Name] = true
		}
		for _, c := range objs.Claims {
			if c.Status.Allocation != nil || admitted[c.Name] {
				sub.Claims = append(sub.Claims, c)
			}
		}
		if got := len(runDrasat(t, &sub, model.CompatKEP5963)); got != up {
			t.Errorf("seed %d: drasat admits %d of the %d claims upstream admitted: %v", seed, got, up, placement(res.Allocated))
		}
		upTotal += up
		drTotal += len(dr)
	}
	t.Logf("%d instances (%d with compatibility groups): upstream admits %d, drasat %d; drasat better on %d",
		seeds, grouped, upTotal, drTotal, better)
}

// validateAllocations checks allocated claims (pending ones plus those
// allocated in objs) with the independent checker, and with a small check
// of its own: every result names a published device, no device is
// allocated twice (admin access aside), no counter is overdrawn, and a
// claim's node-local devices are on one node.
func validateAllocations(t *testing.T, who string, objs *input.Objects, allocated []*resourceapi.ResourceClaim) {
	t.Helper()
	if err := check.Check(objs, allocated, check.Options{}); err != nil {
		t.Errorf("%s: check: %v", who, err)
	}
	type devKey struct{ driver, pool, name string }
	type setKey struct{ driver, pool, set string }
	devs := map[devKey]*resourceapi.Device{}
	devNode := map[devKey]string{}
	gens := map[devKey]int{} // slices (generations) that publish the device
	capacity := map[setKey]map[string]resource.Quantity{}
	for _, s := range objs.Slices {
		for _, cs := range s.Spec.SharedCounters {
			m := map[string]resource.Quantity{}
			for n, c := range cs.Counters {
				m[n] = c.Value.DeepCopy()
			}
			capacity[setKey{s.Spec.Driver, s.Spec.Pool.Name, cs.Name}] = m
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			k := devKey{s.Spec.Driver, s.Spec.Pool.Name, d.Name}
			devs[k] = d
			devNode[k] = ptr.Deref(s.Spec.NodeName, ptr.Deref(d.NodeName, ""))
			gens[k]++
		}
	}
	// Existing allocations first: they may already overdraw a counter
	// (the API server does not check that), which only a new consumer of
	// that counter is to blame for.
	var all []*resourceapi.ResourceClaim
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			all = append(all, c)
		}
	}
	existing := len(all)
	all = append(all, allocated...)
	owner := map[devKey]string{}
	for ci, c := range all {
		node := ""
		for _, r := range c.Status.Allocation.Devices.Results {
			k := devKey{r.Driver, r.Pool, r.Device}
			d, ok := devs[k]
			if !ok {
				t.Errorf("%s: claim %s: unknown device %v", who, c.Name, k)
				continue
			}
			// Where generations of a pool differ per node, the checker
			// above judges the node; this cross-check knows one slice.
			if n := devNode[k]; n != "" && gens[k] == 1 {
				if node != "" && node != n {
					t.Errorf("%s: claim %s: devices on nodes %s and %s", who, c.Name, node, n)
				}
				node = n
			}
			if ptr.Deref(r.AdminAccess, false) || r.ShareID != nil {
				continue // admin access and shares of shared devices hold nothing
			}
			if o, dup := owner[k]; dup {
				t.Errorf("%s: device %v allocated to %s and %s", who, k, o, c.Name)
			}
			owner[k] = c.Name
			if gens[k] > 1 {
				continue // which slice's device counts is the checker's to judge
			}
			for _, cc := range d.ConsumesCounters {
				m := capacity[setKey{r.Driver, r.Pool, cc.CounterSet}]
				for n, v := range cc.Counters {
					q := m[n]
					q.Sub(v.Value)
					m[n] = q
					if q.Sign() < 0 && ci >= existing {
						t.Errorf("%s: counter %s/%s/%s overdrawn (claim %s)", who, r.Pool, cc.CounterSet, n, c.Name)
					}
				}
			}
		}
	}
}

// TestFirstFitMatchesUpstreamOnNetworkDevices: a request that a device
// of node-1 and a device reachable from every node can both serve. The
// scheduler tries node-0 first, where the network device serves it.
// bench's first-fit is the engine's placer, which tries every node a
// candidate reaches; its old copy tried only the nodes of node-local
// candidates and placed the claim on node-1's device.
func TestFirstFitMatchesUpstreamOnNetworkDevices(t *testing.T) {
	local := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "local"},
		Spec: resourceapi.ResourceSliceSpec{Driver: upDriver, NodeName: ptr.To("node-1"),
			Pool: resourceapi.ResourcePool{Name: "local", Generation: 1, ResourceSliceCount: 1}, Devices: []resourceapi.Device{{Name: "loc"}}}}
	network := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "network"},
		Spec: resourceapi.ResourceSliceSpec{Driver: upDriver, AllNodes: ptr.To(true),
			Pool: resourceapi.ResourcePool{Name: "network", Generation: 1, ResourceSliceCount: 1}, Devices: []resourceapi.Device{{Name: "net"}}}}
	objs := &input.Objects{
		Nodes:   []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}}, {ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}},
		Slices:  []*resourceapi.ResourceSlice{local, network},
		Classes: []*resourceapi.DeviceClass{upClass()},
		Claims:  []*resourceapi.ResourceClaim{upClaim("c", upExact("r", 1, nil))},
	}
	up := placement(runUpstream(t, objs, baseline.UpstreamFeatures{}).Allocated)
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ff := map[string][]string{}
	for _, a := range baseline.FirstFit(p, p.Claims).Assignments {
		for _, pk := range a.Picks {
			ff[a.Claim.Obj.Name] = append(ff[a.Claim.Obj.Name], p.Devices[pk.Dev].ID.Device)
		}
	}
	if !equalPlacement(ff, up) {
		t.Errorf("first-fit placed %v, upstream %v", ff, up)
	}
}
