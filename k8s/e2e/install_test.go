package e2e

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/k8s"
)

// drasatClient is a client with drasat's identity (deploy/'s
// ServiceAccount token), for requests the tests make as drasat would.
func (c *cluster) drasatClient() kubernetes.Interface {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.drasatKC)
	must(c.t, err)
	return kubernetes.NewForConfigOrDie(cfg)
}

// denied asserts that err is a refusal naming want (a policy or RBAC).
func denied(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want denied (%s)", what, want)
	case !strings.Contains(err.Error(), want):
		t.Errorf("%s: %v; want a denial naming %q", what, err, want)
	default:
		t.Logf("%s: denied: %v", what, firstLineOf(err.Error()))
	}
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// TestPolicies: the ValidatingAdmissionPolicies of deploy/admission.yaml
// on the real API server, with requests made under drasat's identity. RBAC
// lets drasat update any pod and claim; the policies allow only removing
// its gate, and on claims only its allocation, finalizer and annotations.
func TestPolicies(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	as := c.drasatClient()
	const ns = "policy"
	c.namespace(ns)
	p := pod(ns, "gated", true)
	p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "other.example/gate"})
	c.createPod(p)
	get := func() *corev1.Pod {
		got, err := c.admin.CoreV1().Pods(ns).Get(ctx, "gated", metav1.GetOptions{})
		must(t, err)
		return got
	}
	dropGate := func(u *corev1.Pod) {
		u.Spec.SchedulingGates = slices.DeleteFunc(u.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == k8s.SchedulingGate })
	}
	// update removes drasat's gate, as drasat does, and makes one more
	// change.
	update := func(what string, change func(*corev1.Pod)) error {
		u := get()
		dropGate(u)
		change(u)
		_, err := as.CoreV1().Pods(ns).Update(ctx, u, metav1.UpdateOptions{})
		return err
	}
	const podPolicy = "drasat-pod-writes"
	// The policies act once the API server's admission plugin has loaded
	// them and their bindings (type-checked is not enough): probe with a
	// server-side dry run until one is refused by the policy.
	c.eventually("validating policies active", 30*time.Second, func() (bool, error) {
		u := get()
		dropGate(u)
		u.Labels["app"] = "probe"
		_, err := as.CoreV1().Pods(ns).Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), podPolicy), nil
	})
	denied(t, "image change", update("image", func(u *corev1.Pod) { u.Spec.Containers[0].Image = "evil.example/miner:1" }), "may not change a pod's spec")
	denied(t, "label change", update("label", func(u *corev1.Pod) { u.Labels["app"] = "other" }), "may not change a pod's labels")
	denied(t, "toleration added", update("toleration", func(u *corev1.Pod) {
		u.Spec.Tolerations = append(u.Spec.Tolerations, corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists})
	}), "may not change a pod's spec")
	denied(t, "another gate removed", update("gate", func(u *corev1.Pod) { u.Spec.SchedulingGates = nil }),
		podPolicy+"' denied request: drasat may only remove the drasat.dev/allocate scheduling gate")
	u0 := get()
	u0.Spec.Containers[0].Image = "evil.example/miner:1"
	_, err := as.CoreV1().Pods(ns).Update(ctx, u0, metav1.UpdateOptions{})
	denied(t, "image change alone", err, "drasat may only remove the drasat.dev/allocate scheduling gate")
	denied(t, "pod created", func() error {
		_, err := as.CoreV1().Pods(ns).Create(ctx, pod(ns, "new", false), metav1.CreateOptions{})
		return err
	}(), "forbidden")
	denied(t, "pod deleted", as.CoreV1().Pods(ns).Delete(ctx, "gated", metav1.DeleteOptions{}), "forbidden")
	if got := get(); got.Spec.Containers[0].Image != p.Spec.Containers[0].Image || len(got.Spec.SchedulingGates) != 2 {
		t.Fatalf("a denied change went through: %+v", got.Spec)
	}
	// Affinity: only pinning to one node by metadata.name, as the gate
	// goes (--place-pods-without-claims).
	pin := func(nodes ...string) func(*corev1.Pod) {
		return func(u *corev1.Pod) {
			u.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: nodes}}}}}}}
		}
	}
	const affinityDenied = "may change a pod's affinity only to pin it to one node"
	// Narrowings the API server itself allows on a gated pod, but that do
	// not pin it to one node by name.
	denied(t, "affinity by a label", update("label affinity", func(u *corev1.Pod) {
		pin("node-1")(u)
		term := &u.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
		term.MatchExpressions, term.MatchFields = []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}}, nil
	}), affinityDenied)
	denied(t, "affinity away from a node", update("not in", func(u *corev1.Pod) {
		pin("node-1")(u)
		u.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Operator = corev1.NodeSelectorOpNotIn
	}), affinityDenied)
	u1 := get()
	pin("node-1")(u1)
	_, err = as.CoreV1().Pods(ns).Update(ctx, u1, metav1.UpdateOptions{})
	denied(t, "pinned, gate kept", err, "drasat may only remove the drasat.dev/allocate scheduling gate")
	if err := update("drasat gate", pin("node-1")); err != nil {
		t.Fatalf("removing drasat's gate, pinning the pod to node-1: %v", err)
	}
	if got := get(); len(got.Spec.SchedulingGates) != 1 || got.Spec.SchedulingGates[0].Name != "other.example/gate" || got.Spec.Affinity == nil {
		t.Errorf("gates after removal: %v, affinity %+v", got.Spec.SchedulingGates, got.Spec.Affinity)
	}

	// Claims: the admin creates one; drasat may add its finalizer and
	// annotations, not labels or other annotations; in status only the
	// allocation.
	c.createClaim(ns, "cl", migSpec("1g.5gb"), false)
	claims := as.ResourceV1().ResourceClaims(ns)
	updateClaim := func(change func(*resourceapi.ResourceClaim)) error {
		u := c.claim(ns, "cl")
		change(u)
		_, err := claims.Update(ctx, u, metav1.UpdateOptions{})
		return err
	}
	const claimMeta = "drasat may only add the delete-protection finalizer"
	denied(t, "claim label", updateClaim(func(u *resourceapi.ResourceClaim) { u.Labels = map[string]string{k8s.ManagedLabel: "true"} }), claimMeta)
	// Refused by drasat-claim-writes (not drasat's annotation) and by
	// drasat-weight (not a weight-allowed namespace); either may answer.
	denied(t, "claim weight annotation", updateClaim(func(u *resourceapi.ResourceClaim) { u.Annotations = map[string]string{"drasat.dev/weight": "1000"} }), "denied request")
	denied(t, "other finalizer", updateClaim(func(u *resourceapi.ResourceClaim) { u.Finalizers = append(u.Finalizers, "example.com/keep") }), claimMeta)
	if err := updateClaim(func(u *resourceapi.ResourceClaim) {
		u.Finalizers = append(u.Finalizers, k8s.Finalizer)
		u.Annotations = map[string]string{k8s.AllocatedByAnnotation: "e2e", k8s.UnallocatableAnnotation: "test"}
	}); err != nil {
		t.Fatalf("finalizer and drasat's annotations: %v", err)
	}
	u := c.claim(ns, "cl")
	u.Status.Allocation = &resourceapi.AllocationResult{AllocationTimestamp: ptr.To(metav1.Now()), Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "mig", Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-0"}}}}
	u.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "gated", UID: get().UID}}
	_, err = claims.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	denied(t, "status.reservedFor", err, "drasat may only set status.allocation")
	u.Status.ReservedFor = nil
	if _, err := claims.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Errorf("setting status.allocation: %v", err)
	}
	denied(t, "claim deleted", claims.Delete(ctx, "cl", metav1.DeleteOptions{}), "forbidden")

	// Withdrawing: only an allocation drasat wrote (allocated-by), not one
	// of the scheduler's.
	c.createClaim(ns, "theirs", migSpec("1g.5gb"), false)
	theirs := c.claim(ns, "theirs")
	theirs.Status.Allocation = u.Status.Allocation.DeepCopy()
	theirs.Status.Allocation.Devices.Results[0].Device = "gpu-1"
	theirs, err = c.admin.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, theirs, metav1.UpdateOptions{})
	must(t, err)
	theirs.Status.Allocation = nil
	_, err = claims.UpdateStatus(ctx, theirs, metav1.UpdateOptions{})
	denied(t, "withdrawing the scheduler's allocation", err, "withdraw its own allocation")
	mine := c.claim(ns, "cl")
	mine.Status.Allocation = nil
	if _, err := claims.UpdateStatus(ctx, mine, metav1.UpdateOptions{}); err != nil {
		t.Errorf("withdrawing drasat's own allocation: %v", err)
	}

	// Events: drasat's own only, not another component's.
	event := func(name, component, reason string) error {
		_, err := as.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "gated"}, Reason: reason, Message: "e2e",
			Source: corev1.EventSource{Component: component}, Type: corev1.EventTypeNormal}, metav1.CreateOptions{})
		return err
	}
	denied(t, "an Event in the scheduler's name", event("forged", "default-scheduler", "Scheduled"), "drasat may only record its own Events")
	if err := event("own", k8s.Component, k8s.ReasonUngated); err != nil {
		t.Errorf("drasat's own Event: %v", err)
	}
}

