package alloc

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
)

// randomPodInstance draws a small cluster with pods: nodes with labels,
// allocatable CPU, memory and pods, taints, cordons and bound pods, each
// with node-local GPUs and NICs; pending pods with CPU and memory
// requests (also in init containers), node selectors, required node
// affinity and tolerations, using one to three claims, some claims shared
// by two pods.
func randomPodInstance(seed uint64) *input.Objects {
	r := rand.New(rand.NewPCG(seed, 26))
	objs := &input.Objects{}
	sel := func(driver string) []resourceapi.DeviceSelector {
		return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}}}
	}
	objs.Classes = []*resourceapi.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{Selectors: sel("gpu.example.com")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nic"}, Spec: resourceapi.DeviceClassSpec{Selectors: sel("nic.example.com")}},
	}
	nodes := 2 + r.IntN(3)
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("node-%d", i+1)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"zone": []string{"a", "b"}[r.IntN(2)], "gpu": []string{"a100", "h100"}[r.IntN(2)]}}}
		n.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(4+4*r.IntN(4)), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(8+8*r.IntN(3))<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(int64(2+r.IntN(8)), resource.DecimalSI),
		}
		switch r.IntN(6) {
		case 0:
			n.Spec.Unschedulable = true
		case 1:
			n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
		case 2:
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoExecute}}
		case 3:
			n.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
		}
		objs.Nodes = append(objs.Nodes, n)
		for _, drv := range []string{"gpu", "nic"} {
			s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + drv}}
			s.Spec.Driver = drv + ".example.com"
			s.Spec.Pool = resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}
			s.Spec.NodeName = ptr.To(name)
			for d := 0; d < 1+r.IntN(2); d++ {
				s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("%s-%d", drv, d)})
			}
			objs.Slices = append(objs.Slices, s)
		}
		if r.IntN(3) == 0 {
			objs.Pods = append(objs.Pods, podWith("bound-"+name, int64(1+r.IntN(4)), 2, nil, name))
		}
	}
	if r.IntN(3) == 0 {
		// A pod whose claim is allocated already (its gate removed), not
		// bound yet: its requests count on the claim's node.
		node := objs.Nodes[r.IntN(nodes)].Name
		objs.Claims = append(objs.Claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: "gpu.example.com", Pool: node, Device: "gpu-0"}}},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}})
		objs.Pods = append(objs.Pods, podWith("ungated", int64(1+r.IntN(8)), 4, []string{"running"}, ""))
	}
	pods := 1 + r.IntN(4)
	claimNo := 0
	var last []string // the previous pod's claims, to share one
	for i := 0; i < pods; i++ {
		var claims []string
		if len(last) > 0 && r.IntN(4) == 0 {
			claims = append(claims, last[r.IntN(len(last))])
		}
		for k := 0; k < 1+r.IntN(2) || len(claims) == 0; k++ {
			if len(claims) >= 3 {
				break
			}
			claimNo++
			name := fmt.Sprintf("claim-%d", claimNo)
			class := []string{"gpu", "nic"}[r.IntN(2)]
			objs.Claims = append(objs.Claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
					Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}})
			claims = append(claims, name)
		}
		pod := podWith(fmt.Sprintf("pod-%d", i+1), int64(1+r.IntN(8)), int64(1+r.IntN(12)), claims, "")
		switch r.IntN(5) {
		case 0:
			pod.Spec.NodeSelector = map[string]string{"zone": []string{"a", "b"}[r.IntN(2)]}
		case 1:
			pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"h100"}}}}}}}}
		}
		switch r.IntN(4) {
		case 0:
			pod.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
		case 1:
			pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		if r.IntN(4) == 0 {
			// An init container asking for more than the containers.
			pod.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: *resource.NewQuantity(int64(2+r.IntN(10)), resource.DecimalSI)}}}}
		}
		objs.Pods = append(objs.Pods, pod)
		last = claims
	}
	return objs
}

// podWith is a pod requesting cpu CPUs and mem GiB, using claims, bound to
// node (or pending when "").
func podWith(name string, cpu, mem int64, claims []string, node string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	p.Spec.NodeName = node
	p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem<<30, resource.BinarySI),
	}}}}
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return p
}

