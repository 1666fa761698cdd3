package check

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	gpuDriver = "gpu.example.com"
	netDriver = "net.example.com"
)

// fixture is a small cluster with a valid allocation of its pending claims:
//
//   - nodes node-1 (zone a) and node-2 (zone b), each with a GPU pool: one
//     counter set gpu-0 (memory 40Gi, slices s0..s3) and partitions whole,
//     half-0/1 and quarter-0..3 consuming memory and slices;
//   - an allNodes pool "fabric" (nic-0, nic-1, link-0, link-1) and a pool
//     "zoned" for zone a (z-0);
//   - existing claims old-nic (fabric/nic-0) and old-q (node-2/quarter-0);
//   - pending claims a (a half), b (two quarters, matchAttribute gpu,
//     tolerating quarter-3's taint), c (firstAvailable big/small), d (admin
//     access to nic-0, in use), e (all links, distinct ports), f (z-0),
//     g (never allocated).
type fixture struct {
	objs *input.Objects
	out  []*resourceapi.ResourceClaim
}

func gpuSlices(node string) []*resourceapi.ResourceSlice {
	pool := resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}
	counters := map[string]resourceapi.Counter{"memory": {Value: resource.MustParse("40Gi")}}
	for i := 0; i < 4; i++ {
		counters[fmt.Sprintf("s%d", i)] = resourceapi.Counter{Value: resource.MustParse("1")}
	}
	cs := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-counters"},
		Spec: resourceapi.ResourceSliceSpec{Driver: gpuDriver, NodeName: ptr.To(node), Pool: pool,
			SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0", Counters: counters}}}}
	ds := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-devices"},
		Spec: resourceapi.ResourceSliceSpec{Driver: gpuDriver, NodeName: ptr.To(node), Pool: pool}}
	dev := func(name string, size int, slices ...int) {
		cons := map[string]resourceapi.Counter{"memory": {Value: resource.MustParse(fmt.Sprintf("%dGi", 10*size))}}
		for _, s := range slices {
			cons[fmt.Sprintf("s%d", s)] = resourceapi.Counter{Value: resource.MustParse("1")}
		}
		ds.Spec.Devices = append(ds.Spec.Devices, resourceapi.Device{
			Name: name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"size": {IntValue: ptr.To(int64(size))},
				"gpu":  {StringValue: ptr.To(node + "-gpu-0")},
			},
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: cons}},
		})
	}
	dev("whole", 4, 0, 1, 2, 3)
	dev("half-0", 2, 0, 1)
	dev("half-1", 2, 2, 3)
	for i := 0; i < 4; i++ {
		dev(fmt.Sprintf("quarter-%d", i), 1, i)
	}
	return []*resourceapi.ResourceSlice{cs, ds}
}

func netDevice(name, kind string, attrs map[string]resourceapi.DeviceAttribute) resourceapi.Device {
	d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"kind": {StringValue: ptr.To(kind)}}}
	for k, v := range attrs {
		d.Attributes[resourceapi.QualifiedName(k)] = v
	}
	return d
}

func zoneSelector(zones ...string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: zones}}}}}
}

func nodeSel(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}
}

func sel(expr string) []resourceapi.DeviceSelector {
	return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
}

func sizeSel(size int) []resourceapi.DeviceSelector {
	return sel(fmt.Sprintf(`device.attributes["%s"].size == %d`, gpuDriver, size))
}

func kindSel(kind string) []resourceapi.DeviceSelector {
	return sel(fmt.Sprintf(`device.attributes["%s"].kind == "%s"`, netDriver, kind))
}

func res(req, driver, pool, dev string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: req, Driver: driver, Pool: pool, Device: dev}
}

func mkClaim(name string, reqs []resourceapi.DeviceRequest, cons ...resourceapi.DeviceConstraint) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs, Constraints: cons}}}
}

func exact(name, class string, sels []resourceapi.DeviceSelector, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, Selectors: sels, Count: count}}
}

func allocation(ns *corev1.NodeSelector, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}, NodeSelector: ns}
}

