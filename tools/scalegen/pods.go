package scalegen

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/input"
)

// Pods, drawn here and not by package bench: every claim gets the pod
// that uses it, and the nodes what pods need besides devices.
//
//   - A node has cpus CPUs, 6Gi of memory per CPU and room for 110 pods; a
//     system pod (1 CPU, 2Gi, no claim) runs on every node. Nodes are in
//     zones a and b, one in 16 carries the taint maintenance=true:NoSchedule
//     and one in 32 is cordoned.
//   - A running claim's pod is bound on the claim's node: 2 CPUs, 16Gi.
//   - Pending claims are used by pending pods, mostly one claim a pod, one
//     pod in eight two claims (the next two pending claims). A pod asks
//     for 0.5 to 8 CPUs and 2, 4 or 8Gi per CPU; one in ten pods is held
//     to a zone by nodeSelector, three in ten tolerate the maintenance
//     taint.

// Zone and taint keys of the generated nodes.
const (
	ZoneLabel   = "topology.kubernetes.io/zone"
	MaintTaint  = "maintenance"
	podsPerNode = 110
)

// podCPU is a pending pod's CPU in milli-CPUs, drawn with weight.
type podCPU struct {
	milli  int64
	weight int
}

// podCPUs is the pending pods' CPU draw.
var podCPUs = []podCPU{{500, 15}, {1000, 25}, {2000, 25}, {3000, 10}, {4000, 15}, {6000, 5}, {8000, 5}}

// AddPods gives objs (a Generate answer) nodes with cpus CPUs and a pod
// for every claim, drawn with seed. The same arguments give the same
// objects.
func AddPods(objs *input.Objects, cpus int, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x706f6473))
	nodeOfPool := map[string]string{}
	for _, sl := range objs.Slices {
		if sl.Spec.NodeName != nil {
			nodeOfPool[sl.Spec.Pool.Name] = *sl.Spec.NodeName
		}
	}
	for i, n := range objs.Nodes {
		n.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(cpus)*6<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(podsPerNode, resource.DecimalSI),
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[ZoneLabel] = []string{"a", "b"}[i%2]
		if i%16 == 5 {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: MaintTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		}
		if i%32 == 11 {
			n.Spec.Unschedulable = true
		}
		sys := pod("system-"+n.Name, 1000, 2<<30)
		sys.Spec.NodeName = n.Name
		objs.Pods = append(objs.Pods, sys)
	}
	var pending []string
	for _, c := range objs.Claims {
		if c.Status.Allocation == nil {
			pending = append(pending, c.Name)
			continue
		}
		node := ""
		if res := c.Status.Allocation.Devices.Results; len(res) > 0 {
			node = nodeOfPool[res[0].Pool]
		}
		p := pod("pod-"+c.Name, 2000, 16<<30, c.Name)
		p.Spec.NodeName = node
		objs.Pods = append(objs.Pods, p)
	}
	for i := 0; i < len(pending); {
		claims := pending[i:min(i+1, len(pending))]
		if r.IntN(8) == 0 && i+1 < len(pending) {
			claims = pending[i : i+2]
		}
		i += len(claims)
		cpu := draw(r, podCPUs, func(c podCPU) int { return c.weight }).milli
		mem := cpu * int64([]int{2, 4, 8}[r.IntN(3)]) << 30 / 1000
		p := pod("pod-"+claims[0], cpu, mem, claims...)
		if r.IntN(10) == 0 {
			p.Spec.NodeSelector = map[string]string{ZoneLabel: []string{"a", "b"}[r.IntN(2)]}
		}
		if r.IntN(10) < 3 {
			p.Spec.Tolerations = []corev1.Toleration{{Key: MaintTaint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}
		objs.Pods = append(objs.Pods, p)
	}
}

// pod is a pod in namespace default requesting cpu milli-CPUs and mem
// bytes, using the named claims.
func pod(name string, cpu, mem int64, claims ...string) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI)}}}}},
	}
	for k, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: fmt.Sprintf("c%d", k), ResourceClaimName: ptr.To(c)})
	}
	return p
}
