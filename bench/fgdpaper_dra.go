package bench

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
)

// The fgd-paper cluster in DRA terms. Each trace node is a Node with its
// CPU and memory as allocatable and one ResourceSlice of its GPUs. A GPU
// is a device that allows multiple allocations (KEP-5075 consumable
// capacity) with capacity "milli" 1000 and its model as an attribute; a
// task asking for 0.3 GPU is a claim whose one request asks for 300 milli
// of one GPU, a task of k whole GPUs asks for k devices of 1000 milli
// each, and gpu_spec is a CEL selector on the model. Every task is a Pod
// with its CPU and memory requests (a CPU-only task has no claim). The
// trace gives no GPU-memory demand per task, so GPU memory is not a
// constraint (as in the paper).

// FGDPaperDriver is the driver name of the fgd-paper GPUs.
const FGDPaperDriver = "gpu.openb.example"

// fpObjects states the cluster with the first upto placements of s as
// running: a GPU task's claim is allocated on its node and GPUs; its pod
// and every CPU-only task's pod are bound when bound is set, else only
// the CPU-only pods are (a pending pod whose claims pin it to a node
// counts there for the checker's pod rules).
func fpObjects(s *fpSim, upto int, bound bool) *input.Objects {
	objs := fpClusterObjects(s)
	for i := 0; i < upto && i < len(s.placed); i++ {
		pod, claim := fpPlacedObjects(s, i, bound)
		if pod != nil {
			objs.Pods = append(objs.Pods, pod)
		}
		if claim != nil {
			objs.Claims = append(objs.Claims, claim)
		}
	}
	return objs
}

// fpClusterObjects is the cluster without tasks: the GPUs' device class,
// the nodes and their slices.
func fpClusterObjects(s *fpSim) *input.Objects {
	objs := &input.Objects{Origin: map[string]string{}}
	objs.Classes = append(objs.Classes, &resourceapi.DeviceClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
		ObjectMeta: fpClusterMeta(FGDPaperDriver),
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == '%s'", FGDPaperDriver)}}}},
	})
	for _, n := range s.nodes {
		node := fpNodeObject(n)
		node.UID, node.ResourceVersion = fpClusterMeta(n.name).UID, "1"
		objs.Nodes = append(objs.Nodes, node)
		sl := &resourceapi.ResourceSlice{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
			ObjectMeta: fpClusterMeta(n.name + "-gpus"), Spec: resourceapi.ResourceSliceSpec{
				Driver: FGDPaperDriver, NodeName: ptr.To(n.name), Pool: resourceapi.ResourcePool{Name: n.name, Generation: 1, ResourceSliceCount: 1}}}
		for g := 0; g < n.gpus; g++ {
			sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", g), AllowMultipleAllocations: ptr.To(true),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To(n.model)}},
				Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"milli": {Value: *resource.NewQuantity(1000, resource.DecimalSI)}}})
		}
		objs.Slices = append(objs.Slices, sl)
	}
	return objs
}

// fpClusterMeta names a cluster object with a UID and resourceVersion, as
// the API server does: they never change during a run, and the checker
// keeps what it learns of them between checks (check.Memo) by these.
func fpClusterMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, UID: types.UID("fgd-paper-" + name), ResourceVersion: "1"}
}

// fpPlacedObjects is s's placement i as running (fpObjects): its pod and,
// for a GPU task, its allocated claim; nil, nil when it is not placed.
func fpPlacedObjects(s *fpSim, i int, bound bool) (*corev1.Pod, *resourceapi.ResourceClaim) {
	pl := s.placed[i]
	if pl.node < 0 {
		return nil, nil
	}
	name := fmt.Sprintf("t%05d", i)
	pod := fpPod(name, pl.task)
	if pl.task.num == 0 || bound {
		pod.Spec.NodeName = s.nodes[pl.node].name
	}
	if pl.task.num == 0 {
		return pod, nil
	}
	c := fpClaim(name, pl.task)
	node := s.nodes[pl.node].name
	res := resourceapi.AllocationResult{NodeSelector: gen.NodeSelectorFor(node)}
	for k, g := range pl.gpus {
		res.Devices.Results = append(res.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: FGDPaperDriver, Pool: node, Device: fmt.Sprintf("gpu-%d", g),
			ShareID:          ptr.To(types.UID(fmt.Sprintf("00000000-0000-4000-8000-%07d%05d", i, k))),
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"milli": *resource.NewQuantity(pl.task.milli, resource.DecimalSI)}})
	}
	c.Status.Allocation = &res
	if bound {
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	}
	return pod, c
}

func fpNodeObject(n fpNode) *corev1.Node {
	return &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"kubernetes.io/hostname": n.name}},
		Status:     corev1.NodeStatus{Allocatable: nodeAllocatable(n.cpu, n.mem)}}
}

// fpPod is task t as a pod named pod-NAME; a GPU task uses claim NAME.
func fpPod(name string, t *fpTask) *corev1.Pod {
	claim := ""
	if t.num > 0 {
		claim = name
	}
	return taskPod(name, t.cpu, t.mem, claim)
}

// fpClaim is GPU task t as a claim: num GPUs of milli each, of an
// accepted model.
func fpClaim(name string, t *fpTask) *resourceapi.ResourceClaim {
	c := gen.NewClaim(name, []string{FGDPaperDriver}, nil)
	r := &c.Spec.Devices.Requests[0]
	r.Name = "gpu"
	r.Exactly.Count = int64(t.num)
	r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
		"milli": *resource.NewQuantity(t.milli, resource.DecimalSI)}}
	if len(t.specs) > 0 {
		q := make([]string, len(t.specs))
		for i, s := range t.specs {
			q[i] = fmt.Sprintf("%q", s)
		}
		r.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf(
			"device.attributes[%q].model in [%s]", FGDPaperDriver, strings.Join(q, ", "))}}}
	}
	return c
}

// verify checks the run's final state with the independent checker: every
// GPU claim's allocation is valid under DRA semantics (devices, shared
// capacity, selectors) and every node's CPU and memory hold its pods.
func (s *fpSim) verify(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := check.CheckAll(fpObjects(s, len(s.placed), false), check.Options{}); err != nil {
		return fmt.Errorf("INVALID placement: %w", err)
	}
	return nil
}