func newFixture() *fixture {
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Nodes = []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"zone": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{"zone": "b"}}},
	}
	objs.Classes = []*resourceapi.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{Selectors: sel(`device.driver == "` + gpuDriver + `"`)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "net"}, Spec: resourceapi.DeviceClassSpec{Selectors: sel(`device.driver == "` + netDriver + `"`)}},
	}
	objs.Slices = append(objs.Slices, gpuSlices("node-1")...)
	objs.Slices = append(objs.Slices, gpuSlices("node-2")...)
	// quarter-3 of node-1 is tainted; claim b tolerates it.
	objs.Slices[1].Spec.Devices[6].Taints = []resourceapi.DeviceTaint{{Key: "maint", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	port := func(p int64) map[string]resourceapi.DeviceAttribute {
		return map[string]resourceapi.DeviceAttribute{"port": {IntValue: ptr.To(p)}}
	}
	objs.Slices = append(objs.Slices,
		&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "fabric"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: netDriver, AllNodes: ptr.To(true), Pool: resourceapi.ResourcePool{Name: "fabric", Generation: 3, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{netDevice("nic-0", "nic", nil), netDevice("nic-1", "nic", nil),
				netDevice("link-0", "link", port(0)), netDevice("link-1", "link", port(1))}}},
		&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "zoned"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: netDriver, NodeSelector: zoneSelector("a"), Pool: resourceapi.ResourcePool{Name: "zoned", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{netDevice("z-0", "zoned", nil)}}},
	)

	oldNic := mkClaim("old-nic", []resourceapi.DeviceRequest{exact("r", "net", kindSel("nic"), 1)})
	oldNic.Status.Allocation = allocation(nil, res("r", netDriver, "fabric", "nic-0"))
	oldQ := mkClaim("old-q", []resourceapi.DeviceRequest{exact("r", "gpu", sizeSel(1), 1)})
	oldQ.Status.Allocation = allocation(nodeSel("node-2"), res("r", gpuDriver, "node-2", "quarter-0"))

	a := mkClaim("a", []resourceapi.DeviceRequest{exact("r", "gpu", sizeSel(2), 1)})
	b := mkClaim("b", []resourceapi.DeviceRequest{exact("q", "gpu", sizeSel(1), 2)},
		resourceapi.DeviceConstraint{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(gpuDriver + "/gpu"))})
	b.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: "maint", Operator: resourceapi.DeviceTolerationOpExists}}
	c := mkClaim("c", []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: "gpu", Selectors: sizeSel(4)},
		{Name: "small", DeviceClassName: "gpu", Selectors: sizeSel(2)},
	}}})
	d := mkClaim("d", []resourceapi.DeviceRequest{exact("r", "net", kindSel("nic"), 1)})
	d.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	e := mkClaim("e", []resourceapi.DeviceRequest{{Name: "l", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: "net", Selectors: kindSel("link"), AllocationMode: resourceapi.DeviceAllocationModeAll}}},
		resourceapi.DeviceConstraint{DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(netDriver + "/port"))})
	f := mkClaim("f", []resourceapi.DeviceRequest{exact("z", "net", kindSel("zoned"), 1)})
	g := mkClaim("g", []resourceapi.DeviceRequest{exact("r", "gpu", sizeSel(8), 1)})
	objs.Claims = []*resourceapi.ResourceClaim{oldNic, oldQ, a, b, c, d, e, f, g}

	results := map[string]*resourceapi.AllocationResult{
		"a": allocation(nodeSel("node-1"), res("r", gpuDriver, "node-1", "half-0")),
		"b": allocation(nodeSel("node-1"), res("q", gpuDriver, "node-1", "quarter-2"), res("q", gpuDriver, "node-1", "quarter-3")),
		"c": allocation(nodeSel("node-2"), res("r/small", gpuDriver, "node-2", "half-1")),
		"d": allocation(nil, resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: netDriver, Pool: "fabric", Device: "nic-0", AdminAccess: ptr.To(true)}),
		"e": allocation(nil, res("l", netDriver, "fabric", "link-0"), res("l", netDriver, "fabric", "link-1")),
		"f": allocation(zoneSelector("a"), res("z", netDriver, "zoned", "z-0")),
	}
	for i := range results["b"].Devices.Results {
		results["b"].Devices.Results[i].Tolerations = b.Spec.Devices.Requests[0].Exactly.Tolerations
	}
	fx := &fixture{objs: objs}
	for _, cl := range objs.Claims {
		if cl.Status.Allocation != nil {
			continue
		}
		out := cl.DeepCopy()
		out.APIVersion, out.Kind = "resource.k8s.io/v1", "ResourceClaim"
		out.Status.Allocation = results[cl.Name]
		fx.out = append(fx.out, out)
	}
	return fx
}

// claim returns the input claim and its output copy.
func (fx *fixture) claim(name string) (in, out *resourceapi.ResourceClaim) {
	for _, c := range fx.objs.Claims {
		if c.Name == name {
			in = c
		}
	}
	for _, c := range fx.out {
		if c.Name == name {
			out = c
		}
	}
	return in, out
}

// alloc returns the output allocation of a claim.
func (fx *fixture) alloc(name string) *resourceapi.AllocationResult {
	_, out := fx.claim(name)
	return out.Status.Allocation
}

// spec edits a pending claim's spec in input and output alike.
func (fx *fixture) spec(name string, edit func(*resourceapi.ResourceClaimSpec)) {
	in, out := fx.claim(name)
	edit(&in.Spec)
	edit(&out.Spec)
}

// device returns a device of a slice by names.
func (fx *fixture) device(slice, name string) *resourceapi.Device {
	for _, s := range fx.objs.Slices {
		if s.Name != slice {
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == name {
				return &s.Spec.Devices[i]
			}
		}
	}
	panic("no device " + slice + "/" + name)
}

func (fx *fixture) slice(name string) *resourceapi.ResourceSlice {
	for _, s := range fx.objs.Slices {
		if s.Name == name {
			return s
		}
	}
	panic("no slice " + name)
}

// addPending adds a pending claim with its output allocation.
func (fx *fixture) addPending(c *resourceapi.ResourceClaim, a *resourceapi.AllocationResult) {
	fx.objs.Claims = append(fx.objs.Claims, c)
	out := c.DeepCopy()
	out.Status.Allocation = a
	fx.out = append(fx.out, out)
}

// addExisting adds an already allocated claim.
func (fx *fixture) addExisting(name string, admin bool, ns *corev1.NodeSelector, results ...resourceapi.DeviceRequestAllocationResult) {
	c := mkClaim(name, []resourceapi.DeviceRequest{exact("r", "gpu", nil, int64(len(results)))})
	if admin {
		c.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
		for i := range results {
			results[i].AdminAccess = ptr.To(true)
		}
	}
	c.Status.Allocation = allocation(ns, results...)
	fx.objs.Claims = append(fx.objs.Claims, c)
}

