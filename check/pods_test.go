package check

import (
	"strings"
	"testing"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// podWorld: two nodes with 8 CPUs and a GPU and a NIC each; pending pods
// p1 (gpu-1, nic-1) and p2 (gpu-2), 6 CPUs each.
func podWorld() *input.Objects {
	objs := &input.Objects{Classes: []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "any"}}}}
	for _, name := range []string{"node-1", "node-2"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("10")}
		objs.Nodes = append(objs.Nodes, n)
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}}
		s.Spec.Driver, s.Spec.NodeName = "dev.example.com", ptr.To(name)
		s.Spec.Pool = resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}
		s.Spec.Devices = []resourceapi.Device{{Name: "gpu"}, {Name: "nic"}}
		objs.Slices = append(objs.Slices, s)
	}
	for _, c := range []string{"gpu-1", "nic-1", "gpu-2"} {
		objs.Claims = append(objs.Claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: c, Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "any", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}})
	}
	pod := func(name string, claims ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}}}
		for _, c := range claims {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
		}
		return p
	}
	objs.Pods = []*corev1.Pod{pod("p1", "gpu-1", "nic-1"), pod("p2", "gpu-2")}
	return objs
}

// allocatedOn allocates claim (of objs) the device dev of node.
func allocatedOn(objs *input.Objects, claim, node, dev string) *resourceapi.ResourceClaim {
	for _, c := range objs.Claims {
		if c.Name != claim {
			continue
		}
		out := c.DeepCopy()
		out.Status.Allocation = &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: "dev.example.com", Pool: node, Device: dev}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
		}
		return out
	}
	panic(claim)
}

func TestPodRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(objs *input.Objects)
		claims [][3]string // claim, node, device
		want   string      // "" valid, else part of the error
	}{
		{name: "valid", claims: [][3]string{{"gpu-1", "node-1", "gpu"}, {"nic-1", "node-1", "nic"}, {"gpu-2", "node-2", "gpu"}}},
		{name: "claims of one pod on two nodes", claims: [][3]string{{"gpu-1", "node-1", "gpu"}, {"nic-1", "node-2", "nic"}}, want: "no node its claims allow"},
		{name: "two pods' CPU on one node", claims: [][3]string{{"gpu-1", "node-1", "gpu"}, {"gpu-2", "node-1", "nic"}}, want: "request 12 cpu, allocatable is 8"},
		{name: "cordoned", change: func(o *input.Objects) { o.Nodes[1].Spec.Unschedulable = true }, claims: [][3]string{{"gpu-2", "node-2", "gpu"}}, want: "node-2 cordoned"},
		{name: "cordon tolerated", change: func(o *input.Objects) {
			o.Nodes[1].Spec.Unschedulable = true
			o.Pods[1].Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists}}
		}, claims: [][3]string{{"gpu-2", "node-2", "gpu"}}},
		{name: "taint", change: func(o *input.Objects) {
			o.Nodes[1].Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
		}, claims: [][3]string{{"gpu-2", "node-2", "gpu"}}, want: "taint gpu=maintenance:NoSchedule not tolerated"},
		{name: "affinity", change: func(o *input.Objects) { o.Pods[1].Spec.NodeSelector = map[string]string{"zone": "a"} },
			claims: [][3]string{{"gpu-2", "node-2", "gpu"}}, want: "affinity of the pod does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := podWorld()
			if tc.change != nil {
				tc.change(objs)
			}
			var out []*resourceapi.ResourceClaim
			for _, c := range tc.claims {
				out = append(out, allocatedOn(objs, c[0], c[1], c[2]))
			}
			err := Check(objs, out, Options{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid allocation rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
