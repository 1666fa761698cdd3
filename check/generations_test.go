package check

import (
	"strings"
	"testing"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const mvDriver = "mv.example.com"

// moving is a pool "mv" that its driver moves from node-1 (generation 1:
// m0 and m1 on counter set c of capacity 1) to node-2 (generation 2: m0
// alone on its own counter set c). Each node still uses the generation
// published for it.
func moving() *input.Objects {
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "node-2"}}}
	objs.Classes = []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "mv"}, Spec: resourceapi.DeviceClassSpec{Selectors: sel(`device.driver == "` + mvDriver + `"`)}}}
	one := map[string]resourceapi.Counter{"n": {Value: resource.MustParse("1")}}
	dev := func(name string, ver int64) resourceapi.Device {
		return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"ver": {IntValue: ptr.To(ver)}},
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "c", Counters: one}}}
	}
	slice := func(name, node string, gen int64, devs ...resourceapi.Device) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
			Driver: mvDriver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: "mv", Generation: gen, ResourceSliceCount: 2},
			Devices: devs}}
	}
	counters := func(name, node string, gen int64) *resourceapi.ResourceSlice {
		s := slice(name, node, gen)
		s.Spec.SharedCounters = []resourceapi.CounterSet{{Name: "c", Counters: one}}
		return s
	}
	objs.Slices = []*resourceapi.ResourceSlice{
		counters("g1-c", "node-1", 1), slice("g1-d", "node-1", 1, dev("m0", 1), dev("m1", 1)),
		counters("g2-c", "node-2", 2), slice("g2-d", "node-2", 2, dev("m0", 2)),
	}
	return objs
}