// setGroups sets the compatibility groups of devices of a GPU slice.
func (fx *fixture) setGroups(slice string, groups map[string][]string) {
	for name, g := range groups {
		fx.device(slice, name).ConsumesCounters[0].CompatibilityGroups = g
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		compat string
		mutate func(fx *fixture)
		want   []string // substrings of the error; none: must pass
	}{
		// Valid allocations.
		{name: "valid", mutate: func(*fixture) {}},
		{name: "valid wildcard", compat: CompatWildcard, mutate: func(*fixture) {}},
		{name: "valid shared group", mutate: func(fx *fixture) {
			fx.setGroups("node-1-devices", map[string][]string{"half-0": {"mig"}, "quarter-2": {"mig", "ts"}, "quarter-3": {"mig"}})
		}},
		{name: "wildcard: no groups goes with any", compat: CompatWildcard, mutate: func(fx *fixture) {
			fx.setGroups("node-1-devices", map[string][]string{"quarter-2": {"ts"}, "quarter-3": {"ts"}})
		}},
		{name: "existing admin access takes no counters", mutate: func(fx *fixture) {
			fx.addExisting("old-admin", true, nodeSel("node-1"), res("r", gpuDriver, "node-1", "whole"))
		}},
		{name: "exact quantities: capacity equals the sum", mutate: func(fx *fixture) {
			fx.slice("node-1-counters").Spec.SharedCounters[0].Counters["memory"] = resourceapi.Counter{Value: resource.MustParse("42949672960")}
		}},
		{name: "compatibleOnlyWith holds", mutate: func(fx *fixture) {
			fx.objs.CompatibleOnlyWith[input.DeviceID{Driver: gpuDriver, Pool: "node-1", Device: "half-0"}] = `device.attributes["gpu.example.com"].size <= 2`
		}},
		{name: "constraint naming a subrequest", mutate: func(fx *fixture) {
			fx.spec("c", func(s *resourceapi.ResourceClaimSpec) {
				s.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(gpuDriver + "/gpu")), Requests: []string{"r/small"}}}
			})
		}},
		{name: "no Node objects", mutate: func(fx *fixture) {
			fx.objs.Nodes = nil
			_, out := fx.claim("f")
			out.Status.Allocation = nil
			fx.objs.Slices = fx.objs.Slices[:len(fx.objs.Slices)-1] // the zoned pool
		}},

		// Rule 1: devices exist in usable pools.
		{name: "unknown device", mutate: func(fx *fixture) { fx.alloc("a").Devices.Results[0].Device = "half-9" },
			want: []string{"claim default/a: device gpu.example.com/node-1/half-9: no such device"}},
		{name: "unknown pool", mutate: func(fx *fixture) { fx.alloc("a").Devices.Results[0].Pool = "node-9" },
			want: []string{"claim default/a", "pool gpu.example.com/node-9 does not exist"}},
		{name: "incomplete pool", mutate: func(fx *fixture) { fx.slice("node-1-devices").Spec.Pool.Generation = 2 },
			want: []string{"claim default/a: device gpu.example.com/node-1/half-0: pool gpu.example.com/node-1 is not usable: incomplete"}},
		{name: "old generation", mutate: func(fx *fixture) {
			fx.objs.Slices = append(fx.objs.Slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-1-new"}, Spec: resourceapi.ResourceSliceSpec{
				Driver: gpuDriver, NodeName: ptr.To("node-1"), Pool: resourceapi.ResourcePool{Name: "node-1", Generation: 2, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{Name: "other"}}}})
		}, want: []string{"claim default/a: device gpu.example.com/node-1/half-0: no such device in the generations of its pool that nodes use"}},
		{name: "duplicate device name", mutate: func(fx *fixture) {
			s := fx.slice("node-1-devices")
			s.Spec.Devices = append(s.Spec.Devices, *fx.device("node-1-devices", "half-0"))
		}, want: []string{"claim default/a: device gpu.example.com/node-1/half-0: pool gpu.example.com/node-1 is not usable: invalid: duplicate device name half-0"}},
		{name: "duplicate counter set", mutate: func(fx *fixture) {
			s := fx.slice("node-1-counters")
			s.Spec.SharedCounters = append(s.Spec.SharedCounters, s.Spec.SharedCounters[0])
		}, want: []string{"claim default/b: device gpu.example.com/node-1/quarter-2: pool gpu.example.com/node-1 is not usable: invalid: duplicate counter set name gpu-0"}},
		{name: "missing counter", mutate: func(fx *fixture) {
			fx.device("node-1-devices", "whole").ConsumesCounters[0].Counters["s9"] = resourceapi.Counter{Value: resource.MustParse("1")}
		}, want: []string{"not usable: invalid: device whole consumes counter s9"}},
		{name: "missing counter set", mutate: func(fx *fixture) {
			fx.device("node-1-devices", "whole").ConsumesCounters[0].CounterSet = "gpu-9"
		}, want: []string{"not usable: invalid: device whole consumes from counter set gpu-9"}},

		// Rule 2: a device serves one claim.
		{name: "device of an existing claim", mutate: func(fx *fixture) {
			fx.addExisting("old-a", false, nodeSel("node-1"), res("r", gpuDriver, "node-1", "half-0"))
		}, want: []string{"claim default/a: device gpu.example.com/node-1/half-0 is also allocated to claim(s) default/old-a"}},
		{name: "device of another new claim", mutate: func(fx *fixture) {
			in, _ := fx.claim("a")
			a2 := in.DeepCopy()
			a2.Name = "a2"
			fx.addPending(a2, allocation(nodeSel("node-1"), res("r", gpuDriver, "node-1", "half-0")))
		}, want: []string{"claim default/a: device gpu.example.com/node-1/half-0 is also allocated to claim(s) default/a2"}},
		{name: "device twice in a claim", mutate: func(fx *fixture) { fx.alloc("b").Devices.Results[1].Device = "quarter-2" },
			want: []string{"claim default/b: device gpu.example.com/node-1/quarter-2 is allocated 2 times within the claim"}},
		{name: "non-admin on a device in use", mutate: func(fx *fixture) {
			fx.spec("d", func(s *resourceapi.ResourceClaimSpec) { s.Devices.Requests[0].Exactly.AdminAccess = nil })
			fx.alloc("d").Devices.Results[0].AdminAccess = nil
		}, want: []string{"claim default/d: device net.example.com/fabric/nic-0 is also allocated to claim(s) default/old-nic"}},
		{name: "allowMultipleAllocations", mutate: func(fx *fixture) {
			fx.device("node-1-devices", "half-0").AllowMultipleAllocations = ptr.To(true)
		}, want: []string{"claim default/a: request r: device gpu.example.com/node-1/half-0: a share of a device with allowMultipleAllocations needs a shareID"}},

		// Rule 3: requests.
		{name: "unknown request name", mutate: func(fx *fixture) { fx.alloc("a").Devices.Results[0].Request = "x" },
			want: []string{`claim default/a: device gpu.example.com/node-1/half-0: result names request "x", which the claim does not have`, "claim default/a: request r has no allocated device"}},
		{name: "firstAvailable without subrequest", mutate: func(fx *fixture) { fx.alloc("c").Devices.Results[0].Request = "r" },
			want: []string{`claim default/c: device gpu.example.com/node-2/half-1: result names request "r", which is a firstAvailable request`}},
		{name: "unknown subrequest", mutate: func(fx *fixture) { fx.alloc("c").Devices.Results[0].Request = "r/tiny" },
			want: []string{`claim default/c: device gpu.example.com/node-2/half-1: result names subrequest "r/tiny", which request r does not have`}},
		{name: "subrequest of an exact request", mutate: func(fx *fixture) { fx.alloc("a").Devices.Results[0].Request = "r/x" },
			want: []string{`claim default/a: device gpu.example.com/node-1/half-0: result names subrequest "r/x", but request r has no subrequests`}},
		{name: "two subrequests", mutate: func(fx *fixture) {
			a := fx.alloc("c")
			a.Devices.Results = append(a.Devices.Results, res("r/big", gpuDriver, "node-2", "whole"))
		}, want: []string{"claim default/c: request r: results use 2 subrequests (r/big, r/small), want exactly one"}},
		{name: "too few devices", mutate: func(fx *fixture) { fx.alloc("b").Devices.Results = fx.alloc("b").Devices.Results[:1] },
			want: []string{"claim default/b: request q: 1 devices allocated, want exactly count 2"}},
		{name: "too many devices", mutate: func(fx *fixture) {
			a := fx.alloc("a")
			a.Devices.Results = append(a.Devices.Results, res("r", gpuDriver, "node-1", "half-1"))
		}, want: []string{"claim default/a: request r: 2 devices allocated, want exactly count 1"}},
		{name: "no results", mutate: func(fx *fixture) { fx.alloc("b").Devices.Results = nil },
			want: []string{"claim default/b: status.allocation has no device results", "claim default/b: request q has no allocated device"}},
		{name: "request selector false", mutate: func(fx *fixture) { fx.alloc("a").Devices.Results[0].Device = "quarter-0" },
			want: []string{`claim default/a: request r: device gpu.example.com/node-1/quarter-0: request selector #0 "device.attributes[\"gpu.example.com\"].size == 2" is false`}},
		{name: "class selector false", mutate: func(fx *fixture) {
			fx.objs.Classes[1].Spec.Selectors = append(fx.objs.Classes[1].Spec.Selectors, sel(`device.attributes["net.example.com"].kind != "zoned"`)...)
		}, want: []string{"claim default/f: request z: device net.example.com/zoned/z-0: device class net selector #1"}},
		{name: "selector runtime error", mutate: func(fx *fixture) {
			fx.objs.Classes[1].Spec.Selectors = sel(`device.attributes["net.example.com"].port >= 0`)
		}, want: []string{"claim default/f: request z: device net.example.com/zoned/z-0: device class net selector #0: CEL expression", "runtime error"}},
		{name: "taint not tolerated", mutate: func(fx *fixture) {
			fx.spec("b", func(s *resourceapi.ResourceClaimSpec) { s.Devices.Requests[0].Exactly.Tolerations = nil })
		}, want: []string{"claim default/b: request q: device gpu.example.com/node-1/quarter-3: taint maint=:NoSchedule is not tolerated"}},
		{name: "NoExecute taint", mutate: func(fx *fixture) {
			fx.device("node-1-devices", "half-0").Taints = []resourceapi.DeviceTaint{{Key: "broken", Value: "yes", Effect: resourceapi.DeviceTaintEffectNoExecute}}
		}, want: []string{"claim default/a: request r: device gpu.example.com/node-1/half-0: taint broken=yes:NoExecute is not tolerated"}},
		{name: "adminAccess flag missing", mutate: func(fx *fixture) { fx.alloc("d").Devices.Results[0].AdminAccess = nil },
			want: []string{"claim default/d: request r: device net.example.com/fabric/nic-0: result has adminAccess false, the request asks for true"}},
		{name: "adminAccess flag extra", mutate: func(fx *fixture) { fx.alloc("a").Devices.Results[0].AdminAccess = ptr.To(true) },
			want: []string{"claim default/a: request r: device gpu.example.com/node-1/half-0: result has adminAccess true, the request asks for false"}},
		{name: "All misses a device", mutate: func(fx *fixture) { fx.alloc("e").Devices.Results = fx.alloc("e").Devices.Results[:1] },
			want: []string{"claim default/e: allocationMode All is incomplete on node node-1: request l: matching device net.example.com/fabric/link-1 is not allocated"}},
		{name: "All misses a new device", mutate: func(fx *fixture) {
			s := fx.slice("fabric")
			s.Spec.Devices = append(s.Spec.Devices, netDevice("link-2", "link", map[string]resourceapi.DeviceAttribute{"port": {IntValue: ptr.To(int64(2))}}))
		}, want: []string{"claim default/e: allocationMode All is incomplete", "link-2 is not allocated"}},
		{name: "All with an unusable pool", mutate: func(fx *fixture) {
			fx.objs.Slices = append(fx.objs.Slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "partial"}, Spec: resourceapi.ResourceSliceSpec{
				Driver: netDriver, AllNodes: ptr.To(true), Pool: resourceapi.ResourcePool{Name: "partial", Generation: 1, ResourceSliceCount: 2}}})
		}, want: []string{"claim default/e: allocationMode All is incomplete", "pool net.example.com/partial is not usable"}},

		// Rule 4: constraints.
		{name: "matchAttribute differs", mutate: func(fx *fixture) {
			fx.device("node-1-devices", "quarter-3").Attributes["gpu"] = resourceapi.DeviceAttribute{StringValue: ptr.To("other")}
		}, want: []string{"claim default/b: constraint #0 matchAttribute gpu.example.com/gpu: devices have no common value"}},
		{name: "matchAttribute type differs", mutate: func(fx *fixture) {
			fx.device("node-1-devices", "quarter-3").Attributes["gpu"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(0))}
		}, want: []string{"matchAttribute gpu.example.com/gpu: devices have no common value"}},
		{name: "matchAttribute missing", mutate: func(fx *fixture) {
			delete(fx.device("node-1-devices", "quarter-3").Attributes, "gpu")
		}, want: []string{"claim default/b: constraint #0 matchAttribute gpu.example.com/gpu: device gpu.example.com/node-1/quarter-3 (request q) does not have the attribute"}},
		{name: "matchAttribute across requests", mutate: func(fx *fixture) {
			fx.spec("c", func(s *resourceapi.ResourceClaimSpec) {
				s.Devices.Requests = append(s.Devices.Requests, exact("other", "gpu", sizeSel(1), 1))
				s.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(gpuDriver + "/gpu")), Requests: []string{"r", "other"}}}
			})
			a := fx.alloc("c")
			a.Devices.Results = append(a.Devices.Results, res("other", gpuDriver, "node-1", "quarter-1"))
		}, want: []string{"claim default/c: constraint #0 matchAttribute gpu.example.com/gpu: devices have no common value"}},
		{name: "distinctAttribute shared", mutate: func(fx *fixture) {
			fx.device("fabric", "link-1").Attributes["port"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(0))}
		}, want: []string{"claim default/e: constraint #0 distinctAttribute net.example.com/port: devices net.example.com/fabric/link-0 and net.example.com/fabric/link-1 share value {int:0}"}},
		{name: "distinctAttribute list overlap", mutate: func(fx *fixture) {
			fx.device("fabric", "link-0").Attributes["port"] = resourceapi.DeviceAttribute{IntValues: []int64{0, 1}}
		}, want: []string{"distinctAttribute net.example.com/port: devices net.example.com/fabric/link-0 and net.example.com/fabric/link-1 share value {int:1}"}},

		// Rule 5: counters.
		{name: "counter slice overlap", mutate: func(fx *fixture) { fx.alloc("b").Devices.Results[0].Device = "quarter-1" },
			want: []string{"pool gpu.example.com/node-1: counter set gpu-0, counter s1: allocated devices consume 2, more than its value 1; new consumers: claim default/a device gpu.example.com/node-1/half-0, claim default/b device gpu.example.com/node-1/quarter-1"}},
		{name: "counter exceeded by one byte", mutate: func(fx *fixture) {
			fx.slice("node-1-counters").Spec.SharedCounters[0].Counters["memory"] = resourceapi.Counter{Value: resource.MustParse("42949672959")}
		}, want: []string{"pool gpu.example.com/node-1: counter set gpu-0, counter memory: allocated devices consume 40Gi, more than its value 42949672959"}},
		{name: "counter with existing allocation", mutate: func(fx *fixture) {
			fx.addExisting("old-q1", false, nodeSel("node-1"), res("r", gpuDriver, "node-1", "quarter-0"))
		}, want: []string{"counter set gpu-0, counter s0: allocated devices consume 2, more than its value 1; new consumers: claim default/a device gpu.example.com/node-1/half-0"}},
		{name: "existing overflow blocks the pool", mutate: func(fx *fixture) {
			fx.addExisting("old-w", false, nodeSel("node-2"), res("r", gpuDriver, "node-2", "whole"))
		}, want: []string{"pool gpu.example.com/node-2: counter set gpu-0, counter s0: allocated devices consume 2, more than its value 1; existing allocations alone exceed it"}},
		// New admin access takes counters, beside the existing
		// allocations (old-q holds node-2's quarter-0) ...
		{name: "new admin access takes counters", mutate: func(fx *fixture) {
			adm := mkClaim("adm", []resourceapi.DeviceRequest{exact("r", "gpu", sizeSel(4), 1)})
			adm.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
			fx.addPending(adm, allocation(nodeSel("node-2"), resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: gpuDriver, Pool: "node-2", Device: "whole", AdminAccess: ptr.To(true)}))
		}, want: []string{"counter set gpu-0, counter memory: allocated devices consume 50Gi, more than its value 40Gi", "claim default/adm device gpu.example.com/node-2/whole (admin access)"}},
		// ... but claims placed after it do not see them (the allocated
		// state skips admin access): adm first, then a and b on node-1.
		{name: "new admin access unseen by later claims", mutate: func(fx *fixture) {
			adm := mkClaim("adm", []resourceapi.DeviceRequest{exact("r", "gpu", sizeSel(4), 1)})
			adm.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
			fx.addPending(adm, allocation(nodeSel("node-1"), resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: gpuDriver, Pool: "node-1", Device: "whole", AdminAccess: ptr.To(true)}))
		}},

		// Rule 6: compatibility groups.
		{name: "kep5963: disjoint groups", mutate: func(fx *fixture) {
			fx.setGroups("node-1-devices", map[string][]string{"half-0": {"mig"}, "quarter-2": {"ts"}, "quarter-3": {"ts"}})
		}, want: []string{"pool gpu.example.com/node-1: counter set gpu-0: compatibility groups (kep5963): the devices allocated from it have no common group: claim default/a device gpu.example.com/node-1/half-0 [mig]"}},
		{name: "kep5963: no intersection of three", mutate: func(fx *fixture) {
			fx.setGroups("node-1-devices", map[string][]string{"half-0": {"x", "y"}, "quarter-2": {"y", "z"}, "quarter-3": {"x", "z"}})
		}, want: []string{"compatibility groups (kep5963): the devices allocated from it have no common group"}},
		{name: "kep5963: no groups is its own group", mutate: func(fx *fixture) {
			fx.setGroups("node-1-devices", map[string][]string{"quarter-2": {"ts"}, "quarter-3": {"ts"}})
		}, want: []string{"compatibility groups (kep5963)", "half-0 [<none>]"}},
		{name: "wildcard: disjoint groups", compat: CompatWildcard, mutate: func(fx *fixture) {
			fx.setGroups("node-1-devices", map[string][]string{"half-0": {"mig"}, "quarter-2": {"ts"}, "quarter-3": {"ts", "mig"}})
		}, want: []string{"pool gpu.example.com/node-1: counter set gpu-0: compatibility groups (wildcard): claim default/a device gpu.example.com/node-1/half-0 [mig] and claim default/b device gpu.example.com/node-1/quarter-2 [ts] share no group"}},
		{name: "groups of an existing allocation", compat: CompatWildcard, mutate: func(fx *fixture) {
			fx.setGroups("node-2-devices", map[string][]string{"quarter-0": {"ts"}, "half-1": {"mig"}})
		}, want: []string{"existing claim default/old-q device gpu.example.com/node-2/quarter-0 [ts] and claim default/c device gpu.example.com/node-2/half-1 [mig] share no group"}},

		// Rule 7: compatibleOnlyWith.
		{name: "compatibleOnlyWith violated", mutate: func(fx *fixture) {
			fx.objs.CompatibleOnlyWith[input.DeviceID{Driver: gpuDriver, Pool: "node-1", Device: "half-0"}] = `device.attributes["gpu.example.com"].size == 2`
		}, want: []string{`compatibleOnlyWith of claim default/a device gpu.example.com/node-1/half-0: expression "device.attributes[\"gpu.example.com\"].size == 2" is false for claim default/b device gpu.example.com/node-1/quarter-2`}},
		{name: "compatibleOnlyWith of an existing device", mutate: func(fx *fixture) {
			fx.objs.CompatibleOnlyWith[input.DeviceID{Driver: gpuDriver, Pool: "node-2", Device: "quarter-0"}] = `device.attributes["gpu.example.com"].size == 1`
		}, want: []string{"compatibleOnlyWith of existing claim default/old-q device gpu.example.com/node-2/quarter-0", "is false for claim default/c device gpu.example.com/node-2/half-1"}},

		// Rule 8: nodes.
		{name: "node-local without nodeSelector", mutate: func(fx *fixture) { fx.alloc("a").NodeSelector = nil },
			want: []string{"claim default/a: device gpu.example.com/node-1/half-0 is node-local or binds to its node, so nodeSelector must be exactly matchFields metadata.name In [<node>], got <nil>"}},
		{name: "node-local with a label selector", mutate: func(fx *fixture) { fx.alloc("a").NodeSelector = zoneSelector("a") },
			want: []string{"claim default/a: device gpu.example.com/node-1/half-0 is node-local or binds to its node, so nodeSelector must be exactly"}},
		{name: "node-local on the wrong node", mutate: func(fx *fixture) { fx.alloc("a").NodeSelector = nodeSel("node-2") },
			want: []string{"claim default/a: device gpu.example.com/node-1/half-0 is not available on node node-2"}},
		{name: "node-local on an unknown node", mutate: func(fx *fixture) { fx.alloc("a").NodeSelector = nodeSel("node-9") },
			want: []string{"claim default/a: nodeSelector names node node-9, which does not exist"}},
		{name: "bindsToNode", mutate: func(fx *fixture) { fx.device("zoned", "z-0").BindsToNode = ptr.To(true) },
			want: []string{"claim default/f: device net.example.com/zoned/z-0 is node-local or binds to its node"}},
		{name: "selector device without nodeSelector", mutate: func(fx *fixture) { fx.alloc("f").NodeSelector = nil },
			want: []string{"claim default/f: device net.example.com/zoned/z-0 is not available on node node-2, which the allocation's nodeSelector admits"}},
		{name: "nodeSelector admits no node", mutate: func(fx *fixture) { fx.alloc("f").NodeSelector = zoneSelector("c") },
			want: []string{"claim default/f: nodeSelector {zone In [c]} admits none of the known nodes"}},
		{name: "nodeSelector for devices on all nodes", mutate: func(fx *fixture) { fx.alloc("e").NodeSelector = zoneSelector("a") },
			want: []string{"claim default/e: all devices are available on all nodes, so nodeSelector should be nil"}},
		{name: "pod bound elsewhere", mutate: func(fx *fixture) {
			fx.objs.Pods = append(fx.objs.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{
				NodeName: "node-2", ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("a")}}}})
		}, want: []string{"claim default/a: used by pod default/p, which is bound to node node-2, but the allocation's nodeSelector"}},
		{name: "pod bound elsewhere via reservedFor", mutate: func(fx *fixture) {
			fx.objs.Pods = append(fx.objs.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "node-2"}})
			in, out := fx.claim("f")
			in.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "1"}}
			out.Status.ReservedFor = in.Status.ReservedFor
		}, want: []string{"claim default/f: used by pod default/p, which is bound to node node-2", "device net.example.com/zoned/z-0 is not available there"}},
		{name: "pod bound elsewhere via template status", mutate: func(fx *fixture) {
			fx.objs.Pods = append(fx.objs.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "node-2"},
				Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("b")}}}})
		}, want: []string{"claim default/b: used by pod default/p, which is bound to node node-2"}},
		{name: "All on a bound pod's node", mutate: func(fx *fixture) {
			// link-2 is only on node-2, where e's pod runs: it must be taken.
			fx.objs.Slices = append(fx.objs.Slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "local-links"}, Spec: resourceapi.ResourceSliceSpec{
				Driver: netDriver, NodeName: ptr.To("node-2"), Pool: resourceapi.ResourcePool{Name: "local-links", Generation: 1, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{netDevice("link-2", "link", map[string]resourceapi.DeviceAttribute{"port": {IntValue: ptr.To(int64(2))}})}}})
			fx.objs.Pods = append(fx.objs.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{
				NodeName: "node-2", ResourceClaims: []corev1.PodResourceClaim{{Name: "l", ResourceClaimName: ptr.To("e")}}}})
		}, want: []string{"claim default/e: allocationMode All is incomplete on node node-2: request l: matching device net.example.com/local-links/link-2 is not allocated"}},

		// Rule 9: claims otherwise unchanged.
		{name: "spec changed", mutate: func(fx *fixture) {
			_, out := fx.claim("a")
			out.Spec.Devices.Requests[0].Exactly.Count = 2
		}, want: []string{"claim default/a: spec differs from the input claim"}},
		{name: "metadata of an unallocated claim changed", mutate: func(fx *fixture) {
			_, out := fx.claim("g")
			out.Labels = map[string]string{"x": "y"}
		}, want: []string{"claim default/g: metadata differs from the input claim"}},
		{name: "status changed", mutate: func(fx *fixture) {
			_, out := fx.claim("a")
			out.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "1"}}
		}, want: []string{"claim default/a: status other than allocation differs from the input claim"}},
		{name: "selector error on a device the search reaches", mutate: func(fx *fixture) {
			fx.device("node-1-devices", "half-0").Attributes["extra"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(1))}
			fx.spec("a", func(s *resourceapi.ResourceClaimSpec) {
				s.Devices.Requests[0].Exactly.Selectors = sel(`device.attributes["gpu.example.com"].size != 2 || device.attributes["gpu.example.com"].extra == 1`)
			})
		}, want: []string{"claim default/a: the scheduler's allocator fails on node node-2: request r: a selector fails on device gpu.example.com/node-2/half-0"}},
		{name: "derived attribute error on a device the search tries", mutate: func(fx *fixture) {
			// c, if placed first, would hold half-1 of node-2: left out.
			fx.out = slices.DeleteFunc(fx.out, func(c *resourceapi.ResourceClaim) bool { return c.Name == "c" })
			fx.device("node-1-devices", "half-0").Attributes["extra"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(1))}
			fx.spec("a", derivedOnExtra)
		}, want: []string{"claim default/a: the scheduler's allocator fails on node node-2: request r: derived attribute on device gpu.example.com/node-2/half-1: no such key: extra"}},
		{name: "derived attribute error only on another node still fails the pod", mutate: func(fx *fixture) {
			// c, if placed first, would hold half-1 of node-2: left out.
			fx.out = slices.DeleteFunc(fx.out, func(c *resourceapi.ResourceClaim) bool { return c.Name == "c" })
			fx.device("node-1-devices", "half-0").Attributes["extra"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(1))}
			fx.device("node-1-devices", "half-1").Attributes["extra"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(2))}
			fx.spec("a", derivedOnExtra)
		}, want: []string{"claim default/a: the scheduler's allocator fails on node node-2: request r: derived attribute on device gpu.example.com/node-2/half-1"}},
		{name: "DeviceTaintRule not tolerated", mutate: func(fx *fixture) {
			fx.objs.TaintRules = []*resourceapi.DeviceTaintRule{{Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Device: ptr.To("half-0")},
				Taint:          resourceapi.DeviceTaint{Key: "rule", Effect: resourceapi.DeviceTaintEffectNoExecute}}}}
		}, want: []string{"claim default/a: request r: device gpu.example.com/node-1/half-0: taint rule=:NoExecute is not tolerated"}},
		{name: "DeviceTaintRule of another pool", mutate: func(fx *fixture) {
			fx.objs.TaintRules = []*resourceapi.DeviceTaintRule{{Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Pool: ptr.To("elsewhere")},
				Taint:          resourceapi.DeviceTaint{Key: "rule", Effect: resourceapi.DeviceTaintEffectNoExecute}}}}
		}},
		{name: "tolerations not copied", mutate: func(fx *fixture) { fx.alloc("b").Devices.Results[0].Tolerations = nil },
			want: []string{"claim default/b: device gpu.example.com/node-1/quarter-2 (request q): tolerations [], want the request's"}},
		{name: "binding conditions not copied", mutate: func(fx *fixture) {
			fx.device("node-1-devices", "half-0").BindingConditions = []string{"ready"}
			fx.device("node-1-devices", "half-0").BindingFailureConditions = []string{"failed"}
		}, want: []string{"claim default/a: device gpu.example.com/node-1/half-0 (request r): bindingConditions [] / bindingFailureConditions [], want the device's [ready] / [failed]"}},
		{name: "skipNodeOperations not copied", mutate: func(fx *fixture) {
			fx.slice("node-1-devices").Spec.SkipNodeOperations = []resourceapi.SkipNodeOperation{"*"}
			for _, n := range fx.objs.Nodes {
				n.Status.DeclaredFeatures = []string{"DRAOptionalNodeOperations"}
			}
		}, want: []string{"claim default/a: device gpu.example.com/node-1/half-0 (request r): skipNodeOperations [], want the slice's [*]"}},
		{name: "skipNodeOperations on a node without the feature", mutate: func(fx *fixture) {
			fx.slice("node-1-devices").Spec.SkipNodeOperations = []resourceapi.SkipNodeOperation{"*"}
			fx.alloc("a").Devices.Results[0].SkipNodeOperations = []resourceapi.SkipNodeOperation{"*"}
		}, want: []string{"claim default/a: device gpu.example.com/node-1/half-0 is not available on node node-1"}},
		{name: "more than 32 results", mutate: func(fx *fixture) {
			r := fx.alloc("e").Devices.Results
			for len(fx.alloc("e").Devices.Results) <= 32 {
				fx.alloc("e").Devices.Results = append(fx.alloc("e").Devices.Results, r...)
			}
		}, want: []string{"claim default/e: 34 results, more than the limit of 32 per claim"}},
		{name: "claim not in the input", mutate: func(fx *fixture) {
			x := mkClaim("x", nil)
			fx.out = append(fx.out, x)
		}, want: []string{"claim default/x: not among the input claims"}},
		{name: "existing allocation changed", mutate: func(fx *fixture) {
			in := fx.objs.Claims[0].DeepCopy()
			in.Status.Allocation.NodeSelector = nodeSel("node-1")
			fx.out = append(fx.out, in)
		}, want: []string{"claim default/old-nic: was already allocated in the input, but its status.allocation was changed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture()
			tc.mutate(fx)
			err := Check(fx.objs, fx.out, Options{Compat: tc.compat})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want no violation, got:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want a violation mentioning %q, got none", tc.want)
			}
			t.Logf("violations:\n%v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// derivedOnExtra gives request r a derived attribute read from the
// device's "extra" attribute (a run-time error where it is missing) and a
// constraint that uses it.
func derivedOnExtra(s *resourceapi.ResourceClaimSpec) {
	s.Devices.Requests[0].Exactly.DerivedAttributes = []resourceapi.DeviceDerivedAttribute{
		{Name: "derived/extra", Expression: `device.attributes["gpu.example.com"].extra`}}
	s.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("derived/extra"))}}
}

