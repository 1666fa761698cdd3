package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// optimum solves objs to a proven optimum, checks the result with the
// independent checker, and returns the admitted claims.
func optimum(t *testing.T, objs *input.Objects, compat string) int {
	t.Helper()
	p, err := model.Build(context.Background(), objs, model.Options{Compat: compat})
	if err != nil {
		t.Fatal(err)
	}
	res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stats.Optimal {
		t.Fatalf("optimum not proven: %+v", res.Stats)
	}
	claims, err := alloc.Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Check(objs, claims, check.Options{Compat: compat}); err != nil {
		t.Fatalf("checker: %v", err)
	}
	return res.Stats.Admitted
}

// modeClaim asks for one device of a mode (and a MIG profile).
func modeClaim(i int, mode, profile string) *resourceapi.ResourceClaim {
	for _, m := range gen.GPUModes {
		if m.Mode == mode {
			var sel []resourceapi.DeviceSelector
			if profile != "" {
				sel = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: fmt.Sprintf("device.attributes['%s'].profile == '%s'", gen.ModesDriver, profile)}}}
			}
			return gen.NewClaim(fmt.Sprintf("c%d-%s", i, strings.ToLower(mode)), []string{m.Class}, sel)
		}
	}
	panic(mode)
}

// researchOn publishes one modes GPU per node under every model with the
// given claims, and returns each model's optimum.
func researchOn(t *testing.T, nodes int, claims ...[2]string) map[string]int {
	t.Helper()
	insts, err := ResearchInstances(gen.ModesConfig{Nodes: nodes, GPUsPerNode: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, ri := range insts {
		ri.Objs.Claims = nil
		for i, c := range claims {
			ri.Objs.Claims = append(ri.Objs.Claims, modeClaim(i, c[0], c[1]))
		}
		if ri.Model == ModelStaticShare { // its modes follow the claims
			fresh := gen.Modes(gen.ModesConfig{Nodes: nodes, GPUsPerNode: 1, Seed: 1})
			fresh.Claims = ri.Objs.Claims
			modesStaticShare(fresh)
			ri.Objs = fresh
		}
		out[ri.Model] = optimum(t, ri.Objs, ri.Compat)
	}
	t.Logf("%v", out)
	return out
}

func wantAdmitted(t *testing.T, got map[string]int, want map[string]int) {
	t.Helper()
	for m, n := range want {
		if got[m] != n {
			t.Errorf("%s admits %d, want %d (all: %v)", m, got[m], n, got)
		}
	}
}

// kep5963 against wildcard: a device without groups (a time slot) goes
// only with devices without groups under kep5963, with any under wildcard.
// The draft cannot keep the modes apart at all; CEL states the hardware's
// rule and agrees with kep5963.
func TestResearchTimeSlotBesideMIG(t *testing.T) {
	got := researchOn(t, 1, [2]string{modeTimeSlice, ""}, [2]string{modeMIG, "1g.5gb"})
	wantAdmitted(t, got, map[string]int{ModelKEP5963: 1, ModelWildcard: 2, ModelCEL: 1, ModelDraft: 2, ModelDraftTokens: 1, ModelStaticBest: 1})
}

// The draft has no way to keep modes apart: a MIG device and an MPS share
// fit the GPU's capacity together, so it admits both; every other model
// admits one.
func TestResearchDraftMixesModes(t *testing.T) {
	got := researchOn(t, 1, [2]string{modeMPS, ""}, [2]string{modeMIG, "1g.5gb"})
	wantAdmitted(t, got, map[string]int{ModelKEP5963: 1, ModelWildcard: 1, ModelCEL: 1, ModelDraft: 2, ModelDraftTokens: 1, ModelStaticBest: 1})
}

// Dynamic modes against a GPU fixed to one mode: a fractional half and two
// MPS shares run together (the hardware allows it, the shared group says
// so), a static GPU is either fractional or MPS.
func TestResearchStaticLosesSharedModes(t *testing.T) {
	got := researchOn(t, 1, [2]string{modeFractional, ""}, [2]string{modeMPS, ""}, [2]string{modeMPS, ""})
	wantAdmitted(t, got, map[string]int{ModelKEP5963: 3, ModelWildcard: 3, ModelCEL: 3, ModelDraft: 3, ModelDraftTokens: 3, ModelStaticBest: 2})
}

// Sizing static modes by demand share is not the best static choice: a
// whole GPU weighs more than three 1g.5gb devices, so the one GPU is set
// whole and admits one claim; the best static mode (MIG) admits three.
func TestResearchStaticShareAgainstBest(t *testing.T) {
	got := researchOn(t, 1, [2]string{modeWhole, ""}, [2]string{modeMIG, "1g.5gb"}, [2]string{modeMIG, "1g.5gb"}, [2]string{modeMIG, "1g.5gb"})
	wantAdmitted(t, got, map[string]int{ModelStaticShare: 1, ModelStaticBest: 3, ModelKEP5963: 3})
}

// groupPool is one node with one pool: devices (name, counter set,
// groups) of one unit each, counter sets of capacity 3, one class, and a
// claim per device asking for it by name.
func groupPool(devs ...[3]string) *input.Objects {
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}}
	pool := resourceapi.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 2}
	counters := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "counters"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "x.example.com", NodeName: ptr.To("node-a"), Pool: pool}}
	devices := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "devices"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "x.example.com", NodeName: ptr.To("node-a"), Pool: pool}}
	three := resourceapi.Counter{Value: *resource.NewQuantity(3, resource.DecimalSI)}
	one := resourceapi.Counter{Value: *resource.NewQuantity(1, resource.DecimalSI)}
	sets := map[string]bool{}
	for _, d := range devs {
		if !sets[d[1]] {
			sets[d[1]] = true
			counters.Spec.SharedCounters = append(counters.Spec.SharedCounters, resourceapi.CounterSet{Name: d[1], Counters: map[string]resourceapi.Counter{"units": three}})
		}
		var groups []string
		if d[2] != "" {
			groups = strings.Split(d[2], ",")
		}
		devices.Spec.Devices = append(devices.Spec.Devices, resourceapi.Device{Name: d[0],
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {StringValue: ptr.To(d[0])}},
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: d[1], CompatibilityGroups: groups,
				Counters: map[string]resourceapi.Counter{"units": one}}}})
		objs.Claims = append(objs.Claims, gen.NewClaim("want-"+d[0], []string{"x"}, []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.attributes['x.example.com'].name == '%s'", d[0])}}}))
	}
	objs.Slices = []*resourceapi.ResourceSlice{counters, devices}
	objs.Classes = []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.driver == 'x.example.com'"}}}}}}
	return objs
}