// schedulerAccepts runs the kube-scheduler's filters that drasat applies
// through the scheduler's own libraries, on the raw objects (nothing of
// model): placed maps each admitted claim to its node. Every pending pod
// with an admitted claim must have all its claims admitted on one node
// that NodeUnschedulable, TaintToleration and NodeAffinity accept, and on
// every node the pods placed there and the bound pods must fit in its
// allocatable (NodeResourcesFit, including the pod count).
func schedulerAccepts(objs *input.Objects, placed map[string]string) error {
	nodes := map[string]*corev1.Node{}
	for _, n := range objs.Nodes {
		nodes[n.Name] = n
	}
	type use struct{ cpu, mem, pods int64 }
	used := map[string]*use{}
	add := func(node string, p *corev1.Pod) {
		if used[node] == nil {
			used[node] = &use{}
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		used[node].cpu += req.Cpu().MilliValue()
		used[node].mem += req.Memory().Value()
		used[node].pods++
	}
	logger := klog.Background()
	newHere := map[string]bool{}    // nodes with pods drasat placed
	existing := map[string]string{} // claims allocated before: their node
	for _, c := range objs.Claims {
		if a := c.Status.Allocation; a != nil {
			existing[c.Name] = a.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0]
		}
	}
	for _, p := range objs.Pods {
		if p.Spec.NodeName != "" {
			add(p.Spec.NodeName, p)
			continue
		}
		if n, ok := existing[*p.Spec.ResourceClaims[0].ResourceClaimName]; ok {
			add(n, p) // its node is decided: it counts there
			continue
		}
		node, some, all := "", false, true
		for _, rc := range p.Spec.ResourceClaims {
			n, ok := placed[*rc.ResourceClaimName]
			if !ok {
				all = false
				continue
			}
			some = true
			if node != "" && n != node {
				return fmt.Errorf("pod %s: claims on %s and %s", p.Name, node, n)
			}
			node = n
		}
		if !some {
			continue
		}
		if !all {
			return fmt.Errorf("pod %s: only some of its claims are allocated", p.Name)
		}
		n := nodes[node]
		if n.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, p.Spec.Tolerations, &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false) {
			return fmt.Errorf("pod %s: node %s is cordoned", p.Name, node)
		}
		if t, bad := corev1helpers.FindMatchingUntoleratedTaint(logger, n.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); bad {
			return fmt.Errorf("pod %s: node %s has taint %v", p.Name, node, t)
		}
		if ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); err != nil || !ok {
			return fmt.Errorf("pod %s: node %s does not match its affinity", p.Name, node)
		}
		add(node, p)
		newHere[node] = true
	}
	for name, u := range used {
		if !newHere[name] {
			continue // as it was before
		}
		a := nodes[name].Status.Allocatable
		if u.cpu > a.Cpu().MilliValue() || u.mem > a.Memory().Value() || u.pods > a.Pods().Value() {
			return fmt.Errorf("node %s: pods request %dm CPU, %d memory, %d pods; allocatable %v", name, u.cpu, u.mem, u.pods, a)
		}
	}
	return nil
}

// placedNodes maps the claims of res to the node their allocation's node
// selector admits (the devices are node-local: exactly one).
func placedNodes(t *testing.T, p *model.Problem, objs *input.Objects, res *Result) map[string]string {
	t.Helper()
	claims, err := Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		ns, err := nodeaffinity.NewNodeSelector(c.Status.Allocation.NodeSelector)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range objs.Nodes {
			if ns.Match(n) {
				if prev, ok := out[c.Name]; ok {
					t.Fatalf("claim %s: selector admits %s and %s", c.Name, prev, n.Name)
				}
				out[c.Name] = n.Name
			}
		}
	}
	return out
}

// podBruteForce is the most claims any combination of the claims' device
// options admits that schedulerAccepts accepts.
func podBruteForce(t *testing.T, objs *input.Objects) int {
	// The problem without pods: every device placement of each claim.
	bare := *objs
	bare.Pods = nil
	p := build(t, &bare, "")
	opts := make([][]option, len(p.Claims))
	for i, c := range p.Claims {
		opts[i] = allOptions(p, c)
	}
	s := model.NewState(p)
	placed := map[string]string{}
	best := 0
	var rec func(i, n int)
	rec = func(i, n int) {
		if n+len(p.Claims)-i <= best {
			return
		}
		if i == len(p.Claims) {
			if schedulerAccepts(objs, placed) == nil {
				best = n
			}
			return
		}
		rec(i+1, n)
		c := p.Claims[i]
		for _, o := range opts[i] {
			if undo, ok := tryTake(s, c, o); ok {
				placed[c.Obj.Name] = p.Nodes[o.node].Name
				rec(i+1, n+1)
				delete(placed, c.Obj.Name)
				undo()
			}
		}
	}
	rec(0, 0)
	return best
}

