// Package driverprofile produces the ResourceSlices and DeviceClasses that a
// node publishes under a given DRA driver, driver version and device model,
// exactly as the driver's own code builds them: device names, attributes,
// capacities, counter sets, device order and the split into slices. The
// examples and the benchmark fleets are built from these profiles, so that
// a claim written against them is a claim that works on a real node.
//
// Every fact here names its source. What a driver reads from the hardware
// (NVML's MIG profile table, PCI bus addresses) is taken from the vendor's
// published tables or from NVIDIA's NVML mock; what no source fixes (UUIDs,
// bus addresses, which PCIe root a device sits on) is ours and says so.
package driverprofile

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// NVIDIADriver is the driver name of NVIDIA/k8s-dra-driver-gpu.
const NVIDIADriver = "gpu.nvidia.com"

// The standard attributes of k8s.io/dynamic-resource-allocation/deviceattribute
// (v0.37), which the NVIDIA driver fills from sysfs.
const (
	PCIBusIDAttr = "resource.kubernetes.io/pciBusID"
	PCIeRootAttr = "resource.kubernetes.io/pcieRoot"
)

// MIGProfile is one GPU instance profile as NVML reports it
// (nvmlDeviceGetGpuInstanceProfileInfo, nvmlDeviceGetGpuInstancePossiblePlacements).
type MIGProfile struct {
	Name string // go-nvlib's profile string, e.g. "1g.5gb+me"
	// ID is the GPU instance profile ID that `nvidia-smi mig -lgip` lists
	// and the driver puts in the device name.
	ID                                              int
	MemoryMi                                        int64
	SMs, CopyEngines, Decoders, Encoders, JPEG, OFA int64
	Size                                            int   // memory slices of one placement
	Starts                                          []int // first memory slice of each placement
}

// GPUModel is a GPU as NVML describes it to the driver.
type GPUModel struct {
	Key                   string // profile key: "a100-40gb"
	ProductName           string // nvmlDeviceGetName
	Architecture          string // go-nvlib GetArchitectureAsString
	CUDAComputeCapability string // go-nvlib GetCudaComputeCapabilityAsString
	MemoryMi              int64  // nvmlDeviceGetMemoryInfo total
	// MIGToggle: the GPU switches MIG mode without a reset (Hopper and
	// later). The v0.4.0 driver publishes the whole GPU of a MIG-mode GPU
	// only then.
	MIGToggle bool
	Profiles  []MIGProfile
}

// Versions NVML reports on our example nodes (nvmlSystemGetDriverVersion,
// nvmlSystemGetCudaDriverVersion); the driver publishes them as semver
// versions ("580.95.05" becomes "580.95.5"). Our choice, any release would do.
const (
	nvidiaDriverVersion = "580.95.5"
	cudaDriverVersion   = "13.0.0"
)

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// A100SXM440GB: profile numbers and placements from NVIDIA/go-nvml
// pkg/nvml/mock/gpus/a100.go (a100_40gb_GpuInstanceProfiles,
// a100_GpuInstancePlacements; go-nvml v0.13.3); the profile IDs and names
// are those `nvidia-smi mig -lgip` lists (NVIDIA MIG User Guide), the same
// IDs the driver's device names carry ("gpu-2-mig-1g24gb-19-0" in
// cmd/gpu-kubelet-plugin/partitions.go, v0.4.0).
var A100SXM440GB = GPUModel{Key: "a100-40gb", ProductName: "NVIDIA A100-SXM4-40GB", Architecture: "Ampere",
	CUDAComputeCapability: "8.0.0", MemoryMi: 40960, Profiles: []MIGProfile{
		{Name: "1g.5gb", ID: 19, MemoryMi: 4864, SMs: 14, CopyEngines: 1, Size: 1, Starts: seq(7)},
		{Name: "1g.5gb+me", ID: 20, MemoryMi: 4864, SMs: 14, CopyEngines: 1, Decoders: 1, JPEG: 1, OFA: 1, Size: 1, Starts: seq(7)},
		{Name: "1g.10gb", ID: 15, MemoryMi: 9856, SMs: 14, CopyEngines: 1, Decoders: 1, Size: 2, Starts: []int{0, 2, 4, 6}},
		{Name: "2g.10gb", ID: 14, MemoryMi: 9856, SMs: 28, CopyEngines: 2, Decoders: 1, Size: 2, Starts: []int{0, 2, 4}},
		{Name: "3g.20gb", ID: 9, MemoryMi: 19968, SMs: 42, CopyEngines: 3, Decoders: 2, Size: 4, Starts: []int{0, 4}},
		{Name: "4g.20gb", ID: 5, MemoryMi: 19968, SMs: 56, CopyEngines: 4, Decoders: 2, Size: 4, Starts: []int{0}},
		{Name: "7g.40gb", ID: 0, MemoryMi: 40192, SMs: 98, CopyEngines: 7, Decoders: 5, JPEG: 1, OFA: 1, Size: 8, Starts: []int{0}},
	}}