// Intersection against pairwise: groups [a,b], [b,c], [a,c] share a group
// two by two but none all three. kep5963 (one group common to all) admits
// two; the wildcard semantics and compatibleOnlyWith (both pairwise) admit
// all three.
func TestResearchIntersectionAgainstPairwise(t *testing.T) {
	devs := [][3]string{{"d1", "gpu", "a,b"}, {"d2", "gpu", "b,c"}, {"d3", "gpu", "a,c"}}
	if got := optimum(t, groupPool(devs...), model.CompatKEP5963); got != 2 {
		t.Errorf("kep5963 admits %d, want 2", got)
	}
	if got := optimum(t, groupPool(devs...), model.CompatWildcard); got != 3 {
		t.Errorf("wildcard admits %d, want 3", got)
	}
	cel := groupPool(devs...)
	for _, s := range cel.Slices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			d.ConsumesCounters[0].CompatibilityGroups = nil
			// Pairwise: every other device shares a group with this one.
			cel.CompatibleOnlyWith[input.DeviceID{Driver: "x.example.com", Pool: "node-a", Device: d.Name}] = "true"
		}
	}
	if got := optimum(t, cel, model.CompatKEP5963); got != 3 {
		t.Errorf("compatibleOnlyWith admits %d, want 3", got)
	}
}

