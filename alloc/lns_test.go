package alloc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// sharesInstance builds GPUs whose modes offer interchangeable devices,
// like the modes scenario: a whole GPU, two halves and four quarters in a
// "shared" group, and two time-slice slots without groups, all drawing on
// memory and multiprocessors. Claims ask for one device of a mode, or for
// two quarters of one GPU.
func sharesInstance(seed uint64) *input.Objects {
	rng := rand.New(rand.NewPCG(seed, 11))
	objs := testObjects()
	q := func(v int64) resourceapi.Counter {
		return resourceapi.Counter{Value: *resource.NewQuantity(v, resource.DecimalSI)}
	}
	nodes := 1 + rng.IntN(2)
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("node-%d", n)
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
			Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
		for g := 0; g < 1+rng.IntN(2); g++ {
			set := fmt.Sprintf("gpu-%d", g)
			slice.Spec.SharedCounters = append(slice.Spec.SharedCounters, resourceapi.CounterSet{Name: set,
				Counters: map[string]resourceapi.Counter{"memory": q(8), "sm": q(12)}})
			dev := func(name, mode string, groups []string, mem, sm int64) {
				slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d-%s", g, name),
					Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
						"mode": {StringValue: ptr.To(mode)}, "gpu": {StringValue: ptr.To(fmt.Sprintf("%s-%d", node, g))}},
					ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, CompatibilityGroups: groups,
						Counters: map[string]resourceapi.Counter{"memory": q(mem), "sm": q(sm)}}}})
			}
			dev("whole", "whole", nil, 8, 12)
			for i := 0; i < 2; i++ {
				dev(fmt.Sprintf("half-%d", i), "half", []string{"shared"}, 4, 6)
			}
			for i := 0; i < 4; i++ {
				dev(fmt.Sprintf("quarter-%d", i), "quarter", []string{"shared"}, 2, 3)
			}
			for i := 0; i < 2; i++ {
				dev(fmt.Sprintf("slot-%d", i), "slot", nil, 3, 0)
			}
		}
		objs.Slices = append(objs.Slices, slice)
	}
	mode := func(m string) []resourceapi.DeviceSelector {
		return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf(`device.attributes["%s"].mode == "%s"`, testDriver, m)}}}
	}
	for i := 0; i < 3+rng.IntN(4); i++ {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", i), Namespace: "default"}}
		if rng.IntN(3) == 0 {
			c.Annotations = map[string]string{model.WeightAnnotation: fmt.Sprint(1 + rng.IntN(3))}
		}
		if rng.IntN(5) == 0 {
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{
				{Name: "a", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: mode("quarter")}},
				{Name: "b", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: mode("quarter")}},
			}
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(testDriver + "/gpu"))}}
		} else {
			m := []string{"whole", "half", "quarter", "quarter", "slot"}[rng.IntN(5)]
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: mode(m)}}}
		}
		objs.Claims = append(objs.Claims, c)
	}
	return objs
}

// maximise is the SAT optimum of the whole problem under encode options.
func maximise(t *testing.T, p *model.Problem, opts encode.Options) (int64, []*Assignment) {
	t.Helper()
	m, err := encode.Encode(context.Background(), p, p.Claims, opts)
	if err != nil {
		t.Fatal(err)
	}
	weight := func(c *model.Claim) int64 { return c.Weight }
	obj := objectiveSorter(m, weight)
	s := solver.New(m.C, m.Clauses)
	var best []*Assignment
	var v int64
	for s.Solve(context.Background(), time.Now().Add(time.Minute), obj.Geq(int(v)+1)) == solver.Sat {
		best = decode(p, m, s)
		v = 0
		for _, a := range best {
			v += a.Claim.Weight
		}
	}
	return v, best
}

// Ordering interchangeable devices keeps the optimum (brute force) and
// every allocation valid, on instances that have such devices.
func TestDeviceSymmetryKeepsOptimum(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		for _, compat := range []string{model.CompatKEP5963, model.CompatWildcard} {
			objs := sharesInstance(seed)
			p := build(t, objs, compat)
			want := newBruteForce(p).best()
			got, as := maximise(t, p, encode.Options{Symmetry: true, DeviceSymmetry: true})
			if got != want {
				t.Fatalf("seed %d %s: optimum with device symmetry %d, brute force %d", seed, compat, got, want)
			}
			checkAllocations(t, p, objs, &Result{Assignments: as, Rejected: map[int]error{}}, compat)
		}
	}
}

