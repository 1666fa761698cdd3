package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// Size is one instance size: nodes, GPUs per node (ignored where a
// scenario fixes it) and pending claims.
type Size struct {
	Nodes, GPUs, Claims int
}

func (s Size) String() string {
	if s.GPUs == 0 {
		return fmt.Sprintf("%d:%d", s.Nodes, s.Claims)
	}
	return fmt.Sprintf("%dx%d:%d", s.Nodes, s.GPUs, s.Claims)
}

// ParseSize reads "NODESxGPUS:CLAIMS" or "NODES:CLAIMS".
func ParseSize(s string) (Size, error) {
	var sz Size
	nodes, claims, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return sz, fmt.Errorf("size %q: want NODESxGPUS:CLAIMS or NODES:CLAIMS", s)
	}
	n, g, hasG := strings.Cut(nodes, "x")
	var err error
	if sz.Nodes, err = strconv.Atoi(n); err != nil || sz.Nodes < 0 {
		return sz, fmt.Errorf("size %q: bad node count", s)
	}
	if hasG {
		if sz.GPUs, err = strconv.Atoi(g); err != nil || sz.GPUs <= 0 {
			return sz, fmt.Errorf("size %q: bad GPU count", s)
		}
	}
	if sz.Claims, err = strconv.Atoi(claims); err != nil || sz.Claims < 0 {
		return sz, fmt.Errorf("size %q: bad claim count", s)
	}
	return sz, nil
}

// ParseSizes reads a comma-separated list of sizes.
func ParseSizes(s string) ([]Size, error) {
	var out []Size
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		sz, err := ParseSize(part)
		if err != nil {
			return nil, err
		}
		out = append(out, sz)
	}
	return out, nil
}

// Instance is one generated batch: the objects, the compatibility semantics
// to run under, and how to read its counters for the metrics.
type Instance struct {
	Scenario string
	Size     Size
	Compat   string // model.CompatKEP5963 or model.CompatWildcard
	Objs     *input.Objects
	// Unit names the physical unit a counter belongs to ("GPU" for a
	// counter set of a GPU, one node's TPUs for a per-node counter); a unit
	// is free when none of its counters is consumed.
	Unit     func(set, counter string) string
	UnitName string // "GPUs", "TPU hosts"
	// Util selects the counters whose use is reported as utilisation.
	Util     func(counter string) bool
	UtilName string
	// Picture: draw a per-GPU memory-slice picture of each placement.
	Picture bool
	// Fleet is the GPU fleet of a mig instance (MIGFleets); "" elsewhere.
	Fleet string
	// Capacity, when set, measures shared devices instead of counters:
	// units are devices with allowMultipleAllocations, utilisation is the
	// share of this capacity consumed.
	Capacity string
	// Family is the claim mix of a mig instance (MIGFamilies, then any
	// --mig-mix settings after a '+'); "" elsewhere.
	Family string
}

// Name is "scenario size [compat]", and for mig "scenario size [fleet]"
// where the fleet is not the default a100.
func (in *Instance) Name() string {
	n := in.Scenario + " " + in.Size.String()
	if in.Scenario == "modes" {
		n += " " + in.Compat
	}
	if in.namedFleet() {
		n += " " + in.Fleet
	}
	if in.Family != "" && in.Family != "default" {
		n += " " + in.Family
	}
	return n
}

// namedFleet tells whether the instance's fleet is not the default A100
// one: such instances name their fleet, and their pictures each GPU's
// model.
func (in *Instance) namedFleet() bool { return in.Fleet != "" && in.Fleet != "a100" }

// GenerateOptions are the scenario options beyond the size and seed.
type GenerateOptions struct {
	// MIGGPU is the mig scenario's GPU fleet: a100 ("" too), h100 or
	// mixed (see MIGFleet).
	MIGGPU string
	// MIGFamily is the mig scenario's claim mix (MIGFamilies; "" is
	// default), MIGMix single settings changed on top of it (ParseMIGMix).
	MIGFamily string
	MIGMix    map[string]float64
}

// Scenarios lists the batch scenarios and the replay.
var Scenarios = []string{"mig", "scale", "tpu", "modes", "nic", "gpu-nic", "openb", "openb-wait", "inflation", "research", "research-openb"}

// DefaultSizes are the sizes run when none are given.
var DefaultSizes = map[string]string{
	"mig": "8x8:300,8x8:500,16x8:1000",
	// scale: clusters of the largest GPU fleets, from tools/scalegen (a
	// generator apart from bench/gen's); the sizes go to 2,000
	// nodes, which need minutes per policy (docs/performance.md).
	"scale": "128x8:4000,256x8:8000",
	"tpu":   "32:20,64:40,128:80",
	"modes": "8x4:160,16x4:320",
	"nic":   "16:150,32:300,64:600",
	// gpu-nic: NODES:CLAIMS, nodes of 8 GPUs and 4 NICs (gpunic.go).
	"gpu-nic": "8:40,16:80",
	"openb":   "16:1000",
	// openb-wait: the replay with waiting, NODES:TASKS.
	"openb-wait": "16:1000",
	// inflation: NODES:BATCH, tasks until the requested GPUs reach the
	// cluster's.
	"inflation": "32:10",
	// research: every partitioning model on a modes workload (research.go).
	"research": "8x4:160,16x4:320",
	// research-openb: the trace on modes GPUs under every model.
	"research-openb": "16:1000",
}