func TestCompatOption(t *testing.T) {
	fx := newFixture()
	if err := Check(fx.objs, fx.out, Options{Compat: "bogus"}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("want an error for an unknown compat mode, got %v", err)
	}
}

// The checker must not depend on the order of its inputs: the same
// violation is found whichever way claims and slices are listed.
func TestOrderIndependent(t *testing.T) {
	fx := newFixture()
	fx.alloc("b").Devices.Results[0].Device = "quarter-1"
	want := Check(fx.objs, fx.out, Options{})
	for i, j := 0, len(fx.objs.Slices)-1; i < j; i, j = i+1, j-1 {
		fx.objs.Slices[i], fx.objs.Slices[j] = fx.objs.Slices[j], fx.objs.Slices[i]
	}
	got := Check(fx.objs, fx.out, Options{})
	if want == nil || got == nil || want.Error() != got.Error() {
		t.Fatalf("results differ:\n%v\n---\n%v", want, got)
	}
}

// CheckAll accepts the fixture's whole state once every allocation is in
// place, and catches a device held by two claims.
func TestCheckAll(t *testing.T) {
	fx := newFixture()
	whole := *fx.objs
	whole.Claims = nil
	for _, c := range fx.objs.Claims {
		if c.Status.Allocation != nil {
			whole.Claims = append(whole.Claims, c)
		}
	}
	whole.Claims = append(whole.Claims, fx.out...)
	if err := CheckAll(&whole, Options{}); err != nil {
		t.Fatalf("valid state: %v", err)
	}
	twice := fx.alloc("c").Devices.Results[0]
	twice.Pool, twice.Device = "node-1", "half-0"
	fx.alloc("c").Devices.Results[0] = twice
	fx.alloc("c").NodeSelector = nodeSel("node-1")
	err := CheckAll(&whole, Options{})
	if err == nil || !strings.Contains(err.Error(), "node-1/half-0 is also allocated to claim(s) default/c") {
		t.Fatalf("half-0 allocated to a and c: CheckAll = %v", err)
	}
}
