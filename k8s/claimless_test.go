package k8s

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/drasat/drasat/model"
)

// cpuNode is a node with cpus CPUs allocatable.
func cpuNode(name string, cpus int64) *corev1.Node {
	n := node(name)
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI)}
	return n
}

// gatedCPUPod is a gated pod without claims asking for cpus CPUs.
func gatedCPUPod(name string, cpus int64) *corev1.Pod {
	p := gatedPod(name)
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI)}
	return p
}

// A gated pod without claims gets the node drasat chose, in the pass that
// allocates the claims, and loses only drasat's gate; one that fits
// nowhere stays gated with one Warning Event however many passes run.
func TestPassPlacesGatedPodsWithoutClaims(t *testing.T) {
	// n1 (8 CPUs, GPUs) runs the claim's pod after this pass: its 4 CPUs
	// count there. n2 has 4 CPUs: the 2-CPU pod leaves n1 at 2/8 free and
	// n2 at 2/4, so it goes to n1 (fullest; whole GPUs are no unit of
	// the measure, the ties decide).
	gp := gatedPod("gpu", "a")
	gp.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(4, resource.DecimalSI)}
	e := newEnv(t, Options{PlacePods: true}, cpuNode("n1", 8), slice("n1", 1), cpuNode("n2", 4), class(),
		claim("a", 1, nil), gp, gatedCPUPod("small", 2), gatedCPUPod("big", 9))
	rec := record.NewFakeRecorder(20)
	e.r.Recorder = rec
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Allocated != 1 || res.Placed != 1 || res.Ungated != 2 {
		t.Fatalf("result %+v, want 1 allocated, 1 placed, 2 ungated", res)
	}
	small := e.pod(t, "small")
	if got := model.PinnedByName(small); got != "n1" {
		t.Errorf("small pinned to %q (%+v), want n1", got, small.Spec.Affinity)
	}
	if hasGate(small) || len(small.Spec.SchedulingGates) != 1 {
		t.Errorf("small's gates %v, want only the other gate", small.Spec.SchedulingGates)
	}
	big := e.pod(t, "big")
	if !hasGate(big) || big.Spec.Affinity != nil {
		t.Errorf("big: gates %v affinity %v, want still gated, unchanged", big.Spec.SchedulingGates, big.Spec.Affinity)
	}
	if _, err := e.r.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	all := strings.Join(events, "\n")
	if !strings.Contains(all, "Normal "+ReasonPlaced+" node n1 chosen") {
		t.Errorf("events %q: no %s for small", all, ReasonPlaced)
	}
	if n := strings.Count(all, ReasonNoNode); n != 1 || !strings.Contains(all, "Warning "+ReasonNoNode+" 0/2 nodes fit: 2 not enough cpu") {
		t.Errorf("events %q: want one %s naming the CPU", all, ReasonNoNode)
	}
	e.allFeasible(t)
}

// Off (the default), a gated pod without claims is ungated at once and
// left as it is.
func TestPassWithoutPlacePodsUngatesAtOnce(t *testing.T) {
	e := newEnv(t, Options{}, cpuNode("n1", 8), class(), gatedCPUPod("small", 2))
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := e.pod(t, "small")
	if res.Placed != 0 || res.Ungated != 1 || hasGate(p) || p.Spec.Affinity != nil {
		t.Errorf("result %+v, pod gates %v affinity %v: want ungated, no affinity", res, p.Spec.SchedulingGates, p.Spec.Affinity)
	}
}

// pinToNode only adds: to every term of a required node affinity, or the
// one term when there is none; the result matches only that node.
func TestPinToNodeNarrows(t *testing.T) {
	p := gatedCPUPod("x", 1)
	pinToNode(p, "n2")
	if model.PinnedByName(p) != "n2" {
		t.Fatalf("empty affinity: %+v", p.Spec.Affinity)
	}
	p = gatedCPUPod("x", 1)
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}}}}}
	orig := p.DeepCopy()
	pinToNode(p, "n2")
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 || model.PinnedByName(p) != "n2" {
		t.Fatalf("two terms: %+v", terms)
	}
	for i, term := range terms {
		if len(term.MatchExpressions) != 1 || term.MatchExpressions[0].Values[0] != orig.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i].MatchExpressions[0].Values[0] {
			t.Errorf("term %d changed: %+v", i, term)
		}
	}
	for _, n := range []*corev1.Node{cpuNode("n1", 1), cpuNode("n2", 1)} {
		n.Labels["zone"] = "a"
		want := n.Name == "n2"
		if got := model.NodeRefuses(p, n) == ""; got != want {
			t.Errorf("%s accepted %v, want %v", n.Name, got, want)
		}
	}
}

// A pass builds the look-ahead's shapes once: with its claims (the solve),
// and the placement of pods without claims that follows binds its measure
// with them, not with a build of its own (frag.For), even when the cluster
// changed since the last pass, so that no shapes built before can serve.
func TestPassBuildsShapesOnce(t *testing.T) {
	ga := gatedPod("ga", "a")
	ga.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(2, resource.DecimalSI)}
	e := newEnv(t, Options{PlacePods: true}, cpuNode("n1", 16), slice("n1", 4), cpuNode("n2", 8), slice("n2", 2), class(),
		claim("a", 1, nil), ga, gatedCPUPod("small", 1))
	if res := e.pass(t); res.Allocated != 1 || res.Placed != 1 {
		t.Fatalf("first pass %+v, want 1 allocated, 1 placed", res)
	}
	ctx := context.Background()
	// n2 relabelled: a new object in the cache, another cluster for the
	// shapes. Then a claim of the same shape and another pod without claims.
	n2, err := e.client.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n2.Labels["example.com/rack"] = "r2"
	if _, err := e.client.CoreV1().Nodes().Update(ctx, n2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	gb := gatedPod("gb", "b")
	gb.Spec.Containers[0].Resources = ga.Spec.Containers[0].Resources
	e.create(t, claim("b", 1, nil))
	for _, p := range []*corev1.Pod{gb, gatedCPUPod("small2", 1)} {
		if _, err := e.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitCache(t, "n2 relabelled, claim b and pod small2", func(s *Snapshot) bool {
		relabelled, b, small2 := false, false, false
		for _, n := range s.Nodes {
			relabelled = relabelled || n.Labels["example.com/rack"] == "r2"
		}
		for _, c := range s.Claims {
			b = b || c.Name == "b"
		}
		for _, p := range s.Pods {
			small2 = small2 || p.Name == "small2"
		}
		return relabelled && b && small2
	})
	before := e.r.workload.ShapeBuilds()
	if res := e.pass(t); res.Allocated != 1 || res.Placed != 1 {
		t.Fatalf("second pass %+v, want 1 allocated, 1 placed", res)
	}
	if n := e.r.workload.ShapeBuilds() - before; n != 0 {
		t.Fatalf("the second pass built the shapes %d more times for the pods without claims; want none", n)
	}
	e.allFeasible(t)
}
