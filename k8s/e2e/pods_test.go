package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/k8s"
)

// Pods and their nodes: drasat places a pod's claims only on a node the
// kube-scheduler's filters accept for the pod (cordons, taints, node
// selectors and affinity, CPU and memory), all claims of a pod on one
// node. In every case each pod that can run is bound, no pod that cannot
// gets devices, and a watch on the claims sees no allocation removed
// (the scheduler's DynamicResources PostFilter deallocates a claim whose
// pod fits nowhere on its node); drasat_allocations_undone_total stays 0.

// podCase is one such scenario's cluster.
type podCase struct {
	t       *testing.T
	c       *cluster
	drasat  *proc
	ns      string
	mu      sync.Mutex
	removed []string // claims whose allocation was removed
}

// newPodCase starts a cluster with the nodes (64 CPUs, 256Gi each), gpus
// and nics per node, the classes gpu and nic, drasat, and the claim watch.
func newPodCase(t *testing.T, nodes []*corev1.Node, gpus, nics map[string]int) *podCase {
	c := newCluster(t)
	c.createNodes(nodes)
	ctx := context.Background()
	for _, drv := range []string{"gpu", "nic"} {
		_, err := c.admin.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: drv},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == %q", drv+".example.com")}}}}}, metav1.CreateOptions{})
		must(t, err)
	}
	for _, n := range nodes {
		for drv, count := range map[string]int{"gpu": gpus[n.Name], "nic": nics[n.Name]} {
			if count == 0 {
				continue
			}
			s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-" + drv}}
			s.Spec.Driver, s.Spec.NodeName = drv+".example.com", ptr.To(n.Name)
			s.Spec.Pool = resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1}
			for i := 0; i < count; i++ {
				s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("%s-%d", drv, i)})
			}
			_, err := c.admin.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
			must(t, err)
		}
	}
	pc := &podCase{t: t, c: c, ns: "pods"}
	c.namespace(pc.ns)
	for _, drv := range []string{"gpu", "nic"} {
		c.createTemplate(pc.ns, drv, deviceSpec(drv))
	}
	w, err := c.admin.ResourceV1().ResourceClaims(pc.ns).Watch(ctx, metav1.ListOptions{})
	must(t, err)
	t.Cleanup(w.Stop)
	go func() {
		allocated := map[types.UID]bool{}
		for ev := range w.ResultChan() {
			cl, ok := ev.Object.(*resourceapi.ResourceClaim)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			if allocated[cl.UID] && cl.Status.Allocation == nil {
				pc.mu.Lock()
				pc.removed = append(pc.removed, cl.Name)
				pc.mu.Unlock()
			}
			allocated[cl.UID] = cl.Status.Allocation != nil
		}
	}()
	pc.drasat = c.startDrasat("drasat-a")
	return pc
}

func deviceSpec(class string) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: class,
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}}}}
}

// nodeNamed is a node with labels (key=value pairs).
func nodeNamed(name string, labels ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	for _, kv := range labels {
		k, v, _ := strings.Cut(kv, "=")
		n.Labels[k] = v
	}
	return n
}

// gatedPodWith is a gated pod using device templates (gpu, nic) and
// requesting cpu and memory.
func (pc *podCase) gatedPodWith(name, cpu, mem string, templates ...string) *corev1.Pod {
	var claims []corev1.PodResourceClaim
	for _, t := range templates {
		claims = append(claims, fromTemplate(t, t))
	}
	p := pod(pc.ns, name, true, claims...)
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	return p
}

