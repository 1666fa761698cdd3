package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/k8s"
)

// allocation is a one-device allocation of the mig-a100 pool.
func allocation(device string) *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{AllocationTimestamp: ptr.To(metav1.Now()), Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "mig", Driver: "gpu.nvidia.com", Pool: "node-1", Device: device}}}}
}

// TestClaimWriteScope: with drasat's token (as a thief would use it),
// claims are writable only where drasat serves them: in a namespace
// labelled drasat.dev/enabled=true, or labelled drasat.dev/managed=true.
// And drasat cannot forge its mark on someone else's allocation to
// withdraw it.
func TestClaimWriteScope(t *testing.T) {
	c := migCluster(t)
	ctx := context.Background()
	as := c.drasatClient()
	c.namespace("served")
	c.namespaceLabelled("tenant", nil)
	c.createClaim("served", "in-served", migSpec("1g.5gb"), false)
	c.createClaim("tenant", "foreign", migSpec("1g.5gb"), false)
	c.createClaim("tenant", "managed", migSpec("1g.5gb"), true)
	allocate := func(ns, name, device string) error {
		cl := c.claim(ns, name)
		cl.Status.Allocation = allocation(device)
		_, err := as.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, cl, metav1.UpdateOptions{})
		return err
	}
	const scope = "drasat may only write claims it serves"
	// The policies act once loaded: probe with a dry run.
	c.eventually("claim policy active", 30*time.Second, func() (bool, error) {
		cl := c.claim("tenant", "foreign")
		cl.Status.Allocation = allocation("gpu-0")
		_, err := as.ResourceV1().ResourceClaims("tenant").UpdateStatus(ctx, cl, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), scope), nil
	})
	denied(t, "allocating a claim of an unserved namespace", allocate("tenant", "foreign", "gpu-0"), scope)
	fc := c.claim("tenant", "foreign")
	fc.Annotations = map[string]string{k8s.UnallocatableAnnotation: "x"}
	_, err := as.ResourceV1().ResourceClaims("tenant").Update(ctx, fc, metav1.UpdateOptions{})
	denied(t, "annotating a claim of an unserved namespace", err, scope)
	if err := allocate("served", "in-served", "gpu-0"); err != nil {
		t.Errorf("allocating a claim in a served namespace: %v", err)
	}
	if err := allocate("tenant", "managed", "gpu-1"); err != nil {
		t.Errorf("allocating a managed claim: %v", err)
	}

	// Forged withdraw: the scheduler (here the admin) allocated a claim;
	// drasat may neither mark it as its own nor withdraw it.
	c.createClaim("served", "schedulers", migSpec("1g.5gb"), false)
	theirs := c.claim("served", "schedulers")
	theirs.Status.Allocation = allocation("gpu-2")
	_, err = c.admin.ResourceV1().ResourceClaims("served").UpdateStatus(ctx, theirs, metav1.UpdateOptions{})
	must(t, err)
	forged := c.claim("served", "schedulers")
	forged.Annotations = map[string]string{k8s.AllocatedByAnnotation: "drasat"}
	_, err = as.ResourceV1().ResourceClaims("served").Update(ctx, forged, metav1.UpdateOptions{})
	denied(t, "marking the scheduler's allocation as drasat's", err, "drasat.dev/allocated-by on a claim not allocated yet")
	w := c.claim("served", "schedulers")
	w.Status.Allocation = nil
	_, err = as.ResourceV1().ResourceClaims("served").UpdateStatus(ctx, w, metav1.UpdateOptions{})
	denied(t, "withdrawing the scheduler's allocation", err, "withdraw its own allocation")
	if c.claim("served", "schedulers").Status.Allocation == nil {
		t.Error("the scheduler's allocation was withdrawn")
	}
}

