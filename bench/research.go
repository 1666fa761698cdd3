package bench

// The research report: one workload of the modes scenario (GPUs that serve
// whole, MIG, fractional, MPS or time-sliced), published under every
// partitioning model there is, each solved to its optimum and checked.
// docs/research.md explains the models and what the numbers show.

import (
	"context"
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gonum.org/v1/plot/plotter"

	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// The partitioning models of the research report, in report order.
const (
	// ModelKEP5963: compatibilityGroups, intersection semantics; the
	// time-sliced slots carry no groups, so they only share a GPU with
	// devices without groups.
	ModelKEP5963 = "kep5963"
	// ModelWildcard: the same slices under the seed proposal's pairwise
	// semantics, where a device without groups goes with every group.
	ModelWildcard = "wildcard"
	// ModelCEL: no groups; each device's compatibleOnlyWith expression
	// states the hardware's rule.
	ModelCEL = "cel"
	// ModelDraft: the KEP-4815 draft's composite devices, every partition
	// consuming capacity from its whole GPU; the draft has no way to keep
	// modes apart (docs/research.md).
	ModelDraft = "draft"
	// ModelDraftTokens: the draft with exclusion capacities added (tokens
	// on the memory slices and one per time slot), which keep the modes
	// apart with additive capacities alone.
	ModelDraftTokens = "draft-tokens"
	// ModelStaticBest: today's drivers, each GPU fixed to one mode; the
	// modes are the best static choice for the batch (singleton groups, so
	// the optimum chooses them).
	ModelStaticBest = "static-best"
	// ModelStaticShare: each GPU fixed to one mode, the number of GPUs per
	// mode proportional to the batch's demand (an administrator's sizing,
	// no optimisation).
	ModelStaticShare = "static-share"
)

// ResearchModels lists the models in report order.
var ResearchModels = []string{ModelKEP5963, ModelWildcard, ModelCEL, ModelDraft, ModelDraftTokens, ModelStaticBest, ModelStaticShare}

// upstreamModels are the models the kube-scheduler's allocator can run:
// groups and plain counters (the draft flattened to counters), not the
// wildcard semantics nor compatibleOnlyWith.
var upstreamModels = map[string]bool{ModelKEP5963: true, ModelDraft: true, ModelDraftTokens: true, ModelStaticBest: true, ModelStaticShare: true}

// ResearchStats are the research report's columns beyond a Row's.
type ResearchStats struct {
	Model string `json:"model"`
	// ModeGPUs counts the GPUs in use per mode of the result
	// ("fractional+MPS" where both share a GPU, "INVALID" where the result
	// mixes modes the hardware cannot run together).
	ModeGPUs map[string]int `json:"modeGPUs"`
	// Violations counts GPUs whose allocated devices mix modes the hardware
	// cannot run together (the model could not express the rule).
	Violations int `json:"violations"`
	// Reconfigurations counts GPUs whose mode the driver sets up when the
	// claims are prepared: every GPU used in a partitioned mode under a
	// dynamic model, none under a static one (set up beforehand).
	Reconfigurations int `json:"reconfigurations"`
	// Replays only: windows, and windows solved to a proven optimum.
	// Violations then counts GPU-windows, Reconfigurations every time a
	// GPU takes up a mode it was not set up for, and ModeGPUs the GPUs by
	// the modes they were last set up for.
	Windows        int `json:"windows,omitempty"`
	OptimalWindows int `json:"optimalWindows,omitempty"`
	// AdmittedOverTime: replays only, the tasks admitted so far after
	// each window.
	AdmittedOverTime []TimePoint `json:"admittedOverTime,omitempty"`
	// StaticCandidates: the replay's static-best only, every static
	// configuration tried and what it admitted (research_openb.go).
	StaticCandidates []StaticCandidate `json:"staticCandidates,omitempty"`
	// modal: replays only, each GPU's mode in the most windows (GPU as
	// pool/counter set), for static-best's candidates.
	modal map[string]string
}

// Hardware modes of the modes scenario's GPUs.
const (
	modeWhole      = "None"
	modeMIG        = "MIGSlicing"
	modeFractional = "GPUFractioning"
	modeMPS        = "MPSSharing"
	modeTimeSlice  = "TimeSlicing"
)

// HardwareCompatible is the rule of the modes scenario's GPUs that every
// model tries to express: a whole GPU goes with nothing, MIG with MIG,
// time-sliced with time-sliced, and fractional and MPS devices with each
// other.
func HardwareCompatible(a, b string) bool {
	shared := func(m string) bool { return m == modeFractional || m == modeMPS }
	switch {
	case a == modeWhole || b == modeWhole:
		return false
	case shared(a) && shared(b):
		return true
	}
	return a == b
}

// ResearchInstance is one model's publication of the workload.
type ResearchInstance struct {
	Model  string
	Compat string
	Objs   *input.Objects
}

// ResearchInstances publishes one modes workload under every model. All
// share the nodes, classes and claims.
func ResearchInstances(cfg gen.ModesConfig) ([]*ResearchInstance, error) {
	var out []*ResearchInstance
	for _, m := range ResearchModels {
		objs := gen.Modes(cfg)
		compat := model.CompatKEP5963
		var err error
		switch m {
		case ModelWildcard:
			compat = model.CompatWildcard
		case ModelCEL:
			modesAsCEL(objs)
		case ModelDraft:
			err = modesAsDraft(objs, false)
		case ModelDraftTokens:
			err = modesAsDraft(objs, true)
		case ModelStaticBest:
			eachModeDevice(objs, func(d *resourceapi.Device, mode string) {
				d.ConsumesCounters[0].CompatibilityGroups = []string{staticGroup(mode)}
			})
		case ModelStaticShare:
			modesStaticShare(objs)
		}
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", m, err)
		}
		out = append(out, &ResearchInstance{Model: m, Compat: compat, Objs: objs})
	}
	return out, nil
}

