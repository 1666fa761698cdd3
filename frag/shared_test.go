package frag

import (
	"context"
	"fmt"
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

// The shared-GPU fixture, small enough to measure by hand: GPUs shared by
// consumable capacity ("milli", 1000 each, KEP-5075) as the FGD paper's
// cluster is, and nodes with CPU.
//
//	n1: 8 CPUs, gpu-0 and gpu-1; a running task takes 600 milli of gpu-0
//	    and 4 CPUs, so 4 CPUs, 0.4 and 1.0 GPU are left
//	n2: 2 CPUs, gpu-0 (1.0 left)
//
// A pending task asks for 500 milli of one GPU and 1 CPU.
const sharedDriver = "gpu.example.com"

func sharedObjects() *input.Objects {
	objs := &input.Objects{Origin: map[string]string{}}
	objs.Classes = []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == '" + sharedDriver + "'"}}}}}}
	for _, n := range []struct {
		name       string
		cpus, gpus int
	}{{"n1", 8, 2}, {"n2", 2, 1}} {
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"kubernetes.io/hostname": n.name}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(int64(n.cpus), resource.DecimalSI),
				corev1.ResourceMemory: resource.MustParse("64Gi"),
				corev1.ResourcePods:   *resource.NewQuantity(100, resource.DecimalSI)}}})
		sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: n.name + "-gpus"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: sharedDriver, NodeName: ptr.To(n.name), Pool: resourceapi.ResourcePool{Name: n.name, Generation: 1, ResourceSliceCount: 1}}}
		for g := 0; g < n.gpus; g++ {
			sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", g), AllowMultipleAllocations: ptr.To(true),
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"milli": {Value: *resource.NewQuantity(1000, resource.DecimalSI)}}})
		}
		objs.Slices = append(objs.Slices, sl)
	}
	run := sharedClaim("run", 600)
	run.Status.Allocation = &resourceapi.AllocationResult{
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}},
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: sharedDriver, Pool: "n1", Device: "gpu-0", ShareID: ptr.To(types.UID("00000000-0000-4000-8000-000000000001")),
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"milli": *resource.NewQuantity(600, resource.DecimalSI)}}}}}
	runPod := sharedPod("run", 4)
	runPod.Spec.NodeName = "n1"
	run.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: runPod.Name, UID: runPod.UID}}
	objs.Claims = []*resourceapi.ResourceClaim{run, sharedClaim("p", 500)}
	objs.Pods = []*corev1.Pod{runPod, sharedPod("p", 1)}
	return objs
}

// sharedClaim asks for milli of one GPU.
func sharedClaim(name string, milli int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
					"milli": *resource.NewQuantity(milli, resource.DecimalSI)}}}}}}}}
}

// sharedPod is the pod of claim name, asking for cpus CPUs.
func sharedPod(name string, cpus int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-" + name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI)}}}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name)}}}}
}

func cpus(n int64) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(n, resource.DecimalSI)}
}

// sharedWorkload: three tasks of 500 milli and 4 CPUs, one CPU-only task.
func sharedWorkload() *Workload {
	w := NewWorkload()
	for i := 0; i < 3; i++ {
		w.ObserveTask(sharedClaim("w", 500), cpus(4))
	}
	w.ObserveTask(nil, cpus(1))
	return w
}

func bindShared(t *testing.T, w *Workload) (*input.Objects, *model.Problem, *Measure) {
	t.Helper()
	objs := sharedObjects()
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := w.Bind(context.Background(), objs, p)
	if err != nil {
		t.Fatal(err)
	}
	return objs, p, m
}

