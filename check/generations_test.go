package check

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/model"
)

const mvDriver = "mv.example.com"

// moving is a pool "mv" that its driver moves from node-1 (generation 1:
// m0 and m1 on counter set c of capacity 1) to node-2 (generation 2: m0
// alone on its own counter set c). Each node still uses the generation
// published for it.
func moving() *model.Objects {
	objs := &model.Objects{CompatibleOnlyWith: map[model.DeviceID]string{}, Origin: map[string]string{}}
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
		edit     func(*model.Objects)
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
			edit: func(o *model.Objects) {
				o.Slices = o.Slices[:3] // node-2's generation 2 lacks its devices
			},
			claims: []claim{{"a", "node-1", []string{"m1"}, nil}}},
		{name: "incomplete older generation is ignored",
			edit: func(o *model.Objects) {
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