func staticGroup(mode string) string { return strings.ToLower(mode) }

// eachModeDevice calls f for every device of the objects with its mode.
func eachModeDevice(objs *input.Objects, f func(d *resourceapi.Device, mode string)) {
	for _, s := range objs.Slices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if a, ok := d.Attributes["partitioningMode"]; ok && a.StringValue != nil {
				f(d, *a.StringValue)
			}
		}
	}
}

// modesAsCEL drops the groups and writes HardwareCompatible as
// compatibleOnlyWith expressions over the devices of the pool.
func modesAsCEL(objs *input.Objects) {
	for _, s := range objs.Slices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			mode := *d.Attributes["partitioningMode"].StringValue
			gpu := *d.Attributes["physicalDevice"].StringValue
			d.ConsumesCounters[0].CompatibilityGroups = nil
			var with []string
			for _, other := range []string{modeWhole, modeMIG, modeFractional, modeMPS, modeTimeSlice} {
				if HardwareCompatible(mode, other) {
					with = append(with, "'"+other+"'")
				}
			}
			expr := fmt.Sprintf("device.attributes['%s'].physicalDevice != '%s'", gen.ModesDriver, gpu)
			if len(with) > 0 {
				expr += fmt.Sprintf(" || device.attributes['%s'].partitioningMode in [%s]", gen.ModesDriver, strings.Join(with, ", "))
			}
			objs.CompatibleOnlyWith[input.DeviceID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}] = expr
		}
	}
}

// draftCapacityName is the capacity a counter of the modes GPU becomes in
// the draft: memory-slice-3 -> memorySlice3.
func draftCapacityName(counter string) resourceapi.QualifiedName {
	parts := strings.Split(counter, "-")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return resourceapi.QualifiedName(strings.Join(parts, ""))
}