// Neighbourhood search from arrival-order first-fit never loses weight,
// never passes the optimum, only produces allocations the independent
// checker accepts, and does improve on first-fit.
func TestNeighbourhoodSearch(t *testing.T) {
	weight := func(c *model.Claim) int64 { return c.Weight }
	value := func(as []*Assignment) (v int64) {
		for _, a := range as {
			v += a.Claim.Weight
		}
		return v
	}
	improved, reached, runs := 0, 0, 0
	for seed := uint64(1); seed <= 80; seed++ {
		for _, compat := range []string{model.CompatKEP5963, model.CompatWildcard} {
			for _, objs := range []*input.Objects{randomInstance(seed), sharesInstance(seed)} {
				p := build(t, objs, compat)
				want := newBruteForce(p).best()
				start := firstFitInOrder(context.Background(), p, p.Claims, DefaultLimits.SearchSteps)
				rel := relaxationOf(t, p, p.Claims, weight)
				if len(rel.Bins) < 2 || value(start) == want {
					continue
				}
				runs++
				got, _ := neighbourhoodSearch(context.Background(), p, p.Claims, start, rel, weight, want, time.Now().Add(time.Minute), DefaultLimits)
				if value(got) < value(start) || value(got) > want {
					t.Fatalf("seed %d %s: neighbourhood search went from %d to %d (optimum %d)", seed, compat, value(start), value(got), want)
				}
				if value(got) > value(start) {
					improved++
				}
				if value(got) == want {
					reached++
				}
				checkAllocations(t, p, objs, &Result{Assignments: got, Rejected: map[int]error{}}, compat)
			}
		}
	}
	t.Logf("%d runs below the optimum: %d improved, %d reached the optimum", runs, improved, reached)
	if runs == 0 || improved == 0 {
		t.Fatalf("neighbourhood search improved none of %d first-fit allocations below the optimum", runs)
	}
}

// A rejected claim that fits alone is told so (the component placed it
// alone already); one that fits nowhere gets explain's reason instead.
func TestRejectReasonsUseTheComponentsPlacements(t *testing.T) {
	objs := testObjects()
	q := func(v int64) resourceapi.Counter {
		return resourceapi.Counter{Value: *resource.NewQuantity(v, resource.DecimalSI)}
	}
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-0-gpus"},
		Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: ptr.To("node-0"), Pool: resourceapi.ResourcePool{Name: "node-0", Generation: 1, ResourceSliceCount: 1},
			SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0", Counters: map[string]resourceapi.Counter{"memory": q(8)}}}}}
	for _, d := range []struct {
		name string
		mem  int64
	}{{"whole", 8}, {"half-0", 4}, {"half-1", 4}} {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: d.name,
			Attributes:       map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"size": {IntValue: ptr.To(d.mem)}},
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]resourceapi.Counter{"memory": q(d.mem)}}}})
	}
	objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}})
	objs.Slices = append(objs.Slices, slice)
	claim := func(name string, size int) {
		objs.Claims = append(objs.Claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: fmt.Sprintf(`device.attributes["%s"].size == %d`, testDriver, size)}}}}}}}}})
	}
	claim("whole", 8)
	claim("half-a", 4)
	claim("half-b", 4)
	claim("huge", 16)
	p := build(t, objs, "")
	res := run(t, p, Options{})
	if res.Stats.Admitted != 2 {
		t.Fatalf("admitted %d claims, want the two halves", res.Stats.Admitted)
	}
	want := fitsAloneReason(MaxClaims)
	for _, c := range p.Claims {
		why, rejected := res.Rejected[c.Index]
		switch c.Key {
		case "default/whole":
			if why == nil || why.Error() != want.Error() || model.ReasonOf(why) != model.ReasonCapacity {
				t.Errorf("%s: reason %v (%s), want %q (%s)", c.Key, why, model.ReasonOf(why), want, model.ReasonCapacity)
			}
		case "default/huge":
			if !rejected || why.Error() != NoPlacementReason || model.ReasonOf(why) != model.ReasonNoPlacement || !slices.Contains(res.Unplaceable, c.Index) {
				t.Errorf("%s: reason %v (%s), unplaceable %v; want it listed as fitting nowhere, for explain", c.Key, why, model.ReasonOf(why), res.Unplaceable)
			}
		default:
			if rejected {
				t.Errorf("%s rejected: %s", c.Key, why)
			}
		}
	}
}
