package gen

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drasat/drasat/driverprofile"
	"github.com/drasat/drasat/input"
)

// GPUNICConfig sizes a gpu-nic scenario.
type GPUNICConfig struct {
	Nodes, Claims int
	Seed          uint64
}

// GPUNIC generates the GPU+NIC joint allocation: nodes with eight H100s
// (NVIDIA driver v25.12.0, MIG off) and four NICs of our own shape, two
// GPUs and one NIC on each of four PCIe roots (driverprofile). A claim
// for k GPUs (1, 2, 4 or 8) asks for each GPU a 100G share of a NIC on the
// same root (matchAttribute resource.kubernetes.io/pcieRoot over the
// pair of requests), so a root serves its two GPUs. Some claims want a
// GPU without network (inference), some one GPU and a NIC's whole 200G
// (ingest): these leave roots unevenly filled, a GPU beside a drained NIC
// or a NIC beside taken GPUs, and an arrival-order allocator then strands
// the larger claims that a different placement of the small ones fits.
func GPUNIC(cfg GPUNICConfig) *input.Objects {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x67706e))
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Classes = append(driverprofile.NVIDIAClasses(), driverprofile.NICClass())
	for n := 0; n < cfg.Nodes; n++ {
		node := fmt.Sprintf("node-%03d", n)
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
			Labels: map[string]string{"nvidia.com/gpu.product": ProductLabel(driverprofile.H100SXM580GB.ProductName)}}})
		objs.Slices = append(objs.Slices, driverprofile.NVIDIAWholeGPUs(driverprofile.NVIDIAv25120, driverprofile.H100SXM580GB, node, 8).Slices...)
		objs.Slices = append(objs.Slices, driverprofile.NICs(node, 4).Slices...)
	}
	for i := 0; i < cfg.Claims; i++ {
		name := fmt.Sprintf("claim-%04d", i)
		switch x := rng.IntN(20); {
		case x < 3: // inference: a GPU, no network
			objs.Claims = append(objs.Claims, driverprofile.Claim(name, []resourceapi.DeviceRequest{driverprofile.Request("gpu", "gpu.nvidia.com", 1)}))
		case x < 5: // ingest: a GPU and a whole NIC
			objs.Claims = append(objs.Claims, gpuNICClaim(name, 1, driverprofile.NICBandwidth.String()))
		default: // training on 1, 2, 4 or 8 GPUs
			k := []int{1, 1, 2, 2, 4, 8}[rng.IntN(6)]
			objs.Claims = append(objs.Claims, gpuNICClaim(name, k, driverprofile.NICShare.String()))
		}
	}
	return objs
}

// gpuNICClaim asks for k GPUs, each with share of a NIC on its PCIe root.
func gpuNICClaim(name string, k int, share string) *resourceapi.ResourceClaim {
	var reqs []resourceapi.DeviceRequest
	var cons []resourceapi.DeviceConstraint
	for i := 0; i < k; i++ {
		g, n := fmt.Sprintf("gpu-%d", i), fmt.Sprintf("nic-%d", i)
		reqs = append(reqs, driverprofile.Request(g, "gpu.nvidia.com", 1),
			driverprofile.WithCapacity(driverprofile.Request(n, driverprofile.NICDriver, 1), map[string]string{"bandwidth": share}))
		cons = append(cons, driverprofile.Match(driverprofile.PCIeRootAttr, g, n))
	}
	return driverprofile.Claim(name, reqs, cons...)
}
