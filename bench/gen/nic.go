package gen

import (
	"fmt"
	"math/rand/v2"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// NICDriver is the driver name of the nic scenario. Its NICs are our own
// shape (see docs/drivers.md): dra-example-driver's net profile shares
// ingress and egress bandwidth, these one bandwidth and virtual functions.
const NICDriver = "nic.example.com"

// NICConfig sizes a nic scenario: NICs shared by bandwidth (consumable
// capacity, allowMultipleAllocations), two per node.
type NICConfig struct {
	Nodes, NICsPerNode, Claims int
	Seed                       uint64
	// Running is the share of NICs that already carry a running claim's
	// share (10G to 40G).
	Running float64
}

// NIC generates the scenario. Every NIC has 100G of bandwidth, requested
// in 5G steps from 5G (a request rounds up; none asks for the default
// 10G), and 16 virtual functions in 1, 2, 4 or 8 (default 1). Claims, in
// arrival order: small (5G–15G), medium (20G–45G, often off the step),
// large (50G–80G), pairs of one bandwidth on one NIC (two requests,
// matchAttribute on the NIC) or on two NICs of one node
// (distinctAttribute), and some asking for virtual functions. First-fit
// spreads the small ones over the NICs and strands the large ones.
func NIC(cfg NICConfig) *input.Objects {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e6963))
	q := resource.MustParse
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Classes = append(objs.Classes, &resourceapi.DeviceClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
		ObjectMeta: metav1.ObjectMeta{Name: NICDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == '%s'", NICDriver)}}}},
	})
	nics := cfg.NICsPerNode
	if nics == 0 {
		nics = 2
	}
	bandwidth := resourceapi.DeviceCapacity{Value: q("100G"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
		Default:    ptr.To(q("10G")),
		ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(q("5G")), Max: ptr.To(q("100G")), Step: ptr.To(q("5G"))},
	}}
	vfs := resourceapi.DeviceCapacity{Value: q("16"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
		Default: ptr.To(q("1")), ValidValues: []resource.Quantity{q("1"), q("2"), q("4"), q("8")},
	}}
	share := 0
	for n := 0; n < cfg.Nodes; n++ {
		node := fmt.Sprintf("node-%03d", n)
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		s := &resourceapi.ResourceSlice{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: node + "-nics"}, Spec: resourceapi.ResourceSliceSpec{
				Driver: NICDriver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
		for i := 0; i < nics; i++ {
			name := fmt.Sprintf("nic-%d", i)
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: name, AllowMultipleAllocations: ptr.To(true),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"nic": {StringValue: ptr.To(node + "/" + name)},
				},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bandwidth": bandwidth, "virtualFunctions": vfs}})
			if rng.Float64() < cfg.Running {
				share++
				bw := resource.NewQuantity(int64(10+10*rng.IntN(4))*1_000_000_000, resource.DecimalSI)
				id := ptr.To(types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", share)))
				c := NewClaim(fmt.Sprintf("running-%04d", share), []string{NICDriver}, nil)
				c.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: NodeSelectorFor(node), Devices: resourceapi.DeviceAllocationResult{
					Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r0", Driver: NICDriver, Pool: node, Device: name, ShareID: id,
						ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": *bw, "virtualFunctions": q("1")}}}}}
				objs.Claims = append(objs.Claims, c)
			}
		}
		objs.Slices = append(objs.Slices, s)
	}
	bw := func(g int) *resourceapi.CapacityRequirements {
		return &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			"bandwidth": *resource.NewQuantity(int64(g)*1_000_000_000, resource.DecimalSI)}}
	}
	nicAttr := resourceapi.FullyQualifiedName(NICDriver + "/nic")
	for i := 0; i < cfg.Claims; i++ {
		name := fmt.Sprintf("claim-%04d", i)
		switch k := rng.IntN(20); {
		case k < 8: // small
			c := NewClaim(name, []string{NICDriver}, nil)
			c.Spec.Devices.Requests[0].Exactly.Capacity = bw(5 + rng.IntN(11))
			objs.Claims = append(objs.Claims, c)
		case k < 12: // medium, often off the 5G step
			c := NewClaim(name, []string{NICDriver}, nil)
			c.Spec.Devices.Requests[0].Exactly.Capacity = bw(20 + rng.IntN(26))
			objs.Claims = append(objs.Claims, c)
		case k < 15: // large
			c := NewClaim(name, []string{NICDriver}, nil)
			c.Spec.Devices.Requests[0].Exactly.Capacity = bw(50 + 5*rng.IntN(7))
			objs.Claims = append(objs.Claims, c)
		case k < 17: // two requests on one NIC, or on two NICs of the node
			c := NewClaim(name, []string{NICDriver, NICDriver}, nil)
			g := 10 + 5*rng.IntN(5)
			for r := range c.Spec.Devices.Requests {
				c.Spec.Devices.Requests[r].Exactly.Capacity = bw(g)
			}
			if rng.IntN(2) == 0 {
				c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(nicAttr)}}
			} else {
				c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{DistinctAttribute: ptr.To(nicAttr)}}
			}
			objs.Claims = append(objs.Claims, c)
		default: // virtual functions (3 rounds up to 4) and some bandwidth
			c := NewClaim(name, []string{NICDriver}, nil)
			r := bw(5 + 5*rng.IntN(4))
			r.Requests["virtualFunctions"] = *resource.NewQuantity(int64(1+rng.IntN(8)), resource.DecimalSI)
			c.Spec.Devices.Requests[0].Exactly.Capacity = r
			objs.Claims = append(objs.Claims, c)
		}
	}
	return objs
}
