package alloc

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

const testDriver = "gpu.example.com"

// testObjects starts a test instance: no objects yet but the device class
// "gpu", every device of testDriver.
func testObjects() *input.Objects {
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Classes = append(objs.Classes, &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "` + testDriver + `"`}}}},
	})
	return objs
}

// randomInstance builds a small partitionable-GPU problem: nodes with GPUs of
// four memory slices, partitions of size 1, 2 and 4 (some with
// compatibility groups), claims of one to three devices with constraints,
// firstAvailable and weights, and sometimes an existing allocation.
func randomInstance(seed uint64) *input.Objects {
	rng := rand.New(rand.NewPCG(seed, 7))
	objs := testObjects()
	nodes := 1 + rng.IntN(2)
	gpus := 1 + rng.IntN(2)
	useGroups := rng.IntN(3) == 0
	var existing []resourceapi.DeviceRequestAllocationResult
	var existingNode string
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("node-%d", n)
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"zone": fmt.Sprint(n % 2)}}})
		counters := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-counters"},
			Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}}}
		devices := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-devices"},
			Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}}}
		for g := 0; g < gpus; g++ {
			set := fmt.Sprintf("gpu-%d", g)
			cs := resourceapi.CounterSet{Name: set, Counters: map[string]resourceapi.Counter{
				"memory": {Value: resource.MustParse("4Gi")}}}
			for s := 0; s < 4; s++ {
				cs.Counters[fmt.Sprintf("slice-%d", s)] = resourceapi.Counter{Value: resource.MustParse("1")}
			}
			counters.Spec.SharedCounters = append(counters.Spec.SharedCounters, cs)
			for _, size := range []int{4, 2, 1} {
				for start := 0; start+size <= 4; start += size {
					if size == 1 && start == 3 && rng.IntN(2) == 0 {
						continue // like MIG: not every slice hosts the smallest profile
					}
					cons := resourceapi.DeviceCounterConsumption{CounterSet: set, Counters: map[string]resourceapi.Counter{
						"memory": {Value: resource.MustParse(fmt.Sprintf("%dGi", size))}}}
					for s := start; s < start+size; s++ {
						cons.Counters[fmt.Sprintf("slice-%d", s)] = resourceapi.Counter{Value: resource.MustParse("1")}
					}
					if useGroups {
						switch size {
						case 4:
							cons.CompatibilityGroups = []string{"full"}
						case 2:
							cons.CompatibilityGroups = []string{"mig", "half"}
						case 1:
							if start%2 == 0 {
								cons.CompatibilityGroups = []string{"mig"}
							}
						}
					}
					name := fmt.Sprintf("gpu-%d-s%d-%d", g, size, start)
					devices.Spec.Devices = append(devices.Spec.Devices, resourceapi.Device{
						Name: name,
						Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
							"size": {IntValue: ptr.To(int64(size))},
							"gpu":  {StringValue: ptr.To(fmt.Sprintf("%s-gpu-%d", node, g))},
						},
						ConsumesCounters: []resourceapi.DeviceCounterConsumption{cons},
					})
					if existing == nil && rng.IntN(12) == 0 {
						existing = append(existing, resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: testDriver, Pool: node, Device: name})
						existingNode = node
					}
				}
			}
		}
		objs.Slices = append(objs.Slices, counters, devices)
	}
	if existing != nil {
		objs.Claims = append(objs.Claims, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "existing", Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu"}}}}},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: existing},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{existingNode}}}}}},
			}},
		})
	}
	sizeSel := func(size int) []resourceapi.DeviceSelector {
		return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.attributes["%s"].size == %d`, testDriver, size)}}}
	}
	sizes := []int{1, 1, 1, 2, 2, 4}
	nClaims := 2 + rng.IntN(6)
	for i := 0; i < nClaims; i++ {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", i), Namespace: "default"}}
		if rng.IntN(4) == 0 {
			c.Annotations = map[string]string{model.WeightAnnotation: fmt.Sprint(1 + rng.IntN(3))}
		}
		switch rng.IntN(6) {
		case 0: // two devices on one GPU
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{
				{Name: "a", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: sizeSel(1)}},
				{Name: "b", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: sizeSel(sizes[rng.IntN(5)])}},
			}
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(testDriver + "/gpu"))}}
		case 1: // count 2 on distinct GPUs
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: sizeSel(sizes[rng.IntN(4)]), Count: 2}}}
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(testDriver + "/gpu"))}}
		case 2: // firstAvailable: big, else small
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "big", DeviceClassName: "gpu", Selectors: sizeSel(4)},
				{Name: "small", DeviceClassName: "gpu", Selectors: sizeSel(2)},
			}}}
		default:
			c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: sizeSel(sizes[rng.IntN(len(sizes))])}}}
		}
		objs.Claims = append(objs.Claims, c)
	}
	return objs
}