// Scope: groups only relate devices drawing on the same counter set;
// compatibleOnlyWith relates any two devices of the pool. Two devices on
// two GPUs with different groups are both admitted under groups; a CEL
// expression can keep them apart (say, two GPUs sharing one NVLink
// switch).
func TestResearchCELAcrossCounterSets(t *testing.T) {
	devs := [][3]string{{"d1", "gpu-0", "x"}, {"d2", "gpu-1", "y"}}
	if got := optimum(t, groupPool(devs...), model.CompatKEP5963); got != 2 {
		t.Errorf("kep5963 admits %d, want 2", got)
	}
	cel := groupPool(devs...)
	cel.CompatibleOnlyWith[input.DeviceID{Driver: "x.example.com", Pool: "node-a", Device: "d1"}] = "device.attributes['x.example.com'].name != 'd2'"
	if got := optimum(t, cel, model.CompatKEP5963); got != 1 {
		t.Errorf("compatibleOnlyWith admits %d, want 1", got)
	}
}

// No tree of consumesCapacityFrom with additive capacities keeps two modes
// apart while letting each run several devices: the draft's optimum on a
// workload is at least the optimum under any groups (it is the capacity
// relaxation of the same GPUs). Checked here on a small generated batch.
func TestResearchDraftIsCapacityRelaxation(t *testing.T) {
	insts, err := ResearchInstances(gen.ModesConfig{Nodes: 1, GPUsPerNode: 2, Claims: 14, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, ri := range insts {
		got[ri.Model] = optimum(t, ri.Objs, ri.Compat)
	}
	for _, m := range ResearchModels {
		if got[m] > got[ModelDraft] {
			t.Errorf("%s admits %d, more than the draft's %d", m, got[m], got[ModelDraft])
		}
	}
	for _, m := range []string{ModelCEL, ModelDraftTokens} {
		if got[m] != got[ModelKEP5963] {
			t.Errorf("%s admits %d, kep5963 %d: both state the hardware's rule exactly", m, got[m], got[ModelKEP5963])
		}
	}
	t.Logf("%v", got)
}

// The report: every model on one workload, each result checked (Run
// fails on an invalid allocation), the research columns filled in.
func TestBenchResearch(t *testing.T) {
	rep := runSmall(t, "research", "1x2:12", OpenBConfig{})
	models := map[string]*Row{}
	for _, r := range rep.Rows {
		if r.Research == nil {
			t.Fatalf("%s %s: no research columns", r.Instance, r.Policy)
		}
		models[r.Policy] = r
	}
	for _, m := range ResearchModels {
		if models[m] == nil {
			t.Errorf("no row for model %s", m)
		}
	}
	for _, m := range []string{ModelKEP5963, ModelCEL, ModelStaticBest, ModelStaticShare} {
		if r := models[m]; r != nil && r.Research.Violations != 0 {
			t.Errorf("%s: %d GPUs mixing incompatible modes", m, r.Research.Violations)
		}
	}
	for _, m := range []string{ModelStaticBest, ModelStaticShare} {
		if r := models[m]; r != nil && r.Research.Reconfigurations != 0 {
			t.Errorf("%s: %d reconfigurations, a static model has none", m, r.Research.Reconfigurations)
		}
	}
	if models[ModelCEL+" upstream"] != nil || models[ModelWildcard+" upstream"] != nil {
		t.Error("upstream ran a model it does not implement")
	}
	var sb strings.Builder
	if err := WriteHTML(&sb, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "GPUs per mode") {
		t.Error("HTML report without the mode-mix chart")
	}
}

// The replay under every model: each window checked (Run fails on an
// invalid allocation); static GPUs never reconfigure, and the models that
// state the hardware's rule never mix modes.
func TestBenchResearchOpenB(t *testing.T) {
	if _, err := OpenBDir(""); err != nil {
		t.Skipf("trace not available: %v", err)
	}
	rep := runSmall(t, "research-openb", "4:80", OpenBConfig{Window: 5 * time.Minute})
	if want := researchSteps(Config{Policies: Policies}); len(rep.Rows) != want {
		t.Fatalf("%d rows, want %d", len(rep.Rows), want)
	}
	rows := map[string]*Row{}
	for _, r := range rep.Rows {
		st := r.Research
		if st == nil || st.Windows == 0 {
			t.Fatalf("%s: no replay research columns", r.Policy)
		}
		rows[r.Policy] = r
		static := st.Model == ModelStaticBest || st.Model == ModelStaticShare
		if static && st.Reconfigurations != 0 {
			t.Errorf("%s reconfigured %d times", r.Policy, st.Reconfigurations)
		}
		exact := st.Model == ModelKEP5963 || st.Model == ModelCEL || st.Model == ModelDraftTokens || static
		if exact && st.Violations != 0 {
			t.Errorf("%s: %d invalid GPU-windows", r.Policy, st.Violations)
		}
		if n := len(st.AdmittedOverTime); n != st.Windows || st.AdmittedOverTime[n-1].Value != float64(r.Admitted) {
			t.Errorf("%s: admitted over time %v, want %d windows ending at %d", r.Policy, st.AdmittedOverTime, st.Windows, r.Admitted)
		}
		t.Logf("%s %d/%d reconfigurations %d invalid %d", r.Policy, r.Admitted, r.Claims, st.Reconfigurations, st.Violations)
	}
	for m := range upstreamModels {
		if rows[m+" upstream"] == nil {
			t.Errorf("no upstream replay of %s", m)
		}
	}
	if rows[ModelCEL] == nil || rows[ModelCEL+" upstream"] != nil || rows[ModelWildcard+" upstream"] != nil {
		t.Error("want a CEL replay by drasat, and no upstream replay of a model it does not implement")
	}
	// static-best is the best of its candidates, static-share's
	// configuration among them (a separate replay: ties may break apart).
	best := rows[ModelStaticBest]
	var names []string
	for _, c := range best.Research.StaticCandidates {
		names = append(names, c.Name)
		if c.Admitted > best.Admitted {
			t.Errorf("static-best admitted %d, below its candidate %+v", best.Admitted, c)
		}
	}
	if got := strings.Join(names, ", "); got != "demand share, kep5963 replay's modes, busiest moment, whole trace" {
		t.Errorf("static-best candidates %s", got)
	}
	var sb strings.Builder
	if err := WriteHTML(&sb, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Reconfigurations and invalid GPU-windows", "Tasks admitted: openb", "the best by replay of the static configurations"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("HTML report without %q", want)
		}
	}
}

// A partial-GPU task may take any mode that covers it, a whole GPU last.
func TestModesTaskClaim(t *testing.T) {
	alts := func(milli, gpus int) string {
		c := modesTaskClaim(&openbTask{name: "t", milli: milli, numGPU: gpus})
		r := c.Spec.Devices.Requests[0]
		if r.Exactly != nil {
			return fmt.Sprintf("%s x%d", r.Exactly.DeviceClassName, r.Exactly.Count)
		}
		var names []string
		for _, s := range r.FirstAvailable {
			names = append(names, s.Name)
		}
		return strings.Join(names, ",")
	}
	for _, tc := range []struct {
		milli, gpus int
		want        string
	}{
		{100, 1, "mig,mps,half,slot,whole"},
		{240, 1, "mig,mps,half,slot,whole"},
		{300, 1, "mig,half,whole"},
		{450, 1, "half,whole"},
		{700, 1, "whole"},
		{1000, 2, "gpu.example.com x2"},
	} {
		if got := alts(tc.milli, tc.gpus); got != tc.want {
			t.Errorf("milli %d gpus %d: %s, want %s", tc.milli, tc.gpus, got, tc.want)
		}
	}
}

// draft-tokens keeps the modes apart with capacities alone: on one GPU,
// every pair and triple of devices is feasible under draft-tokens exactly
// when it is under kep5963, as the independent checker judges it.
func TestResearchDraftTokensSameSetsAsGroups(t *testing.T) {
	insts, err := ResearchInstances(gen.ModesConfig{Nodes: 1, GPUsPerNode: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	byModel := map[string]*ResearchInstance{}
	for _, ri := range insts {
		byModel[ri.Model] = ri
	}
	type dev struct{ name, mode string }
	var devs []dev
	for _, s := range byModel[ModelKEP5963].Objs.Slices {
		for _, d := range s.Spec.Devices {
			devs = append(devs, dev{d.Name, *d.Attributes["partitioningMode"].StringValue})
		}
	}
	feasible := func(ri *ResearchInstance, set []dev) bool {
		objs := *ri.Objs
		objs.Claims = nil
		var allocated []*resourceapi.ResourceClaim
		for i, d := range set {
			c := modeClaim(i, d.mode, "")
			objs.Claims = append(objs.Claims, c)
			out := c.DeepCopy()
			out.Status.Allocation = &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "r0", Driver: gen.ModesDriver, Pool: "node-000", Device: d.name}}},
				NodeSelector: gen.NodeSelectorFor("node-000")}
			allocated = append(allocated, out)
		}
		return check.Check(&objs, allocated, check.Options{Compat: ri.Compat}) == nil
	}
	sets := 0
	for i := range devs {
		for j := i + 1; j < len(devs); j++ {
			for k := j; k < len(devs); k++ {
				set := []dev{devs[i], devs[j]}
				if k > j {
					set = append(set, devs[k])
				}
				g, d := feasible(byModel[ModelKEP5963], set), feasible(byModel[ModelDraftTokens], set)
				if g != d {
					t.Fatalf("%v: feasible under kep5963 %v, under draft-tokens %v", set, g, d)
				}
				if k == j { // pairs: the plain draft differs somewhere
					if p := feasible(byModel[ModelDraft], set); p != g {
						sets++
					}
				}
			}
		}
	}
	if sets == 0 {
		t.Error("the plain draft agrees with kep5963 on every pair: the test does not tell them apart")
	}
	t.Logf("%d devices; the plain draft differs from kep5963 on %d pairs", len(devs), sets)
}