// FGD's measure by hand on GPUs shared by capacity, with the nodes' CPU.
// Shapes: A (500 milli, 4 CPUs) at 3/4, B (CPU-only) at 1/4.
// n1: A runs (4 CPUs left) and gpu-1 hosts it; gpu-0's 0.4 is A's
// fragment; B leaves all 1.4: F = 3/4·0.4 + 1/4·1.4 = 0.65.
// n2: A cannot run (2 CPUs): F = 1.0.
func TestMeasureSharedGPUsByHand(t *testing.T) {
	_, p, m := bindShared(t, sharedWorkload())
	if m.GPUs() != 3 {
		t.Fatalf("%d GPUs measured, want 3 (the shared devices)", m.GPUs())
	}
	s := model.NewState(p)
	if f, free := m.Frag(s); !near(f, 1.65) || !near(free, 2.4) {
		t.Fatalf("frag %v free %v, want 1.65 and 2.4 GPUs", f, free)
	}
	// FGD's choice for the pending task: on n1's gpu-1 the node keeps 3
	// CPUs, too few for A, so all of its 0.9 left is fragment (+0.25); on
	// n2 F falls from 1.0 to 0.5 (−0.5). Without the CPU dimension both
	// deltas are −0.125 and n1, first by name, would win.
	a, ok := m.Place(s, p.Claims[0], FGD)
	if !ok {
		t.Fatal("not placed")
	}
	if got := p.Nodes[a.Node].Name; got != "n2" {
		t.Fatalf("placed on %s, want n2", got)
	}
	if f, free := m.Frag(s); !near(f, 1.15) || !near(free, 1.9) {
		t.Fatalf("after the placement: frag %v free %v, want 1.15 and 1.9 GPUs", f, free)
	}
	// BestFit: the least left on the chosen GPU, then on the node. n1's
	// gpu-0 has too little; n1's gpu-1 and n2's gpu-0 both keep 0.5, and
	// n2 keeps 0.5 in all against n1's 0.9: n2.
	s2 := model.NewState(p)
	b, ok := m.Place(s2, p.Claims[0], BestFit)
	if !ok || p.Nodes[b.Node].Name != "n2" {
		t.Fatalf("best fit: %v %v, want n2", b, ok)
	}
}

// Top keeps the shapes that make up that share of the tasks: at 75 % only
// A (3 of 4 tasks), at weight 1: n1 0.4, n2 1.0.
func TestWorkloadTop(t *testing.T) {
	w := sharedWorkload()
	w.Top = 75
	_, p, m := bindShared(t, w)
	if f, _ := m.Frag(model.NewState(p)); !near(f, 1.4) {
		t.Fatalf("frag %v, want 1.4", f)
	}
}

// The frag policy over shared GPUs and node CPU, the engine's path: it
// admits what binpack admits, leaves the cluster no more fragmented, every
// allocation passes the independent checker (devices, shared capacity,
// the pods' CPU), and two runs give the same placement.
func TestFragPolicySharedGPUs(t *testing.T) {
	ctx := context.Background()
	var first string
	for run := 0; run < 2; run++ {
		objs := sharedObjects()
		for i, milli := range []int64{300, 700, 200} {
			name := fmt.Sprintf("q%d", i)
			objs.Claims = append(objs.Claims, sharedClaim(name, milli))
			objs.Pods = append(objs.Pods, sharedPod(name, 1))
		}
		p, err := model.Build(ctx, objs, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := sharedWorkload().Bind(ctx, objs, p)
		if err != nil {
			t.Fatal(err)
		}
		base, err := alloc.Run(ctx, p, alloc.Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 5 * time.Second, Policy: alloc.Frag, Lookahead: m})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Assignments) != len(base.Assignments) || len(res.Assignments) != 4 {
			t.Fatalf("frag admits %d, binpack %d, want 4", len(res.Assignments), len(base.Assignments))
		}
		fragOf := func(r *alloc.Result) float64 {
			s := model.NewState(p)
			for _, a := range r.Assignments {
				take(s, a)
			}
			f, _ := m.Frag(s)
			return f
		}
		if fragOf(res) > fragOf(base)+1e-9 {
			t.Fatalf("frag policy leaves %v fragmented, binpack %v", fragOf(res), fragOf(base))
		}
		claims, err := alloc.Allocated(p, res)
		if err != nil {
			t.Fatal(err)
		}
		var allocated []*resourceapi.ResourceClaim
		got := ""
		for _, c := range claims {
			if c.Status.Allocation != nil {
				allocated = append(allocated, c)
				for _, r := range c.Status.Allocation.Devices.Results {
					got += c.Name + "@" + r.Pool + "/" + r.Device + " "
				}
			}
		}
		if err := check.Check(objs, allocated, check.Options{}); err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			first = got
		} else if got != first {
			t.Fatalf("not deterministic:\n%s\n%s", first, got)
		}
	}
}