// modesAsDraft republishes the GPUs the way the KEP-4815 draft proposed:
// one draft slice per device slice, the whole GPU a source device with the
// GPU's capacities, every other device a composite device consuming its
// capacities from it, per-GPU attributes in mixins. The draft slices are
// flattened by the model package, as the loader does.
//
// With tokens, capacities alone keep the modes apart (docs/research.md):
// every fractional, MPS and time-sliced device also draws a tenth of each
// memory slice (a MIG device takes a whole slice, and at most ten of those
// devices run at once), time slot k draws all of capacity timeSlotK, and
// fractional and MPS devices a tenth of every timeSlotK.
func modesAsDraft(objs *input.Objects, tokens bool) error {
	sets := map[string]map[string]resourceapi.Counter{} // pool/set -> counters
	perPool := map[string]int64{}
	for _, s := range objs.Slices {
		for _, cs := range s.Spec.SharedCounters {
			sets[s.Spec.Pool.Name+"/"+cs.Name] = cs.Counters
		}
		if len(s.Spec.Devices) > 0 {
			perPool[s.Spec.Pool.Name]++
		}
	}
	caps := func(cs map[string]resourceapi.Counter) map[resourceapi.QualifiedName]input.DraftCapacity {
		out := map[resourceapi.QualifiedName]input.DraftCapacity{}
		for n, c := range cs {
			out[draftCapacityName(n)] = input.DraftCapacity{Quantity: c.Value.DeepCopy()}
		}
		return out
	}
	var slices []*resourceapi.ResourceSlice
	var drafts []*input.DraftResourceSlice
	for _, s := range objs.Slices {
		if len(s.Spec.Devices) == 0 {
			continue
		}
		ds := &input.DraftResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: input.DraftAPIVersion, Kind: "ResourceSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: s.Name},
			Spec: input.DraftSliceSpec{Driver: s.Spec.Driver, NodeName: s.Spec.NodeName,
				Pool: resourceapi.ResourcePool{Name: s.Spec.Pool.Name, Generation: s.Spec.Pool.Generation, ResourceSliceCount: perPool[s.Spec.Pool.Name]}},
		}
		roots := map[string]string{} // counter set -> whole-GPU device
		for _, d := range s.Spec.Devices {
			if *d.Attributes["partitioningMode"].StringValue == modeWhole {
				roots[d.ConsumesCounters[0].CounterSet] = d.Name
			}
		}
		mixins := map[string]bool{}
		for _, d := range s.Spec.Devices {
			set := d.ConsumesCounters[0].CounterSet
			gpuMixin := set + "-attributes"
			if !mixins[gpuMixin] {
				mixins[gpuMixin] = true
				ds.Spec.DeviceMixins = append(ds.Spec.DeviceMixins, input.DraftDeviceMixin{Name: gpuMixin, Composite: &input.DraftCompositeMixin{
					Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
						"physicalDevice": d.Attributes["physicalDevice"], "parentUUID": d.Attributes["parentUUID"]}}})
			}
			own := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
			for k, v := range d.Attributes {
				if k != "physicalDevice" && k != "parentUUID" {
					own[k] = v
				}
			}
			cd := &input.DraftCompositeDevice{Includes: []input.DraftRef{{Name: gpuMixin}}, Attributes: own}
			if root := roots[set]; root == d.Name {
				cd.Capacity = caps(sets[s.Spec.Pool.Name+"/"+set])
				if tokens {
					for k := 0; k < 4; k++ {
						cd.Capacity[resourceapi.QualifiedName(fmt.Sprintf("timeSlot%d", k))] = input.DraftCapacity{Quantity: resource.MustParse("1")}
					}
				}
			} else {
				if root == "" {
					return fmt.Errorf("slice %s: GPU %s has no whole-GPU device", s.Name, set)
				}
				cd.Capacity = caps(d.ConsumesCounters[0].Counters)
				cd.ConsumesCapacityFrom = []input.DraftRef{{Name: root}}
				if tokens {
					addTokens(cd.Capacity, *d.Attributes["partitioningMode"].StringValue, d.Name)
				}
			}
			ds.Spec.Devices = append(ds.Spec.Devices, input.DraftDevice{Name: d.Name, Composite: cd})
		}
		flat, err := input.FlattenDraft(ds)
		if err != nil {
			return fmt.Errorf("draft slice %s: %w", ds.Name, err)
		}
		slices = append(slices, flat...)
		drafts = append(drafts, ds)
	}
	objs.Slices, objs.Draft = slices, drafts
	return nil
}

// addTokens adds the exclusion capacities of a device of the given mode.
func addTokens(c map[resourceapi.QualifiedName]input.DraftCapacity, mode, name string) {
	tenth := input.DraftCapacity{Quantity: resource.MustParse("100m")}
	switch mode {
	case modeFractional, modeMPS, modeTimeSlice:
		for k := 0; k < 8; k++ {
			c[resourceapi.QualifiedName(fmt.Sprintf("memorySlice%d", k))] = tenth
		}
	}
	switch mode {
	case modeFractional, modeMPS:
		for k := 0; k < 4; k++ {
			c[resourceapi.QualifiedName(fmt.Sprintf("timeSlot%d", k))] = tenth
		}
	case modeTimeSlice:
		var k int
		fmt.Sscanf(name[strings.LastIndex(name, "-")+1:], "%d", &k) // gpu-N-ts-K
		c[resourceapi.QualifiedName(fmt.Sprintf("timeSlot%d", k))] = input.DraftCapacity{Quantity: resource.MustParse("1")}
	}
}

