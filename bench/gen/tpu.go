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

// TPUDriver is the driver name of the tpu scenario. Its multi-host slices
// are our own shape, after KEP-4815's TPU example: no driver we could read
// publishes them (docs/drivers.md).
const TPUDriver = "tpu.dra.example.com"

// TPUConfig sizes a tpu scenario: multi-host pools of 16 TPU hosts (a 4×4
// grid of hosts with 2×2 chips each, an 8×8 chip torus), published as in
// KEP-4815 by a central controller.
type TPUConfig struct {
	Nodes  int // a multiple of 16
	Claims int
	Seed   uint64
	// Fragmented is the fraction of hosts already running a 2x2 slice.
	Fragmented float64
}

// TPUTopology is one slice shape: hosts wide × high in the host grid.
type TPUTopology struct {
	Name       string
	W, H       int // in hosts
	ClaimShare float64
}

// TPUTopologies are the shapes published per pool, smallest first as
// KEP-4815 recommends for first-fit allocators.
var TPUTopologies = []TPUTopology{
	{"2x2", 1, 1, 50}, {"2x4", 2, 1, 25}, {"4x4", 2, 2, 14}, {"4x8", 4, 2, 7}, {"8x8", 4, 4, 4},
}

const tpuHostsPerPool = 16

// TPU generates the scenario.
func TPU(cfg TPUConfig) (*input.Objects, error) {
	if cfg.Nodes <= 0 || cfg.Nodes%tpuHostsPerPool != 0 {
		return nil, fmt.Errorf("tpu: %d nodes: want a positive multiple of %d (pools of 4×4 hosts)", cfg.Nodes, tpuHostsPerPool)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x747075))
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Classes = []*resourceapi.DeviceClass{{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
		ObjectMeta: metav1.ObjectMeta{Name: TPUDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == '%s'", TPUDriver)}}}},
	}}
	q := func(v int64) resourceapi.Counter {
		return resourceapi.Counter{Value: *resource.NewQuantity(v, resource.DecimalSI)}
	}
	existing := 0
	for p := 0; p < cfg.Nodes/tpuHostsPerPool; p++ {
		pool := fmt.Sprintf("tpu-pool-%02d", p)
		host := func(x, y int) string { return fmt.Sprintf("tpu-%02d-%02d", p, y*4+x) }
		poolSlice := func(name string) *resourceapi.ResourceSlice {
			return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
				Driver: TPUDriver, Pool: resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 2}}}
		}
		counters := poolSlice(pool + "-counters")
		counters.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: TPUDriver + "/pool", Operator: corev1.NodeSelectorOpIn, Values: []string{pool}}}}}}
		set := resourceapi.CounterSet{Name: "tpu-counter-set", Counters: map[string]resourceapi.Counter{}}
		for y := 0; y < 4; y++ {
			for x := 0; x < 4; x++ {
				h := host(x, y)
				set.Counters["tpus-"+h] = q(4)
				objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h, Labels: map[string]string{
					"kubernetes.io/hostname": h, TPUDriver + "/pool": pool}}})
			}
		}
		counters.Spec.SharedCounters = []resourceapi.CounterSet{set}
		devs := poolSlice(pool + "-devices")
		devs.Spec.PerDeviceNodeSelection = ptr.To(true)
		for _, t := range TPUTopologies {
			k := 0
			for y0 := 0; y0 < 4; y0 += t.H {
				for x0 := 0; x0 < 4; x0 += t.W {
					var hosts []string
					cons := map[string]resourceapi.Counter{}
					for y := y0; y < y0+t.H; y++ {
						for x := x0; x < x0+t.W; x++ {
							hosts = append(hosts, host(x, y))
							cons["tpus-"+host(x, y)] = q(4)
						}
					}
					d := resourceapi.Device{Name: fmt.Sprintf("tpu-%s-%d", t.Name, k),
						Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
							"topology": {StringValue: ptr.To(t.Name)},
							"hosts":    {IntValue: ptr.To(int64(len(hosts)))},
						},
						Capacity:         map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"tpus": {Value: *resource.NewQuantity(int64(4*len(hosts)), resource.DecimalSI)}},
						ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "tpu-counter-set", Counters: cons}}}
					if len(hosts) == 1 {
						d.NodeName = ptr.To(hosts[0])
					} else {
						d.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
							Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: hosts}}}}}
					}
					devs.Spec.Devices = append(devs.Spec.Devices, d)
					k++
				}
			}
		}
		objs.Slices = append(objs.Slices, counters, devs)
		// Existing 2x2 slices on some hosts.
		for i := 0; i < tpuHostsPerPool; i++ {
			if rng.Float64() >= cfg.Fragmented {
				continue
			}
			c := NewClaim(fmt.Sprintf("running-%04d", existing), []string{TPUDriver}, tpuSelector("2x2"))
			c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "r0", Driver: TPUDriver, Pool: pool, Device: fmt.Sprintf("tpu-2x2-%d", i)}}},
				NodeSelector: NodeSelectorFor(host(i%4, i/4))}
			objs.Claims = append(objs.Claims, c)
			existing++
		}
	}
	for i := 0; i < cfg.Claims; i++ {
		t := TPUTopologies[pickWeighted(rng, len(TPUTopologies), func(k int) float64 { return TPUTopologies[k].ClaimShare })]
		objs.Claims = append(objs.Claims, NewClaim(fmt.Sprintf("claim-%04d", i), []string{TPUDriver}, tpuSelector(t.Name)))
	}
	return objs, nil
}

func tpuSelector(topology string) []resourceapi.DeviceSelector {
	return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf("device.attributes['%s'].topology == '%s'", TPUDriver, topology)}}}
}