// A100SXM480GB: numbers from the same go-nvml mock
// (a100_80gb_GpuInstanceProfiles). Not checked against a real A100-80GB.
var A100SXM480GB = GPUModel{Key: "a100-80gb", ProductName: "NVIDIA A100-SXM4-80GB", Architecture: "Ampere",
	CUDAComputeCapability: "8.0.0", MemoryMi: 81920, Profiles: []MIGProfile{
		{Name: "1g.10gb", ID: 19, MemoryMi: 9856, SMs: 14, CopyEngines: 1, Decoders: 1, Size: 1, Starts: seq(7)},
		{Name: "1g.10gb+me", ID: 20, MemoryMi: 9856, SMs: 14, CopyEngines: 1, Decoders: 1, JPEG: 1, OFA: 1, Size: 1, Starts: seq(7)},
		{Name: "1g.20gb", ID: 15, MemoryMi: 19968, SMs: 14, CopyEngines: 1, Decoders: 1, Size: 2, Starts: []int{0, 2, 4, 6}},
		{Name: "2g.20gb", ID: 14, MemoryMi: 19968, SMs: 28, CopyEngines: 2, Decoders: 1, Size: 2, Starts: []int{0, 2, 4}},
		{Name: "3g.40gb", ID: 9, MemoryMi: 40192, SMs: 42, CopyEngines: 3, Decoders: 2, Size: 4, Starts: []int{0, 4}},
		{Name: "4g.40gb", ID: 5, MemoryMi: 40192, SMs: 56, CopyEngines: 4, Decoders: 2, Size: 4, Starts: []int{0}},
		{Name: "7g.80gb", ID: 0, MemoryMi: 80384, SMs: 98, CopyEngines: 7, Decoders: 5, JPEG: 1, OFA: 1, Size: 8, Starts: []int{0}},
	}}

// H100SXM580GB: product name and memory total from go-nvml's mock
// (pkg/nvml/mock/gpus/h100.go); the profile table from `nvidia-smi mig
// -lgip` on an H100 80GB HBM3 (IDs, SMs, engines; memory 9.75, 19.62,
// 39.50 and 79.25 GiB), the placements from the NVIDIA MIG User Guide's
// H100 placement table (the A100 layout of 8 memory slices). The mock's own
// H100 MIG numbers are not a real H100's and are not used.
var H100SXM580GB = GPUModel{Key: "h100-80gb", ProductName: "NVIDIA H100 80GB HBM3", Architecture: "Hopper",
	CUDAComputeCapability: "9.0.0", MemoryMi: 81920, MIGToggle: true, Profiles: []MIGProfile{
		{Name: "1g.10gb", ID: 19, MemoryMi: 9984, SMs: 16, CopyEngines: 1, Decoders: 1, JPEG: 1, Size: 1, Starts: seq(7)},
		{Name: "1g.10gb+me", ID: 20, MemoryMi: 9984, SMs: 16, CopyEngines: 1, Decoders: 1, JPEG: 1, OFA: 1, Size: 1, Starts: seq(7)},
		{Name: "1g.20gb", ID: 15, MemoryMi: 20096, SMs: 26, CopyEngines: 1, Decoders: 1, JPEG: 1, Size: 2, Starts: []int{0, 2, 4, 6}},
		{Name: "2g.20gb", ID: 14, MemoryMi: 20096, SMs: 32, CopyEngines: 2, Decoders: 2, JPEG: 2, Size: 2, Starts: []int{0, 2, 4}},
		{Name: "3g.40gb", ID: 9, MemoryMi: 40448, SMs: 60, CopyEngines: 3, Decoders: 3, JPEG: 3, Size: 4, Starts: []int{0, 4}},
		{Name: "4g.40gb", ID: 5, MemoryMi: 40448, SMs: 64, CopyEngines: 4, Decoders: 4, JPEG: 4, Size: 4, Starts: []int{0}},
		{Name: "7g.80gb", ID: 0, MemoryMi: 81152, SMs: 132, CopyEngines: 8, Decoders: 7, JPEG: 7, OFA: 1, Size: 8, Starts: []int{0}},
	}}