// settle waits until the pods in want are bound (to the node given, or
// any when ""), then a few seconds more, and checks: those pods bound as
// wanted, every other pod still gated with no allocated claim, no
// allocation removed, drasat_allocations_undone_total 0, the state
// feasible.
func (pc *podCase) settle(want map[string]string) {
	t, c := pc.t, pc.c
	c.eventually("the pods that can run bound", 2*time.Minute, func() (bool, error) {
		for _, p := range c.pods(pc.ns) {
			if _, ok := want[p.Name]; ok && p.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(5 * time.Second) // drasat and the scheduler have had their say
	for _, p := range c.pods(pc.ns) {
		node, ok := want[p.Name]
		switch {
		case ok && node != "" && p.Spec.NodeName != node:
			t.Errorf("pod %s on %s, want %s", p.Name, p.Spec.NodeName, node)
		case ok:
			t.Logf("pod %s bound to %s", p.Name, p.Spec.NodeName)
		case p.Spec.NodeName != "" || !hasGate(&p):
			t.Errorf("pod %s cannot run, but it is bound (%q) or ungated", p.Name, p.Spec.NodeName)
		default:
			for _, rc := range p.Spec.ResourceClaims {
				if cl := c.podClaim(&p, rc.Name); cl != nil && cl.Status.Allocation != nil {
					t.Errorf("pod %s cannot run, but its claim %s has devices %s", p.Name, cl.Name, devicesOf(cl))
				}
			}
			t.Logf("pod %s stays gated, its claims unallocated", p.Name)
		}
	}
	pc.mu.Lock()
	if len(pc.removed) > 0 {
		t.Errorf("allocations removed from claims %v", pc.removed)
	}
	pc.mu.Unlock()
	m := httpGet(t, "http://"+metricsAddr(t, pc.drasat)+"/metrics")
	if !regexp.MustCompile(`(?m)^drasat_allocations_undone_total 0$`).MatchString(m) {
		t.Errorf("/metrics: drasat_allocations_undone_total is not 0")
	}
	c.assertFeasible()
}

func TestPodsCordonedNode(t *testing.T) {
	cordoned := nodeNamed("node-1")
	cordoned.Spec.Unschedulable = true
	pc := newPodCase(t, []*corev1.Node{cordoned, nodeNamed("node-2")}, map[string]int{"node-1": 2, "node-2": 1}, nil)
	pc.c.createPod(pc.gatedPodWith("a", "1", "1Gi", "gpu"))
	pc.c.createPod(pc.gatedPodWith("b", "1", "1Gi", "gpu"))
	pc.c.eventually("one pod bound", 2*time.Minute, func() (bool, error) {
		for _, p := range pc.c.pods(pc.ns) {
			if p.Spec.NodeName != "" {
				return true, nil
			}
		}
		return false, nil
	})
	bound := ""
	for _, p := range pc.c.pods(pc.ns) {
		if p.Spec.NodeName != "" {
			bound = p.Name
		}
	}
	pc.settle(map[string]string{bound: "node-2"})
}

func TestPodsTaints(t *testing.T) {
	tainted := nodeNamed("node-1")
	tainted.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	pc := newPodCase(t, []*corev1.Node{tainted, nodeNamed("node-2")}, map[string]int{"node-1": 1, "node-2": 1}, nil)
	tolerant := pc.gatedPodWith("tolerant", "1", "1Gi", "gpu")
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	// Created first: without the taint rule either node would do for it.
	pc.c.createPod(tolerant)
	pc.c.createPod(pc.gatedPodWith("plain", "1", "1Gi", "gpu"))
	pc.settle(map[string]string{"tolerant": "node-1", "plain": "node-2"})
}

func TestPodsNodeSelectorAndAffinity(t *testing.T) {
	pc := newPodCase(t, []*corev1.Node{nodeNamed("node-1", "zone=a"), nodeNamed("node-2", "zone=b")}, map[string]int{"node-1": 1, "node-2": 1}, nil)
	sel := pc.gatedPodWith("selector", "1", "1Gi", "gpu")
	sel.Spec.NodeSelector = map[string]string{"zone": "b"}
	aff := pc.gatedPodWith("affinity", "1", "1Gi", "gpu")
	aff.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
	// A third pod that may run in zone b only, where the GPU is taken.
	late := pc.gatedPodWith("late", "1", "1Gi", "gpu")
	late.Spec.NodeSelector = map[string]string{"zone": "b"}
	pc.c.createPod(sel)
	pc.c.createPod(aff)
	pc.waitBound(2)
	pc.c.createPod(late)
	pc.settle(map[string]string{"selector": "node-2", "affinity": "node-1"})
}

func TestPodsTwoClaimsOfOnePod(t *testing.T) {
	pc := newPodCase(t, []*corev1.Node{nodeNamed("node-1"), nodeNamed("node-2")}, map[string]int{"node-1": 1, "node-2": 1}, map[string]int{"node-2": 1})
	pc.c.createPod(pc.gatedPodWith("gpu-only", "1", "1Gi", "gpu"))
	pc.c.createPod(pc.gatedPodWith("gpu-and-nic", "1", "1Gi", "gpu", "nic"))
	pc.settle(map[string]string{"gpu-only": "node-1", "gpu-and-nic": "node-2"})
}

func TestPodsSharedClaimDifferentAffinity(t *testing.T) {
	pc := newPodCase(t, []*corev1.Node{nodeNamed("node-1", "zone=a"), nodeNamed("node-2", "zone=b"), nodeNamed("node-3", "zone=b", "model=h100")},
		map[string]int{"node-1": 1, "node-2": 1, "node-3": 1}, nil)
	pc.c.createClaim(pc.ns, "shared", deviceSpec("gpu"), false)
	x := pod(pc.ns, "x", true, byName("gpu", "shared"))
	x.Spec.NodeSelector = map[string]string{"zone": "b"}
	y := pod(pc.ns, "y", true, byName("gpu", "shared"))
	y.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "model", Operator: corev1.NodeSelectorOpIn, Values: []string{"h100"}}}}}}}}
	pc.c.createPod(x)
	pc.c.createPod(y)
	pc.settle(map[string]string{"x": "node-3", "y": "node-3"})
}

