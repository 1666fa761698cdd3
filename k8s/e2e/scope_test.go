package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