// GPUModels are the models with a profile. The H200 is not among them: its
// MIG table could not be sourced (go-nvml's dgxh200 mock reuses invented
// numbers), so no profile pretends to know it.
var GPUModels = []GPUModel{A100SXM440GB, A100SXM480GB, H100SXM580GB}

// NVIDIAVersion is a release of NVIDIA/k8s-dra-driver-gpu.
type NVIDIAVersion string

const (
	// NVIDIAv25120 is v25.12.0 with the DynamicMIG feature gate: every
	// GPU publishes its whole GPU and every MIG placement.
	NVIDIAv25120 NVIDIAVersion = "v25.12.0"
	// NVIDIAv040 is v0.4.0 with DynamicMIG: a MIG-mode GPU that cannot
	// leave MIG mode without a reset (Ampere) publishes only its MIG
	// placements; the MIG devices also carry the parent's pcieRoot.
	NVIDIAv040 NVIDIAVersion = "v0.4.0"
)

// Inventory is what one node publishes: its pool's slices, and the
// driver's DeviceClasses (cluster-wide, the same for every node).
type Inventory struct {
	Slices  []*resourceapi.ResourceSlice
	Classes []*resourceapi.DeviceClass
}

// Topology places a node's devices on PCI: the bus address of each device
// and the PCIe root it hangs from. Ours: eight devices on four roots (two
// per root) as on a two-socket 8-GPU server; no driver source fixes it.
func gpuPCI(minor int) (busID, root string) {
	root = fmt.Sprintf("pci0000:%02x", (minor/2%4)*0x40+(minor/8)*0x10)
	busID = fmt.Sprintf("0000:%02x:00.0", (minor/2%4)*0x40+(minor/8)*0x10+0x07+(minor%2)*0x08)
	return busID, root
}

// gpuUUID is a stable stand-in for the UUID NVML reports.
func gpuUUID(node string, minor int) string {
	h := fnv.New128a()
	fmt.Fprintf(h, "%s/gpu/%d", node, minor)
	b := h.Sum(nil)
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// NVIDIAClasses are the driver's DeviceClasses for GPUs and MIG devices:
// deployments/helm/.../templates/deviceclass-gpu.yaml and deviceclass-mig.yaml
// (v25.12.0 and v0.4.0 alike; the gpu class maps the extended resource
// nvidia.com/gpu under resource.k8s.io/v1).
func NVIDIAClasses() []*resourceapi.DeviceClass {
	gpu := deviceClass("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'")
	gpu.Spec.ExtendedResourceName = ptr.To("nvidia.com/gpu")
	mig := deviceClass("mig.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'")
	return []*resourceapi.DeviceClass{gpu, mig}
}

func deviceClass(name, expr string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}},
	}
}