// syntheticReplay is a replay over given tasks (seconds) on nodes of
// modes GPUs, without the trace: each task is a modesTaskClaim.
func syntheticReplay(gpusPerNode []int, tasks ...openbTask) *researchReplay {
	rp := &researchReplay{win: 60, timeout: 10 * time.Second}
	for i, g := range gpusPerNode {
		rp.nodes = append(rp.nodes, openbNode{name: fmt.Sprintf("n%d", i), gpus: g})
	}
	for i := range tasks {
		tasks[i].name = fmt.Sprintf("t%02d", i)
		rp.tasks = append(rp.tasks, tasks[i])
		rp.claims = append(rp.claims, modesTaskClaim(&tasks[i]))
	}
	return rp
}

// compatibleOnlyWith evaluated once and reused (compatCache) gives every
// window the problem model.Build gives, with running claims in place: the
// same incompatible pairs on every device, and the same optimum.
func TestResearchCompatCacheSameProblem(t *testing.T) {
	ctx := context.Background()
	base := modesCluster([]openbNode{{name: "a", gpus: 2}, {name: "b", gpus: 1}})
	modesAsCEL(base)
	cache, err := newCompatCache(ctx, base, model.CompatKEP5963)
	if err != nil {
		t.Fatal(err)
	}
	// A window: two claims running (allocated by a first window), four new.
	objs := *base
	objs.Claims = []*resourceapi.ResourceClaim{modeClaim(0, modeMIG, "1g.5gb"), modeClaim(1, modeTimeSlice, "")}
	first, err := runPolicy(ctx, PolicyDrasatBinpack, &objs, model.CompatKEP5963, 10*time.Second, nil, false, nil)
	if err != nil || len(first.allocated) != 2 {
		t.Fatalf("first window: %v, %d allocated", err, len(first.allocated))
	}
	objs.Claims = append(first.allocated, modeClaim(2, modeMPS, ""), modeClaim(3, modeFractional, ""),
		modeClaim(4, modeWhole, ""), modeClaim(5, modeWhole, ""), modeClaim(6, modeMIG, "3g.20gb"))
	direct, err := model.Build(ctx, &objs, model.Options{Compat: model.CompatKEP5963})
	if err != nil {
		t.Fatal(err)
	}
	cached, err := cache.build(ctx, &objs, model.CompatKEP5963)
	if err != nil {
		t.Fatal(err)
	}
	pairs := 0
	for i, d := range direct.Devices {
		c := cached.Devices[i]
		if d.ID != c.ID || fmt.Sprint(d.Incompatible) != fmt.Sprint(c.Incompatible) || d.CompatibleOnlyWith != c.CompatibleOnlyWith {
			t.Fatalf("device %s: incompatible %v, cached %s %v", d.ID, d.Incompatible, c.ID, c.Incompatible)
		}
		pairs += len(d.Incompatible)
	}
	if pairs == 0 {
		t.Fatal("no incompatible pairs: the instance tests nothing")
	}
	got := map[string]int{}
	for name, p := range map[string]*model.Problem{"direct": direct, "cached": cached} {
		res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 10 * time.Second})
		if err != nil || !res.Stats.Optimal {
			t.Fatalf("%s: %v %+v", name, err, res.Stats)
		}
		claims, err := alloc.Allocated(p, res)
		if err != nil {
			t.Fatal(err)
		}
		var out []*resourceapi.ResourceClaim
		for _, c := range claims {
			if c.Status.Allocation != nil {
				out = append(out, c)
			}
		}
		if err := check.Check(&objs, out, check.Options{Compat: model.CompatKEP5963}); err != nil {
			t.Fatalf("%s: checker: %v", name, err)
		}
		got[name] = res.Stats.Admitted
	}
	// 3 GPUs, one running MIG and one time slots: MPS and the half share
	// the third, no whole GPU is left, the 3g.20gb joins the MIG GPU.
	if got["direct"] != 3 || got["cached"] != 3 {
		t.Errorf("admitted %v, want 3 each", got)
	}
}