// TestNamespacedRBAC: deploy/namespaced/ binds drasat's write rights in one
// namespace only. drasat allocates there; in another namespace it may not
// even remove its gate.
func TestNamespacedRBAC(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("rendering deploy/namespaced needs kubectl (kustomize)")
	}
	c := migCluster(t)
	ctx := context.Background()
	c.namespace("ml")
	c.namespace("elsewhere")
	// Cluster-wide write rights off, as the overlay has them.
	must(t, c.admin.RbacV1().ClusterRoleBindings().Delete(ctx, "drasat-write", metav1.DeleteOptions{}))
	c.applyKustomization("deploy/namespaced")
	if _, err := c.admin.RbacV1().ClusterRoleBindings().Get(ctx, "drasat-write", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deploy/namespaced keeps cluster-wide write rights: %v", err)
	}
	// The overlay gates pods of ml only: this drasat would never ungate a
	// pod elsewhere, though that namespace is labelled for drasat too.
	gp := pod("ml", "probe", false, fromTemplate("gpu", "mig"))
	delete(gp.Labels, "drasat.dev/enabled")
	c.eventually("gating policy active in ml", 30*time.Second, func() (bool, error) {
		got, err := c.admin.CoreV1().Pods("ml").Create(ctx, gp, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && hasGate(got), err
	})
	// The API server reloads the changed binding within seconds; a pod
	// elsewhere must then stay ungated.
	gp.Namespace = "elsewhere"
	c.eventually("pods outside ml not gated", 30*time.Second, func() (bool, error) {
		got, err := c.admin.CoreV1().Pods("elsewhere").Create(ctx, gp, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && !hasGate(got), err
	})
	c.createPod(pod("elsewhere", "p", true))
	as := c.drasatClient()
	u, err := c.admin.CoreV1().Pods("elsewhere").Get(ctx, "p", metav1.GetOptions{})
	must(t, err)
	u.Spec.SchedulingGates = nil
	_, err = as.CoreV1().Pods("elsewhere").Update(ctx, u, metav1.UpdateOptions{})
	denied(t, "gate removal outside the namespace", err, "forbidden")

	c.startDrasat("drasat-ns", "--namespace=ml")
	c.createTemplate("ml", "mig", migSpec("1g.5gb"))
	c.createPod(pod("ml", "worker", true, fromTemplate("gpu", "mig")))
	c.eventually("pod in ml bound", 2*time.Minute, func() (bool, error) {
		p, err := c.admin.CoreV1().Pods("ml").Get(ctx, "worker", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", err
	})
	c.assertFeasible()
}

// TestGatingDeployment: deploy/gating.yaml's MutatingAdmissionPolicy gates
// the pods of a plain Deployment in a namespace labelled
// drasat.dev/enabled=true; drasat allocates their claims, the real
// scheduler binds them, and the Deployment's spec never mentions drasat.
// A pod labelled drasat.dev/enabled=false is left alone.
func TestGatingDeployment(t *testing.T) {
	c := newClusterWith(t, clusterOptions{controllers: []string{"resourceclaim-controller", "deployment-controller", "replicaset-controller"}})
	ctx := context.Background()
	// drasat runs as a local process here, not as deploy/'s Deployment.
	must(t, c.admin.AppsV1().Deployments(drasatNamespace).Delete(ctx, "drasat", metav1.DeleteOptions{}))
	c.createPool(example(t, "mig-a100", "00-nodes.yaml", "10-classes.yaml", "20-slices.yaml"))
	const ns = "apps"
	_, err := c.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"drasat.dev/enabled": "true"}}}, metav1.CreateOptions{})
	must(t, err)
	c.createTemplate(ns, "mig", migSpec("1g.5gb"))

	// The policy acts once the API server has loaded it: probe with
	// dry-run creates.
	probe := pod(ns, "probe", false, fromTemplate("gpu", "mig"))
	delete(probe.Labels, "drasat.dev/enabled")
	c.eventually("mutating policy active", 30*time.Second, func() (bool, error) {
		got, err := c.admin.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && hasGate(got), err
	})
	out := pod(ns, "opted-out", false, fromTemplate("gpu", "mig"))
	out.Labels["drasat.dev/enabled"] = "false"
	got, err := c.admin.CoreV1().Pods(ns).Create(ctx, out, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	must(t, err)
	if hasGate(got) {
		t.Error("a pod labelled drasat.dev/enabled=false was gated")
	}
	plain := pod("default", "plain", false, fromTemplate("gpu", "mig"))
	delete(plain.Labels, "drasat.dev/enabled")
	got, err = c.admin.CoreV1().Pods("default").Create(ctx, plain, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	must(t, err)
	if hasGate(got) {
		t.Error("a pod in a namespace without drasat.dev/enabled=true was gated")
	}

	c.startDrasat("drasat-a")
	tmpl := pod(ns, "web", false, fromTemplate("gpu", "mig"))
	delete(tmpl.Labels, "drasat.dev/enabled")
	const replicas = 4
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](replicas),
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels}, Spec: tmpl.Spec},
		},
	}
	_, err = c.admin.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	must(t, err)
	c.eventually("the Deployment's pods bound", 2*time.Minute, func() (bool, error) {
		ps := c.pods(ns)
		bound := 0
		for _, p := range ps {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == replicas && len(ps) == replicas, nil
	})
	for _, p := range c.pods(ns) {
		cl := c.podClaim(&p, "gpu")
		if cl == nil || cl.Annotations[k8s.AllocatedByAnnotation] != "drasat-a" {
			t.Errorf("pod %s: claim not allocated by drasat: %v", p.Name, cl)
			continue
		}
		t.Logf("pod %s on %s: %s", p.Name, p.Spec.NodeName, devicesOf(cl))
	}
	if n := len(c.events(ns, k8s.ReasonUngated)); n != replicas {
		t.Errorf("%d SchedulingGateRemoved events, want %d (one per gated pod)", n, replicas)
	}
	dep, err := c.admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	must(t, err)
	if len(dep.Spec.Template.Spec.SchedulingGates) != 0 {
		t.Errorf("the Deployment's template was changed: %v", dep.Spec.Template.Spec.SchedulingGates)
	}
	c.assertFeasible()
}
