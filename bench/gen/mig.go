// Package gen generates the bench's allocation scenarios as the objects an
// API server would hold: MIG GPUs as the NVIDIA driver publishes them (mig,
// several fleets and claim families, pods with CPU), TPU pools (tpu), NICs
// (nic, gpu-nic) and GPUs with mutually exclusive partitioning modes
// (modes). Every generator is deterministic in its seed. Running policies on
// them is package bench's; the baselines are package baseline's.
package gen

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

// NVIDIADriver is the driver name the MIG scenarios publish under.
const NVIDIADriver = "gpu.nvidia.com"

// MIGProfile is one MIG profile of a GPU model and the counters one
// instance consumes (driverprofile's numbers), with how often generated
// claims ask for it.
type MIGProfile struct {
	Name       string
	ID         int // GPU instance profile ID, part of the device name
	MemoryMi   int64
	Slices     int   // memory slices
	Starts     []int // first memory slice of each placement
	SMs        int64
	CopyEng    int64
	Decoders   int64
	JPEG, OFA  int64
	ClaimShare float64 // relative frequency in generated claims
}

// GPUModel is a MIG-capable GPU as a version of the NVIDIA DRA driver
// publishes it (driverprofile.NVIDIADynamicMIG): the counters below are
// those of its counter set, the largest of each over the MIG profiles.
type GPUModel struct {
	Name         string // productName attribute and node label
	Architecture string // architecture attribute
	MemoryMi     int64
	SMs          int64
	CopyEng      int64
	Decoders     int64
	JPEG         int64
	OFA          int64
	Profiles     []MIGProfile
	// Driver is the GPU as NVML describes it, Version the driver release
	// publishing it.
	Driver  driverprofile.GPUModel
	Version driverprofile.NVIDIAVersion
}

// fromDriver is the bench's view of a driver profile's GPU model; shares
// are the claim frequencies by profile name.
func fromDriver(gm driverprofile.GPUModel, v driverprofile.NVIDIAVersion, shares map[string]float64) GPUModel {
	out := GPUModel{Name: gm.ProductName, Architecture: gm.Architecture, Driver: gm, Version: v}
	for _, p := range gm.Profiles {
		out.Profiles = append(out.Profiles, MIGProfile{Name: p.Name, ID: p.ID, MemoryMi: p.MemoryMi, Slices: p.Size, Starts: p.Starts,
			SMs: p.SMs, CopyEng: p.CopyEngines, Decoders: p.Decoders, JPEG: p.JPEG, OFA: p.OFA, ClaimShare: shares[p.Name]})
		out.MemoryMi, out.SMs, out.CopyEng = max(out.MemoryMi, p.MemoryMi), max(out.SMs, p.SMs), max(out.CopyEng, p.CopyEngines)
		out.Decoders, out.JPEG, out.OFA = max(out.Decoders, p.Decoders), max(out.JPEG, p.JPEG), max(out.OFA, p.OFA)
	}
	return out
}

// A100 is the A100-SXM4-40GB under the NVIDIA driver v25.12.0: per GPU the
// whole GPU and 25 MIG placements (driverprofile.A100SXM440GB).
var A100 = fromDriver(driverprofile.A100SXM440GB, driverprofile.NVIDIAv25120, map[string]float64{
	"1g.5gb": 30, "1g.5gb+me": 5, "1g.10gb": 15, "2g.10gb": 20, "3g.20gb": 15, "4g.20gb": 8, "7g.40gb": 7})

// A100v040 is the same GPU under driver v0.4.0: an A100 in MIG mode
// publishes no whole GPU.
var A100v040 = fromDriver(driverprofile.A100SXM440GB, driverprofile.NVIDIAv040, map[string]float64{
	"1g.5gb": 30, "1g.5gb+me": 5, "1g.10gb": 15, "2g.10gb": 20, "3g.20gb": 15, "4g.20gb": 8, "7g.40gb": 7})

