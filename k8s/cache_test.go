package k8s

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStripUnread: the informers' transform drops managedFields from every
// object and the image list from Nodes, and nothing drasat reads.
func TestStripUnread(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a"}, ManagedFields: mf},
		Spec:       corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
			Images:      []corev1.ContainerImage{{Names: []string{"registry/image:tag"}, SizeBytes: 1 << 30}},
		},
	}
	got, err := stripUnread(node)
	if err != nil {
		t.Fatal(err)
	}
	if n := got.(*corev1.Node); n.ManagedFields != nil || n.Status.Images != nil || n.Name != "n" ||
		!n.Spec.Unschedulable || len(n.Spec.Taints) != 1 || n.Labels["zone"] != "a" || n.Status.Allocatable.Cpu().String() != "8" {
		t.Errorf("node after the transform: %+v", n)
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{"drasat.dev/weight": "3"}, ManagedFields: mf}}
	got, err = stripUnread(claim)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.(*resourceapi.ResourceClaim); c.ManagedFields != nil || c.Annotations["drasat.dev/weight"] != "3" {
		t.Errorf("claim after the transform: %+v", c.ObjectMeta)
	}
	// A tombstone passes through untouched.
	if _, err := stripUnread("not an object"); err != nil {
		t.Errorf("a value without metadata: %v", err)
	}
}

// TestDeviceMapsShared: devices with equal capacity or equal counter
// consumption share one map after the transform, in one slice and across
// slices; different contents keep their own; every device reads as before.
func TestDeviceMapsShared(t *testing.T) {
	capOf := func(mem string) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
		return map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse(mem)}, "multiprocessors": {Value: resource.MustParse("14")}}
	}
	uses := func(slot string) []resourceapi.DeviceCounterConsumption {
		return []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]resourceapi.Counter{"memory-slice-" + slot: {Value: resource.MustParse("1")}}}}
	}
	sliceOf := func(name string, devs ...resourceapi.Device) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{Devices: devs}}
	}
	a := sliceOf("a",
		resourceapi.Device{Name: "d0", Capacity: capOf("5Gi"), ConsumesCounters: uses("0")},
		resourceapi.Device{Name: "d1", Capacity: capOf("5Gi"), ConsumesCounters: uses("1")},
		resourceapi.Device{Name: "d2", Capacity: capOf("10Gi"), ConsumesCounters: uses("0")})
	b := sliceOf("b", resourceapi.Device{Name: "d0", Capacity: capOf("5Gi"), ConsumesCounters: uses("1")})
	before := []*resourceapi.ResourceSlice{a.DeepCopy(), b.DeepCopy()}
	m := newDeviceMaps()
	m.share(a)
	m.share(b)
	for i, s := range []*resourceapi.ResourceSlice{a, b} {
		if !equality.Semantic.DeepEqual(s, before[i]) {
			t.Errorf("slice %s changed: %+v", s.Name, s.Spec.Devices)
		}
	}
	same := func(x, y any) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	da, db := a.Spec.Devices, b.Spec.Devices
	if !same(da[0].Capacity, da[1].Capacity) || !same(da[0].Capacity, db[0].Capacity) || same(da[0].Capacity, da[2].Capacity) {
		t.Error("capacity maps: equal ones not shared, or different ones shared")
	}
	if !same(da[0].ConsumesCounters[0].Counters, da[2].ConsumesCounters[0].Counters) || !same(da[1].ConsumesCounters[0].Counters, db[0].ConsumesCounters[0].Counters) ||
		same(da[0].ConsumesCounters[0].Counters, da[1].ConsumesCounters[0].Counters) {
		t.Error("counter maps: equal ones not shared, or different ones shared")
	}
}
