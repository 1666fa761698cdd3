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
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// researchOpenBModels: every model of the batches runs the replay too.
var researchOpenBModels = ResearchModels

// modesCluster publishes every sampled trace node with its GPU count as
// modes GPUs.
func modesCluster(nodes []openbNode) *input.Objects {
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	for i, n := range nodes {
		one := gen.Modes(gen.ModesConfig{Nodes: 1, GPUsPerNode: n.gpus})
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
		for _, m := range gen.GPUModes {
			if m.Mode == mode {
				return m.Class
			}
		}
		panic(mode)
	}
	if t.numGPU > 1 || t.milli >= 1000 {
		c := gen.NewClaim(t.name, []string{class(modeWhole)}, nil)
		c.Spec.Devices.Requests[0].Exactly.Count = int64(max(t.numGPU, 1))
		return c
	}
	var subs []resourceapi.DeviceSubRequest
	add := func(name, mode string, sel []resourceapi.DeviceSelector) {
		subs = append(subs, resourceapi.DeviceSubRequest{Name: name, DeviceClassName: class(mode), Selectors: sel,
			AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1})
	}
	for _, p := range gen.ModesMIGProfiles { // smallest first
		if p.SMs*1000 >= int64(t.milli)*98 {
			add("mig", modeMIG, []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.attributes['%s'].profile == '%s'", gen.ModesDriver, p.Profile)}}})
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
	c := gen.NewClaim(t.name, nil, nil)
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: subs}}
	return c
}

// researchReplay is one replay's trace: the tasks in arrival order, their
// claims, the window and drasat's budget per window.
type researchReplay struct {
	nodes   []openbNode
	tasks   []openbTask
	claims  []*resourceapi.ResourceClaim
	win     float64
	timeout time.Duration
}

// RunResearchOpenB replays the trace under every model, with drasat and,
// where it implements the model and was asked for, the kube-scheduler's
// allocator.
func RunResearchOpenB(ctx context.Context, cfg Config, sz Size, progress func(string)) ([]*Row, error) {
	oc := cfg.OpenB
	if oc.Window <= 0 {
		oc.Window = time.Minute
	}
	if oc.Load <= 0 {
		oc.Load = DefaultOpenBLoad
	}
	nodes, tasks, err := loadOpenB(oc, true, false)
	if err != nil {
		return nil, err
	}
	nodes, tasks = sampleReplay(nodes, tasks, sz, cfg.Seed, oc.Load) // the openb scenario's sample
	claims := make([]*resourceapi.ResourceClaim, len(tasks))
	for i := range tasks {
		claims[i] = modesTaskClaim(&tasks[i])
	}
	rp := &researchReplay{nodes: nodes, tasks: tasks, claims: claims, win: oc.Window.Seconds(), timeout: cfg.Timeout}
	name := fmt.Sprintf("research openb %s load %g window %s", Size{Nodes: len(nodes), Claims: len(tasks)}, oc.Load, oc.Window)
	var rows []*Row
	var dynamic map[string]string // the modes of drasat's kep5963 replay
	for _, m := range researchOpenBModels {
		pols := researchPolicies(cfg.Policies, m)
		base, compat, err := rp.publication(m)
		if err != nil {
			return nil, fmt.Errorf("%s, model %s: %w", name, m, err)
		}
		var best *Row // static-best: the drasat replay that chose the configuration
		var candidates []StaticCandidate
		if m == ModelStaticBest {
			progress(fmt.Sprintf("%s %s: choosing the configuration", name, m))
			if base, best, candidates, err = rp.staticBest(ctx, dynamic); err != nil {
				return nil, fmt.Errorf("%s, model %s: %w", name, m, err)
			}
		}
		static := m == ModelStaticBest || m == ModelStaticShare
		for k, pol := range pols {
			if m != ModelStaticBest || k > 0 { // one step per policy
				progress(fmt.Sprintf("%s %s %s", name, m, pol))
			}
			row := best
			if row == nil || pol != PolicyDrasat {
				if row, err = rp.replay(ctx, base, compat, pol, static); err != nil {
					return nil, fmt.Errorf("%s, model %s, %s: %w", name, m, pol, err)
				}
			}
			row.Instance, row.Policy = name, m
			if pol == PolicyUpstream {
				row.Policy = m + " upstream"
			}
			row.Research.Model = m
			row.Research.StaticCandidates = candidates
			if m == ModelKEP5963 && pol == PolicyDrasat {
				dynamic = row.Research.modal
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// publication is one model's publication of the replay's nodes. For
// static-best it is the plain modes cluster: staticBest fixes its modes.
func (rp *researchReplay) publication(m string) (*input.Objects, string, error) {
	base := modesCluster(rp.nodes)
	compat := model.CompatKEP5963
	switch m {
	case ModelWildcard:
		compat = model.CompatWildcard
	case ModelCEL:
		modesAsCEL(base)
	case ModelDraft, ModelDraftTokens:
		if err := modesAsDraft(base, m == ModelDraftTokens); err != nil {
			return nil, "", err
		}
	case ModelStaticShare:
		fixModes(base, rp.shareModes())
	}
	return base, compat, nil
}

// shareModes sizes static-share by the GPU-time of each task's first
// choice: a task counts once per hour it runs (at least once).
func (rp *researchReplay) shareModes() map[string]string {
	objs := modesCluster(rp.nodes)
	for i, c := range rp.claims {
		dur := rp.tasks[i].leave - rp.tasks[i].arrive
		for k := 0; k < int(math.Max(1, math.Round(dur/3600))); k++ {
			objs.Claims = append(objs.Claims, c)
		}
	}
	return staticShareModes(objs)
}

// StaticCandidate is one static configuration static-best tried on the
// replay, and the tasks drasat admitted with it.
type StaticCandidate struct {
	Name     string `json:"name"`
	Claims   int    `json:"claims"` // claims of the sizing batch (0: no batch)
	Optimal  bool   `json:"optimal"`
	Admitted int    `json:"admitted"` // over the replay
}

// staticBest is the replay's best static configuration, as far as this
// report searches: each GPU fixed to one mode, the best by drasat's replay
// of up to four configurations. The demand-share sizing (static-share's);
// the mode each GPU ran in longest in drasat's kep5963 replay (dynamic,
// when given: GPU -> mode); and the configurations an optimal allocation
// induces for two batches: the tasks running together at the trace's
// busiest moment (as the trace has them, before any admission), and every
// task of the trace at once. For a batch, every mode gets a group of its
// own so the optimum chooses each GPU's mode with the allocation
// (static-best of the batches). GPUs a configuration leaves open keep
// their demand-share mode. It returns the chosen publication, its drasat
// replay row and every candidate's score.
func (rp *researchReplay) staticBest(ctx context.Context, dynamic map[string]string) (*input.Objects, *Row, []StaticCandidate, error) {
	share := rp.shareModes()
	type cand struct {
		StaticCandidate
		modes map[string]string
	}
	cands := []cand{{StaticCandidate{Name: "demand share"}, share}}
	if dynamic != nil {
		modes := map[string]string{}
		for g, m := range share {
			modes[g] = m
		}
		for g, m := range dynamic {
			modes[g] = m
		}
		cands = append(cands, cand{StaticCandidate{Name: "kep5963 replay's modes"}, modes})
	}
	for _, batch := range []struct {
		name   string
		claims []*resourceapi.ResourceClaim
	}{
		{"busiest moment", rp.busiest()},
		{"whole trace", rp.claims},
	} {
		modes, optimal, err := rp.batchModes(ctx, batch.claims, share)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("sizing batch %s: %w", batch.name, err)
		}
		cands = append(cands, cand{StaticCandidate{Name: batch.name, Claims: len(batch.claims), Optimal: optimal}, modes})
	}
	var best *Row
	var bestObjs *input.Objects
	var out []StaticCandidate
	for _, c := range cands {
		objs := modesCluster(rp.nodes)
		fixModes(objs, c.modes)
		row, err := rp.replay(ctx, objs, model.CompatKEP5963, PolicyDrasat, true)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("configuration %s: %w", c.Name, err)
		}
		c.Admitted = row.Admitted
		out = append(out, c.StaticCandidate)
		if best == nil || row.Admitted > best.Admitted {
			best, bestObjs = row, objs
		}
	}
	return bestObjs, best, out, nil
}

// busiest returns the claims of the tasks running together at the
// trace's busiest moment (most tasks; the first such moment).
func (rp *researchReplay) busiest() []*resourceapi.ResourceClaim {
	var best []*resourceapi.ResourceClaim
	for _, t := range rp.tasks {
		var alive []*resourceapi.ResourceClaim
		for k, o := range rp.tasks {
			if o.arrive <= t.arrive && t.arrive < o.leave {
				alive = append(alive, rp.claims[k])
			}
		}
		if len(alive) > len(best) {
			best = alive
		}
	}
	return best
}

// batchModes solves one batch with a group per mode on every GPU and
// returns the modes the allocation induces (a GPU used by it takes the
// mode of its devices; the others keep fallback's), and whether the
// optimum was proven. The allocation is checked.
func (rp *researchReplay) batchModes(ctx context.Context, claims []*resourceapi.ResourceClaim, fallback map[string]string) (map[string]string, bool, error) {
	objs := modesCluster(rp.nodes)
	eachModeDevice(objs, func(d *resourceapi.Device, mode string) {
		d.ConsumesCounters[0].CompatibilityGroups = []string{staticGroup(mode)}
	})
	objs.Claims = claims
	out, err := runPolicy(ctx, PolicyDrasatBinpack, objs, model.CompatKEP5963, rp.timeout, nil, false, nil)
	if err != nil {
		return nil, false, err
	}
	if err := validate(PolicyDrasat, "static sizing batch", objs, model.CompatKEP5963, out.allocated); err != nil {
		return nil, false, err
	}
	gpuOf := map[input.DeviceID][2]string{} // GPU, mode
	for _, s := range objs.Slices {
		for _, d := range s.Spec.Devices {
			gpuOf[input.DeviceID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}] = [2]string{
				s.Spec.Pool.Name + "/" + d.ConsumesCounters[0].CounterSet, *d.Attributes["partitioningMode"].StringValue}
		}
	}
	modes := map[string]string{}
	for g, m := range fallback {
		modes[g] = m
	}
	for _, c := range out.allocated {
		for _, r := range c.Status.Allocation.Devices.Results {
			gm := gpuOf[input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}]
			modes[gm[0]] = gm[1]
		}
	}
	return modes, out.stats != nil && out.stats.Optimal, nil
}

// compatCache holds compatibleOnlyWith evaluated once for a publication:
// the devices do not change between windows, only the allocations, so the
// pairs of devices that exclude each other do not either. Building each
// window's problem from it instead of evaluating every pair of a pool's
// devices anew is what makes the CEL model affordable in a replay.
type compatCache struct {
	exprs        map[input.DeviceID]string
	incompatible map[input.DeviceID][]input.DeviceID
}

// newCompatCache evaluates the publication's compatibleOnlyWith
// expressions (model.Build, without claims).
func newCompatCache(ctx context.Context, base *input.Objects, compat string) (*compatCache, error) {
	objs := *base
	objs.Claims = nil
	p, err := model.Build(ctx, &objs, model.Options{Compat: compat})
	if err != nil {
		return nil, err
	}
	c := &compatCache{exprs: base.CompatibleOnlyWith, incompatible: map[input.DeviceID][]input.DeviceID{}}
	for _, d := range p.Devices {
		for _, o := range d.Incompatible {
			c.incompatible[d.ID] = append(c.incompatible[d.ID], p.Devices[o].ID)
		}
	}
	return c, nil
}

// build builds a window's problem without evaluating compatibleOnlyWith
// and sets the cached pairs on its devices, as model.Build would.
func (c *compatCache) build(ctx context.Context, objs *input.Objects, compat string) (*model.Problem, error) {
	bare := *objs
	bare.CompatibleOnlyWith = nil
	p, err := model.Build(ctx, &bare, model.Options{Compat: compat})
	if err != nil {
		return nil, err
	}
	index := map[input.DeviceID]int{}
	for _, d := range p.Devices {
		index[d.ID] = d.Index
	}
	for _, d := range p.Devices {
		d.CompatibleOnlyWith = c.exprs[d.ID]
		d.Incompatible = nil
		for _, id := range c.incompatible[d.ID] {
			if o, ok := index[id]; ok {
				d.Incompatible = append(d.Incompatible, o)
			}
		}
		sort.Ints(d.Incompatible)
	}
	return p, nil
}

// windowSolver allocates one window's pending claims (objs holds the
// running ones with their allocations): the new allocations, and whether
// they are a proven optimum.
type windowSolver func(ctx context.Context, objs *input.Objects) ([]*resourceapi.ResourceClaim, bool, string, error)

// solver returns the policy's window solver for a publication: drasat
// (to the optimum; compatibleOnlyWith from a compatCache) or the
// kube-scheduler's allocator.
func (rp *researchReplay) solver(ctx context.Context, base *input.Objects, compat, policy string) (windowSolver, error) {
	if policy == PolicyUpstream {
		return func(ctx context.Context, objs *input.Objects) ([]*resourceapi.ResourceClaim, bool, string, error) {
			res, err := baseline.Upstream(ctx, objs, baseline.UpstreamFeaturesFor(objs))
			if err != nil {
				return nil, false, "", err
			}
			return res.Allocated, false, res.Implementation, nil
		}, nil
	}
	if len(base.CompatibleOnlyWith) == 0 {
		return func(ctx context.Context, objs *input.Objects) ([]*resourceapi.ResourceClaim, bool, string, error) {
			out, err := runPolicy(ctx, PolicyDrasatBinpack, objs, compat, rp.timeout, nil, false, nil) // the optimum; no look-ahead needed
			if err != nil {
				return nil, false, "", err
			}
			return out.allocated, out.stats != nil && out.stats.Optimal, "", nil
		}, nil
	}
	cache, err := newCompatCache(ctx, base, compat)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, objs *input.Objects) ([]*resourceapi.ResourceClaim, bool, string, error) {
		p, err := cache.build(ctx, objs, compat)
		if err != nil {
			return nil, false, "", err
		}
		res, err := alloc.Run(ctx, p, alloc.Options{Timeout: rp.timeout})
		if err != nil {
			return nil, false, "", err
		}
		claims, err := alloc.Allocated(p, res)
		if err != nil {
			return nil, false, "", err
		}
		var out []*resourceapi.ResourceClaim
		for _, c := range claims {
			if c.Status.Allocation != nil {
				out = append(out, c)
			}
		}
		return out, res.Stats.Optimal, "", nil
	}, nil
}