// H100 is the H100 80GB HBM3 under driver v25.12.0
// (driverprofile.H100SXM580GB).
var H100 = fromDriver(driverprofile.H100SXM580GB, driverprofile.NVIDIAv25120, map[string]float64{
	"1g.10gb": 30, "1g.10gb+me": 5, "1g.20gb": 15, "2g.20gb": 20, "3g.40gb": 15, "4g.40gb": 8, "7g.80gb": 7})

// MIGFleets are the GPU fleets of the mig scenario (--mig-gpu): a100 (the
// default), h100, mixed (A100 and H100 nodes alternating), and versions
// (A100 nodes alternating between driver v0.4.0 and v25.12.0).
var MIGFleets = []string{"a100", "h100", "mixed", "versions"}

// Profile is the model's MIG profile of that name, nil when it has none.
func (gm *GPUModel) Profile(name string) *MIGProfile {
	for i := range gm.Profiles {
		if gm.Profiles[i].Name == name {
			return &gm.Profiles[i]
		}
	}
	return nil
}

// MIGFleet returns the GPU models of a fleet ("" is a100).
func MIGFleet(name string) ([]GPUModel, error) {
	switch name {
	case "", "a100":
		return []GPUModel{A100}, nil
	case "h100":
		return []GPUModel{H100}, nil
	case "mixed":
		return []GPUModel{A100, H100}, nil
	case "versions":
		return []GPUModel{A100v040, A100}, nil
	}
	return nil, fmt.Errorf("mig GPU fleet %q: want one of %s", name, strings.Join(MIGFleets, ", "))
}

// MIGConfig sizes a mig scenario.
type MIGConfig struct {
	Nodes, GPUsPerNode int
	Claims             int
	Seed               uint64
	// Fragmented is the fraction of GPUs that start with 1–2 allocations.
	Fragmented float64
	// MultiDevice is the fraction of claims asking for 2–4 devices on one
	// GPU (matchAttribute parentUUID) or on one node.
	MultiDevice float64
	// MatchShare is the share of multi-device claims that keep all their
	// devices on one GPU (matchAttribute parentUUID); 0 means one half.
	MatchShare float64
	// WholeGPU is the fraction of claims asking for one whole GPU (class
	// gpu.nvidia.com), TwoGPU the fraction asking for two whole GPUs in
	// one request (count 2, so on one node).
	WholeGPU, TwoGPU float64
	// Count is the fraction of claims asking for 2–3 MIG devices of one
	// profile in a single request (count > 1, anywhere on one node).
	Count float64
	// Rich is the fraction of claims written as the drivers' users write
	// them (richClaim): firstAvailable, two requests on one GPU, count 2 on
	// one GPU, CEL on the MIG device's memory capacity, productName.
	Rich float64
	// PreallocMax is the most MIG devices already allocated on a
	// fragmented GPU (1..PreallocMax; 0 means 2), and PreallocSmall keeps
	// them to the profiles of one or two memory slices.
	PreallocMax   int
	PreallocSmall bool
	// Models are the GPU models of the fleet, assigned to nodes round
	// robin; empty means A100 only. Each pending claim picks a model at
	// random and a profile of it; with more than one distinct model its
	// requests also select the model's productName, since profile names
	// alone are ambiguous (1g.10gb is two memory slices on an A100 and one
	// on an H100).
	Models []GPUModel
	// PodCPUs > 0 gives every pending claim a pod with CPU and memory
	// requests and every node PodCPUs CPUs (AddPods).
	PodCPUs int
}

// DefaultMIG is the instance family of the engine's speed targets.
func DefaultMIG(nodes, gpus, claims int, seed uint64) MIGConfig {
	return MIGConfig{Nodes: nodes, GPUsPerNode: gpus, Claims: claims, Seed: seed, Fragmented: 0.25, MultiDevice: 0.2}
}

