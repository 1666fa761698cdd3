package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drasat/drasat/k8s"
)

// Gated pods without claims (--place-pods-without-claims, the default): drasat
// chooses each one's node, the API server accepts the narrowed required
// node affinity on the gated pod (and deploy/'s admission policy the
// update by drasat's token), and the kube-scheduler binds it there. A pod
// that fits nowhere stays gated with a Warning Event.
//
// node-1 has the GPU and runs the GPU pod (4 CPUs); node-2 has no GPU and
// a bound pod of 40 CPUs. The scheduler's default LeastAllocated would
// put an 8-CPU pod on node-1; drasat puts it on node-2, where it strands
// no GPU. The 30-CPU pod then fits only on node-1 (16 CPUs left on
// node-2), the 2-CPU pod that requires node-1 there, and the 100-CPU
// pod nowhere.
func TestPodsWithoutClaimsPlaced(t *testing.T) {
	c := newCluster(t)
	c.createNodes([]*corev1.Node{nodeNamed("node-1"), nodeNamed("node-2")})
	ctx := context.Background()
	c.createWholeGPUs("node-1", 1)
	ns := "cpu"
	c.namespace(ns)
	c.createTemplate(ns, "gpu", deviceSpec("gpu"))

	withCPU := func(p *corev1.Pod, cpus string) *corev1.Pod {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpus), corev1.ResourceMemory: resource.MustParse("1Gi")}
		return p
	}
	filler := withCPU(pod(ns, "filler", false), "40")
	filler.Spec.NodeName = "node-2"
	c.createPod(filler)
	c.createPod(withCPU(pod(ns, "gpu-pod", true, fromTemplate("gpu", "gpu")), "4"))
	c.startDrasat("drasat-a") // --place-pods-without-claims is on by default
	c.eventually("the GPU pod bound", time.Minute, func() (bool, error) {
		return c.pod(ns, "gpu-pod").Spec.NodeName == "node-1", nil
	})
	// cpu-a is gated by deploy/'s gating policy (its label), once the
	// API server has loaded it: probe with dry-run creates.
	labelled := func(name string) *corev1.Pod {
		p := withCPU(pod(ns, name, false), "8")
		p.Labels = map[string]string{"drasat.dev/place": "true"}
		return p
	}
	c.eventually("gating policy active", 30*time.Second, func() (bool, error) {
		got, err := c.admin.CoreV1().Pods(ns).Create(ctx, labelled("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && hasGate(got), err
	})
	c.createPod(labelled("cpu-a"))
	c.createPod(withCPU(pod(ns, "cpu-big", true), "30"))
	c.createPod(withCPU(pod(ns, "huge", true), "100"))
	// A required node affinity of its own: drasat's requirement is added
	// to its term, which the API server allows on a gated pod.
	aff := withCPU(pod(ns, "cpu-aff", true), "2")
	aff.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}}}}}}}
	c.createPod(aff)

	want := map[string]string{"cpu-a": "node-2", "cpu-big": "node-1", "cpu-aff": "node-1"}
	c.eventually("the CPU-only pods bound", time.Minute, func() (bool, error) {
		for name := range want {
			if c.pod(ns, name).Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
	for name, node := range want {
		p := c.pod(ns, name)
		if p.Spec.NodeName != node {
			t.Errorf("pod %s bound to %s, want %s", name, p.Spec.NodeName, node)
		}
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || len(terms[0].MatchFields) != 1 || terms[0].MatchFields[0].Values[0] != node {
			t.Errorf("pod %s: required node affinity %+v, want metadata.name In [%s]", name, terms, node)
		}
		if hasGate(p) {
			t.Errorf("pod %s still gated", name)
		}
	}
	c.eventually("a NoNodeFits Event for the 100-CPU pod", 30*time.Second, func() (bool, error) {
		return len(c.events(ns, k8s.ReasonNoNode)) > 0, nil
	})
	time.Sleep(3 * time.Second)
	huge := c.pod(ns, "huge")
	if !hasGate(huge) || huge.Spec.NodeName != "" || huge.Spec.Affinity != nil {
		t.Errorf("pod huge: gated %v, node %q, affinity %+v; want gated, unchanged", hasGate(huge), huge.Spec.NodeName, huge.Spec.Affinity)
	}
	for _, e := range c.events(ns, k8s.ReasonNoNode) {
		if e.InvolvedObject.Name != "huge" || !strings.Contains(e.Message, "0/2 nodes fit: 2 not enough cpu") {
			t.Errorf("event %s about %s: %q", e.Reason, e.InvolvedObject.Name, e.Message)
		}
	}
	if n := len(c.events(ns, k8s.ReasonPlaced)); n != 3 {
		t.Errorf("%d %s Events, want 3", n, k8s.ReasonPlaced)
	}
	if terms := c.pod(ns, "cpu-aff").Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms[0].MatchExpressions) != 1 {
		t.Errorf("cpu-aff's own requirement changed: %+v", terms)
	}
	c.assertFeasible()
}

func (c *cluster) pod(ns, name string) *corev1.Pod {
	c.t.Helper()
	p, err := c.admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	must(c.t, err)
	return p
}
