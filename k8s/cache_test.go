package k8s

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
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
	// A slice's counter sets: the same counters for every GPU.
	gpu := func(name, mem string) resourceapi.CounterSet {
		return resourceapi.CounterSet{Name: name, Counters: map[string]resourceapi.Counter{"memory": {Value: resource.MustParse(mem)}}}
	}
	b.Spec.SharedCounters = []resourceapi.CounterSet{gpu("gpu-0", "40Gi"), gpu("gpu-1", "40Gi"), gpu("gpu-2", "80Gi")}
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
	sc := b.Spec.SharedCounters
	if !same(sc[0].Counters, sc[1].Counters) || same(sc[0].Counters, sc[2].Counters) {
		t.Error("counter sets' maps: equal ones not shared, or different ones shared")
	}
}

// TestDeviceAttributesShared: devices with equal attribute maps share one
// map after the transform, in one slice and across slices; different maps
// keep their own, but their names and the values they point to are shared
// with equal ones elsewhere; so are device and counter set names. Every
// device reads as decoded, nil and empty lists included.
func TestDeviceAttributesShared(t *testing.T) {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	attrs := func(kv ...any) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
		m := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"productName":   str("NVIDIA A100-SXM4-40GB"),
			"driverVersion": {VersionValue: ptr.To("580.95.5")},
			"cores":         {IntValue: ptr.To[int64](98)},
			"healthy":       {BoolValue: ptr.To(true)},
		}
		for i := 0; i < len(kv); i += 2 {
			m[resourceapi.QualifiedName(kv[i].(string))] = kv[i+1].(resourceapi.DeviceAttribute)
		}
		return m
	}
	uses := func(set string) []resourceapi.DeviceCounterConsumption {
		return []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: map[string]resourceapi.Counter{"memory": {Value: resource.MustParse("1")}}}}
	}
	sliceOf := func(name string, devs ...resourceapi.Device) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{Devices: devs}}
	}
	dev := func(name, set string, a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) resourceapi.Device {
		return resourceapi.Device{Name: name, Attributes: a, ConsumesCounters: uses(set)}
	}
	a := sliceOf("a",
		dev("gpu-0", "gpu-0-counter-set", attrs("uuid", str("GPU-1"))),
		dev("gpu-0-mig-1g-0", "gpu-0-counter-set", attrs("parentUUID", str("GPU-1"), "profile", str("1g"))),
		dev("gpu-0-mig-1g-1", "gpu-0-counter-set", attrs("parentUUID", str("GPU-1"), "profile", str("1g"))),
		dev("gpu-0-mig-2g-0", "gpu-0-counter-set", attrs("parentUUID", str("GPU-1"), "profile", str("2g"))),
		dev("nic-0", "", attrs()),
		dev("list-nil", "", attrs("ports", resourceapi.DeviceAttribute{IntValues: []int64{1, 2}})),
		dev("list-empty", "", attrs("ports", resourceapi.DeviceAttribute{IntValues: []int64{1, 2}, StringValues: []string{}})))
	b := sliceOf("b",
		dev("gpu-0", "gpu-0-counter-set", attrs("uuid", str("GPU-2"))),
		dev("gpu-0-mig-1g-0", "gpu-0-counter-set", attrs("parentUUID", str("GPU-2"), "profile", str("1g"))),
		dev("nic-0", "", attrs()),
		dev("no-attributes", "", nil),
		dev("empty-attributes", "", map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}))
	before := []*resourceapi.ResourceSlice{a.DeepCopy(), b.DeepCopy()}
	m := newDeviceMaps()
	m.share(a)
	m.share(b)
	for i, s := range []*resourceapi.ResourceSlice{a, b} {
		if !reflect.DeepEqual(s, before[i]) {
			t.Errorf("slice %s reads differently after the transform:\n%+v\nwas\n%+v", s.Name, s.Spec.Devices, before[i].Spec.Devices)
		}
	}
	// Idempotent, as client-go asks of a transform: a slice passed again
	// keeps what it shares.
	kept := a.Spec.Devices[1].Attributes
	m.share(a)
	if !reflect.DeepEqual(a, before[0]) || reflect.ValueOf(a.Spec.Devices[1].Attributes).Pointer() != reflect.ValueOf(kept).Pointer() {
		t.Error("a slice passed twice changed")
	}
	if b.Spec.Devices[3].Attributes != nil || b.Spec.Devices[4].Attributes == nil {
		t.Error("a device's nil or empty attribute map changed")
	}
	same := func(x, y any) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	da, db := a.Spec.Devices, b.Spec.Devices
	for _, c := range []struct {
		what   string
		x, y   map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
		shared bool
	}{
		{"two placements of a profile on one GPU", da[1].Attributes, da[2].Attributes, true},
		{"devices without a UUID on two nodes", da[4].Attributes, db[2].Attributes, true},
		{"two profiles on one GPU", da[1].Attributes, da[3].Attributes, false},
		{"one profile on two GPUs", da[1].Attributes, db[1].Attributes, false},
		{"a GPU and its MIG device", da[0].Attributes, da[1].Attributes, false},
		{"a nil list and an empty one", da[5].Attributes, da[6].Attributes, false},
	} {
		if same(c.x, c.y) != c.shared {
			t.Errorf("%s: map shared %t, want %t", c.what, !c.shared, c.shared)
		}
	}
	// In maps not shared whole, equal values and names are.
	key := func(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name string) *byte {
		for k := range attrs {
			if string(k) == name {
				return unsafe.StringData(string(k))
			}
		}
		t.Fatalf("no attribute %s", name)
		return nil
	}
	x, y := da[0].Attributes, db[1].Attributes
	if x["productName"].StringValue != y["productName"].StringValue || x["driverVersion"].VersionValue != y["driverVersion"].VersionValue ||
		x["cores"].IntValue != y["cores"].IntValue || x["healthy"].BoolValue != y["healthy"].BoolValue {
		t.Error("equal attribute values in two maps not shared")
	}
	if key(x, "productName") != key(y, "productName") {
		t.Error("an attribute name in two maps not shared")
	}
	if da[1].Attributes["parentUUID"].StringValue == db[1].Attributes["parentUUID"].StringValue {
		t.Error("different values share a pointer")
	}
	if da[0].Attributes["uuid"].StringValue != da[1].Attributes["parentUUID"].StringValue {
		t.Error("a GPU's uuid and its MIG devices' parentUUID (the same string) not shared")
	}
	if unsafe.StringData(da[0].Name) != unsafe.StringData(db[0].Name) ||
		unsafe.StringData(da[0].ConsumesCounters[0].CounterSet) != unsafe.StringData(db[0].ConsumesCounters[0].CounterSet) {
		t.Error("device or counter set names of two slices not shared")
	}
	// The list of what a device consumes: one for the same counter set and
	// counters, not for another set.
	if &da[0].ConsumesCounters[0] != &db[0].ConsumesCounters[0] || &da[0].ConsumesCounters[0] == &da[4].ConsumesCounters[0] {
		t.Error("counter consumption lists: equal ones not shared, or different ones shared")
	}
}

