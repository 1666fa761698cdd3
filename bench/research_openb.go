package bench

// The research report's replay: the Alibaba GPU trace (the openb scenario's
// data and windows) on GPUs that offer the modes scenario's modes, under
// every partitioning model. A partial-GPU task asks, through firstAvailable,
// for the smallest MIG device that covers it, else an MPS share, a
// fractional half or a time slot where they cover it, else a whole GPU: the
// allocator picks the mode. docs/research.md describes the mapping.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/model"
)

// researchOpenBModels: the static-best model chooses modes per batch,
// which over a replay would reconfigure GPUs; only the demand-share sizing
// is a static choice here.
//
// compatibleOnlyWith is left out of the replay: its pairwise expressions
// are evaluated anew in every window's model (about a second a window for
// four trace nodes on the development machine), and on every batch
// instance it states the same rule as kep5963 and has the same optimum
// (TestResearchDraftIsCapacityRelaxation, the research scenario).
var researchOpenBModels = []string{ModelKEP5963, ModelWildcard, ModelDraft, ModelDraftTokens, ModelStaticShare}

// modesCluster publishes every sampled trace node with its GPU count as
// modes GPUs.
func modesCluster(nodes []openbNode) *model.Objects {
	objs := &model.Objects{CompatibleOnlyWith: map[model.DeviceID]string{}, Origin: map[string]string{}}
	for i, n := range nodes {
		one := Modes(ModesConfig{Nodes: 1, GPUsPerNode: n.gpus})
		if i == 0 {
			objs.Classes = one.Classes
		}
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}})
		for _, s := range one.Slices {
			s.Name = n.name + strings.TrimPrefix(s.Name, "node-000")
			s.Spec.NodeName = ptr.To(n.name)
			s.Spec.Pool.Name = n.name
			objs.Slices = append(objs.Slices, s)
		}
	}
	return objs
}

// modesTaskClaim is a trace task's claim on modes GPUs.
func modesTaskClaim(t *openbTask) *resourceapi.ResourceClaim {
	class := func(mode string) string {
		for _, m := range gpuModes {
			if m.mode == mode {
				return m.class
			}
		}
		panic(mode)
	}
	if t.numGPU > 1 || t.milli >= 1000 {
		c := newClaim(t.name, []string{class(modeWhole)}, nil)
		c.Spec.Devices.Requests[0].Exactly.Count = int64(max(t.numGPU, 1))
		return c
	}
	var subs []resourceapi.DeviceSubRequest
	add := func(name, mode string, sel []resourceapi.DeviceSelector) {
		subs = append(subs, resourceapi.DeviceSubRequest{Name: name, DeviceClassName: class(mode), Selectors: sel,
			AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1})
	}
	for _, p := range modesMIGProfiles { // smallest first
		if p.sms*1000 >= int64(t.milli)*98 {
			add("mig", modeMIG, []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.attributes['%s'].profile == '%s'", ModesDriver, p.profile)}}})
			break
		}
	}
	if t.milli*98 <= 24*1000 {
		add("mps", modeMPS, nil)
	}
	if t.milli <= 500 {
		add("half", modeFractional, nil)
	}
	if t.milli <= 250 {
		add("slot", modeTimeSlice, nil)
	}
	add("whole", modeWhole, nil)
	c := newClaim(t.name, nil, nil)
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: subs}}
	return c
}

// RunResearchOpenB replays the trace under every model.
func RunResearchOpenB(ctx context.Context, cfg Config, sz Size, progress func(string)) ([]*Row, error) {
	oc := cfg.OpenB
	if oc.Window <= 0 {
		oc.Window = time.Minute
	}
	if oc.Load <= 0 {
		oc.Load = DefaultOpenBLoad
	}
	nodes, tasks, err := loadOpenB(oc, true)
	if err != nil {
		return nil, err
	}
	if sz.Nodes > 0 && sz.Nodes < len(nodes) { // the openb scenario's sample
		rng := rand.New(rand.NewPCG(cfg.Seed, 0x6f70656e62))
		rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		nodes = nodes[:sz.Nodes]
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	}
	for i := range tasks {
		t := &tasks[i]
		t.arrive = float64(t.creation) / oc.Load
		t.leave = t.arrive + float64(t.delete-t.creation)
	}
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].arrive < tasks[j].arrive })
	if sz.Claims > 0 && sz.Claims < len(tasks) {
		tasks = tasks[:sz.Claims]
	}
	claims := make([]*resourceapi.ResourceClaim, len(tasks))
	for i := range tasks {
		claims[i] = modesTaskClaim(&tasks[i])
	}
	name := fmt.Sprintf("research openb %s load %g window %s", Size{Nodes: len(nodes), Claims: len(tasks)}, oc.Load, oc.Window)
	var rows []*Row
	for _, m := range researchOpenBModels {
		progress(name + " " + m)
		base := modesCluster(nodes)
		compat := model.CompatKEP5963
		switch m {
		case ModelWildcard:
			compat = model.CompatWildcard
		case ModelCEL:
			modesAsCEL(base)
		case ModelDraft, ModelDraftTokens:
			if err := modesAsDraft(base, m == ModelDraftTokens); err != nil {
				return nil, err
			}
		case ModelStaticShare:
			// Sized by the GPU-time of each task's first choice.
			base.Claims = nil
			for i, c := range claims {
				dur := tasks[i].leave - tasks[i].arrive
				for k := 0; k < int(math.Max(1, math.Round(dur/3600))); k++ {
					base.Claims = append(base.Claims, c)
				}
			}
			modesStaticShare(base)
			base.Claims = nil
		}
		row, err := replayModes(ctx, base, compat, tasks, claims, oc.Window.Seconds(), cfg.Timeout, m == ModelStaticShare)
		if err != nil {
			return nil, fmt.Errorf("%s, model %s: %w", name, m, err)
		}
		row.Instance, row.Policy = name, m
		row.Research.Model = m
		rows = append(rows, row)
	}
	return rows, nil
}

