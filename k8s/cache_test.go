package k8s

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStripUnread: the informers' transform drops managedFields from every
// object and the image list from Nodes, and nothing drasat reads.
func TestStripUnread(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a"}, ManagedFields: mf},
		Spec:       corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
			Images:      []corev1.ContainerImage{{Names: []string{"registry/image:tag"}, SizeBytes: 1 << 30}},
		},
	}
	got, err := stripUnread(node)
	if err != nil {
		t.Fatal(err)
	}
	if n := got.(*corev1.Node); n.ManagedFields != nil || n.Status.Images != nil || n.Name != "n" ||
		!n.Spec.Unschedulable || len(n.Spec.Taints) != 1 || n.Labels["zone"] != "a" || n.Status.Allocatable.Cpu().String() != "8" {
		t.Errorf("node after the transform: %+v", n)
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{"drasat.dev/weight": "3"}, ManagedFields: mf}}
	got, err = stripUnread(claim)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.(*resourceapi.ResourceClaim); c.ManagedFields != nil || c.Annotations["drasat.dev/weight"] != "3" {
		t.Errorf("claim after the transform: %+v", c.ObjectMeta)
	}
	// A tombstone passes through untouched.
	if _, err := stripUnread("not an object"); err != nil {
		t.Errorf("a value without metadata: %v", err)
	}
}
