package gen

import (
	"fmt"
	"math/rand/v2"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ModesDriver is the driver name of the modes scenario. The devices are
// our own shape: no driver publishes GPUs with KEP-5963 modes yet (the name
// is dra-example-driver's, its devices are not; docs/drivers.md).
const ModesDriver = "gpu.example.com"

// ModesConfig sizes a modes scenario: GPUs that serve in one of several
// mutually exclusive modes at a time, told apart by compatibility groups
// (KEP-5963) under consumesCounters.
type ModesConfig struct {
	Nodes, GPUsPerNode, Claims int
	Seed                       uint64
}

// GPUMode is one device family of a modes GPU.
// GPUMode is one partitioning mode of the modes scenario's GPUs.
type GPUMode struct {
	Class  string   // DeviceClass name
	Mode   string   // partitioningMode attribute
	Groups []string // compatibility groups
	Share  float64  // claim frequency
}

// The modes, per GPU (98 SMs, 40Gi, 8 memory slices):
//   - whole GPU: no groups, consumes everything;
//   - MIG [mig]: 1g.5gb ×7, 2g.10gb ×3, 3g.20gb ×2 on memory slices;
//   - fractional [fractional, shared]: two halves (49 SMs, 20Gi);
//   - MPS [mps, shared]: four shares (24 SMs, 10Gi);
//   - time-sliced: no groups, four slots (8Gi, no SMs reserved).
//
// Under kep5963 a device without groups only goes with others that have
// none, so time-sliced slots share a GPU only with each other; under
// wildcard (the seed proposal) they go with every mode. That is the
// difference between the two semantics this scenario measures.
var GPUModes = []GPUMode{
	{"gpu.example.com", "None", nil, 10},
	{"mig.gpu.example.com", "MIGSlicing", []string{"mig"}, 40},
	{"fraction.gpu.example.com", "GPUFractioning", []string{"fractional", "shared"}, 18},
	{"mps.gpu.example.com", "MPSSharing", []string{"mps", "shared"}, 17},
	{"timeslice.gpu.example.com", "TimeSlicing", nil, 15},
}

// ModesMIG is a MIG profile of the modes scenario: its memory slices, the
// slices it may start at, its SMs and memory, and its claim frequency.
type ModesMIG struct {
	Profile string
	Slices  int
	Starts  []int
	SMs     int64
	MemGi   int64
	Share   float64
}

var ModesMIGProfiles = []ModesMIG{
	{"1g.5gb", 1, []int{0, 1, 2, 3, 4, 5, 6}, 14, 5, 50},
	{"2g.10gb", 2, []int{0, 2, 4}, 28, 10, 30},
	{"3g.20gb", 4, []int{0, 4}, 42, 20, 20},
}

// Modes generates the scenario.
func Modes(cfg ModesConfig) *input.Objects {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6d6f6465))
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	for _, m := range GPUModes {
		objs.Classes = append(objs.Classes, &resourceapi.DeviceClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
			ObjectMeta: metav1.ObjectMeta{Name: m.Class},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].partitioningMode == '%s'", ModesDriver, ModesDriver, m.Mode)}}}},
		})
	}
	q := func(v int64) resourceapi.Counter {
		return resourceapi.Counter{Value: *resource.NewQuantity(v, resource.DecimalSI)}
	}
	gi := func(v int64) resourceapi.Counter {
		return resourceapi.Counter{Value: *resource.NewQuantity(v<<30, resource.BinarySI)}
	}
	for n := 0; n < cfg.Nodes; n++ {
		node := fmt.Sprintf("node-%03d", n)
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		// A GPU has 23 devices, all consuming counters, and the API allows
		// 64 such devices and 8 counter sets per slice: two GPUs per device
		// slice, eight per counter slice.
		const perSlice, perCounterSlice = 2, 8
		total := int64((cfg.GPUsPerNode+perSlice-1)/perSlice + (cfg.GPUsPerNode+perCounterSlice-1)/perCounterSlice)
		mk := func(name string) *resourceapi.ResourceSlice {
			return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
				Driver: ModesDriver, NodeName: ptr.To(node),
				Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: total}}}
		}
		var counters, devs *resourceapi.ResourceSlice
		for g := 0; g < cfg.GPUsPerNode; g++ {
			if g%perCounterSlice == 0 {
				counters = mk(fmt.Sprintf("%s-counters-%d", node, g/perCounterSlice))
				objs.Slices = append(objs.Slices, counters)
			}
			if g%perSlice == 0 {
				devs = mk(fmt.Sprintf("%s-gpus-%d", node, g/perSlice))
				objs.Slices = append(objs.Slices, devs)
			}
			set := fmt.Sprintf("gpu-%d", g)
			full := map[string]resourceapi.Counter{"multiprocessors": q(98), "memory": gi(40)}
			for s := 0; s < 8; s++ {
				full[fmt.Sprintf("memory-slice-%d", s)] = q(1)
			}
			counters.Spec.SharedCounters = append(counters.Spec.SharedCounters, resourceapi.CounterSet{Name: set, Counters: full})
			uuid := fmt.Sprintf("GPU-%s-%d", node, g)
			dev := func(name, mode string, groups []string, cons map[string]resourceapi.Counter, extra map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) {
				attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"partitioningMode": {StringValue: ptr.To(mode)},
					"physicalDevice":   {StringValue: ptr.To(fmt.Sprintf("gpu-%d", g))},
					"parentUUID":       {StringValue: ptr.To(uuid)},
				}
				for k, v := range extra {
					attrs[k] = v
				}
				devs.Spec.Devices = append(devs.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d-%s", g, name), Attributes: attrs,
					ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, CompatibilityGroups: groups, Counters: cons}}})
			}
			dev("full", "None", nil, full, nil)
			for _, pr := range ModesMIGProfiles {
				for _, st := range pr.Starts {
					cons := map[string]resourceapi.Counter{"multiprocessors": q(pr.SMs), "memory": gi(pr.MemGi)}
					for s := st; s < st+pr.Slices; s++ {
						cons[fmt.Sprintf("memory-slice-%d", s)] = q(1)
					}
					dev(fmt.Sprintf("mig-%s-%d", profileLabelName(pr.Profile), st), "MIGSlicing", []string{"mig"}, cons,
						map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"profile": {StringValue: ptr.To(pr.Profile)}})
				}
			}
			for i := 0; i < 2; i++ {
				dev(fmt.Sprintf("half-%d", i), "GPUFractioning", []string{"fractional", "shared"},
					map[string]resourceapi.Counter{"multiprocessors": q(49), "memory": gi(20)}, nil)
			}
			for i := 0; i < 4; i++ {
				dev(fmt.Sprintf("mps-%d", i), "MPSSharing", []string{"mps", "shared"},
					map[string]resourceapi.Counter{"multiprocessors": q(24), "memory": gi(10)}, nil)
			}
			for i := 0; i < 4; i++ {
				dev(fmt.Sprintf("ts-%d", i), "TimeSlicing", nil, map[string]resourceapi.Counter{"memory": gi(8)}, nil)
			}
		}
	}
	for i := 0; i < cfg.Claims; i++ {
		m := GPUModes[pickWeighted(rng, len(GPUModes), func(k int) float64 { return GPUModes[k].Share })]
		name := fmt.Sprintf("claim-%04d", i)
		switch m.Mode {
		case "MIGSlicing":
			pt := 0.0
			for _, p := range ModesMIGProfiles {
				pt += p.Share
			}
			y := rng.Float64() * pt
			pr := ModesMIGProfiles[0]
			for _, p := range ModesMIGProfiles {
				y -= p.Share
				if y < 0 {
					pr = p
					break
				}
			}
			objs.Claims = append(objs.Claims, NewClaim(name, []string{m.Class}, []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.attributes['%s'].profile == '%s'", ModesDriver, pr.Profile)}}}))
		case "MPSSharing":
			// Some MPS claims want two shares of one GPU.
			if rng.IntN(4) == 0 {
				c := NewClaim(name, []string{m.Class, m.Class}, nil)
				c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(ModesDriver + "/parentUUID"))}}
				objs.Claims = append(objs.Claims, c)
				continue
			}
			objs.Claims = append(objs.Claims, NewClaim(name, []string{m.Class}, nil))
		default:
			objs.Claims = append(objs.Claims, NewClaim(name, []string{m.Class}, nil))
		}
	}
	return objs
}
