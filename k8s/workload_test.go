package k8s

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/frag"
)

// onN1Device is the allocation of one device of node n1.
func onN1Device(dev string) *resourceapi.AllocationResult {
	a := onN1()
	a.Devices.Results[0].Device = dev
	return a
}

// boundPod is a pod bound to n1 asking for cpus CPUs, using claims.
func boundPod(name string, cpus int64, claims ...string) *corev1.Pod {
	p := gatedCPUPod(name, cpus)
	p.Spec.SchedulingGates = nil
	p.Spec.NodeName = "n1"
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return p
}

// runningCluster is n1 with four GPUs, two of them allocated (one claim in
// another namespace), the pod of one claim, two bound pods without claims
// (one labelled for drasat), a finished labelled one, and a pending
// managed claim.
func runningCluster() []runtime.Object {
	run1 := claim("run1", 1, nil)
	run1.Status.Allocation = onN1Device("gpu-0")
	run2 := claim("run2", 1, nil)
	run2.Namespace = "other"
	run2.Status.Allocation = onN1Device("gpu-1")
	placed := boundPod("cpu", 3)
	placed.Labels = map[string]string{PlaceLabel: "true"}
	done := boundPod("done", 5)
	done.Labels = map[string]string{PlaceLabel: "true"}
	done.Status.Phase = corev1.PodSucceeded
	return []runtime.Object{cpuNode("n1", 64), slice("n1", 4), class(), run1, run2,
		boundPod("p1", 2, "run1"), placed, done, boundPod("sys", 1),
		claim("a", 1, map[string]string{ManagedLabel: "true"})}
}

// A controller's look-ahead starts from the tasks running when it starts:
// the allocated claims (with their pods' CPU when it places pods) and the
// bound pods without claims labelled for drasat, in the namespace it
// serves; then it learns what it allocates, and never counts the running
// ones twice.
func TestWorkloadStartsFromRunningTasks(t *testing.T) {
	for _, tc := range []struct {
		name          string
		opts          Options
		total, shapes float64
	}{
		// run1 with its pod's 2 CPUs, run2 and a by claim alone (one
		// shape), the labelled pod's 3 CPUs.
		{"place pods, all namespaces", Options{PlacePods: true}, 4, 3},
		{"place pods, default namespace", Options{PlacePods: true, Namespace: "default"}, 3, 3},
		// By claim alone: run1, run2 and a are one shape.
		{"claims only", Options{}, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts, runningCluster()...)
			for pass := 1; pass <= 2; pass++ {
				res, err := e.r.Pass(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if pass == 1 && res.Allocated != 1 {
					t.Fatalf("pass 1: %+v; want claim a allocated", res)
				}
				w := e.r.workload
				if w.Total() != tc.total || float64(w.Shapes()) != tc.shapes {
					t.Fatalf("pass %d: workload of %v tasks in %d shapes; want %v in %v", pass, w.Total(), w.Shapes(), tc.total, tc.shapes)
				}
			}
			e.allFeasible(t)
		})
	}
}

// Options.Workload is where the look-ahead starts: the running tasks and
// what it allocates are added to it. Other policies have no workload.
func TestWorkloadStartsFromOptions(t *testing.T) {
	prior := frag.NewWorkload()
	for range 5 {
		prior.Observe(claim("past", 2, nil))
	}
	e := newEnv(t, Options{Workload: prior}, runningCluster()...)
	if _, err := e.r.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := e.r.workload; w != prior || w.Total() != 8 || w.Shapes() != 2 {
		t.Fatalf("workload %p of %v tasks in %d shapes; want the prior %p, 5 + 3 tasks in 2 shapes", w, w.Total(), w.Shapes(), prior)
	}
	e = newEnv(t, Options{Policy: alloc.Binpack}, runningCluster()...)
	if _, err := e.r.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.r.workload != nil {
		t.Fatalf("binpack learnt a workload of %v tasks", e.r.workload.Total())
	}
}

// LoadWorkload reads claims and pods as kubectl prints them: a List of
// both, each claim with its pod's CPU when asked, labelled pods without
// claims as CPU-only tasks; a file with neither, or one that does not
// parse, is an error naming it.
func TestLoadWorkload(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	claimYAML := func(name string, count int) string {
		return `- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata: {name: ` + name + `, namespace: ml}
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu, count: ` + string(rune('0'+count)) + `}
`
	}
	podYAML := func(name, cpu, claim, label string) string {
		s := `- apiVersion: v1
  kind: Pod
  metadata: {name: ` + name + `, namespace: ml` + label + `}
  spec:
    containers: [{name: c, image: x, resources: {requests: {cpu: "` + cpu + `"}}}]
`
		if claim != "" {
			s += `    resourceClaims: [{name: g, resourceClaimName: ` + claim + `}]
`
		}
		return s
	}
	good := write("past.yaml", "apiVersion: v1\nkind: List\nitems:\n"+
		claimYAML("a", 1)+claimYAML("b", 1)+claimYAML("c", 2)+
		podYAML("pa", "4", "a", "")+podYAML("pb", "8", "b", "")+
		podYAML("cpu", "16", "", ", labels: {drasat.dev/place: \"true\"}")+
		podYAML("sys", "1", "", ""))
	for _, tc := range []struct {
		withCPU       bool
		total, shapes int
	}{
		{true, 4, 4},  // a with 4 CPUs, b with 8, c, the CPU-only pod
		{false, 3, 2}, // a and b one shape, c
	} {
		w, err := LoadWorkload([]string{good}, tc.withCPU)
		if err != nil {
			t.Fatal(err)
		}
		if w.Total() != float64(tc.total) || w.Shapes() != tc.shapes {
			t.Errorf("withCPU %v: %v tasks in %d shapes; want %d in %d", tc.withCPU, w.Total(), w.Shapes(), tc.total, tc.shapes)
		}
	}
	nodes := write("nodes.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
	broken := write("broken.yaml", "apiVersion: v1\nkind: List\nitems: [\n")
	for _, f := range []string{nodes, broken} {
		_, err := LoadWorkload([]string{good, f}, true)
		if err == nil || !strings.Contains(err.Error(), filepath.Base(f)) {
			t.Errorf("%s: error %v; want one naming the file", filepath.Base(f), err)
		}
	}
}