// TestDeviceMapsStartOver: what deviceMaps remembers stays bounded while
// slices of distinct devices keep coming (each slice's values are kept
// only until it starts over), and every slice still reads as decoded.
func TestDeviceMapsStartOver(t *testing.T) {
	m := newDeviceMaps()
	const devices = 26
	for i := range 3 * maxSharedMaps / devices {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i)}}
		for j := range devices {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", j),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"uuid":  {StringValue: ptr.To(fmt.Sprintf("GPU-%d-%d", i, j))},
					"index": {IntValue: ptr.To(int64(i*devices + j))},
				}})
		}
		before := s.DeepCopy()
		m.share(s)
		if !reflect.DeepEqual(s, before) {
			t.Fatalf("slice %d reads differently after the transform", i)
		}
		// A slice adds at most its own devices' values past the bound.
		if n := m.size(); n > maxSharedMaps+4*devices {
			t.Fatalf("after %d slices deviceMaps remembers %d values; bound %d", i+1, n, maxSharedMaps)
		}
	}
}

// TestSharedSlicesBuildTheSameProblem: the MIG slices of a few nodes,
// read through the controller's cache (NewCache: the transform shares
// their maps and values) and as decoded, build the same problem and
// allocate the same.
func TestSharedSlicesBuildTheSameProblem(t *testing.T) {
	ctx := context.Background()
	insts, err := bench.Generate("mig", bench.Size{Nodes: 3, GPUs: 8, Claims: 40}, 1, bench.GenerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs := insts[0].Objs
	var kube []runtime.Object
	for _, s := range objs.Slices {
		kube = append(kube, s.DeepCopy())
	}
	for _, c := range objs.Classes {
		kube = append(kube, c.DeepCopy())
	}
	for _, n := range objs.Nodes {
		kube = append(kube, n.DeepCopy())
	}
	e := newEnv(t, Options{}, kube...)
	snap, err := e.r.Cache.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Slices) != len(objs.Slices) {
		t.Fatalf("%d slices in the cache; want %d", len(snap.Slices), len(objs.Slices))
	}
	// The cache's slices read as the objects do, and the transform ran:
	// the placements of one profile on one GPU share their attributes.
	byName := map[string]*resourceapi.ResourceSlice{}
	for _, s := range objs.Slices {
		byName[s.Name] = s
	}
	maps := map[uintptr]bool{}
	devices := 0
	for _, s := range snap.Slices {
		if !reflect.DeepEqual(s.Spec, byName[s.Name].Spec) {
			t.Fatalf("slice %s in the cache differs from the object", s.Name)
		}
		for _, d := range s.Spec.Devices {
			maps[reflect.ValueOf(d.Attributes).Pointer()] = true
			devices++
		}
	}
	if len(maps) >= devices/2 {
		t.Fatalf("%d attribute maps for %d devices: the cache's transform did not share them", len(maps), devices)
	}
	t.Logf("%d devices, %d attribute maps", devices, len(maps))

	var batch []*resourceapi.ResourceClaim
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			snap.Claims = append(snap.Claims, c)
		} else {
			batch = append(batch, c)
		}
	}
	decoded := &input.Objects{Slices: objs.Slices, Classes: objs.Classes, Nodes: objs.Nodes, Claims: objects(snap, batch).Claims}
	fromCache, err := model.Build(ctx, objects(snap, batch), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	asDecoded, err := model.Build(ctx, decoded, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The same problem: devices (what each reads, the counters it
	// consumes, its nodes), counter sets, claims with their candidates.
	if !reflect.DeepEqual(fromCache.Devices, asDecoded.Devices) || !reflect.DeepEqual(fromCache.CounterSets, asDecoded.CounterSets) ||
		!reflect.DeepEqual(fromCache.Nodes, asDecoded.Nodes) || !reflect.DeepEqual(fromCache.Claims, asDecoded.Claims) {
		t.Fatal("the problem built from the cache differs from the one built from the objects")
	}
	// The same answer: as many claims admitted, both proven optimal, and
	// the allocation from the cache valid on the objects for the
	// independent checker. (Which devices are picked among equally good
	// ones may differ between any two runs on a loaded machine: the
	// search is deterministic only when no time limit cuts in.)
	solve := func(p *model.Problem) (*alloc.Result, []*resourceapi.ResourceClaim) {
		res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		claims, err := alloc.Allocated(p, res)
		if err != nil {
			t.Fatal(err)
		}
		return res, claims
	}
	got, allocated := solve(fromCache)
	want, _ := solve(asDecoded)
	if got.Stats.Admitted == 0 || !got.Stats.Optimal || !want.Stats.Optimal || got.Stats.Objective != want.Stats.Objective {
		t.Fatalf("from the cache: %d admitted, objective %d, optimal %t; from the objects: %d, %d, %t",
			got.Stats.Admitted, got.Stats.Objective, got.Stats.Optimal, want.Stats.Admitted, want.Stats.Objective, want.Stats.Optimal)
	}
	if err := check.Check(decoded, allocated, check.Options{}); err != nil {
		t.Fatalf("the allocation built from the cache, on the objects: %v", err)
	}
}

// TestEqualAttributesIsDeepEqual: the transform's equality of attribute
// maps is reflect.DeepEqual's on every pair of maps that differ in one
// value, its presence, nil against empty, or a list's element, and equal
// maps hash the same.
func TestEqualAttributesIsDeepEqual(t *testing.T) {
	type attrs = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	base := func() attrs {
		return attrs{
			"i": {IntValue: ptr.To[int64](1)}, "b": {BoolValue: ptr.To(false)},
			"s": {StringValue: ptr.To("x")}, "v": {VersionValue: ptr.To("1.0.0")},
			"l": {IntValues: []int64{1, 2}, BoolValues: []bool{true}, StringValues: []string{"a"}, VersionValues: []string{"1.0.0"}},
		}
	}
	variants := []attrs{nil, {}, base()}
	change := func(f func(a attrs)) {
		a := base()
		f(a)
		variants = append(variants, a)
	}
	set := func(k resourceapi.QualifiedName, v resourceapi.DeviceAttribute) func(attrs) {
		return func(a attrs) { a[k] = v }
	}
	change(set("i", resourceapi.DeviceAttribute{IntValue: ptr.To[int64](2)}))
	change(set("i", resourceapi.DeviceAttribute{}))
	change(set("i", resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1), BoolValue: ptr.To(false)}))
	change(set("b", resourceapi.DeviceAttribute{BoolValue: ptr.To(true)}))
	change(set("s", resourceapi.DeviceAttribute{StringValue: ptr.To("y")}))
	change(set("s", resourceapi.DeviceAttribute{VersionValue: ptr.To("x")}))
	change(set("s", resourceapi.DeviceAttribute{StringValue: ptr.To("")}))
	change(set("v", resourceapi.DeviceAttribute{VersionValue: ptr.To("1.0.1")}))
	change(func(a attrs) { delete(a, "v") })
	change(func(a attrs) { a["w"] = a["v"]; delete(a, "v") })
	change(set("x", resourceapi.DeviceAttribute{}))
	for _, l := range []resourceapi.DeviceAttribute{
		{IntValues: []int64{1, 3}, BoolValues: []bool{true}, StringValues: []string{"a"}, VersionValues: []string{"1.0.0"}},
		{IntValues: []int64{1}, BoolValues: []bool{true}, StringValues: []string{"a"}, VersionValues: []string{"1.0.0"}},
		{IntValues: []int64{1, 2}, BoolValues: []bool{}, StringValues: []string{"a"}, VersionValues: []string{"1.0.0"}},
		{IntValues: []int64{1, 2}, BoolValues: []bool{true}, StringValues: []string{}, VersionValues: []string{"1.0.0"}},
		{IntValues: []int64{1, 2}, BoolValues: []bool{true}, StringValues: []string{"a"}},
		{IntValues: []int64{1, 2}, BoolValues: []bool{true}, StringValues: []string{"a"}, VersionValues: []string{}},
		{IntValues: []int64{1, 2}, BoolValues: []bool{true}, StringValues: []string{"a"}, VersionValues: []string{"1.0.0"}}, // equal to base's
	} {
		change(set("l", l))
	}
	m := newDeviceMaps()
	for i, a := range variants {
		for j, b := range variants {
			want := reflect.DeepEqual(a, b)
			if got := equalAttributes(a, b); got != want {
				t.Errorf("variants %d and %d: equalAttributes %t, reflect.DeepEqual %t", i, j, got, want)
			}
			if want && m.attrHash(a) != m.attrHash(b) {
				t.Errorf("variants %d and %d: equal, hashed apart", i, j)
			}
		}
	}
}
