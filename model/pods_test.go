package model

import (
	"context"
	"strings"
	"testing"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// podObjects: node-1 (GPU, cordoned), node-2 (NIC, 8 CPUs), node-3
// (tainted); pod p uses claims gpu and nic.
func podObjects() *input.Objects {
	objs := &input.Objects{}
	for _, c := range []string{"gpu", "nic"} {
		objs.Classes = append(objs.Classes, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: c}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + c + `.example.com"`}}}}})
	}
	for i, name := range []string{"node-1", "node-2", "node-3"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": "a"}}}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("10")}
		switch i {
		case 0:
			n.Spec.Unschedulable = true
		case 2:
			n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
		}
		objs.Nodes = append(objs.Nodes, n)
	}
	for _, d := range [][2]string{{"node-1", "gpu"}, {"node-2", "nic"}} {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: d[0]}}
		s.Spec.Driver, s.Spec.NodeName = d[1]+".example.com", ptr.To(d[0])
		s.Spec.Pool = resourceapi.ResourcePool{Name: d[0], Generation: 1, ResourceSliceCount: 1}
		s.Spec.Devices = []resourceapi.Device{{Name: d[1]}}
		objs.Slices = append(objs.Slices, s)
	}
	for _, c := range []string{"gpu", "nic"} {
		objs.Claims = append(objs.Claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: c, Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: c, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}})
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}
	for _, c := range []string{"gpu", "nic"} {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	objs.Pods = []*corev1.Pod{p}
	return objs
}

func TestPodRulesInBuild(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*input.Objects)
		want   map[string]string // claim -> part of its error ("" none)
		// reasons: claim -> the Reason a caller reads without the message
		reasons map[string]Reason
	}{
		{name: "the GPU only on a cordoned node", want: map[string]string{
			"gpu": "its pods cannot run where its devices are: pod default/p: node-1 cordoned",
			"nic": "claim gpu of the same pods cannot be allocated"},
			reasons: map[string]Reason{"gpu": ReasonNoNode, "nic": ReasonSamePod}},
		{name: "cordon tolerated, but no common node", change: func(o *input.Objects) {
			o.Pods[0].Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}, want: map[string]string{"gpu": "claims gpu and nic of pod default/p cannot share a node", "nic": "cannot share a node"},
			reasons: map[string]Reason{"gpu": ReasonSamePod, "nic": ReasonSamePod}},
		{name: "too much CPU everywhere", change: func(o *input.Objects) {
			o.Pods[0].Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("10")
		}, want: map[string]string{"gpu": "no node for its pods: pod default/p: node-1 cordoned; pod default/p: needs 10 cpu, node-2 has 8 free; pod default/p: taint gpu=maintenance:NoSchedule of node-3 not tolerated"},
			reasons: map[string]Reason{"gpu": ReasonNoNode}},
		{name: "inter-pod affinity", change: func(o *input.Objects) {
			o.Pods[0].Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "zone"}}}}
		}, want: map[string]string{"gpu": PodLeftToScheduler + "pod default/p: it has required inter-pod affinity", "nic": PodLeftToScheduler},
			reasons: map[string]Reason{"gpu": ReasonLeftToScheduler, "nic": ReasonLeftToScheduler}},
		{name: "no pods", change: func(o *input.Objects) { o.Pods = nil }, want: map[string]string{"gpu": "", "nic": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := podObjects()
			if tc.change != nil {
				tc.change(objs)
			}
			p, err := Build(context.Background(), objs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range p.Claims {
				want, ok := tc.want[c.Obj.Name]
				if !ok {
					continue
				}
				switch {
				case want == "" && c.Err != nil:
					t.Errorf("%s: %v, want no error", c.Obj.Name, c.Err)
				case want != "" && (c.Err == nil || !strings.Contains(c.Err.Error(), want)):
					t.Errorf("%s: %v, want %q", c.Obj.Name, c.Err, want)
				}
				if r, ok := tc.reasons[c.Obj.Name]; ok && ReasonOf(c.Err) != r {
					t.Errorf("%s: reason %q, want %q", c.Obj.Name, ReasonOf(c.Err), r)
				}
			}
		})
	}
}

// A pod's claims: by name, generated (its status names them), and the
// adapter's stand-in "pod:entry" for a template claim not created yet.
func TestPodClaimNames(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{
		{Name: "a", ResourceClaimName: ptr.To("shared")},
		{Name: "b", ResourceClaimTemplateName: ptr.To("t")},
		{Name: "c", ResourceClaimTemplateName: ptr.To("t")},
	}
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "b", ResourceClaimName: ptr.To("p-b-x7k2")}}
	got := strings.Join(PodClaimNames(p), ",")
	if want := "shared,p-b-x7k2,p:c"; got != want {
		t.Fatalf("PodClaimNames = %s, want %s", got, want)
	}
}

// A pod without claims pinned to a node by name and ungated (the adapter
// placed it; not bound yet) takes that node's CPU in the claim problem;
// still gated, it takes nothing yet.
func TestPodPinnedByNameCounts(t *testing.T) {
	for _, gated := range []bool{false, true} {
		objs := podObjects()
		objs.Pods[0].Spec.ResourceClaims = objs.Pods[0].Spec.ResourceClaims[1:] // nic only: node-2
		placed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "placed", Namespace: "default"}}
		placed.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}}}
		placed.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-2"}}}}}}}}
		if gated {
			placed.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "drasat.dev/allocate"}}
		}
		objs.Pods = append(objs.Pods, placed)
		if PinnedByName(placed) != "node-2" {
			t.Fatalf("PinnedByName: %q", PinnedByName(placed))
		}
		p, err := Build(context.Background(), objs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Claims {
			if c.Obj.Name != "nic" {
				continue
			}
			short := c.Err != nil && strings.Contains(c.Err.Error(), "needs 4 cpu, node-2 has 2 free")
			if short == gated {
				t.Errorf("gated %v: nic's error %v", gated, c.Err)
			}
		}
	}
}