// NVIDIADynamicMIG is a node of gpus MIG-mode GPUs of model gm under the
// driver's DynamicMIG feature gate, on Kubernetes 1.35 or later
// (generateSplitResourceSlices in cmd/gpu-kubelet-plugin/driver.go):
//   - one pool named after the node; its first slice holds only the shared
//     counters, one counter set per GPU named gpu-<minor>-counter-set;
//   - then one slice per GPU (by minor in v25.12.0, by PCI bus ID in v0.4.0,
//     the same order here), its devices sorted by name;
//   - the whole GPU gpu-<minor> (not in v0.4.0 on an Ampere GPU in MIG
//     mode: nvlib.go, isDynamicMIGCapable) has as capacity the largest of
//     each capacity over all MIG profiles and consumes the whole counter
//     set (partitions.go, PartGetDevice, PartConsumesCounters);
//   - every placement of every MIG profile is a device
//     gpu-<minor>-mig-<profile>-<profileID>-<start> (mig.go, ToCanonicalName)
//     with the profile's capacities (mig.go, CommonCapacitiesMig) and
//     consuming them plus its memory slices (partitions.go).
func NVIDIADynamicMIG(v NVIDIAVersion, gm GPUModel, node string, gpus int) Inventory {
	var counterSets []resourceapi.CounterSet
	var gpuSlices [][]resourceapi.Device
	for minor := 0; minor < gpus; minor++ {
		g := nvidiaGPU{model: gm, node: node, minor: minor}
		g.uuid = gpuUUID(node, minor)
		g.busID, g.root = gpuPCI(minor)
		maxCaps, slicesN := g.maxCapacities()
		set := fmt.Sprintf("gpu-%d-counter-set", minor)
		counterSets = append(counterSets, resourceapi.CounterSet{Name: set, Counters: withMemSlices(toCounters(maxCaps), 0, slicesN)})
		var devs []resourceapi.Device
		if v != NVIDIAv040 || gm.MIGToggle {
			devs = append(devs, resourceapi.Device{
				Name: fmt.Sprintf("gpu-%d", minor), Attributes: g.gpuAttributes(v), Capacity: maxCaps,
				ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: withMemSlices(toCounters(maxCaps), 0, slicesN)}},
			})
		}
		for _, pr := range gm.Profiles {
			for _, start := range pr.Starts {
				caps := migCapacities(pr)
				devs = append(devs, resourceapi.Device{
					Name: MIGDeviceName(minor, pr, start), Attributes: g.migAttributes(v, pr.Name), Capacity: caps,
					ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: withMemSlices(toCounters(caps), start, pr.Size)}},
				})
			}
		}
		slices.SortFunc(devs, func(a, b resourceapi.Device) int { return strings.Compare(a.Name, b.Name) })
		gpuSlices = append(gpuSlices, devs)
	}
	// The driver puts every counter set in its one counters slice. The API
	// takes at most 8 counter sets per slice, so a node with more than 8
	// GPUs could not publish; we split the sets over as many counters
	// slices as that needs (8 GPUs or fewer: the driver's layout).
	counterSlices := (len(counterSets) + maxCounterSets - 1) / maxCounterSets
	total := int64(max(counterSlices, 1) + len(gpuSlices))
	inv := Inventory{Classes: NVIDIAClasses()}
	for i := 0; i < max(counterSlices, 1); i++ {
		s := newSlice(NVIDIADriver, node, i, total)
		s.Spec.SharedCounters = counterSets[i*maxCounterSets : min(len(counterSets), (i+1)*maxCounterSets)]
		inv.Slices = append(inv.Slices, s)
	}
	for _, devs := range gpuSlices {
		s := newSlice(NVIDIADriver, node, len(inv.Slices), total)
		s.Spec.Devices = devs
		inv.Slices = append(inv.Slices, s)
	}
	return inv
}

// maxCounterSets is the API's limit of counter sets in one slice
// (resource.k8s.io/v1 ResourceSliceMaxCounterSets).
const maxCounterSets = resourceapi.ResourceSliceMaxCounterSets

// NVIDIAWholeGPUs is a node of gpus GPUs without MIG (MIG disabled, or the
// DynamicMIG gate off): one slice with a device gpu-<minor> per GPU, whose
// only capacity is the memory NVML reports (deviceinfo.go, GetDevice;
// driver.go, publishResources). The driver appends the devices in Go map
// order, which is unspecified; here they are in minor order.
func NVIDIAWholeGPUs(v NVIDIAVersion, gm GPUModel, node string, gpus int) Inventory {
	s := newSlice(NVIDIADriver, node, 0, 1)
	for minor := 0; minor < gpus; minor++ {
		g := nvidiaGPU{model: gm, node: node, minor: minor, uuid: gpuUUID(node, minor)}
		g.busID, g.root = gpuPCI(minor)
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", minor), Attributes: g.gpuAttributes(v),
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: mi(gm.MemoryMi)}},
		})
	}
	return Inventory{Slices: []*resourceapi.ResourceSlice{s}, Classes: NVIDIAClasses()}
}

// MIGDeviceName is the driver's name of a MIG placement: the profile with
// dots dropped and other characters outside [a-z0-9-] turned into '-'
// ("1g.5gb+me" is "1g5gb-me"), then the profile ID and the first memory
// slice (mig.go, ToCanonicalName and toRFC1123Compliant).
func MIGDeviceName(minor int, pr MIGProfile, start int) string {
	name := strings.ToLower(strings.ReplaceAll(pr.Name, ".", ""))
	name = strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, name), "-")
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", minor, name, pr.ID, start)
}

type nvidiaGPU struct {
	model       GPUModel
	node, uuid  string
	minor       int
	busID, root string
}