func TestPodsCPU(t *testing.T) {
	pc := newPodCase(t, []*corev1.Node{nodeNamed("node-1"), nodeNamed("node-2")}, map[string]int{"node-1": 2, "node-2": 2}, nil)
	for _, name := range []string{"a", "b", "c"} {
		pc.c.createPod(pc.gatedPodWith(name, "40", "1Gi", "gpu"))
	}
	pc.settleOnePerNode()
}

func TestPodsMemory(t *testing.T) {
	pc := newPodCase(t, []*corev1.Node{nodeNamed("node-1"), nodeNamed("node-2")}, map[string]int{"node-1": 2, "node-2": 2}, nil)
	for _, name := range []string{"a", "b", "c"} {
		pc.c.createPod(pc.gatedPodWith(name, "1", "160Gi", "gpu"))
	}
	pc.settleOnePerNode()
}

// waitBound waits until n of the case's pods are bound to a node.
func (pc *podCase) waitBound(n int) {
	pc.c.eventually(fmt.Sprintf("%d pods bound", n), 2*time.Minute, func() (bool, error) {
		bound := 0
		for _, p := range pc.c.pods(pc.ns) {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == n, nil
	})
}

// settleOnePerNode: three pods of which each node holds one (by CPU or
// memory): two bound, on different nodes, the third not given devices.
func (pc *podCase) settleOnePerNode() {
	pc.waitBound(2)
	want := map[string]string{}
	for _, p := range pc.c.pods(pc.ns) {
		if p.Spec.NodeName != "" {
			want[p.Name] = p.Spec.NodeName
		}
	}
	pc.settle(want)
	nodes := map[string]bool{}
	for _, n := range want {
		nodes[n] = true
	}
	if len(nodes) != 2 {
		pc.t.Errorf("pods on %v, want one per node", want)
	}
}

// A gated pod with required inter-pod anti-affinity is left to the
// scheduler: drasat removes its gate without allocating (Event
// LeftToScheduler), and the scheduler allocates its claim and binds it.
func TestPodsLeftToScheduler(t *testing.T) {
	pc := newPodCase(t, []*corev1.Node{nodeNamed("node-1"), nodeNamed("node-2")}, map[string]int{"node-1": 1, "node-2": 1}, nil)
	p := pc.gatedPodWith("spread", "1", "1Gi", "gpu")
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}, TopologyKey: "kubernetes.io/hostname"}}}}
	pc.c.createPod(p)
	pc.c.eventually("the pod bound", 2*time.Minute, func() (bool, error) {
		for _, p := range pc.c.pods(pc.ns) {
			if p.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
	got := pc.c.pods(pc.ns)[0]
	cl := pc.c.podClaim(&got, "gpu")
	if cl == nil || cl.Status.Allocation == nil {
		t.Fatal("claim not allocated")
	}
	if by := cl.Annotations[k8s.AllocatedByAnnotation]; by != "" {
		t.Errorf("claim allocated by %q, want the scheduler", by)
	}
	pc.c.eventually("a LeftToScheduler Event", 30*time.Second, func() (bool, error) {
		for _, e := range pc.c.events(pc.ns, k8s.ReasonLeftToScheduler) {
			if e.InvolvedObject.Name == "spread" && strings.Contains(e.Message, "required inter-pod anti-affinity") {
				return true, nil
			}
		}
		return false, nil
	})
	pc.c.assertFeasible()
}

// The watch itself: a claim drasat allocated (a managed standalone claim,
// on node-1) that an ungated pod selecting node-2 then uses. The
// scheduler cannot place the pod with the claim where it is, so its
// PostFilter removes the allocation: drasat_allocations_undone_total
// counts it and the claim gets an AllocationUndone Event.
func TestPodsUndoneAllocationSeen(t *testing.T) {
	pc := newPodCase(t, []*corev1.Node{nodeNamed("node-1"), nodeNamed("node-2")}, map[string]int{"node-1": 1}, nil)
	c := pc.c
	c.createClaim(pc.ns, "managed", deviceSpec("gpu"), true)
	c.eventually("the managed claim allocated by drasat", time.Minute, func() (bool, error) {
		cl := c.claim(pc.ns, "managed")
		return cl.Status.Allocation != nil && cl.Annotations[k8s.AllocatedByAnnotation] != "", nil
	})
	p := pod(pc.ns, "elsewhere", false, byName("gpu", "managed"))
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "node-2"}
	c.createPod(p)
	c.eventually("drasat_allocations_undone_total 1 and an AllocationUndone Event", 2*time.Minute, func() (bool, error) {
		m := httpGet(t, "http://"+metricsAddr(t, pc.drasat)+"/metrics")
		if !regexp.MustCompile(`(?m)^drasat_allocations_undone_total [1-9]`).MatchString(m) {
			return false, nil
		}
		return len(c.events(pc.ns, k8s.ReasonAllocationUndone)) > 0, nil
	})
}