// MIG generates the scenario: Nodes, DeviceClasses, one pool per node (a
// counters slice and device slices of at most two GPUs, as the API's
// per-slice limits require), existing allocations and pending claims.
func MIG(cfg MIGConfig) *input.Objects {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6d6967))
	models := cfg.Models
	if len(models) == 0 {
		models = []GPUModel{A100}
	}
	// selectors asks for a profile, and for the model when the fleet has
	// more than one.
	mixed := false
	for _, m := range models {
		mixed = mixed || m.Name != models[0].Name
	}
	selectors := func(gm *GPUModel, profile string) []resourceapi.DeviceSelector {
		sel := ProfileSelector(profile)
		if mixed {
			sel = append(sel, productSelector(gm.Name))
		}
		return sel
	}
	// A whole GPU is selected by its class, as the driver's users do; a
	// whole GPU has no profile attribute.
	wholeSelectors := func(gm *GPUModel) []resourceapi.DeviceSelector {
		if mixed {
			return []resourceapi.DeviceSelector{productSelector(gm.Name)}
		}
		return nil
	}
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Classes = MIGClasses()
	type gpu struct {
		node  string
		index int
		model *GPUModel
	}
	var gpus []*gpu
	for n := 0; n < cfg.Nodes; n++ {
		node := fmt.Sprintf("node-%03d", n)
		gm := &models[n%len(models)]
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
			Labels: map[string]string{"nvidia.com/gpu.product": ProductLabel(gm.Name)}}})
		objs.Slices = append(objs.Slices, driverprofile.NVIDIADynamicMIG(gm.Version, gm.Driver, node, cfg.GPUsPerNode).Slices...)
		for g := 0; g < cfg.GPUsPerNode; g++ {
			gpus = append(gpus, &gpu{node: node, index: g, model: gm})
		}
	}
	// Existing allocations: 1–2 MIG devices on a share of the GPUs, on
	// disjoint memory slices and within every counter of the GPU's model so
	// the start state is valid.
	existing := 0
	for _, gp := range gpus {
		if rng.Float64() >= cfg.Fragmented {
			continue
		}
		var used [8]bool
		var engines engineUse
		most := cfg.PreallocMax
		if most <= 0 {
			most = 2
		}
		n := 1 + rng.IntN(most)
		for k := 0; k < n; k++ {
			var pr MIGProfile
			if cfg.PreallocSmall {
				pr = pickSmallProfile(rng, gp.model, 4)
			} else {
				pr = pickProfile(rng, gp.model)
			}
			if pr.Slices == 8 {
				continue // a whole GPU in use is not fragmentation
			}
			start := pr.Starts[rng.IntN(len(pr.Starts))]
			free := engines.plus(pr, 1).fits(gp.model)
			for s := start; s < start+pr.Slices; s++ {
				free = free && !used[s]
			}
			if !free {
				continue
			}
			engines = engines.plus(pr, 1)
			for s := start; s < start+pr.Slices; s++ {
				used[s] = true
			}
			name := migName(gp.index, pr, start)
			c := NewClaim(fmt.Sprintf("running-%04d", existing), []string{"mig.nvidia.com"}, nil)
			c.Spec.Devices.Requests[0].Exactly.Selectors = selectors(gp.model, pr.Name)
			c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "r0", Driver: NVIDIADriver, Pool: gp.node, Device: name}}},
				NodeSelector: NodeSelectorFor(gp.node)}
			objs.Claims = append(objs.Claims, c)
			existing++
		}
	}
	// Pending claims.
	for i := 0; i < cfg.Claims; i++ {
		name := fmt.Sprintf("claim-%04d", i)
		gm := &models[rng.IntN(len(models))]
		// The draws of the default family come first and stay as they
		// were: the new shares only draw when they are set, so the
		// default instances do not change.
		if cfg.WholeGPU+cfg.TwoGPU+cfg.Count > 0 {
			x := rng.Float64()
			switch {
			case x < cfg.WholeGPU:
				objs.Claims = append(objs.Claims, wholeGPUClaim(name, wholeSelectors(gm), 1))
				continue
			case x < cfg.WholeGPU+cfg.TwoGPU:
				objs.Claims = append(objs.Claims, wholeGPUClaim(name, wholeSelectors(gm), 2))
				continue
			case x < cfg.WholeGPU+cfg.TwoGPU+cfg.Count:
				n := 2 + rng.IntN(2)
				c := NewClaim(name, []string{"mig.nvidia.com"}, nil)
				c.Spec.Devices.Requests[0].Exactly.Selectors = selectors(gm, pickSmallProfile(rng, gm, n).Name)
				c.Spec.Devices.Requests[0].Exactly.Count = int64(n)
				objs.Claims = append(objs.Claims, c)
				continue
			}
		}
		if cfg.Rich > 0 && rng.Float64() < cfg.Rich {
			objs.Claims = append(objs.Claims, richClaim(rng, name, gm, selectors))
			continue
		}
		if rng.Float64() < cfg.MultiDevice {
			n := 2 + rng.IntN(3)
			c := NewClaim(name, repeat("mig.nvidia.com", n), nil)
			for r := range c.Spec.Devices.Requests {
				c.Spec.Devices.Requests[r].Exactly.Selectors = selectors(gm, pickSmallProfile(rng, gm, n).Name)
			}
			match := rng.IntN(2) == 0
			if cfg.MatchShare != 0 {
				match = rng.Float64() < cfg.MatchShare
			}
			if match {
				c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(NVIDIADriver + "/parentUUID"))}}
			}
			objs.Claims = append(objs.Claims, c)
			continue
		}
		pr := pickProfile(rng, gm)
		c := NewClaim(name, []string{"mig.nvidia.com"}, nil)
		c.Spec.Devices.Requests[0].Exactly.Selectors = selectors(gm, pr.Name)
		objs.Claims = append(objs.Claims, c)
	}
	if cfg.PodCPUs > 0 {
		AddPods(objs, int64(cfg.PodCPUs), cfg.Seed)
	}
	return objs
}

