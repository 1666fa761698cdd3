package frag

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// cpuPod is a pod without claims asking for cpus CPUs.
func cpuPod(name string, cpus int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI)}}}}}}
}

// withCPUNode adds n3, a node of cpus CPUs without GPUs, to the shared
// fixture.
func withCPUNode(objs *input.Objects, cpus int64) {
	objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3", Labels: map[string]string{"kubernetes.io/hostname": "n3"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpus, resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse("64Gi"),
			corev1.ResourcePods:   *resource.NewQuantity(100, resource.DecimalSI)}}})
}

func placeOn(t *testing.T, objs *input.Objects, pods ...*corev1.Pod) []PodPlacement {
	t.Helper()
	objs.Pods = append(objs.Pods, pods...)
	p, m := sharedMeasure(t, objs)
	return PlacePods(objs, p, m, pods)
}

// sharedMeasure builds objs and binds the shared workload's measure to it.
func sharedMeasure(t *testing.T, objs *input.Objects) (*model.Problem, *Measure) {
	t.Helper()
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sharedWorkload().Bind(context.Background(), objs, p)
	if err != nil {
		t.Fatal(err)
	}
	return p, m
}

// By hand, shapes A (500 milli, 4 CPUs) at 3/4 and B (CPU-only) at 1/4
// (TestMeasureSharedGPUsByHand): a CPU-only pod of 1 CPU on n1 leaves 3
// CPUs, too few for A, so n1's 0.4 fragment becomes all its 1.4 free:
// +0.75. On n2 (2 CPUs) A cannot run either way: +0. On n3, without
// GPUs: +0, and no free GPU (the tie goes to it).
func TestPlacePodsByHand(t *testing.T) {
	objs := sharedObjects()
	withCPUNode(objs, 8)
	p, m := sharedMeasure(t, objs)
	s := model.NewState(p)
	left := nodesLeft(objs, p, nil)
	req := model.PodRequests(cpuPod("c", 1))
	want := map[string][2]float64{"n1": {0.75, 1.4}, "n2": {0, 1}, "n3": {0, 0}}
	for n, node := range p.Nodes {
		cost, free := m.PodCost(s, n, left[n], req)
		if w := want[node.Name]; !near(cost, w[0]) || !near(free, w[1]) {
			t.Errorf("%s: cost %v free %v, want %v", node.Name, cost, free, w)
		}
	}
	if pl := placeOn(t, sharedObjects(), cpuPod("c", 1)); pl[0].Node != "n2" {
		t.Errorf("without n3: placed on %q (%s), want n2 (no growth)", pl[0].Node, pl[0].Why)
	}
	o := sharedObjects()
	withCPUNode(o, 8)
	if pl := placeOn(t, o, cpuPod("c", 1)); pl[0].Node != "n3" {
		t.Errorf("with n3: placed on %q, want n3 (no growth, no free GPU)", pl[0].Node)
	}
	// 3 CPUs fit only on n1 (n2 has 2).
	if pl := placeOn(t, sharedObjects(), cpuPod("c", 3)); pl[0].Node != "n1" {
		t.Errorf("3 CPUs: placed on %q, want n1", pl[0].Node)
	}
}

// Pods placed in one call count for the next ones, and a pod that fits
// nowhere says why.
func TestPlacePodsInTurnAndNowhere(t *testing.T) {
	o := sharedObjects()
	withCPUNode(o, 1)
	pl := placeOn(t, o, cpuPod("a", 1), cpuPod("b", 1), cpuPod("big", 9))
	if pl[0].Node != "n3" || pl[1].Node != "n2" {
		t.Errorf("placed on %q and %q, want n3 then n2 (n3 full)", pl[0].Node, pl[1].Node)
	}
	if pl[2].Node != "" || pl[2].Why != "0/3 nodes fit: 3 not enough cpu" {
		t.Errorf("big: %q %q, want no node and why", pl[2].Node, pl[2].Why)
	}
}

