package gen

import (
	"fmt"
	"math/rand/v2"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// AddPods gives every pending claim of objs a pending pod of its own (1,
// 2 or 4 CPUs, 4 to 32Gi of memory, drawn from seed) and every node cpus
// CPUs, 512Gi of memory and 110 pods allocatable: the MIG batches with
// node resources that bind (MIGConfig.PodCPUs).
func AddPods(objs *input.Objects, cpus int64, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x706f6473))
	for _, n := range objs.Nodes {
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110")}
	}
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			continue
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-" + c.Name, Namespace: c.Namespace}}
		p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity([]int64{1, 2, 4}[r.IntN(3)], resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 4<<r.IntN(4))),
		}}}}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(c.Name)}}
		objs.Pods = append(objs.Pods, p)
	}
}