// Every node drasat chooses for a pod passes the scheduler's filters run
// through its own libraries, with every pod's claims on one node and node
// resources respected; and drasat admits as many claims as brute force.
func TestPodRulesAgainstSchedulerLibraries(t *testing.T) {
	seeds := 100
	if s, err := strconv.Atoi(os.Getenv("DRASAT_POD_SEEDS")); err == nil {
		seeds = s
	}
	refusedSome, sharedSome, multiSome := false, false, false
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		objs := randomPodInstance(seed)
		p := build(t, objs, "")
		res := run(t, p, Options{})
		checkAllocations(t, p, objs, res, "")
		placed := placedNodes(t, p, objs, res)
		if err := schedulerAccepts(objs, placed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		want := podBruteForce(t, objs)
		if res.Stats.Admitted != want {
			t.Fatalf("seed %d: drasat admits %d claims, brute force %d", seed, res.Stats.Admitted, want)
		}
		if !res.Stats.Optimal {
			t.Errorf("seed %d: not proven optimal", seed)
		}
		// The paths without the SAT model, and the ordered objective:
		// valid answers, whatever they admit.
		for _, o := range []Options{{MaxVariables: -1}, {Objective: Ordered}, {Objective: Ordered, MaxVariables: -1}} {
			p := build(t, objs, "")
			res := run(t, p, o)
			checkAllocations(t, p, objs, res, "")
			if err := schedulerAccepts(objs, placedNodes(t, p, objs, res)); err != nil {
				t.Fatalf("seed %d, %+v: %v", seed, o, err)
			}
		}
		for _, c := range p.Claims {
			refusedSome = refusedSome || len(c.PodRefused) > 0
			sharedSome = sharedSome || len(c.Pods) > 1
			multiSome = multiSome || c.Group != nil && len(c.Group.Claims) > 1
		}
	}
	if !refusedSome || !sharedSome || !multiSome {
		t.Errorf("the instances lack a case: refused nodes %v, shared claims %v, pods with several claims %v", refusedSome, sharedSome, multiSome)
	}
}

// TestPodRulesLPAgainstBruteForce: the MIP export carries the pod rules.
// On the random pod instances (taints, affinity, shared claims, pods of
// several claims, CPU, memory and pod count), CBC's optimum of `drasat
// export --lp` equals the brute-force optimum under the scheduler's
// filters.
func TestPodRulesLPAgainstBruteForce(t *testing.T) {
	if mip.CBCPath() == "" {
		t.Skip("cbc not installed (Debian: apt-get install coinor-cbc); the LP export's pod rules are not checked")
	}
	dir := t.TempDir()
	for seed := uint64(1); seed <= 30; seed++ {
		objs := randomPodInstance(seed)
		p := build(t, objs, "")
		path := filepath.Join(dir, fmt.Sprintf("seed%d.lp", seed))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mip.WriteLP(f, p); err != nil {
			t.Fatal(err)
		}
		f.Close()
		sol, err := mip.SolveCBC(context.Background(), path, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if want := podBruteForce(t, objs); !strings.HasPrefix(sol.Status, "Optimal") || int(math.Round(sol.Objective)) != want {
			t.Fatalf("seed %d: CBC %s %g, brute force %d", seed, sol.Status, sol.Objective, want)
		}
	}
}

// TestRejectionReasonsAreTyped: on the shipped pods example, a caller tells
// the claims turned away for their pods' CPU from the others by
// model.ReasonOf, without reading the message.
func TestRejectionReasonsAreTyped(t *testing.T) {
	objs, _, err := input.Load([]string{filepath.Join("..", "examples", "pods-cpu")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, p, Options{})
	resources := 0
	for i, why := range res.Rejected {
		reason := model.ReasonOf(why)
		if reason == "" {
			t.Errorf("%s: rejection %q has no reason", p.Claims[i].Key, why)
		}
		if byText := strings.Contains(why.Error(), "free besides the pods admitted there"); byText != (reason == model.ReasonNodeResources) {
			t.Errorf("%s: %q has reason %s", p.Claims[i].Key, why, reason)
		}
		if reason == model.ReasonNodeResources {
			resources++
		}
	}
	if resources == 0 {
		t.Fatalf("no claim rejected for node resources: %v", res.Rejected)
	}
}