func str(s string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{StringValue: ptr.To(s)}
}
func ver(s string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{VersionValue: ptr.To(s)}
}

// common are the attributes a whole GPU and its MIG devices share
// (partitions.go PartDevAttributes and PartAttributes in v25.12.0;
// deviceinfo.go Attributes and mig.go CommonAttributesMig in v0.4.0).
func (g nvidiaGPU) common() map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"productName":           str(g.model.ProductName),
		"brand":                 str("Nvidia"),
		"architecture":          str(g.model.Architecture),
		"cudaComputeCapability": ver(g.model.CUDAComputeCapability),
		"driverVersion":         ver(nvidiaDriverVersion),
		"cudaDriverVersion":     ver(cudaDriverVersion),
		PCIBusIDAttr:            str(g.busID),
	}
}

// gpuAttributes: the whole GPU also has its uuid and, in both versions,
// the pcieRoot (added in PartGetDevice and GetDevice).
func (g nvidiaGPU) gpuAttributes(NVIDIAVersion) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	a := g.common()
	a["type"] = str("gpu")
	a["uuid"] = str(g.uuid)
	a[PCIeRootAttr] = str(g.root)
	return a
}

// migAttributes: a MIG placement has its parent's uuid and its profile; it
// has no uuid of its own (it does not exist yet). v0.4.0 adds the parent's
// pcieRoot (CommonAttributesMig), v25.12.0 does not (PartAttributes).
func (g nvidiaGPU) migAttributes(v NVIDIAVersion, profile string) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	a := g.common()
	a["type"] = str("mig")
	a["parentUUID"] = str(g.uuid)
	a["profile"] = str(profile)
	if v == NVIDIAv040 {
		a[PCIeRootAttr] = str(g.root)
	}
	return a
}

// migCapacities: mig.go CommonCapacitiesMig. NVML's MemorySizeMB is MiB.
func migCapacities(pr MIGProfile) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
	return map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		"multiprocessors": {Value: bin(pr.SMs)},
		"copyEngines":     {Value: bin(pr.CopyEngines)},
		"decoders":        {Value: bin(pr.Decoders)},
		"encoders":        {Value: bin(pr.Encoders)},
		"jpegEngines":     {Value: bin(pr.JPEG)},
		"ofaEngines":      {Value: bin(pr.OFA)},
		"memory":          {Value: mi(pr.MemoryMi)},
	}
}

// maxCapacities is the largest of each capacity over all placements, and
// the largest placement's size as the number of memory slices
// (nvlib.go, inspectMigProfilesAndPlacements).
func (g nvidiaGPU) maxCapacities() (map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, int) {
	out := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
	size := 0
	for _, pr := range g.model.Profiles {
		size = max(size, pr.Size)
		for name, c := range migCapacities(pr) {
			if cur, ok := out[name]; !ok || c.Value.Cmp(cur.Value) > 0 {
				out[name] = c
			}
		}
	}
	return out, size
}

// toCounters names each capacity as a counter: camelCase becomes a DNS
// label ("copyEngines" is "copy-engines"; partitions.go capacitiesToCounters).
func toCounters(caps map[resourceapi.QualifiedName]resourceapi.DeviceCapacity) map[string]resourceapi.Counter {
	out := map[string]resourceapi.Counter{}
	for name, c := range caps {
		var b strings.Builder
		for i, r := range string(name) {
			if r >= 'A' && r <= 'Z' {
				if i > 0 {
					b.WriteByte('-')
				}
				r += 'a' - 'A'
			}
			b.WriteRune(r)
		}
		out[b.String()] = resourceapi.Counter{Value: c.Value}
	}
	return out
}

// withMemSlices adds memory-slice-<i> counters of 1 for the slices
// [start, start+size) (partitions.go addCountersForMemSlices).
func withMemSlices(c map[string]resourceapi.Counter, start, size int) map[string]resourceapi.Counter {
	for i := start; i < start+size; i++ {
		c[fmt.Sprintf("memory-slice-%d", i)] = resourceapi.Counter{Value: bin(1)}
	}
	return c
}

func bin(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.BinarySI) }
func mi(v int64) resource.Quantity  { return *resource.NewQuantity(v<<20, resource.BinarySI) }

// newSlice is slice i of a node's pool. The kubelet's slice controller
// names slices <node>-<driver>-<random>; ours end in the slice's index.
func newSlice(driver, node string, i int, total int64) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", node, driver, i)},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: total}},
	}
}