// The scheduler's filters: a taint not tolerated, a node selector; a pod
// with what drasat does not model is left to the scheduler.
func TestPlacePodsFilters(t *testing.T) {
	o := sharedObjects()
	withCPUNode(o, 8)
	o.Nodes[2].Spec.Taints = []corev1.Taint{{Key: "cpu-only", Effect: corev1.TaintEffectNoSchedule}}
	if pl := placeOn(t, o, cpuPod("c", 1)); pl[0].Node != "n2" {
		t.Errorf("n3 tainted: placed on %q, want n2", pl[0].Node)
	}
	o = sharedObjects()
	withCPUNode(o, 8)
	sel := cpuPod("c", 1)
	sel.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "n1"}
	if pl := placeOn(t, o, sel); pl[0].Node != "n1" {
		t.Errorf("selector n1: placed on %q, want n1", pl[0].Node)
	}
	o = sharedObjects()
	sel = cpuPod("c", 1)
	sel.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "n9"}
	if pl := placeOn(t, o, sel); pl[0].Node != "" || !strings.Contains(pl[0].Why, "2 node selector or required node affinity not matched") {
		t.Errorf("selector n9: %q %q, want none, the selector named", pl[0].Node, pl[0].Why)
	}
	o = sharedObjects()
	hp := cpuPod("c", 1)
	hp.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 8080, ContainerPort: 80}}
	if pl := placeOn(t, o, hp); pl[0].Node != "" || !pl[0].Unmodelled {
		t.Errorf("host port: %+v, want left to the scheduler", pl[0])
	}
}

// A pod placed earlier but not bound yet (ungated, pinned by its required
// node affinity to one node) counts on that node; a gated one does not.
func TestPlacePodsCountsPinnedPods(t *testing.T) {
	o := sharedObjects()
	withCPUNode(o, 1)
	prev := cpuPod("prev", 1)
	prev.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n3"}}}}}}}}
	o.Pods = append(o.Pods, prev)
	if pl := placeOn(t, o, cpuPod("c", 1)); pl[0].Node != "n2" {
		t.Errorf("n3 taken by a pinned pod: placed on %q, want n2", pl[0].Node)
	}
	prev.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "other"}}
	o = sharedObjects()
	withCPUNode(o, 1)
	o.Pods = append(o.Pods, prev)
	if pl := placeOn(t, o, cpuPod("c", 1)); pl[0].Node != "n3" {
		t.Errorf("n3's pinned pod still gated: placed on %q, want n3", pl[0].Node)
	}
}

// PodCost against the measure's own path: the cluster's fragmentation
// with the pod bound on node n (the model counts it in the node's
// resources) minus without, for every node.
func TestPodCostIsFragDifference(t *testing.T) {
	w := sharedWorkload()
	frag := func(objs *input.Objects) float64 {
		p, err := model.Build(context.Background(), objs, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := w.Bind(context.Background(), objs, p)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := m.Frag(model.NewState(p))
		return f
	}
	objs := sharedObjects()
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := w.Bind(context.Background(), objs, p)
	if err != nil {
		t.Fatal(err)
	}
	base := frag(objs)
	for _, cpus := range []int64{1, 2, 4} {
		pod := cpuPod("c", cpus)
		left := nodesLeft(objs, p, nil)
		for n, node := range p.Nodes {
			if _, short := lacks(left[n], model.PodRequests(pod)); short {
				continue
			}
			cost, _ := m.PodCost(model.NewState(p), n, left[n], model.PodRequests(pod))
			o := sharedObjects()
			bound := pod.DeepCopy()
			bound.Spec.NodeName = node.Name
			o.Pods = append(o.Pods, bound)
			if d := frag(o) - base; !near(cost, d) {
				t.Errorf("%d CPUs on %s: PodCost %v, the measure's difference %v", cpus, node.Name, cost, d)
			}
		}
	}
}