func TestPoolGenerations(t *testing.T) {
	type claim struct {
		name, node string
		devs       []string
		sels       []resourceapi.DeviceSelector
	}
	tests := []struct {
		name     string
		existing []claim
		claims   []claim
		edit     func(*input.Objects)
		want     string // substring of the violation; "" for none
	}{
		{name: "each node its generation", claims: []claim{{"a", "node-1", []string{"m1"}, nil}}},
		{name: "newer generation on its node", claims: []claim{{"a", "node-2", []string{"m0"}, nil}}},
		{name: "device of another node's generation", claims: []claim{{"a", "node-2", []string{"m1"}, nil}},
			want: "claim default/a: no node the allocation may be for uses a generation of the pools that has all its devices (mv.example.com/mv/m1)"},
		{name: "one device name, two generations, two claims",
			claims: []claim{{"a", "node-1", []string{"m0"}, nil}, {"b", "node-2", []string{"m0"}, nil}},
			want:   "device mv.example.com/mv/m0 is also allocated to claim(s)"},
		{name: "allocated in one generation consumes in the other",
			existing: []claim{{"old", "node-2", []string{"m0"}, nil}},
			claims:   []claim{{"a", "node-1", []string{"m1"}, nil}},
			want:     "pool mv.example.com/mv: counter set c, counter n: allocated devices consume 2, more than its value 1"},
		{name: "selector judged on the node's generation",
			claims: []claim{{"a", "node-1", []string{"m0"}, sel(`device.attributes["` + mvDriver + `"].ver == 1`)}}},
		{name: "selector judged on the node's generation (other node)",
			claims: []claim{{"a", "node-2", []string{"m0"}, sel(`device.attributes["` + mvDriver + `"].ver == 1`)}},
			want:   "selector #0"},
		{name: "incomplete newer generation: older node goes on",
			edit: func(o *input.Objects) {
				o.Slices = o.Slices[:3] // node-2's generation 2 lacks its devices
			},
			claims: []claim{{"a", "node-1", []string{"m1"}, nil}}},
		{name: "incomplete older generation is ignored",
			edit: func(o *input.Objects) {
				o.Slices = o.Slices[1:] // node-1's generation 1 lacks its counters
			},
			claims: []claim{{"a", "node-1", []string{"m1"}, nil}},
			want:   "claim default/a: device mv.example.com/mv/m1: no such device in the generations of its pool that nodes use"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := moving()
			if tc.edit != nil {
				tc.edit(objs)
			}
			mk := func(c claim) (*resourceapi.ResourceClaim, *resourceapi.AllocationResult) {
				cl := mkClaim(c.name, []resourceapi.DeviceRequest{exact("r", "mv", c.sels, int64(len(c.devs)))})
				var rs []resourceapi.DeviceRequestAllocationResult
				for _, d := range c.devs {
					rs = append(rs, res("r", mvDriver, "mv", d))
				}
				return cl, allocation(nodeSel(c.node), rs...)
			}
			for _, c := range tc.existing {
				cl, a := mk(c)
				cl.Status.Allocation = a
				objs.Claims = append(objs.Claims, cl)
			}
			var out []*resourceapi.ResourceClaim
			for _, c := range tc.claims {
				cl, a := mk(c)
				objs.Claims = append(objs.Claims, cl)
				o := cl.DeepCopy()
				o.Status.Allocation = a
				out = append(out, o)
			}
			err := Check(objs, out, Options{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want no violation, got:\n%v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("want a violation mentioning %q, got none", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("violation does not mention %q:\n%v", tc.want, err)
			}
		})
	}
}

// TestDuplicateNameAcrossNodes: upstream checks device names only among
// the slices published for the node it tries (validateDeviceNames in
// buildPool). Pool "mv" (generation 1, three slices, counter c of 2): m0 in
// node-1's slice (ver 1) and again in node-2's (ver 2, beside m1), the
// counters in a third slice. Each node sees one m0: valid on both. An
// allocated name consumes for every device of that name.
func TestDuplicateNameAcrossNodes(t *testing.T) {
	dups := func(extra, free bool) *input.Objects {
		objs := moving()
		two := map[string]resourceapi.Counter{"n": {Value: resource.MustParse("2")}}
		count := int64(3)
		if extra {
			count = 4
		}
		for _, s := range objs.Slices {
			s.Spec.Pool = resourceapi.ResourcePool{Name: "mv", Generation: 1, ResourceSliceCount: count}
		}
		objs.Slices[0].Spec.SharedCounters[0].Counters = two
		objs.Slices[1].Spec.Devices = objs.Slices[1].Spec.Devices[:1] // m0, ver 1
		objs.Slices[3].Spec.Devices = append(objs.Slices[3].Spec.Devices, objs.Slices[1].Spec.Devices[0])
		objs.Slices[3].Spec.Devices[1].Name = "m1"
		objs.Slices = []*resourceapi.ResourceSlice{objs.Slices[0], objs.Slices[1], objs.Slices[3]}
		if free { // node-1's m0 consumes nothing, node-1 has m1 too, the counter is 1
			objs.Slices[1].Spec.Devices[0].ConsumesCounters = nil
			objs.Slices[1].Spec.Devices = append(objs.Slices[1].Spec.Devices, *objs.Slices[2].Spec.Devices[1].DeepCopy())
			objs.Slices[0].Spec.SharedCounters[0].Counters = map[string]resourceapi.Counter{"n": {Value: resource.MustParse("1")}}
		}
		if extra { // m1 again, on all nodes: twice among node-2's slices
			s := objs.Slices[2].DeepCopy()
			s.Name, s.Spec.NodeName, s.Spec.AllNodes = "all", nil, ptr.To(true)
			s.Spec.Devices = s.Spec.Devices[1:]
			objs.Slices = append(objs.Slices, s)
		}
		return objs
	}
	type claim struct {
		name, node string
		dev        string
		sels       []resourceapi.DeviceSelector
	}
	ver1 := sel(`device.attributes["` + mvDriver + `"].ver == 1`)
	tests := []struct {
		name     string
		extra    bool
		free     bool
		existing []claim
		claims   []claim
		want     string // substring of the violation; "" for none
	}{
		{name: "each node its m0", claims: []claim{{"a", "node-1", "m0", ver1}}},
		{name: "node-2's m0 is another device", claims: []claim{{"a", "node-2", "m0", ver1}}, want: "selector #0"},
		{name: "allocated m0 consumes for both",
			existing: []claim{{"old", "node-2", "m0", nil}},
			claims:   []claim{{"a", "node-2", "m1", nil}},
			want:     "counter set c, counter n: allocated devices consume 3, more than its value 2"},
		{name: "two claims: valid when the one with m0 comes last",
			claims: []claim{{"a", "node-1", "m0", nil}, {"b", "node-2", "m1", nil}}},
		// a's m0 consumes nothing: the allocator checks no counter for a,
		// so a may come after b (whose check sees its own m1 alone),
		// though an allocated m0 consumes 1 through node-2's m0, and an
		// allocated m1 2 through both.
		{name: "a claim without counters comes after the one with", free: true,
			claims: []claim{{"a", "node-1", "m0", nil}, {"b", "node-2", "m1", nil}}},
		{name: "existing m0 consumes through node-2's m0", free: true,
			existing: []claim{{"old", "node-1", "m0", nil}},
			claims:   []claim{{"b", "node-2", "m1", nil}},
			want:     "allocated devices consume 2, more than its value 1"},
		{name: "m1 twice among node-2's slices", extra: true,
			claims: []claim{{"b", "node-2", "m0", nil}}, want: "no node the allocation may be for uses a generation of the pools that has all its devices (mv.example.com/mv/m0) usable"},
		{name: "node-1 sees m1 once", extra: true,
			claims: []claim{{"a", "node-1", "m0", nil}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := dups(tc.extra, tc.free)
			mk := func(c claim) (*resourceapi.ResourceClaim, *resourceapi.AllocationResult) {
				cl := mkClaim(c.name, []resourceapi.DeviceRequest{exact("r", "mv", c.sels, 1)})
				return cl, allocation(nodeSel(c.node), res("r", mvDriver, "mv", c.dev))
			}
			for _, c := range tc.existing {
				cl, a := mk(c)
				cl.Status.Allocation = a
				objs.Claims = append(objs.Claims, cl)
			}
			var out []*resourceapi.ResourceClaim
			for _, c := range tc.claims {
				cl, a := mk(c)
				objs.Claims = append(objs.Claims, cl)
				o := cl.DeepCopy()
				o.Status.Allocation = a
				out = append(out, o)
			}
			err := Check(objs, out, Options{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want no violation, got:\n%v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("want a violation mentioning %q, got none", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("violation does not mention %q:\n%v", tc.want, err)
			}
		})
	}
}
