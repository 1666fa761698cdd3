package frag

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// The two-model fixture: one GPU shared by capacity on each node.
//
//	x: model X, 2 CPUs
//	y: model Y, 16 CPUs
//
// The workload: U (1000 milli, 1 CPU) once, V (500 milli, 4 CPUs) twice,
// H (1000 milli of a model X GPU, 1 CPU) once. A pending U-like task is
// placed. FGD's measure by hand: on x, V cannot run (2 CPUs), so all of
// x's free share is V's fragment, w_V = 1/2; on y, H cannot run (model
// Y), so y's free share is H's, w_H = 1/4. Taking either GPU whole leaves
// its node no fragments: x falls by 1/2, y by 1/4, and FGD puts the task
// on x, the only GPU H can use.
//
// Scarcity: H is 1/3 of the GPU demand (1000 of 3000 milli) and held to
// {x's GPU}; of the cluster's free 2 GPUs, 2/3 will want it, against its
// 1 free: taking it costs min(2/3, 1) a share. x then changes the measure
// by −1/2 + 2/3 = +1/6, y by −1/4: the task goes to y, and H, when it
// comes, finds x free.
func scarceObjects() *input.Objects {
	objs := &input.Objects{Origin: map[string]string{}}
	objs.Classes = []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == '" + sharedDriver + "'"}}}}}}
	for _, n := range []struct {
		name, model string
		cpus        int64
	}{{"x", "X", 2}, {"y", "Y", 16}} {
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"kubernetes.io/hostname": n.name}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(n.cpus, resource.DecimalSI),
				corev1.ResourceMemory: resource.MustParse("64Gi"),
				corev1.ResourcePods:   *resource.NewQuantity(100, resource.DecimalSI)}}})
		objs.Slices = append(objs.Slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: n.name + "-gpus"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: sharedDriver, NodeName: ptr.To(n.name), Pool: resourceapi.ResourcePool{Name: n.name, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "gpu-0", AllowMultipleAllocations: ptr.To(true),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To(n.model)}},
				Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"milli": {Value: *resource.NewQuantity(1000, resource.DecimalSI)}}}}}})
	}
	return objs
}

// heldClaim asks for milli of one GPU of model X.
func heldClaim(name string, milli int64) *resourceapi.ResourceClaim {
	c := sharedClaim(name, milli)
	c.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: "device.attributes['" + sharedDriver + "'].model == 'X'"}}}
	return c
}

func scarceWorkload() *Workload {
	w := NewWorkload()
	w.ObserveTask(sharedClaim("w", 1000), cpus(1))
	w.ObserveTask(sharedClaim("w", 500), cpus(4))
	w.ObserveTask(sharedClaim("w", 500), cpus(4))
	w.ObserveTask(heldClaim("w", 1000), cpus(1))
	return w
}

// buildScarce builds objs' problem.
func buildScarce(t *testing.T, objs *input.Objects) *model.Problem {
	t.Helper()
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bindBuilt binds w as the controller's pass does: its shape claims built
// with objs' claims (with every device they match when every), split off,
// and bound with BindBuilt. It returns the measure and the shapes.
func bindBuilt(t *testing.T, w *Workload, objs *input.Objects, every bool) (*Measure, []*model.Claim) {
	t.Helper()
	with := *objs
	with.Claims = append(slices.Clip(objs.Claims), w.ShapeClaims()...)
	opts := model.Options{}
	if every {
		opts.EveryMatch = IsShape
	}
	full, err := model.Build(context.Background(), &with, opts)
	if err != nil {
		t.Fatal(err)
	}
	q, shapes := full.Split(func(c *model.Claim) bool { return IsShape(c.Obj) })
	return w.BindBuilt(nil, q, shapes), shapes
}

func TestScarcityKeepsHeldGPUs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		noScarcity bool
		want       string
	}{{true, "x"}, {false, "y"}} {
		objs := scarceObjects()
		objs.Claims = []*resourceapi.ResourceClaim{sharedClaim("p", 1000)}
		objs.Pods = []*corev1.Pod{sharedPod("p", 1)}
		p := buildScarce(t, objs)
		m, err := scarceWorkload().Bind(ctx, objs, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.scarce) != 1 || !near(m.scarce[0].share, 1.0/3) {
			t.Fatalf("held sets %+v, want x's GPU with 1/3 of the demand", m.scarce)
		}
		m.NoScarcity = tc.noScarcity
		res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 5 * time.Second, Policy: alloc.Frag, Lookahead: m})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Assignments) != 1 {
			t.Fatalf("no scarcity %v: %d admitted, want 1", tc.noScarcity, len(res.Assignments))
		}
		if got := p.Nodes[res.Assignments[0].Node].Name; got != tc.want {
			t.Errorf("no scarcity %v: placed on %s, want %s", tc.noScarcity, got, tc.want)
		}
		claims, err := alloc.Allocated(p, res)
		if err != nil {
			t.Fatal(err)
		}
		if err := check.Check(objs, claims, check.Options{}); err != nil {
			t.Fatal(err)
		}
		if m.price != nil {
			t.Errorf("prices kept after the look-ahead")
		}
	}
}