// richClaim draws one of the claims the drivers' users write, on model
// gm (sel adds the productName in mixed fleets):
//   - firstAvailable: the largest profile of three or four memory slices,
//     else two devices of the smallest on one GPU, else one of two slices;
//   - two requests, a small and a two-slice device, on one GPU;
//   - count 2 of the smallest profile on one GPU;
//   - any MIG device with at least 10Gi of memory (CEL on its capacity)
//     and the model's productName, without naming a profile.
//
// "On one GPU" is matchAttribute parentUUID over the requests.
func richClaim(rng *rand.Rand, name string, gm *GPUModel, sel func(*GPUModel, string) []resourceapi.DeviceSelector) *resourceapi.ResourceClaim {
	bySlices := func(slices ...int) MIGProfile {
		for _, want := range slices {
			for _, p := range gm.Profiles {
				if p.Slices == want {
					return p
				}
			}
		}
		return gm.Profiles[0]
	}
	small, two, large := bySlices(1), bySlices(2), bySlices(4, 3)
	sameGPU := func(reqs ...string) []resourceapi.DeviceConstraint {
		return []resourceapi.DeviceConstraint{{Requests: reqs, MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(NVIDIADriver + "/parentUUID"))}}
	}
	c := NewClaim(name, []string{"mig.nvidia.com"}, nil)
	r0 := &c.Spec.Devices.Requests[0]
	switch rng.IntN(4) {
	case 0:
		sub := func(n string, pr MIGProfile, count int64) resourceapi.DeviceSubRequest {
			return resourceapi.DeviceSubRequest{Name: n, DeviceClassName: "mig.nvidia.com", Selectors: sel(gm, pr.Name),
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
		}
		r0.Exactly = nil
		r0.FirstAvailable = []resourceapi.DeviceSubRequest{sub("large", large, 1), sub("two-small", small, 2), sub("medium", two, 1)}
		c.Spec.Devices.Constraints = sameGPU("r0")
	case 1:
		r0.Exactly.Selectors = sel(gm, small.Name)
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: "r1", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "mig.nvidia.com", Selectors: sel(gm, two.Name), AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}})
		c.Spec.Devices.Constraints = sameGPU("r0", "r1")
	case 2:
		r0.Exactly.Selectors = sel(gm, small.Name)
		r0.Exactly.Count = 2
		c.Spec.Devices.Constraints = sameGPU("r0")
	default:
		r0.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.capacity['%s'].memory.compareTo(quantity('10Gi')) >= 0", NVIDIADriver)}}, productSelector(gm.Name)}
	}
	return c
}

