package scalegen

import (
	"fmt"
	"math/rand/v2"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/driverprofile"
	"github.com/drasat/drasat/input"
)

// Families are the claim mixes Generate draws (Config.Family).
var Families = []string{"default", "rich"}

// richFleet is the rich family's fleet, node by node in turn: half the
// nodes A100-40GB, a quarter A100-80GB, a quarter H100, each node of one
// model as real servers are.
var richFleet = []driverprofile.GPUModel{
	driverprofile.A100SXM440GB, driverprofile.A100SXM480GB, driverprofile.A100SXM440GB, driverprofile.H100SXM580GB,
}

// richKind is one kind of pending claim of the rich family and how often
// it is drawn, in percent.
type richKind struct {
	name   string
	weight int
	claim  func(name string) *resourceapi.ResourceClaim
}

const (
	mig        = "mig.nvidia.com"
	gpuClass   = "gpu.nvidia.com"
	parentUUID = "gpu.nvidia.com/parentUUID"
	h100Name   = "NVIDIA H100 80GB HBM3"
)

// The selectors are written against the driver's attributes without
// naming a GPU model, as a user of a mixed fleet writes them: a profile by
// its compute slices ("1g." is a 1g.5gb on an A100-40GB and a 1g.10gb on an
// 80 GB GPU; the "+me" variants are left out), memory by capacity, a model
// by productName.
func profileOf(prefix string) string {
	return fmt.Sprintf("device.attributes['gpu.nvidia.com'].profile.matches('^%s[.][0-9]+gb$')", prefix)
}

func memoryAtLeast(q string) string {
	return fmt.Sprintf("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('%s')) >= 0", q)
}

func memoryAtMost(q string) string {
	return fmt.Sprintf("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('%s')) <= 0", q)
}

func onOneGPU(requests ...string) resourceapi.DeviceConstraint {
	return driverprofile.Match(parentUUID, requests...)
}

// richKinds are the pending claims of the rich family:
//   - one 1g device; any MIG device of 9 to 20 GiB (CEL on capacity);
//   - firstAvailable: a 3g device, else two 1g devices on one GPU, else a
//     2g device;
//   - two requests on one GPU (matchAttribute parentUUID): a 2g and a 1g;
//   - count 2 of 1g on one GPU, or on two GPUs (distinctAttribute
//     parentUUID; one node, as a claim's devices always are here);
//   - a MIG device of at least 39 GiB; a 3g device of an 80 GB GPU
//     (productName);
//   - a whole GPU of any model; a whole H100 (productName).
var richKinds = []richKind{
	{"1g", 22, func(n string) *resourceapi.ResourceClaim { return claim(n, mig, 1, profileOf("1g")) }},
	{"mem-9-20Gi", 12, func(n string) *resourceapi.ResourceClaim {
		return claim(n, mig, 1, memoryAtLeast("9Gi")+" && "+memoryAtMost("20Gi"))
	}},
	{"first-available", 14, func(n string) *resourceapi.ResourceClaim {
		sub := func(name string, count int64, cel string) resourceapi.DeviceSubRequest {
			return resourceapi.DeviceSubRequest{Name: name, DeviceClassName: mig, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: cel}}}}
		}
		c := driverprofile.Claim(n, []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
			sub("3g", 1, profileOf("3g")), sub("two-1g", 2, profileOf("1g")), sub("2g", 1, profileOf("2g"))}}}, onOneGPU("gpu"))
		return c
	}},
	{"2g+1g", 10, func(n string) *resourceapi.ResourceClaim {
		return driverprofile.Claim(n, []resourceapi.DeviceRequest{
			driverprofile.Request("model", mig, 1, profileOf("2g")), driverprofile.Request("sidecar", mig, 1, profileOf("1g"))},
			onOneGPU("model", "sidecar"))
	}},
	{"2x1g-one-gpu", 8, func(n string) *resourceapi.ResourceClaim {
		c := claim(n, mig, 2, profileOf("1g"))
		c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{onOneGPU("gpu")}
		return c
	}},
	{"2x1g-two-gpus", 6, func(n string) *resourceapi.ResourceClaim {
		c := claim(n, mig, 2, profileOf("1g"))
		c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{Requests: []string{"gpu"}, DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(parentUUID))}}
		return c
	}},
	{"mem-39Gi", 8, func(n string) *resourceapi.ResourceClaim { return claim(n, mig, 1, memoryAtLeast("39Gi")) }},
	{"3g-80gb", 8, func(n string) *resourceapi.ResourceClaim {
		return claim(n, mig, 1, profileOf("3g"), "device.attributes['gpu.nvidia.com'].productName.contains('80GB')")
	}},
	{"gpu", 6, func(n string) *resourceapi.ResourceClaim { return claim(n, gpuClass, 1) }},
	{"h100", 6, func(n string) *resourceapi.ResourceClaim {
		return claim(n, gpuClass, 1, driverprofile.ProductIs(h100Name))
	}},
}

// productLabel is the node label's value for a model, as GPU feature
// discovery writes it: the product name without "NVIDIA", spaces as dashes.
func productLabel(gm driverprofile.GPUModel) string {
	return strings.ReplaceAll(strings.TrimPrefix(gm.ProductName, "NVIDIA "), " ", "-")
}

// profileBy is the model's first profile named prefix + "." (the one
// without "+me").
func profileBy(gm driverprofile.GPUModel, prefix string) driverprofile.MIGProfile {
	for _, pr := range gm.Profiles {
		if strings.HasPrefix(pr.Name, prefix+".") && !strings.Contains(pr.Name, "+") {
			return pr
		}
	}
	panic("scalegen: no " + prefix + " profile on " + gm.Key)
}

// generateRich is Generate for the rich family: the fleet of richFleet, a
// quarter of the GPUs holding one or two running MIG devices as in the
// default family (a 1g at memory slice 6, maybe a 2g or 3g at 0), and
// pending claims drawn from richKinds.
func generateRich(cfg Config) *input.Objects {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x5ca1e+1))
	objs := &input.Objects{Classes: driverprofile.NVIDIAClasses()}
	running := 0
	for n := 0; n < cfg.Nodes; n++ {
		gm := richFleet[n%len(richFleet)]
		node := fmt.Sprintf("gpu-node-%04d", n)
		objs.Nodes = append(objs.Nodes, &corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{gpuModelLabel: productLabel(gm)}},
		})
		inv := driverprofile.NVIDIADynamicMIG(driverprofile.NVIDIAv25120, gm, node, cfg.GPUs)
		objs.Slices = append(objs.Slices, inv.Slices...)
		for g := 0; g < cfg.GPUs; g++ {
			if r.IntN(4) != 0 {
				continue
			}
			devs := []driverprofile.MIGProfile{profileBy(gm, "1g")}
			starts := []int{6}
			if r.IntN(2) == 0 {
				devs = append(devs, profileBy(gm, []string{"2g", "3g"}[r.IntN(2)]))
				starts = append(starts, 0)
			}
			for i, pr := range devs {
				objs.Claims = append(objs.Claims, runningClaim(fmt.Sprintf("running-%05d", running), pr.Name, node, driverprofile.MIGDeviceName(g, pr, starts[i])))
				running++
			}
		}
	}
	for i := 0; i < cfg.Claims; i++ {
		k := draw(r, richKinds, func(k richKind) int { return k.weight })
		objs.Claims = append(objs.Claims, k.claim(fmt.Sprintf("pending-%05d", i)))
	}
	return objs
}