// A pod without claims (PlacePods, PodCost): a 2-CPU pod leaves x no
// CPU. FGD's measure by hand: U and H can no longer run on x (V never
// could), so x's free 1.0 becomes their fragment too, +(1/4 + 1/4). With
// scarcity x's GPU is also lost to H, whose least request is 1 CPU: +2/3
// more. On y (16 CPUs) the pod changes nothing. PlacePods puts it on y,
// and drops the prices after.
func TestScarcityPodsWithoutClaims(t *testing.T) {
	ctx := context.Background()
	objs := scarceObjects()
	pod := sharedPod("c", 2)
	pod.Spec.ResourceClaims = nil
	objs.Pods = []*corev1.Pod{pod}
	p := buildScarce(t, objs)
	m, err := scarceWorkload().Bind(ctx, objs, p)
	if err != nil {
		t.Fatal(err)
	}
	s := model.NewState(p)
	req := map[corev1.ResourceName]int64{corev1.ResourceCPU: 2000}
	left := func() map[corev1.ResourceName]int64 { return map[corev1.ResourceName]int64{corev1.ResourceCPU: 2000} }
	x := 0
	if p.Nodes[x].Name != "x" {
		x = 1
	}
	if c, _ := m.PodCost(s, x, left(), req); !near(c, 0.5) {
		t.Errorf("FGD's cost of the pod on x: %v, want 1/2", c)
	}
	m.setPrices(s)
	if c, _ := m.PodCost(s, x, left(), req); !near(c, 0.5+2.0/3) {
		t.Errorf("with scarcity: %v, want 1/2 + 2/3", c)
	}
	m.price = nil
	pl := PlacePods(objs, p, m, []*corev1.Pod{pod})
	if pl[0].Node != "y" {
		t.Fatalf("placed on %q (%s), want y", pl[0].Node, pl[0].Why)
	}
	if m.price != nil {
		t.Errorf("prices kept after PlacePods")
	}
}

// The controller builds the shapes with its batch (BindBuilt). With x's
// GPU taken whole by a running task, x is no candidate of H in that
// build, unless the shapes are built with every device they match
// (model.Options.EveryMatch): then the held sets are Bind's, whatever
// runs; without it there are none (read from such candidates they would
// be held by what runs).
func TestScarcityBuiltWithBatch(t *testing.T) {
	ctx := context.Background()
	objs := scarceObjects()
	run := sharedClaim("run", 1000)
	run.Status.Allocation = &resourceapi.AllocationResult{
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}}}}},
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: sharedDriver, Pool: "x", Device: "gpu-0", ShareID: ptr.To(types.UID("00000000-0000-4000-8000-000000000002")),
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"milli": *resource.NewQuantity(1000, resource.DecimalSI)}}}}}
	runPod := sharedPod("run", 1)
	runPod.Spec.NodeName = "x"
	run.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: runPod.Name, UID: runPod.UID}}
	objs.Claims = []*resourceapi.ResourceClaim{run}
	objs.Pods = []*corev1.Pod{runPod}

	p := buildScarce(t, objs)
	bound, err := scarceWorkload().Bind(ctx, objs, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(bound.scarce) != 1 {
		t.Fatalf("Bind: %d held sets, want 1 (x's GPU)", len(bound.scarce))
	}
	for _, every := range []bool{true, false} {
		m, _ := bindBuilt(t, scarceWorkload(), objs, every)
		want := 0
		if every {
			want = 1
		}
		if len(m.scarce) != want || every && !near(m.scarce[0].share, bound.scarce[0].share) {
			t.Errorf("every match %v: held sets %+v, want %d (Bind's %+v)", every, m.scarce, want, bound.scarce)
		}
	}
}