// TestWeightAnnotationRefused: deploy/'s drasat-weight policy refuses
// drasat.dev/weight on claims and claim templates (a tenant raising its
// own priority) except where an administrator labelled the namespace
// drasat.dev/weight-allowed=true.
func TestWeightAnnotationRefused(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	c.namespace("tenant")
	c.namespaceLabelled("trusted", map[string]string{"drasat.dev/enabled": "true", "drasat.dev/weight-allowed": "true"})
	weighted := func(ns, name string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{"drasat.dev/weight": "1000"}}, Spec: migSpec("1g.5gb")}
	}
	tmpl := func(ns string) *resourceapi.ResourceClaimTemplate {
		return &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "heavy"},
			Spec: resourceapi.ResourceClaimTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"drasat.dev/weight": "1000"}}, Spec: migSpec("1g.5gb")}}
	}
	const msg = "drasat.dev/weight is only allowed in namespaces labelled drasat.dev/weight-allowed=true"
	c.eventually("weight policy active", 30*time.Second, func() (bool, error) {
		_, err := c.admin.ResourceV1().ResourceClaims("tenant").Create(ctx, weighted("tenant", "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), msg), nil
	})
	_, err := c.admin.ResourceV1().ResourceClaims("tenant").Create(ctx, weighted("tenant", "w"), metav1.CreateOptions{})
	denied(t, "weighted claim in a tenant namespace", err, msg)
	_, err = c.admin.ResourceV1().ResourceClaimTemplates("tenant").Create(ctx, tmpl("tenant"), metav1.CreateOptions{})
	denied(t, "weighted template in a tenant namespace", err, msg)
	c.createClaim("tenant", "plain", migSpec("1g.5gb"), true)
	u := c.claim("tenant", "plain")
	u.Annotations = map[string]string{"drasat.dev/weight": "1000"}
	_, err = c.admin.ResourceV1().ResourceClaims("tenant").Update(ctx, u, metav1.UpdateOptions{})
	denied(t, "weight added to a claim", err, msg)
	if _, err := c.admin.ResourceV1().ResourceClaims("trusted").Create(ctx, weighted("trusted", "w"), metav1.CreateOptions{}); err != nil {
		t.Errorf("weighted claim where an admin allows it: %v", err)
	}
	if _, err := c.admin.ResourceV1().ResourceClaimTemplates("trusted").Create(ctx, tmpl("trusted"), metav1.CreateOptions{}); err != nil {
		t.Errorf("weighted template where an admin allows it: %v", err)
	}
}

// TestGatingNodeName: in a namespace labelled for drasat, a pod created
// with spec.nodeName (it bypasses the scheduler) is created, ungated; the
// API server refuses a pod with both nodeName and a scheduling gate, so
// gating it would break its creation.
func TestGatingNodeName(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	c.namespace("apps")
	c.createTemplate("apps", "mig", migSpec("1g.5gb"))
	probe := pod("apps", "probe", false, fromTemplate("gpu", "mig"))
	delete(probe.Labels, "drasat.dev/enabled")
	c.eventually("mutating policy active", 30*time.Second, func() (bool, error) {
		got, err := c.admin.CoreV1().Pods("apps").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && hasGate(got), err
	})
	bound := pod("apps", "bound", false, fromTemplate("gpu", "mig"))
	delete(bound.Labels, "drasat.dev/enabled")
	bound.Spec.NodeName = "node-1"
	got, err := c.admin.CoreV1().Pods("apps").Create(ctx, bound, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a pod with spec.nodeName in an enabled namespace: %v", err)
	}
	if hasGate(got) {
		t.Error("a pod with spec.nodeName was gated")
	}
}

// TestInstallElsewhere: deploy/ installed into another namespace with
// kustomize's namespace: (as an overlay of the user's would) still holds
// drasat's ServiceAccount to its policies; a policy naming drasat-system
// would let the moved account change any pod its RBAC reaches.
func TestInstallElsewhere(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("rendering an overlay needs kubectl (kustomize)")
	}
	const ns = "drasat-other"
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(repoRoot, "deploy"))
	must(t, err)
	writeFile(t, filepath.Join(dir, "kustomization.yaml"), []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: "+ns+"\nresources:\n- "+rel+"\n"))
	c := newClusterWith(t, clusterOptions{kustomization: dir})
	ctx := context.Background()
	// A token of the moved ServiceAccount.
	tr, err := c.admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "drasat", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	must(t, err)
	cfg := rest.CopyConfig(c.adminCfg)
	cfg.BearerToken = tr.Status.Token
	as := kubernetes.NewForConfigOrDie(cfg)
	c.namespace("apps")
	c.createPod(pod("apps", "victim", true))
	u, err := c.admin.CoreV1().Pods("apps").Get(ctx, "victim", metav1.GetOptions{})
	must(t, err)
	u.Spec.SchedulingGates = nil
	u.Labels["app"] = "hijacked"
	const msg = "drasat may not change a pod's labels"
	c.eventually("pod policy holds the moved account", 30*time.Second, func() (bool, error) {
		_, err := as.CoreV1().Pods("apps").Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), msg), nil
	})
	_, err = as.CoreV1().Pods("apps").Update(ctx, u, metav1.UpdateOptions{})
	denied(t, "the moved account relabels a pod", err, msg)
	g, err := c.admin.CoreV1().Pods("apps").Get(ctx, "victim", metav1.GetOptions{})
	must(t, err)
	g.Spec.SchedulingGates = nil
	if _, err := as.CoreV1().Pods("apps").Update(ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Errorf("the moved account removing drasat's gate: %v", err)
	}
}