// The replay with the kube-scheduler's allocator and with drasat, on
// tasks small enough to count by hand, one GPU: a whole-GPU task in the
// first window; in the second it still runs, so a small task finds no
// room; in the third it has left (a task leaves at the end of the window
// it ends in): two small tasks on MIG, and one that needs a whole GPU or
// nothing finds no room beside them.
func TestResearchReplayUpstream(t *testing.T) {
	rp := syntheticReplay([]int{1},
		openbTask{numGPU: 1, milli: 1000, arrive: 0, leave: 150},
		openbTask{numGPU: 1, milli: 100, arrive: 70, leave: 100},
		openbTask{numGPU: 1, milli: 100, arrive: 130, leave: 400}, // MIG 1g.5gb
		openbTask{numGPU: 1, milli: 300, arrive: 140, leave: 400}, // MIG beside it
		openbTask{numGPU: 1, milli: 600, arrive: 150, leave: 400}, // a whole GPU only
	)
	base, compat, err := rp.publication(ModelKEP5963)
	if err != nil {
		t.Fatal(err)
	}
	for _, pol := range []string{PolicyUpstream, PolicyDrasat} {
		row, err := rp.replay(context.Background(), base, compat, pol, false)
		if err != nil {
			t.Fatal(err)
		}
		var got []float64
		for _, p := range row.Research.AdmittedOverTime {
			got = append(got, p.Value)
		}
		if fmt.Sprint(got) != "[1 1 3]" || row.Research.Violations != 0 {
			t.Errorf("%s: admitted after each window %v, want [1 1 3]; %d invalid", pol, got, row.Research.Violations)
		}
		if (pol == PolicyUpstream) != (row.Implementation != "") {
			t.Errorf("%s: implementation %q", pol, row.Implementation)
		}
		// Whole in two windows, MIG in one: static-best's candidate from
		// this replay sets the GPU whole.
		if m := row.Research.modal; len(m) != 1 || m["n0/gpu-0"] != modeWhole {
			t.Errorf("%s: modes run longest %v, want n0/gpu-0 whole", pol, m)
		}
	}
}

