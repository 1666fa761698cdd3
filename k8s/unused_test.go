package k8s

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A standalone claim's allocation that nothing used for UnusedAfter is
// withdrawn and marked, and not allocated again; one a pod names, one
// reserved, one younger and one the scheduler made are left alone.
func TestReleaseUnused(t *testing.T) {
	managed := map[string]string{ManagedLabel: "true"}
	old := metav1.NewTime(time.Now().Add(-2 * time.Hour).Truncate(time.Second))
	allocated := func(name string, at metav1.Time, by string) *resourceapi.ResourceClaim {
		c := claim(name, 1, managed)
		c.Status.Allocation = onN1()
		c.Status.Allocation.Devices.Results[0].Device = "gpu-" + name
		c.Status.Allocation.AllocationTimestamp = &at
		if by != "" {
			c.Annotations = map[string]string{AllocatedByAnnotation: by}
		}
		return c
	}
	idle := allocated("idle", old, "drasat")
	named := allocated("named", old, "drasat")
	reserved := allocated("reserved", old, "drasat")
	reserved.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "x", UID: "x"}}
	young := allocated("young", metav1.NewTime(time.Now()), "drasat")
	theirs := allocated("theirs", old, "")
	user := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user", Namespace: "default"},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("named")}}, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	e := newEnv(t, Options{UnusedAfter: time.Hour}, node("n1"), slice("n1", 2), class(), idle, named, reserved, young, theirs, user)
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Withdrawn != 1 {
		t.Errorf("withdrawn %d, want 1 (idle)", res.Withdrawn)
	}
	got := e.claim(t, "idle")
	if got.Status.Allocation != nil || !strings.HasPrefix(got.Annotations[UnallocatableAnnotation], unusedReason) {
		t.Errorf("idle: allocation %v, annotation %q; want withdrawn and marked", got.Status.Allocation, got.Annotations[UnallocatableAnnotation])
	}
	for _, n := range []string{"named", "reserved", "young", "theirs"} {
		if e.claim(t, n).Status.Allocation == nil {
			t.Errorf("%s: withdrawn, want kept", n)
		}
	}
	// The next pass does not allocate the marked claim again.
	time.Sleep(200 * time.Millisecond) // the cache sees the withdrawal
	if _, err := e.r.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.claim(t, "idle").Status.Allocation != nil {
		t.Error("the unused claim was allocated again")
	}
}