// The tasks held to a model are rare shapes, each mostly outside FGD's
// target workload (the top shapes by frequency): the held sets are read
// from every shape seen, not only the ones the measure weighs. Here the
// target keeps V and U (3 of 4 tasks, past 70 %) and leaves H out; H
// still holds 1/3 of the GPU demand to x's GPU, in Bind's measure and in
// BindBuilt's.
func TestScarcityHeldOutsideTarget(t *testing.T) {
	ctx := context.Background()
	objs := scarceObjects()
	objs.Claims = []*resourceapi.ResourceClaim{sharedClaim("p", 1000)}
	objs.Pods = []*corev1.Pod{sharedPod("p", 1)}
	p := buildScarce(t, objs)
	w := scarceWorkload()
	w.Top = 70
	if keep, _ := w.target(); len(keep) != 2 {
		t.Fatalf("target shapes %v, want U and V", keep)
	}
	m, err := w.Bind(ctx, objs, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.shapes) != 2 {
		t.Errorf("%d shapes weighed, want 2", len(m.shapes))
	}
	if len(m.scarce) != 1 || !near(m.scarce[0].share, 1.0/3) {
		t.Errorf("Bind: held sets %+v, want x's GPU with 1/3 of the demand", m.scarce)
	}
	// BindBuilt: the shapes built with the batch, every device they match.
	mb, shapes := bindBuilt(t, w, objs, true)
	if len(shapes) != 3 {
		t.Fatalf("%d shape claims built, want one per spec of every shape (3)", len(shapes))
	}
	if len(mb.scarce) != 1 || !near(mb.scarce[0].share, 1.0/3) {
		t.Errorf("BindBuilt: held sets %+v, want x's GPU with 1/3 of the demand", mb.scarce)
	}
}

// The specs a bind resolved are kept for the next bind of the same
// devices, and only the last bind's: the controller builds its specs anew
// every pass (BindBuilt), and an entry kept past its pass would keep that
// pass's built claims alive (seen: gigabytes at 1,000 nodes).
func TestResolvedKeepsOnlyTheLastBind(t *testing.T) {
	w := scarceWorkload()
	var first []*model.Claim
	for pass := range 3 {
		_, shapes := bindBuilt(t, w, scarceObjects(), true)
		if pass == 0 {
			first = shapes
		}
		if n := len(w.resolved.specs); n != len(shapes) {
			t.Fatalf("pass %d: %d specs kept, want this pass's %d", pass, n, len(shapes))
		}
	}
	for _, c := range first {
		if _, ok := w.resolved.specs[c]; ok {
			t.Fatal("the first pass's specs are still kept")
		}
	}
}

// The next pass's shape claims are new objects, built again: on the same
// devices with the same candidates their resolutions are the kept ones,
// and the measure is the one a workload without kept resolutions makes.
// A device whose model changes changes no layout (IDs, counters, reach
// and capacities stay) but the held shape's candidates: it is resolved
// again.
func TestResolvedKeptAcrossPasses(t *testing.T) {
	objs := scarceObjects()
	w := scarceWorkload()
	first, _ := bindBuilt(t, w, objs, true)
	second, _ := bindBuilt(t, w, objs, true)
	reused := 0
	for k, sh := range second.shapes {
		if sh.bySet != nil && reflect.ValueOf(sh.bySet).Pointer() == reflect.ValueOf(first.shapes[k].bySet).Pointer() {
			reused++
		}
	}
	if reused == 0 {
		t.Fatal("the second pass resolved every shape again")
	}
	fresh, _ := bindBuilt(t, scarceWorkload(), objs, true)
	if !reflect.DeepEqual(shapesOf(second), shapesOf(fresh)) {
		t.Fatal("the kept resolutions give another measure than fresh ones")
	}
	// y's GPU becomes an X: the held shape may now use it too.
	changed := *objs
	changed.Slices = slices.Clone(objs.Slices)
	s := objs.Slices[1].DeepCopy()
	s.Spec.Devices[0].Attributes["model"] = resourceapi.DeviceAttribute{StringValue: ptr.To("X")}
	changed.Slices[1] = s
	if layoutOf(buildScarce(t, &changed)) != layoutOf(buildScarce(t, objs)) {
		t.Fatal("the model is in the layout: the case tests nothing")
	}
	after, _ := bindBuilt(t, w, &changed, true)
	freshAfter, _ := bindBuilt(t, scarceWorkload(), &changed, true)
	if !reflect.DeepEqual(shapesOf(after), shapesOf(freshAfter)) {
		t.Fatal("a changed device's shape was answered from the kept resolution")
	}
}

// shapesOf is m's shapes as values (their resolutions compared by content).
func shapesOf(m *Measure) []shape {
	out := make([]shape, len(m.shapes))
	for i, sh := range m.shapes {
		out[i] = *sh
	}
	return out
}
