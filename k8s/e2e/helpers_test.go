package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/k8s"
)

// example loads one of examples/.
func example(t *testing.T, name string, files ...string) *input.Objects {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join(repoRoot, "examples", name, f))
	}
	if len(files) == 0 {
		paths = []string{filepath.Join(repoRoot, "examples", name)}
	}
	objs, _, err := input.Load(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// createPool creates the example's Nodes, DeviceClasses and ResourceSlices.
func (c *cluster) createPool(objs *input.Objects) {
	c.t.Helper()
	ctx := context.Background()
	c.createNodes(objs.Nodes)
	for _, dc := range objs.Classes {
		dc = dc.DeepCopy()
		dc.ResourceVersion = ""
		if _, err := c.admin.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
			c.t.Fatalf("create class %s: %v", dc.Name, err)
		}
	}
	for _, s := range objs.Slices {
		s = s.DeepCopy()
		s.ResourceVersion = ""
		if _, err := c.admin.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			c.t.Fatalf("create slice %s: %v", s.Name, err)
		}
	}
}

// createWholeGPUs creates the device class gpu (driver gpu.example.com)
// and a slice of n whole GPUs, gpu-0 to gpu-<n-1>, on node.
func (c *cluster) createWholeGPUs(node string, n int) {
	c.t.Helper()
	ctx := context.Background()
	_, err := c.admin.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "gpu.example.com"`}}}}}, metav1.CreateOptions{})
	must(c.t, err)
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"}}
	s.Spec.Driver, s.Spec.NodeName = "gpu.example.com", ptr.To(node)
	s.Spec.Pool = resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	_, err = c.admin.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
	must(c.t, err)
}

// namespace creates a namespace drasat serves (labelled
// drasat.dev/enabled=true: its pods with claims are gated, and drasat's
// admission policy lets it write the claims there).
func (c *cluster) namespace(name string) {
	c.t.Helper()
	c.namespaceLabelled(name, map[string]string{"drasat.dev/enabled": "true"})
}

func (c *cluster) namespaceLabelled(name string, labels map[string]string) {
	c.t.Helper()
	if _, err := c.admin.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// pod returns a pod using the given claims (by template or by name), gated
// for drasat when gated is set, else labelled to opt out of gating.
func pod(ns, name string, gated bool, claims ...corev1.PodResourceClaim) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			ResourceClaims:                claims,
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			}},
		},
	}
	for _, rc := range claims {
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: rc.Name})
	}
	if gated {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: k8s.SchedulingGate}}
	} else {
		// The scheduler's pod: opted out of deploy/'s gating policy.
		p.Labels["drasat.dev/enabled"] = "false"
	}
	return p
}

func fromTemplate(name, tmpl string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(tmpl)}
}

func byName(name, claim string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(claim)}
}

func (c *cluster) createTemplate(ns, name string, spec resourceapi.ResourceClaimSpec) {
	c.t.Helper()
	_, err := c.admin.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(), &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: spec},
	}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) createPod(p *corev1.Pod) {
	c.t.Helper()
	if _, err := c.admin.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("create pod %s: %v", p.Name, err)
	}
}

// createClaim creates a standalone claim, optionally labelled for drasat.
func (c *cluster) createClaim(ns, name string, spec resourceapi.ResourceClaimSpec, managed bool) {
	c.t.Helper()
	cl := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	if managed {
		cl.Labels = map[string]string{k8s.ManagedLabel: "true"}
	}
	if _, err := c.admin.ResourceV1().ResourceClaims(ns).Create(context.Background(), cl, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("create claim %s: %v", name, err)
	}
}

// eventually polls cond until it holds or the timeout ends.
func (c *cluster) eventually(what string, timeout time.Duration, cond func() (bool, error)) {
	c.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		c.t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
	}
}

func (c *cluster) claims(ns string) []resourceapi.ResourceClaim {
	c.t.Helper()
	l, err := c.admin.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return l.Items
}

func (c *cluster) pods(ns string) []corev1.Pod {
	c.t.Helper()
	l, err := c.admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return l.Items
}

func (c *cluster) claim(ns, name string) *resourceapi.ResourceClaim {
	c.t.Helper()
	cl, err := c.admin.ResourceV1().ResourceClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// podClaim returns the claim a pod's entry resolves to (nil if not yet).
func (c *cluster) podClaim(p *corev1.Pod, entry string) *resourceapi.ResourceClaim {
	for _, rc := range p.Spec.ResourceClaims {
		if rc.Name != entry {
			continue
		}
		name := ""
		if rc.ResourceClaimName != nil {
			name = *rc.ResourceClaimName
		}
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name == entry && s.ResourceClaimName != nil {
				name = *s.ResourceClaimName
			}
		}
		if name == "" {
			return nil
		}
		cl, err := c.admin.ResourceV1().ResourceClaims(p.Namespace).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			c.t.Fatal(err)
		}
		return cl
	}
	return nil
}

// assertFeasible runs the independent checker over every claim the API
// server holds: every allocation valid, no device allocated twice, no
// counter exceeded, compatibility groups respected, bound pods on their
// claims' nodes.
func (c *cluster) assertFeasible() {
	c.t.Helper()
	objs := c.objects()
	n := 0
	for _, cl := range objs.Claims {
		if cl.Status.Allocation != nil {
			n++
		}
	}
	if err := check.CheckAll(objs, check.Options{}); err != nil {
		c.t.Fatalf("the API server holds an infeasible state (%d allocated claims): %v", n, err)
	}
	c.t.Logf("checker: %d allocated claims of %d, all feasible together", n, len(objs.Claims))
}

// objects reads what the allocation depends on from the API server: every
// claim, slice, class, node, pod and taint rule.
func (c *cluster) objects() *input.Objects {
	c.t.Helper()
	ctx := context.Background()
	cl, err := c.admin.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	sl, _ := c.admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	dc, _ := c.admin.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	nl, _ := c.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	pl, _ := c.admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	tr, _ := c.admin.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{})
	objs := &input.Objects{}
	for i := range tr.Items {
		objs.TaintRules = append(objs.TaintRules, &tr.Items[i])
	}
	for i := range cl.Items {
		objs.Claims = append(objs.Claims, &cl.Items[i])
	}
	for i := range sl.Items {
		objs.Slices = append(objs.Slices, &sl.Items[i])
	}
	for i := range dc.Items {
		objs.Classes = append(objs.Classes, &dc.Items[i])
	}
	for i := range nl.Items {
		objs.Nodes = append(objs.Nodes, &nl.Items[i])
	}
	for i := range pl.Items {
		objs.Pods = append(objs.Pods, &pl.Items[i])
	}
	return objs
}

func (c *cluster) nodeMatches(a *resourceapi.AllocationResult, nodeName string) bool {
	c.t.Helper()
	if a.NodeSelector == nil {
		return true
	}
	n, err := c.admin.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	ns, err := nodeaffinity.NewNodeSelector(a.NodeSelector)
	if err != nil {
		c.t.Fatal(err)
	}
	return ns.Match(n)
}

func hasGate(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == k8s.SchedulingGate {
			return true
		}
	}
	return false
}

func reservedFor(cl *resourceapi.ResourceClaim, p *corev1.Pod) bool {
	for _, r := range cl.Status.ReservedFor {
		if r.UID == p.UID {
			return true
		}
	}
	return false
}

func (c *cluster) events(ns, reason string) []corev1.Event {
	c.t.Helper()
	l, err := c.admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range l.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func devicesOf(cl *resourceapi.ResourceClaim) string {
	if cl.Status.Allocation == nil {
		return "-"
	}
	var parts []string
	for _, r := range cl.Status.Allocation.Devices.Results {
		parts = append(parts, r.Pool+"/"+r.Device)
	}
	return strings.Join(parts, ",")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