// modesStaticShare fixes every GPU to one mode, as many GPUs per mode as
// the mode's share of the batch's demand (in GPUs: a whole GPU 1, a MIG
// device its share of the profile's instances per GPU, a half 1/2, an MPS
// share or time slot 1/4), largest remainders first; GPUs take modes in
// turn, so every node gets a mix. Only the fixed mode's devices are
// published on each GPU.
func modesStaticShare(objs *input.Objects) {
	fixModes(objs, staticShareModes(objs))
}

// staticShareModes is modesStaticShare's choice: the mode of every GPU
// (pool/counter set).
func staticShareModes(objs *input.Objects) map[string]string {
	demand := map[string]float64{}
	for _, c := range objs.Claims {
		for _, r := range c.Spec.Devices.Requests {
			mode, gpus := requestDemand(r)
			demand[mode] += gpus
		}
	}
	var gpus []string // pool/set, interleaved across nodes
	byPool := map[string][]string{}
	var pools []string
	for _, s := range objs.Slices {
		for _, cs := range s.Spec.SharedCounters {
			if _, ok := byPool[s.Spec.Pool.Name]; !ok {
				pools = append(pools, s.Spec.Pool.Name)
			}
			byPool[s.Spec.Pool.Name] = append(byPool[s.Spec.Pool.Name], s.Spec.Pool.Name+"/"+cs.Name)
		}
	}
	for i := 0; ; i++ {
		added := false
		for _, p := range pools {
			if i < len(byPool[p]) {
				gpus = append(gpus, byPool[p][i])
				added = true
			}
		}
		if !added {
			break
		}
	}
	modes := []string{modeWhole, modeMIG, modeFractional, modeMPS, modeTimeSlice}
	counts := largestRemainder(modes, demand, len(gpus))
	var sequence []string // modes in turn, each as often as its count
	for len(sequence) < len(gpus) {
		for _, m := range modes {
			if counts[m] > 0 {
				sequence = append(sequence, m)
				counts[m]--
			}
		}
	}
	fixed := map[string]string{}
	for i, g := range gpus {
		fixed[g] = sequence[i]
	}
	return fixed
}

// fixModes sets every GPU (pool/counter set) to its mode in fixed: only
// that mode's devices stay published.
func fixModes(objs *input.Objects, fixed map[string]string) {
	for _, s := range objs.Slices {
		kept := s.Spec.Devices[:0]
		for _, d := range s.Spec.Devices {
			if *d.Attributes["partitioningMode"].StringValue == fixed[s.Spec.Pool.Name+"/"+d.ConsumesCounters[0].CounterSet] {
				kept = append(kept, d)
			}
		}
		if s.Spec.Devices != nil {
			s.Spec.Devices = kept
		}
	}
}

// requestDemand is the mode of a request (of its first choice, for
// firstAvailable) and how many GPUs of that mode it takes: a whole GPU 1, a
// MIG device its profile's share of the instances a GPU holds, a half 1/2,
// an MPS share or time slot 1/4.
func requestDemand(r resourceapi.DeviceRequest) (string, float64) {
	class, count, expr := "", int64(1), ""
	if r.Exactly != nil {
		class, count = r.Exactly.DeviceClassName, max(r.Exactly.Count, 1)
		if len(r.Exactly.Selectors) > 0 && r.Exactly.Selectors[0].CEL != nil {
			expr = r.Exactly.Selectors[0].CEL.Expression
		}
	} else if len(r.FirstAvailable) > 0 {
		f := r.FirstAvailable[0]
		class, count = f.DeviceClassName, max(f.Count, 1)
		if len(f.Selectors) > 0 && f.Selectors[0].CEL != nil {
			expr = f.Selectors[0].CEL.Expression
		}
	}
	mode := ""
	for _, m := range gen.GPUModes {
		if m.Class == class {
			mode = m.Mode
		}
	}
	per := 1.0
	switch mode {
	case modeFractional:
		per = 0.5
	case modeMPS, modeTimeSlice:
		per = 0.25
	case modeMIG:
		for _, p := range gen.ModesMIGProfiles {
			if strings.Contains(expr, "'"+p.Profile+"'") {
				per = float64(p.Slices) / 8
				if p.Slices == 1 {
					per = 1.0 / 7 // seven 1g instances a GPU
				}
			}
		}
	}
	return mode, per * float64(count)
}