// wholeGPUClaim asks for n whole GPUs in one request.
func wholeGPUClaim(name string, sel []resourceapi.DeviceSelector, n int) *resourceapi.ResourceClaim {
	c := NewClaim(name, []string{"gpu.nvidia.com"}, sel)
	c.Spec.Devices.Requests[0].Exactly.Count = int64(n)
	return c
}

// engineUse sums the counters other than memory slices that MIG devices
// on one GPU consume.
type engineUse struct {
	memoryMi, sms, copyEng, decoders, jpeg, ofa int64
}

func (u engineUse) plus(pr MIGProfile, n int64) engineUse {
	return engineUse{u.memoryMi + n*pr.MemoryMi, u.sms + n*pr.SMs, u.copyEng + n*pr.CopyEng,
		u.decoders + n*pr.Decoders, u.jpeg + n*pr.JPEG, u.ofa + n*pr.OFA}
}

// fits tells whether the use stays within a GPU of the model.
func (u engineUse) fits(gm *GPUModel) bool {
	return u.memoryMi <= gm.MemoryMi && u.sms <= gm.SMs && u.copyEng <= gm.CopyEng &&
		u.decoders <= gm.Decoders && u.jpeg <= gm.JPEG && u.ofa <= gm.OFA
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func pickProfile(rng *rand.Rand, gm *GPUModel) MIGProfile {
	return gm.Profiles[pickWeighted(rng, len(gm.Profiles), func(i int) float64 { return gm.Profiles[i].ClaimShare })]
}

// pickWeighted draws an index in [0, n) with probability proportional to
// weight(i).
func pickWeighted(rng *rand.Rand, n int, weight func(i int) float64) int {
	total := 0.0
	for i := 0; i < n; i++ {
		total += weight(i)
	}
	x := rng.Float64() * total
	for i := 0; i < n; i++ {
		if x -= weight(i); x < 0 {
			return i
		}
	}
	return 0
}

// pickSmallProfile picks a profile n instances of which fit on one GPU.
func pickSmallProfile(rng *rand.Rand, gm *GPUModel, n int) MIGProfile {
	for {
		p := pickProfile(rng, gm)
		if p.Slices*n <= 8 && len(p.Starts) >= n && (engineUse{}).plus(p, int64(n)).fits(gm) {
			return p
		}
	}
}

func ProfileSelector(profile string) []resourceapi.DeviceSelector {
	return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf("device.attributes['%s'].profile == '%s'", NVIDIADriver, profile)}}}
}

func productSelector(product string) resourceapi.DeviceSelector {
	return resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf("device.attributes['%s'].productName == '%s'", NVIDIADriver, product)}}
}

func NewClaim(name string, classes []string, sel []resourceapi.DeviceSelector) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
	}
	for i, cl := range classes {
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{
			Name:    fmt.Sprintf("r%d", i),
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: cl, Selectors: sel, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		})
	}
	return c
}

func NodeSelectorFor(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}
}

// MIGClasses are the NVIDIA driver's DeviceClasses.
func MIGClasses() []*resourceapi.DeviceClass { return driverprofile.NVIDIAClasses() }

// migName names the MIG device of a profile placed at a memory slice as
// the driver does: "gpu-0-mig-1g5gb-19-3" for 1g.5gb at slice 3 of GPU 0.
func migName(g int, pr MIGProfile, start int) string {
	return driverprofile.MIGDeviceName(g, driverprofile.MIGProfile{Name: pr.Name, ID: pr.ID}, start)
}

// profileLabelName is a profile as part of a DNS label: lowercase, with
// everything but letters, digits and '-' dropped ("1g.5gb+me" ->
// "1g5gbme"). The modes scenario (our own shape) names its devices so.
func profileLabelName(profile string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return -1
	}, profile)
}

// ProductLabel is a productName as GPU feature discovery labels nodes with
// it (nvidia.com/gpu.product): spaces become '-', as a label value needs.
func ProductLabel(product string) string { return strings.ReplaceAll(product, " ", "-") }
