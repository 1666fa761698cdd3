package k8s

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// A gated pod with required inter-pod anti-affinity is left to the
// scheduler: gate removed, claim not allocated, an Event says why; the
// other pod's claim is allocated on the node its pod may run on.
func TestPassLeavesUnmodelledPodToScheduler(t *testing.T) {
	anti := gatedPod("anti", "a")
	anti.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, TopologyKey: "kubernetes.io/hostname"}}}}
	picky := gatedPod("picky", "b")
	picky.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "n2"}
	cordoned := node("n1")
	cordoned.Spec.Unschedulable = true
	e := newEnv(t, Options{}, cordoned, node("n2"), slice("n1", 2), slice("n2", 1), class(), claim("a", 1, nil), claim("b", 1, nil), anti, picky)
	rec := record.NewFakeRecorder(10)
	e.r.Recorder = rec
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := e.claim(t, "a"); c.Status.Allocation != nil {
		t.Errorf("claim of the pod left to the scheduler was allocated")
	}
	if hasGate(e.pod(t, "anti")) {
		t.Errorf("pod left to the scheduler still gated")
	}
	b := e.claim(t, "b")
	if b.Status.Allocation == nil || b.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0] != "n2" {
		t.Fatalf("claim b: %+v, want allocated on n2", b.Status.Allocation)
	}
	if res.Ungated != 2 {
		t.Errorf("%d pods ungated, want 2", res.Ungated)
	}
	found := false
	for len(rec.Events) > 0 {
		ev := <-rec.Events
		found = found || contains([]string{ev}, "Normal "+ReasonLeftToScheduler+" drasat does not model this pod (it has required inter-pod anti-affinity): scheduling gate drasat.dev/allocate removed without allocating its claims; the kube-scheduler allocates them")
	}
	if !found {
		t.Error("no LeftToScheduler Event")
	}
}

// An allocation drasat wrote and someone else removed before any pod
// reserved the claim counts as undone; drasat's own withdrawal does not,
// nor does the deallocation of a claim a pod used.
func TestAllocationsUndone(t *testing.T) {
	e := newEnv(t, Options{})
	rec := record.NewFakeRecorder(10)
	e.r.Recorder = rec
	mine := claim("mine", 1, nil)
	mine.Annotations = map[string]string{AllocatedByAnnotation: "drasat-a"}
	mine.Status.Allocation = onN1()
	gone := mine.DeepCopy()
	gone.Status.Allocation = nil

	e.r.claimUpdated(mine, gone)
	if v := counterValue(t, e.r.Metrics.AllocationsUndone); v != 1 {
		t.Fatalf("undone %v, want 1", v)
	}
	e.r.withdrawn.note(mine.UID)
	e.r.claimUpdated(mine, gone)
	used := mine.DeepCopy()
	used.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "pod-p"}}
	e.r.claimUpdated(used, gone)
	theirs := mine.DeepCopy()
	theirs.Annotations = nil
	e.r.claimUpdated(theirs, gone)
	if v := counterValue(t, e.r.Metrics.AllocationsUndone); v != 1 {
		t.Fatalf("undone %v, want still 1", v)
	}
	if len(rec.Events) != 1 {
		t.Fatalf("%d Events, want 1", len(rec.Events))
	}
}

// A claim whose pod fits nowhere for CPU is parked; when the pod holding
// the CPU goes away, the next pass tries it again and allocates it.
func TestParkedForCPUUntilAPodLeaves(t *testing.T) {
	n1 := node("n1")
	n1.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("10")}
	busy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: "default", UID: "pod-busy"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}}}}}
	p := gatedPod("p", "a")
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	e := newEnv(t, Options{}, n1, slice("n1", 1), class(), claim("a", 1, nil), busy, p)
	if res := e.pass(t); res.Allocated != 0 || res.Unallocated != 1 {
		t.Fatalf("first pass %+v: want a unallocated (4 CPUs needed, 2 free)", res)
	}
	if res := e.pass(t); res.Parked != 1 {
		t.Fatalf("second pass %+v: want a parked", res)
	}
	if err := e.client.CoreV1().Pods("default").Delete(context.Background(), "busy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitCache(t, "busy gone", func(s *Snapshot) bool {
		for _, q := range s.Pods {
			if q.Name == "busy" {
				return false
			}
		}
		return true
	})
	if res := e.pass(t); res.Allocated != 1 {
		t.Fatalf("pass after busy left %+v: want a allocated", res)
	}
}