// static-best's sizing batch: the optimum with a group per mode chooses
// each GPU's mode; GPUs it leaves unused keep the fallback mode. Two
// whole-GPU claims and two MIG 3g.20gb on four GPUs: all four fit only
// with two GPUs whole and one MIG (two 3g.20gb on it).
func TestResearchStaticBestBatchModes(t *testing.T) {
	rp := syntheticReplay([]int{4})
	claims := []*resourceapi.ResourceClaim{modeClaim(0, modeWhole, ""), modeClaim(1, modeMIG, "3g.20gb"),
		modeClaim(2, modeWhole, ""), modeClaim(3, modeMIG, "3g.20gb")}
	fallback := map[string]string{}
	for g := 0; g < 4; g++ {
		fallback[fmt.Sprintf("n0/gpu-%d", g)] = modeTimeSlice
	}
	modes, optimal, err := rp.batchModes(context.Background(), claims, fallback)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, m := range modes {
		count[m]++
	}
	if !optimal || len(modes) != 4 || count[modeWhole] != 2 || count[modeMIG] != 1 || count[modeTimeSlice] != 1 {
		t.Errorf("modes %v (optimal %v), want two whole, one MIG, one time-sliced", modes, optimal)
	}
}

// busiest: the tasks running together at the moment most run.
func TestResearchBusiestMoment(t *testing.T) {
	rp := syntheticReplay([]int{1},
		openbTask{numGPU: 1, milli: 100, arrive: 0, leave: 10},
		openbTask{numGPU: 1, milli: 100, arrive: 20, leave: 100},
		openbTask{numGPU: 1, milli: 100, arrive: 30, leave: 40},
		openbTask{numGPU: 1, milli: 100, arrive: 35, leave: 90},
		openbTask{numGPU: 1, milli: 100, arrive: 50, leave: 60},
	)
	var names []string
	for _, c := range rp.busiest() {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "t01,t02,t03" {
		t.Errorf("busiest moment runs %s, want t01,t02,t03", got)
	}
}

// A window's problem under compatibleOnlyWith on 16 four-GPU nodes with 40
// claims: built evaluating every pair anew (what model.Build does) and
// from the replay's compatCache.
func BenchmarkResearchCELWindow(b *testing.B) {
	ctx := context.Background()
	var nodes []openbNode
	for i := 0; i < 16; i++ {
		nodes = append(nodes, openbNode{name: fmt.Sprintf("n%02d", i), gpus: 4})
	}
	base := modesCluster(nodes)
	modesAsCEL(base)
	objs := *base
	for i := 0; i < 40; i++ {
		objs.Claims = append(objs.Claims, modesTaskClaim(&openbTask{name: fmt.Sprintf("t%02d", i), numGPU: 1, milli: 100 + 25*i}))
	}
	b.Run("evaluated", func(b *testing.B) {
		for b.Loop() {
			if _, err := model.Build(ctx, &objs, model.Options{Compat: model.CompatKEP5963}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		cache, err := newCompatCache(ctx, base, model.CompatKEP5963)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := cache.build(ctx, &objs, model.CompatKEP5963); err != nil {
				b.Fatal(err)
			}
		}
	})
}