// counterSetUnit: every counter set is one GPU.
func counterSetUnit(set, _ string) string { return set }

func memorySlices(c string) bool { return strings.HasPrefix(c, "memory-slice-") }

// Generate builds the batch instances of a scenario at one size. modes
// gives two instances, one per compatibility semantics.
func Generate(scenario string, sz Size, seed uint64, opts GenerateOptions) ([]*Instance, error) {
	switch scenario {
	case "mig":
		g := sz.GPUs
		if g == 0 {
			g = 8
		}
		sz.GPUs = g
		fleet := opts.MIGGPU
		if fleet == "" {
			fleet = "a100"
		}
		models, err := gen.MIGFleet(fleet)
		if err != nil {
			return nil, err
		}
		cfg, err := gen.MIGFamilyConfig(opts.MIGFamily, sz.Nodes, g, sz.Claims, seed)
		if err != nil {
			return nil, err
		}
		if err := gen.ApplyMIGMix(&cfg, opts.MIGMix); err != nil {
			return nil, err
		}
		family := opts.MIGFamily
		if family == "" {
			family = "default"
		}
		if m := gen.MixName(opts.MIGMix); m != "" {
			family += "+" + m
		}
		cfg.Models = models
		// Utilisation counts memory slices: every GPU of either model has
		// eight, so in a mixed fleet each GPU weighs the same.
		return []*Instance{{Scenario: scenario, Size: sz, Compat: model.CompatKEP5963, Objs: gen.MIG(cfg),
			Unit: counterSetUnit, UnitName: "GPUs", Util: memorySlices, UtilName: "memory slices",
			Picture: sz.Nodes*g <= 16, Fleet: fleet, Family: family}}, nil
	case "scale":
		if sz.GPUs == 0 {
			sz.GPUs = 8
		}
		// A100-40GB nodes as the NVIDIA driver publishes them, a quarter of
		// the GPUs already holding MIG devices (tools/scalegen).
		objs := scalegen.Generate(scalegen.Config{Nodes: sz.Nodes, GPUs: sz.GPUs, Claims: sz.Claims, Seed: seed})
		// As drasat allocate reads the same objects from a file, and the
		// controller's cache holds them.
		input.ShareDeviceMaps(objs)
		return []*Instance{{Scenario: scenario, Size: sz, Compat: model.CompatKEP5963, Objs: objs,
			Unit: counterSetUnit, UnitName: "GPUs", Util: memorySlices, UtilName: "memory slices"}}, nil
	case "tpu":
		objs, err := gen.TPU(gen.TPUConfig{Nodes: sz.Nodes, Claims: sz.Claims, Seed: seed, Fragmented: 0.15})
		if err != nil {
			return nil, err
		}
		return []*Instance{{Scenario: scenario, Size: Size{Nodes: sz.Nodes, Claims: sz.Claims}, Compat: model.CompatKEP5963, Objs: objs,
			Unit: func(set, counter string) string { return counter }, UnitName: "TPU hosts",
			Util: func(string) bool { return true }, UtilName: "TPU chips"}}, nil
	case "modes":
		g := sz.GPUs
		if g == 0 {
			g = 4
		}
		sz.GPUs = g
		var out []*Instance
		for _, compat := range []string{model.CompatKEP5963, model.CompatWildcard} {
			objs := gen.Modes(gen.ModesConfig{Nodes: sz.Nodes, GPUsPerNode: g, Claims: sz.Claims, Seed: seed})
			out = append(out, &Instance{Scenario: scenario, Size: sz, Compat: compat, Objs: objs,
				Unit: counterSetUnit, UnitName: "GPUs", Util: func(c string) bool { return c == "multiprocessors" }, UtilName: "SMs"})
		}
		return out, nil
	case "gpu-nic":
		objs := gen.GPUNIC(gen.GPUNICConfig{Nodes: sz.Nodes, Claims: sz.Claims, Seed: seed})
		return []*Instance{{Scenario: scenario, Size: Size{Nodes: sz.Nodes, Claims: sz.Claims}, Compat: model.CompatKEP5963, Objs: objs,
			UnitName: "NICs", UtilName: "NIC bandwidth", Capacity: "bandwidth"}}, nil
	case "nic":
		objs := gen.NIC(gen.NICConfig{Nodes: sz.Nodes, NICsPerNode: sz.GPUs, Claims: sz.Claims, Seed: seed, Running: 0.25})
		return []*Instance{{Scenario: scenario, Size: sz, Compat: model.CompatKEP5963, Objs: objs,
			UnitName: "NICs", UtilName: "bandwidth", Capacity: "bandwidth"}}, nil
	}
	return nil, fmt.Errorf("scenario %q: want one of %s", scenario, strings.Join(Scenarios, ", "))
}