// replayModes runs the windows of the replay with drasat on one model's
// publication, checking each window's result.
func replayModes(ctx context.Context, base *model.Objects, compat string, tasks []openbTask, claims []*resourceapi.ResourceClaim,
	win float64, timeout time.Duration, static bool) (*Row, error) {
	type devInfo struct {
		gpu, mode string
		sms       float64
	}
	devs := map[model.DeviceID]devInfo{}
	gpus := map[string]bool{}
	for _, s := range base.Slices {
		for _, d := range s.Spec.Devices {
			sms := 0.0
			for _, cc := range d.ConsumesCounters {
				if q, ok := cc.Counters["multiprocessors"]; ok {
					sms = math.Max(sms, q.Value.AsApproximateFloat64())
				}
			}
			gpu := s.Spec.Pool.Name + "/" + *d.Attributes["physicalDevice"].StringValue
			gpus[gpu] = true
			devs[model.DeviceID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}] = devInfo{gpu, *d.Attributes["partitioningMode"].StringValue, sms}
		}
	}
	row := &Row{Scenario: "research", Compat: compat, Policy: PolicyDrasat, Claims: len(tasks), UnitName: "GPUs", Units: len(gpus),
		UtilName: "SMs (window mean)"}
	st := &ResearchStats{ModeGPUs: map[string]int{}}
	row.Research = st
	configured := map[string]map[string]bool{} // GPU -> modes set up (GPUs used)
	running := map[string]*resourceapi.ResourceClaim{}
	leaveAt := map[string]float64{}
	var utilSum float64
	windows, optimal := 0, 0
	var wall time.Duration
	for i := 0; i < len(tasks); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		end := (math.Floor(tasks[i].arrive/win) + 1) * win
		j := i
		for j < len(tasks) && tasks[j].arrive < end {
			j++
		}
		for n, c := range running {
			if leaveAt[n] <= end && c != nil {
				delete(running, n)
			}
		}
		objs := *base
		objs.Claims = nil
		names := make([]string, 0, len(running))
		for n := range running {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			objs.Claims = append(objs.Claims, running[n])
		}
		objs.Claims = append(objs.Claims, claims[i:j]...)
		start := time.Now()
		out, err := runPolicy(ctx, PolicyDrasatBinpack, &objs, compat, timeout, nil, false) // the optimum; no look-ahead needed
		wall += time.Since(start)
		if err != nil {
			return nil, err
		}
		if err := validate(PolicyDrasat, fmt.Sprintf("window at %.0fs", end), &objs, compat, out.allocated); err != nil {
			return nil, err
		}
		windows++
		if out.stats != nil && out.stats.Optimal {
			optimal++
		}
		for _, c := range out.allocated {
			running[c.Name] = c
			row.Admitted++
			row.Devices += len(c.Status.Allocation.Devices.Results)
		}
		for t := i; t < j; t++ {
			leaveAt[tasks[t].name] = math.Max(tasks[t].leave, end)
		}
		// Modes per GPU after the window.
		modes := map[string]map[string]bool{}
		used := 0.0
		for _, c := range running {
			for _, r := range c.Status.Allocation.Devices.Results {
				di := devs[model.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}]
				if modes[di.gpu] == nil {
					modes[di.gpu] = map[string]bool{}
				}
				modes[di.gpu][di.mode] = true
				used += di.sms
			}
		}
		utilSum += used / (98 * float64(len(gpus)))
		for gpu, ms := range modes {
			valid := true
			for a := range ms {
				for b := range ms {
					if a < b && !HardwareCompatible(a, b) {
						valid = false
					}
				}
			}
			if !valid {
				st.Violations++ // GPU-windows
			}
			cur := configured[gpu]
			if static {
				configured[gpu] = ms
				continue
			}
			if cur == nil {
				cur = map[string]bool{modeWhole: true} // a GPU starts unpartitioned
				configured[gpu] = cur
			}
			for m := range ms {
				if !cur[m] {
					st.Reconfigurations++
					configured[gpu] = ms
					break
				}
			}
		}
		i = j
	}
	usedGPUs := map[string]bool{}
	for g := range configured {
		usedGPUs[g] = true
	}
	for _, ms := range configured {
		var list []string
		for m := range ms {
			list = append(list, m)
		}
		sort.Strings(list)
		st.ModeGPUs[strings.Join(list, "+")]++
	}
	row.UnitsUsed, row.UnitsFree = len(usedGPUs), len(gpus)-len(usedGPUs)
	row.AdmittedPct = 100 * float64(row.Admitted) / float64(max(len(tasks), 1))
	st.Windows, st.OptimalWindows = windows, optimal
	if windows > 0 {
		row.Util = utilSum / float64(windows)
	}
	row.WallMs = float64(wall.Microseconds()) / 1000
	row.WallsMs = []float64{row.WallMs}
	return row, nil
}
