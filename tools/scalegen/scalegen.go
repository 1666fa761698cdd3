// Package scalegen generates large A100 MIG clusters for scale tests,
// independently of package bench's MIG generator: the slices are what the
// NVIDIA DRA driver publishes (driverprofile.NVIDIADynamicMIG), the claims
// and the running allocations are drawn here, from the driver's device
// classes and profile attribute only.
//
// A quarter of the GPUs hold one or two running MIG devices; the pending
// claims ask for one MIG device of a profile, two 1g devices on one GPU
// (matchAttribute on parentUUID), or one whole GPU. The rich family
// (rich.go) draws claims as users write them on a mixed A100-40GB,
// A100-80GB and H100 fleet.
package scalegen

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drasat/drasat/driverprofile"
	"github.com/drasat/drasat/input"
)

// Config sizes one instance.
type Config struct {
	Nodes, GPUs, Claims int
	Seed                uint64
	// Family is the claim mix: "" or "default" (above), or "rich" (claims
	// as users write them on a mixed fleet; generateRich).
	Family string
}

// share is one kind of pending claim and how often it is drawn.
type share struct {
	profile string // MIG profile; "" is a whole GPU
	count   int64  // devices on one GPU
	weight  int
}

// mix is the pending claims' draw, in percent: mostly small MIG devices, as
// inference fleets ask.
var mix = []share{
	{"1g.5gb", 1, 34}, {"1g.5gb", 2, 6}, {"1g.10gb", 1, 12}, {"2g.10gb", 1, 18},
	{"3g.20gb", 1, 14}, {"4g.20gb", 1, 5}, {"7g.40gb", 1, 5}, {"", 1, 6},
}

const gpuModelLabel = "nvidia.com/gpu.product"

// Generate returns the cluster's objects: Nodes, the driver's slices and
// classes, running claims, then cfg.Claims pending ones. The same Config
// gives the same objects.
func Generate(cfg Config) *input.Objects {
	if cfg.Family == "rich" {
		return generateRich(cfg)
	}
	gm := driverprofile.A100SXM440GB
	r := rand.New(rand.NewPCG(cfg.Seed, 0x5ca1e))
	objs := &input.Objects{Classes: driverprofile.NVIDIAClasses()}
	profiles := map[string]driverprofile.MIGProfile{}
	for _, pr := range gm.Profiles {
		profiles[pr.Name] = pr
	}
	running := 0
	for n := 0; n < cfg.Nodes; n++ {
		node := fmt.Sprintf("gpu-node-%04d", n)
		objs.Nodes = append(objs.Nodes, &corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{gpuModelLabel: "A100-SXM4-40GB"}},
		})
		inv := driverprofile.NVIDIADynamicMIG(driverprofile.NVIDIAv25120, gm, node, cfg.GPUs)
		objs.Slices = append(objs.Slices, inv.Slices...)
		for g := 0; g < cfg.GPUs; g++ {
			if r.IntN(4) != 0 {
				continue
			}
			// One or two running devices on disjoint memory slices: a
			// 1g.5gb at slice 6, and maybe a 2g.10gb or 3g.20gb at 0.
			type dev struct{ name, profile string }
			devs := []dev{{driverprofile.MIGDeviceName(g, profiles["1g.5gb"], 6), "1g.5gb"}}
			if r.IntN(2) == 0 {
				pr := []string{"2g.10gb", "3g.20gb"}[r.IntN(2)]
				devs = append(devs, dev{driverprofile.MIGDeviceName(g, profiles[pr], 0), pr})
			}
			for _, d := range devs {
				objs.Claims = append(objs.Claims, runningClaim(fmt.Sprintf("running-%05d", running), d.profile, node, d.name))
				running++
			}
		}
	}
	for i := 0; i < cfg.Claims; i++ {
		s := draw(r, mix, func(s share) int { return s.weight })
		name := fmt.Sprintf("pending-%05d", i)
		if s.profile == "" {
			objs.Claims = append(objs.Claims, claim(name, "gpu.nvidia.com", 1))
			continue
		}
		c := claim(name, "mig.nvidia.com", s.count, driverprofile.ProfileIs(s.profile))
		if s.count > 1 {
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{driverprofile.Match("gpu.nvidia.com/parentUUID", "gpu")}
		}
		objs.Claims = append(objs.Claims, c)
	}
	return objs
}

// claim is a claim in namespace default with one request "gpu".
func claim(name, class string, count int64, cel ...string) *resourceapi.ResourceClaim {
	c := driverprofile.Claim(name, []resourceapi.DeviceRequest{driverprofile.Request("gpu", class, count, cel...)})
	c.Namespace = "default"
	return c
}

// runningClaim is a claim holding one MIG device of profile, named
// device, on node.
func runningClaim(name, profile, node, device string) *resourceapi.ResourceClaim {
	c := claim(name, "mig.nvidia.com", 1, driverprofile.ProfileIs(profile))
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: driverprofile.NVIDIADriver, Pool: node, Device: device}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
	return c
}

// draw picks one of items, each as likely as its weight, with one draw
// of r.
func draw[T any](r *rand.Rand, items []T, weight func(T) int) T {
	total := 0
	for _, it := range items {
		total += weight(it)
	}
	x := r.IntN(total)
	for _, it := range items {
		if x < weight(it) {
			return it
		}
		x -= weight(it)
	}
	return items[len(items)-1]
}