// replay runs the windows of the replay with one policy on one model's
// publication, checking each window's result with the independent checker.
func (rp *researchReplay) replay(ctx context.Context, base *input.Objects, compat, policy string, static bool) (*Row, error) {
	solve, err := rp.solver(ctx, base, compat, policy)
	if err != nil {
		return nil, err
	}
	tasks, claims, win := rp.tasks, rp.claims, rp.win
	type devInfo struct {
		gpu, mode string
		sms       float64
	}
	devs := map[input.DeviceID]devInfo{}
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
			devs[input.DeviceID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}] = devInfo{gpu, *d.Attributes["partitioningMode"].StringValue, sms}
		}
	}
	row := &Row{Scenario: "research", Compat: compat, Policy: policy, Claims: len(tasks), UnitName: "GPUs", Units: len(gpus),
		UtilName: "SMs (window mean)"}
	st := &ResearchStats{ModeGPUs: map[string]int{}}
	row.Research = st
	configured := map[string]map[string]bool{} // GPU -> modes set up (GPUs used)
	modeWindows := map[string]map[string]int{} // GPU -> mode -> windows it ran in
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
		allocated, opt, impl, err := solve(ctx, &objs)
		wall += time.Since(start)
		if err != nil {
			return nil, err
		}
		if err := validate(policy, fmt.Sprintf("window at %.0fs", end), &objs, compat, allocated); err != nil {
			return nil, err
		}
		row.Implementation = impl
		windows++
		if opt {
			optimal++
		}
		for _, c := range allocated {
			running[c.Name] = c
			row.Admitted++
			row.Devices += len(c.Status.Allocation.Devices.Results)
		}
		st.AdmittedOverTime = append(st.AdmittedOverTime, TimePoint{Hours: end / 3600, Value: float64(row.Admitted)})
		for t := i; t < j; t++ {
			leaveAt[tasks[t].name] = math.Max(tasks[t].leave, end)
		}
		// Modes per GPU after the window.
		modes := map[string]map[string]bool{}
		used := 0.0
		for _, c := range running {
			for _, r := range c.Status.Allocation.Devices.Results {
				di := devs[input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}]
				if modes[di.gpu] == nil {
					modes[di.gpu] = map[string]bool{}
				}
				modes[di.gpu][di.mode] = true
				used += di.sms
			}
		}
		utilSum += used / (98 * float64(len(gpus)))
		for gpu, ms := range modes {
			if modeWindows[gpu] == nil {
				modeWindows[gpu] = map[string]int{}
			}
			for m := range ms {
				modeWindows[gpu][m]++
			}
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
	st.modal = map[string]string{}
	for gpu, counts := range modeWindows {
		best := ""
		for _, m := range []string{modeWhole, modeMIG, modeFractional, modeMPS, modeTimeSlice} {
			if counts[m] > counts[best] {
				best = m
			}
		}
		st.modal[gpu] = best
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