// largestRemainder splits n among the keys in proportion to their weights.
func largestRemainder(keys []string, w map[string]float64, n int) map[string]int {
	total := 0.0
	for _, k := range keys {
		total += w[k]
	}
	out := map[string]int{}
	if total == 0 {
		out[keys[0]] = n
		return out
	}
	type rem struct {
		k string
		r float64
	}
	var rs []rem
	left := n
	for _, k := range keys {
		x := float64(n) * w[k] / total
		out[k] = int(math.Floor(x))
		left -= out[k]
		rs = append(rs, rem{k, x - math.Floor(x)})
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].r > rs[j].r })
	for i := 0; i < left; i++ {
		out[rs[i%len(rs)].k]++
	}
	return out
}

// modeStats reads the modes of the allocated devices per GPU.
func modeStats(objs *input.Objects, allocated []*resourceapi.ResourceClaim, static bool) ResearchStats {
	type devInfo struct{ gpu, mode string }
	devs := map[input.DeviceID]devInfo{}
	for _, s := range objs.Slices {
		for _, d := range s.Spec.Devices {
			devs[input.DeviceID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}] = devInfo{
				gpu: s.Spec.Pool.Name + "/" + *d.Attributes["physicalDevice"].StringValue, mode: *d.Attributes["partitioningMode"].StringValue}
		}
	}
	modes := map[string]map[string]bool{}
	for _, c := range allocated {
		for _, r := range c.Status.Allocation.Devices.Results {
			di := devs[input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}]
			if modes[di.gpu] == nil {
				modes[di.gpu] = map[string]bool{}
			}
			modes[di.gpu][di.mode] = true
		}
	}
	st := ResearchStats{ModeGPUs: map[string]int{}}
	for _, ms := range modes {
		var list []string
		for m := range ms {
			list = append(list, m)
		}
		sort.Strings(list)
		ok := true
		for i := range list {
			for j := i + 1; j < len(list); j++ {
				if !HardwareCompatible(list[i], list[j]) {
					ok = false
				}
			}
		}
		label := strings.Join(list, "+")
		if !ok {
			st.Violations++
			label = "INVALID"
		}
		st.ModeGPUs[label]++
		if !static && !(len(list) == 1 && list[0] == modeWhole) {
			st.Reconfigurations++
		}
	}
	return st
}

// researchPolicies are the policies run per model: drasat always, upstream
// where it can run and was asked for.
func researchPolicies(policies []string, m string) []string {
	out := []string{PolicyDrasat}
	if upstreamModels[m] && contains(policies, PolicyUpstream) {
		out = append([]string{PolicyUpstream}, out...)
	}
	return out
}

func researchSteps(cfg Config) int {
	n := 0
	for _, m := range ResearchModels {
		n += len(researchPolicies(cfg.Policies, m))
	}
	return n
}

// RunResearch runs every model on the modes workload of one size. Every
// result is validated by the independent checker (for the draft, on the
// draft objects too).
func RunResearch(ctx context.Context, cfg Config, sz Size, progress func(string)) ([]*Row, error) {
	if sz.GPUs == 0 {
		sz.GPUs = 4
	}
	insts, err := ResearchInstances(gen.ModesConfig{Nodes: sz.Nodes, GPUsPerNode: sz.GPUs, Claims: sz.Claims, Seed: cfg.Seed})
	if err != nil {
		return nil, err
	}
	var rows []*Row
	for _, ri := range insts {
		in := &Instance{Scenario: "research", Size: sz, Compat: ri.Compat, Objs: ri.Objs,
			Unit: counterSetUnit, UnitName: "GPUs", Util: func(c string) bool { return c == "multiprocessors" }, UtilName: "SMs"}
		w := newWorld(in.Objs)
		for _, pol := range researchPolicies(cfg.Policies, ri.Model) {
			name := fmt.Sprintf("research %s", sz)
			progress(fmt.Sprintf("%s %s %s", name, ri.Model, pol))
			// runRow names the instance for its errors; the model goes in
			// the policy column.
			sub := *in
			sub.Scenario = "research " + ri.Model
			row, err := runRow(ctx, &sub, w, pol, cfg)
			if err != nil {
				return nil, err
			}
			out := row.allocated
			row.allocated = nil
			static := ri.Model == ModelStaticBest || ri.Model == ModelStaticShare
			st := modeStats(ri.Objs, out, static)
			st.Model = ri.Model
			row.Scenario, row.Instance = "research", name
			row.Policy = ri.Model
			if pol == PolicyUpstream {
				row.Policy = ri.Model + " upstream"
			}
			row.Research = &st
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// modelColor colours each model in the report's charts (upstream rows
// take the model's colour too, drawn lighter).
var modelColor = map[string]string{
	ModelKEP5963:     "#2366b5",
	ModelWildcard:    "#7b4fb0",
	ModelCEL:         "#2e9e6a",
	ModelDraft:       "#d04a3a",
	ModelDraftTokens: "#e39a8f",
	ModelStaticBest:  "#6b6b6b",
	ModelStaticShare: "#a8a8a8",
}

func init() {
	for m, c := range modelColor {
		policyColor[m] = c
		policyColor[m+" upstream"] = c + "99"
	}
}

// modeOrder and modeColor draw the GPUs' modes in the mode-mix chart.
var modeOrder = []string{modeWhole, modeMIG, modeFractional, modeFractional + "+" + modeMPS, modeMPS, modeTimeSlice, "INVALID"}

var modeColor = map[string]string{
	modeWhole: "#2366b5", modeMIG: "#2e9e6a", modeFractional: "#e6862b", modeFractional + "+" + modeMPS: "#f0b060",
	modeMPS: "#c9b92a", modeTimeSlice: "#7b4fb0", "INVALID": "#d04a3a",
}

// researchLine is one row of the research summary.
func researchLine(r *Row) string {
	st := r.Research
	opt := researchOptimality(r)
	line := fmt.Sprintf("%-22s %4d/%-4d %-22s %5.1f%% SMs  %3d invalid GPUs  %3d reconfigured  %s",
		r.Policy, r.Admitted, r.Claims, opt, 100*r.Util, st.Violations, st.Reconfigurations, modeMix(st))
	if len(st.StaticCandidates) > 0 && r.Implementation == "" {
		line += "\n    " + staticCandidatesText(st)
	}
	return line
}

// researchOptimality says whether drasat's result is optimal (else its
// gap); for a replay, how many windows were; for the kube-scheduler's
// allocator, that it is first fit.
func researchOptimality(r *Row) string {
	st := r.Research
	switch {
	case r.Implementation != "" && st.Windows > 0:
		return fmt.Sprintf("first fit, %d windows", st.Windows)
	case r.Implementation != "":
		return "first fit"
	case st.Windows > 0:
		return fmt.Sprintf("%d/%d windows optimal", st.OptimalWindows, st.Windows)
	case r.Optimal == nil:
		return ""
	case *r.Optimal:
		return "optimal"
	}
	return fmt.Sprintf("gap %.1f%% (bound %d)", 100**r.Gap, *r.Bound)
}

// modeMix lists the GPUs per mode, known modes first.
func modeMix(st *ResearchStats) string {
	var mix []string
	seen := map[string]bool{}
	for _, m := range modeOrder {
		seen[m] = true
		if n := st.ModeGPUs[m]; n > 0 {
			mix = append(mix, fmt.Sprintf("%s %d", m, n))
		}
	}
	var rest []string
	for m := range st.ModeGPUs {
		if !seen[m] {
			rest = append(rest, m)
		}
	}
	sort.Strings(rest)
	for _, m := range rest {
		mix = append(mix, fmt.Sprintf("%s %d", m, st.ModeGPUs[m]))
	}
	return strings.Join(mix, ", ")
}

// writeResearchLines prints the research columns under the table.
func writeResearchLines(w io.Writer, rep *Report) {
	last := ""
	for _, r := range rep.Rows {
		if r.Research == nil {
			continue
		}
		if r.Instance != last {
			fmt.Fprintf(w, "%s: GPUs per mode, GPUs mixing modes the hardware cannot run together (invalid), GPUs set up at allocation time (reconfigured)\n", r.Instance)
			last = r.Instance
		}
		fmt.Fprintf(w, "  %s\n", researchLine(r))
	}
}

// writeResearchHTML adds the research columns and the mode-mix chart.
func writeResearchHTML(b *strings.Builder, rows []*Row) error {
	b.WriteString(`<p class="note">Every model publishes the same GPUs and the same claims (docs/research.md). <b>invalid</b>: GPUs whose allocated devices mix modes the hardware cannot run together, because the model cannot express the rule; <b>reconfigured</b>: GPUs the driver must set into a partitioned mode when the claims are prepared (static models set their modes beforehand).</p>` + "\n")
	b.WriteString("<table>\n<tr><th class=\"l\">instance</th><th class=\"l\">model</th><th>admitted</th><th class=\"l\">optimal / gap</th><th>SMs used</th><th>invalid GPUs</th><th>reconfigured</th><th class=\"l\">GPUs per mode</th></tr>\n")
	for _, r := range rows {
		if r.Research == nil {
			continue
		}
		st := r.Research
		opt := researchOptimality(r)
		fmt.Fprintf(b, "<tr><td class=\"l\">%s</td><td class=\"l\">%s</td><td>%d/%d</td><td class=\"l\">%s</td><td>%.1f%%</td><td>%d</td><td>%d</td><td class=\"l\">%s</td></tr>\n",
			html.EscapeString(r.Instance), html.EscapeString(r.Policy), r.Admitted, r.Claims, opt, 100*r.Util, st.Violations, st.Reconfigurations, html.EscapeString(modeMix(st)))
	}
	b.WriteString("</table>\n<div class=\"charts\">\n")
	var drasat []*Row
	for _, r := range rows {
		if r.Research != nil && r.Optimal != nil { // drasat rows only
			drasat = append(drasat, r)
		}
	}
	instances, byInst := groupInOrder(drasat, func(r *Row) string { return r.Instance })
	for _, in := range instances {
		modeMixChart(b, in, byInst[in])
	}
	replays := map[string][]*Row{}
	var replayNames []string
	for _, r := range rows {
		if r.Research != nil && r.Research.Windows > 0 {
			if _, ok := replays[r.Instance]; !ok {
				replayNames = append(replayNames, r.Instance)
			}
			replays[r.Instance] = append(replays[r.Instance], r)
		}
	}
	for _, in := range replayNames {
		replayCostChart(b, in, replays[in])
		if err := replayAdmittedChart(b, in, replays[in]); err != nil {
			return err
		}
	}
	b.WriteString("</div>\n")
	for _, r := range rows {
		if r.Research != nil && len(r.Research.StaticCandidates) > 0 && r.Implementation == "" {
			fmt.Fprintf(b, "<p class=\"note\"><b>%s</b>, %s: %s</p>\n", html.EscapeString(r.Policy), html.EscapeString(r.Instance), html.EscapeString(staticCandidatesText(r.Research)))
		}
	}
	return nil
}

// staticCandidatesText lists the static configurations the replay's
// static-best tried, with the tasks each admitted.
func staticCandidatesText(st *ResearchStats) string {
	var parts []string
	for _, c := range st.StaticCandidates {
		s := fmt.Sprintf("%s %d", c.Name, c.Admitted)
		if c.Claims > 0 {
			opt := "optimal"
			if !c.Optimal {
				opt = "not proven optimal"
			}
			s = fmt.Sprintf("%s (sized on %d claims, %s) %d", c.Name, c.Claims, opt, c.Admitted)
		}
		parts = append(parts, s)
	}
	return "the best by replay of the static configurations " + strings.Join(parts, ", ") + " (tasks admitted)"
}

// replayAdmittedChart: tasks admitted so far over the replay, one line per
// model and allocator (upstream dashed).
func replayAdmittedChart(b *strings.Builder, instance string, rows []*Row) error {
	var curves []curve
	for _, r := range rows {
		var xy plotter.XYs
		for _, p := range r.Research.AdmittedOverTime {
			xy = append(xy, plotter.XY{X: p.Hours, Y: p.Value})
		}
		curves = append(curves, curve{r.Policy, xy})
	}
	return lineChart(b, "Tasks admitted: "+strings.TrimPrefix(instance, "research "), "replay time (h)", "tasks admitted so far",
		"tasks admitted after each window, per model (drasat solid, the kube-scheduler's allocator dashed)", curves)
}

// replayCostChart: per model of a replay, reconfigurations and invalid
// GPU-windows side by side.
func replayCostChart(b *strings.Builder, instance string, rows []*Row) {
	const width, barH, left, right = 520, 10, 110, 60
	height := 30 + len(rows)*(2*barH+10) + 30
	max := 1
	for _, r := range rows {
		if r.Research.Reconfigurations > max {
			max = r.Research.Reconfigurations
		}
		if r.Research.Violations > max {
			max = r.Research.Violations
		}
	}
	scale := float64(width-left-right) / float64(max)
	fmt.Fprintf(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart replay-cost\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width, height, width, height)
	fmt.Fprintf(b, "<text x=\"0\" y=\"16\" font-size=\"13\" font-weight=\"bold\">Reconfigurations and invalid GPU-windows: %s</text>\n", html.EscapeString(strings.TrimPrefix(instance, "research ")))
	for i, r := range rows {
		y := 30 + i*(2*barH+10)
		fmt.Fprintf(b, "<g data-model=\"%s\"><text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"end\">%s</text>", html.EscapeString(r.Policy), left-6, y+14, html.EscapeString(r.Policy))
		for k, v := range []int{r.Research.Reconfigurations, r.Research.Violations} {
			color := []string{"#2366b5", "#d04a3a"}[k]
			yy := y + k*barH
			fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/><text x=\"%.1f\" y=\"%d\" font-size=\"10\">%d</text>",
				left, yy, float64(v)*scale, barH-1, color, float64(left)+float64(v)*scale+3, yy+9, v)
		}
		b.WriteString("</g>\n")
	}
	y := 30 + len(rows)*(2*barH+10) + 8
	fmt.Fprintf(b, "<rect x=\"0\" y=\"%d\" width=\"10\" height=\"10\" fill=\"#2366b5\"/><text x=\"13\" y=\"%d\" font-size=\"10\">reconfigurations</text><rect x=\"120\" y=\"%d\" width=\"10\" height=\"10\" fill=\"#d04a3a\"/><text x=\"133\" y=\"%d\" font-size=\"10\">invalid GPU-windows</text>", y, y+9, y, y+9)
	fmt.Fprintf(b, "\n</svg><figcaption>over the replay's %d windows: GPUs taking up a mode they were not set up for, and GPUs mixing modes the hardware cannot run together</figcaption></figure>\n", rows[0].Research.Windows)
}

// modeMixChart: one stacked bar per model, the GPUs of each mode.
func modeMixChart(b *strings.Builder, instance string, rows []*Row) {
	const width, barH, left, right = 520, 22, 110, 20
	height := 30 + len(rows)*(barH+6) + 40
	total := rows[0].Units
	if total == 0 {
		total = 1
	}
	fmt.Fprintf(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart modes\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width, height, width, height)
	fmt.Fprintf(b, "<text x=\"0\" y=\"16\" font-size=\"13\" font-weight=\"bold\">GPUs per mode: %s</text>\n", html.EscapeString(instance))
	scale := float64(width-left-right) / float64(total)
	for i, r := range rows {
		y := 30 + i*(barH+6)
		fmt.Fprintf(b, "<g data-model=\"%s\"><text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"end\">%s</text>", html.EscapeString(r.Policy), left-6, y+15, html.EscapeString(r.Policy))
		x := float64(left)
		for _, m := range modeOrder {
			n := r.Research.ModeGPUs[m]
			if n == 0 {
				continue
			}
			fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s: %d GPUs</title></rect>", x, y, float64(n)*scale, barH, modeColor[m], html.EscapeString(m), n)
			x += float64(n) * scale
		}
		b.WriteString("</g>\n")
	}
	y := 30 + len(rows)*(barH+6) + 8
	x := 0
	for _, m := range modeOrder {
		label := strings.ReplaceAll(m, modeFractional+"+"+modeMPS, "Frac+MPS")
		fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\" font-size=\"10\">%s</text>", x, y, modeColor[m], x+13, y+9, html.EscapeString(label))
		x += 13 + 6*len(label) + 8
	}
	fmt.Fprintf(b, "\n</svg><figcaption>GPUs in use per mode at drasat's allocation, of %d GPUs; red: GPUs mixing modes the hardware cannot run together</figcaption></figure>\n", rows[0].Units)
}
