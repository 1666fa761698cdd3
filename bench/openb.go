package bench

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"k8s.io/apimachinery/pkg/api/resource"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/driverprofile"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/hold"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/reserve"
)

// The openb scenario replays the Alibaba GPU cluster trace of 2023
// (alibaba/clusterdata cluster-trace-gpu-v2023; Weng et al., "Beware of
// Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
// Gradient Descent", USENIX ATC'23) against a MIG-partitioned cluster.

// OpenBConfig configures the openb replay.
type OpenBConfig struct {
	// Dir holds the trace CSVs; "" means ../shared/data/alibaba-openb
	// beside the repository.
	Dir string
	// Pods picks the task list: "default", "gpushare100" or "multigpu50".
	Pods string
	// GPU is the model every trace GPU is published as: "a100" or "h100".
	GPU string
	// Window is the batch window: the arrivals within it are allocated
	// together at its end.
	Window time.Duration
	// Load compresses arrivals: creation times are divided by it, task
	// durations kept, so more tasks overlap than in the real cluster
	// (whose peak demand is about 1 % of its GPUs).
	Load float64
	// Wait keeps a task that is not admitted in its window pending: it is
	// retried in later windows, in arrival order, until admitted or, when
	// MaxWait > 0, dropped once it has waited longer (trace time). Without
	// Wait a task not admitted in its window is dropped (scenario openb).
	Wait    bool
	MaxWait time.Duration
	// Aging, when > 0, gives a waiting task the weight 1 + wait / Aging
	// (annotation drasat.dev/weight, at most model.MaxWeight); only
	// drasat reads weights.
	Aging time.Duration
	// NoReserve turns off the drasat policy's node reservation for a task
	// that waits because it fits nowhere (package reserve): the replay as
	// it was before, to measure what the reservation does.
	NoReserve bool
	// Objective is the drasat policies' objective in the simulations over
	// time (openb, openb-wait, inflation): max-claims ("") or ordered.
	Objective string
	// Hold, when > 0, lets the drasat policy hold back tasks for forecast
	// demand (package hold, as drasat controller --hold does), each at most
	// Hold of trace time after its arrival. A held task stays pending in
	// both replays; in the dropping one it is dropped only when a window
	// after its hold leaves it out.
	Hold time.Duration
	// HoldIdlePerClaim is the holder's rate (hold.Options.IdlePerClaim:
	// what one more task admitted is worth in idle device time; 0: its
	// default).
	HoldIdlePerClaim time.Duration
	// Batch is the number of tasks per batch of the inflation simulation.
	Batch int
	// GPUOnly replays the GPU tasks alone on nodes without CPU or memory,
	// as the replays did before they carried pods: the trace's CPU-only
	// tasks are left out, and a GPU task's pod requests nothing of its
	// node.
	GPUOnly bool
	// InflationTrace, when set, receives the inflation simulation's
	// batches as they are decided (InflationTrace's lines): every
	// task with its node or none, and every node's free GPUs, CPU and
	// memory after the batch. Safe for policies run at once.
	InflationTrace *InflationTrace `json:"-"`
	// Step, when set, is told how far a long simulation has come (the
	// terminal's progress bar).
	Step func(note string) `json:"-"`
}

// DefaultOpenBLoad is the default arrival compression.
const DefaultOpenBLoad = 30

// ReplayStats are the metrics of a replay.
type ReplayStats struct {
	Windows        int `json:"windows"`        // batches the allocator was called on
	OptimalWindows int `json:"optimalWindows"` // drasat: batches proven optimal
	// FragExactWindows: drasat's batches whose placement is proven the
	// least fragmented (the frag policy's exact level).
	FragExactWindows int `json:"fragExactWindows,omitempty"`
	// StrandedGPUHours integrates, over the replay, the free memory slices
	// of GPUs that are partly in use (free capacity that a whole-GPU task
	// cannot use), in GPUs (8 slices = 1) × hours.
	StrandedGPUHours float64 `json:"strandedGPUHours"`
	// MeanFreeGPUs is the time-weighted mean of whole GPUs free; MinFreeGPUs
	// its minimum.
	MeanFreeGPUs float64 `json:"meanFreeGPUs"`
	MinFreeGPUs  int     `json:"minFreeGPUs"`
	GPUs         int     `json:"gpus"`
	HoursSpanned float64 `json:"hours"`
	// FreeGPUs samples whole GPUs free over time (at most 200 points).
	FreeGPUs []TimePoint `json:"freeGPUs"`
	// Replay with waiting: the wait of the admitted tasks (trace seconds,
	// after load compression), tasks dropped after the maximum wait, and
	// tasks still pending when the replay ends (nothing left to release).
	MeanWaitS float64 `json:"meanWaitSeconds,omitempty"`
	P99WaitS  float64 `json:"p99WaitSeconds,omitempty"`
	Dropped   int     `json:"dropped,omitempty"`
	// ReservedWindows counts the windows in which the drasat policy kept a
	// node for a waiting task (package reserve).
	ReservedWindows int `json:"reservedWindows,omitempty"`
	// HeldTasks counts the tasks held back at least once (OpenBConfig.Hold);
	// MeanHeldWaitS and MaxHeldWaitS are the wait, arrival to admission, of
	// those admitted.
	HeldTasks     int     `json:"heldTasks,omitempty"`
	MeanHeldWaitS float64 `json:"meanHeldWaitS,omitempty"`
	MaxHeldWaitS  float64 `json:"maxHeldWaitS,omitempty"`
	Unplaced      int     `json:"stillPending,omitempty"`
	// CPUTasks counts the trace's CPU-only tasks that arrived,
	// CPUTasksPlaced those the scheduler placed (OpenBConfig.GPUOnly off).
	CPUTasks       int `json:"cpuTasks,omitempty"`
	CPUTasksPlaced int `json:"cpuTasksPlaced,omitempty"`
	// Waits samples the number of tasks pending over time.
	Pending []TimePoint `json:"pending,omitempty"`
}

// TimePoint is one sample of a series over replay time.
type TimePoint struct {
	Hours float64 `json:"h"`
	Value float64 `json:"v"`
}

// OpenBDir finds the trace: cfgDir when given, else
// ../shared/data/alibaba-openb beside the repository, searched upwards
// from the working directory (CI clones the repository with shared/ beside
// it).
func OpenBDir(cfgDir string) (string, error) {
	const files = "openb_node_list_gpu_node.csv"
	if cfgDir == "" {
		cfgDir = os.Getenv(OpenBDataEnv)
	}
	if cfgDir != "" {
		if _, err := os.Stat(filepath.Join(cfgDir, files)); err != nil {
			return "", fmt.Errorf("openb: trace not found in %s: %w", cfgDir, err)
		}
		return cfgDir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/drasat/drasat") {
			d := filepath.Join(dir, "..", "shared", "data", "alibaba-openb")
			if _, err := os.Stat(filepath.Join(d, files)); err != nil {
				return "", fmt.Errorf("openb: the Alibaba trace is missing: %s not found (clone the shared/ directory beside the repository, or give --openb-data DIR)", filepath.Join(d, files))
			}
			return filepath.Clean(d), nil
		}
		if filepath.Dir(dir) == dir {
			return "", errors.New("openb: the Alibaba trace is missing: not inside the drasat repository, so ../shared/data/alibaba-openb cannot be located; give --openb-data DIR")
		}
	}
}

// OpenBDataEnv names the environment variable that, when set, gives the
// trace's directory when no --openb-data is given (tests and worktrees not
// beside shared/).
const OpenBDataEnv = "DRASAT_OPENB_DATA"

type openbNode struct {
	name     string
	gpus     int
	model    string
	cpu, mem int64 // milli-CPUs, MiB
}

type openbTask struct {
	name             string
	numGPU, milli    int
	cpu, mem         int64 // milli-CPUs, MiB
	spec             []string
	arrive, leave    float64 // seconds, after load compression
	creation, delete int64
}

func readCSV(path string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("openb: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("openb: %s: %w", path, err)
	}
	var out []map[string]string
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("openb: %s: %w", path, err)
		}
		m := map[string]string{}
		for i, h := range head {
			if i < len(rec) {
				m[h] = rec[i]
			}
		}
		out = append(out, m)
	}
	return out, nil
}

func atoi(path, field, s string) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("openb: %s: field %s: %q is not a number", path, field, s)
	}
	return v, nil
}

// loadOpenB reads the node list and the task list: the GPU tasks, and the
// CPU-only ones too with cpuTasks.
func loadOpenB(cfg OpenBConfig, needTimes, cpuTasks bool) ([]openbNode, []openbTask, error) {
	dir, err := OpenBDir(cfg.Dir)
	if err != nil {
		return nil, nil, err
	}
	np := filepath.Join(dir, "openb_node_list_gpu_node.csv")
	rows, err := readCSV(np)
	if err != nil {
		return nil, nil, err
	}
	var nodes []openbNode
	for _, r := range rows {
		g, err := atoi(np, "gpu", r["gpu"])
		if err != nil {
			return nil, nil, err
		}
		cpu, err := atoi(np, "cpu_milli", r["cpu_milli"])
		if err != nil {
			return nil, nil, err
		}
		mem, err := atoi(np, "memory_mib", r["memory_mib"])
		if err != nil {
			return nil, nil, err
		}
		if g > 0 {
			nodes = append(nodes, openbNode{name: r["sn"], gpus: int(g), model: r["model"], cpu: cpu, mem: mem})
		}
	}
	pods := openbPods(cfg.Pods)
	pp := filepath.Join(dir, "openb_pod_list_"+pods+".csv")
	rows, err = readCSV(pp)
	if err != nil {
		return nil, nil, err
	}
	var tasks []openbTask
	for _, r := range rows {
		var t openbTask
		t.name = r["name"]
		n, err := atoi(pp, "num_gpu", r["num_gpu"])
		if err != nil {
			return nil, nil, err
		}
		if n == 0 && !cpuTasks {
			continue
		}
		if t.cpu, err = atoi(pp, "cpu_milli", r["cpu_milli"]); err != nil {
			return nil, nil, err
		}
		if t.mem, err = atoi(pp, "memory_mib", r["memory_mib"]); err != nil {
			return nil, nil, err
		}
		m, err := atoi(pp, "gpu_milli", r["gpu_milli"])
		if err != nil {
			return nil, nil, err
		}
		if _, ok := r["creation_time"]; !ok {
			if needTimes {
				return nil, nil, fmt.Errorf("openb: %s has no creation_time/deletion_time: it cannot be replayed (the inflation simulation needs no times)", pp)
			}
		} else {
			if t.creation, err = atoi(pp, "creation_time", r["creation_time"]); err != nil {
				return nil, nil, err
			}
			if t.delete, err = atoi(pp, "deletion_time", r["deletion_time"]); err != nil {
				return nil, nil, err
			}
		}
		t.numGPU, t.milli = int(n), int(m)
		if s := strings.TrimSpace(r["gpu_spec"]); s != "" {
			t.spec = strings.Split(s, "|")
		}
		tasks = append(tasks, t)
	}
	return nodes, tasks, nil
}

// openbProfile maps gpu_milli to the smallest MIG profile whose share of
// the GPU's multiprocessors covers it (profiles with media extensions or
// more memory than needed are not used); 1000 and more is the whole GPU.
func openbProfile(gm *gen.GPUModel, milli int) (gen.MIGProfile, bool) {
	if milli >= 1000 {
		return gen.MIGProfile{}, false
	}
	var best *gen.MIGProfile
	for i := range gm.Profiles {
		p := &gm.Profiles[i]
		if strings.Contains(p.Name, "+") || p.SMs*1000 < int64(milli)*gm.SMs {
			continue
		}
		if best == nil || p.SMs < best.SMs || (p.SMs == best.SMs && p.MemoryMi < best.MemoryMi) {
			best = p
		}
	}
	if best == nil || best.Slices == 8 {
		return gen.MIGProfile{}, false // a 7g profile is the whole GPU
	}
	return *best, true
}

// openbCluster publishes the sampled nodes as MIG GPUs; with resources,
// every node has its CPU and memory as allocatable.
func openbCluster(nodes []openbNode, gm *gen.GPUModel, resources bool) *input.Objects {
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Classes = gen.MIGClasses()
	for _, n := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name,
			Labels: map[string]string{"nvidia.com/gpu.product": gen.ProductLabel(gm.Name), "openb/model": n.model}}}
		if resources {
			node.Status.Allocatable = nodeAllocatable(n.cpu, n.mem)
		}
		objs.Nodes = append(objs.Nodes, node)
		// The driver's slices, and our own attribute openbModel on every
		// device: the trace's GPU model, for the tasks that ask for one.
		for _, sl := range driverprofile.NVIDIADynamicMIG(gm.Version, gm.Driver, n.name, n.gpus).Slices {
			for i := range sl.Spec.Devices {
				sl.Spec.Devices[i].Attributes["openbModel"] = resourceapi.DeviceAttribute{StringValue: ptr.To(n.model)}
			}
			objs.Slices = append(objs.Slices, sl)
		}
	}
	return objs
}

// openbClaim is the ResourceClaim of a task.
func openbClaim(t *openbTask, gm *gen.GPUModel) *resourceapi.ResourceClaim {
	var sel []resourceapi.DeviceSelector
	if len(t.spec) > 0 {
		quoted := make([]string, len(t.spec))
		for i, s := range t.spec {
			quoted[i] = strconv.Quote(s)
		}
		sel = append(sel, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.attributes['%s'].openbModel in [%s]", gen.NVIDIADriver, strings.Join(quoted, ", "))}})
	}
	if t.numGPU == 1 {
		if pr, ok := openbProfile(gm, t.milli); ok {
			c := gen.NewClaim(t.name, []string{"mig.nvidia.com"}, append(gen.ProfileSelector(pr.Name), sel...))
			return c
		}
	}
	c := gen.NewClaim(t.name, []string{"gpu.nvidia.com"}, sel)
	c.Spec.Devices.Requests[0].Exactly.Count = int64(t.numGPU)
	return c
}

// replayState tracks memory slices in use per GPU.
type replayState struct {
	w       *world
	slices  map[counterKey]int // per GPU counter set
	gpus    []counterKey
	running map[string]*resourceapi.ResourceClaim
}

func (s *replayState) apply(c *resourceapi.ResourceClaim, sign int) {
	for _, r := range c.Status.Allocation.Devices.Results {
		for _, cc := range s.w.devs[input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}] {
			n := 0
			for name := range cc.Counters {
				if memorySlices(name) {
					n++
				}
			}
			s.slices[counterKey{r.Driver, r.Pool, cc.CounterSet, ""}] += sign * n
		}
	}
}

// sample returns whole GPUs free, stranded GPUs (free slices of partly
// used GPUs / 8) and the share of memory slices in use.
func (s *replayState) sample() (free int, stranded, util float64) {
	used := 0
	for _, g := range s.gpus {
		used += s.slices[g]
		switch n := s.slices[g]; {
		case n == 0:
			free++
		case n < 8:
			stranded += float64(8-n) / 8
		}
	}
	if len(s.gpus) > 0 {
		util = float64(used) / float64(8*len(s.gpus))
	}
	return free, stranded, util
}

// RunOpenB replays the trace with one policy. The size is NODES:TASKS:
// NODES nodes sampled from the node list with the seed (0: all), and the
// first TASKS GPU tasks in arrival order (0: all).
func RunOpenB(ctx context.Context, cfg OpenBConfig, sz Size, seed uint64, policy string, timeout time.Duration) (*Row, error) {
	if cfg.Window <= 0 {
		cfg.Window = time.Minute
	}
	if cfg.Load <= 0 {
		cfg.Load = DefaultOpenBLoad
	}
	// Every trace GPU is one model: a fleet of one.
	models, err := gen.MIGFleet(strings.ToLower(cfg.GPU))
	if err != nil || len(models) != 1 {
		return nil, fmt.Errorf("openb: GPU model %q: want a100 or h100", cfg.GPU)
	}
	gm := &models[0]
	pods := !cfg.GPUOnly
	nodes, tasks, err := loadOpenB(cfg, true, pods)
	if err != nil {
		return nil, err
	}
	nodes, tasks = sampleReplay(nodes, tasks, sz, seed, cfg.Load)
	base := openbCluster(nodes, gm, pods)
	gpuTasks := 0
	for i := range tasks {
		if tasks[i].numGPU > 0 {
			gpuTasks++
		}
	}
	w := newWorld(base)
	st := &replayState{w: w, slices: map[counterKey]int{}, running: map[string]*resourceapi.ResourceClaim{}}
	for _, set := range w.setOrder {
		st.gpus = append(st.gpus, set)
	}
	scenario, inst := "openb", fmt.Sprintf("openb %s %s %s load %g window %s", Size{Nodes: len(nodes), Claims: gpuTasks}, openbPods(cfg.Pods), openbGPUName(cfg.GPU), cfg.Load, cfg.Window)
	if cfg.GPUOnly {
		inst += " gpu only"
	}
	if cfg.Wait {
		scenario = "openb-wait"
		inst = "openb-wait" + strings.TrimPrefix(inst, "openb")
		if cfg.MaxWait > 0 {
			inst += " max wait " + cfg.MaxWait.String()
		}
		if cfg.Aging > 0 {
			inst += " ageing " + cfg.Aging.String()
		}
		if cfg.NoReserve {
			inst += " no reservation"
		}
	}
	if cfg.Objective != "" && cfg.Objective != "max-claims" {
		inst += " objective " + cfg.Objective
	}
	if cfg.Hold > 0 {
		inst += " hold " + cfg.Hold.String()
	}
	row := &Row{Scenario: scenario, Instance: inst, Size: Size{Nodes: len(nodes), Claims: gpuTasks}, Compat: model.CompatKEP5963,
		Policy: policy, Claims: gpuTasks, UnitName: "GPUs", UtilName: "memory slices (time mean)", Units: len(st.gpus)}
	rs := &ReplayStats{GPUs: len(st.gpus), MinFreeGPUs: len(st.gpus)}
	row.Replay = rs

	// Departures in time order.
	type departure struct {
		at   float64
		name string
	}
	var deps []departure
	win := cfg.Window.Seconds()
	var series []TimePoint
	var lastT, freeArea float64
	var lastFree int
	var lastStranded, lastUtil, utilArea float64
	first := true
	advance := func(t float64) {
		if !first {
			dt := (t - lastT) / 3600
			freeArea += float64(lastFree) * dt
			rs.StrandedGPUHours += lastStranded * dt
			utilArea += lastUtil * dt
		}
		lastFree, lastStranded, lastUtil = st.sample()
		if lastFree < rs.MinFreeGPUs {
			rs.MinFreeGPUs = lastFree
		}
		if first {
			rs.HoursSpanned = -t / 3600
		}
		first = false
		lastT = t
		series = append(series, TimePoint{Hours: t / 3600, Value: float64(lastFree)})
	}
	// The pods: every task's requests on its node (bound), the
	// scheduler's placement of the CPU-only tasks, and where each runs.
	tn := newTraceNodes(nodes, base.Slices, seed)
	byTask := map[string]*openbTask{}
	for i := range tasks {
		byTask[tasks[i].name] = &tasks[i]
	}
	release := func(until float64) {
		sort.SliceStable(deps, func(i, j int) bool { return deps[i].at < deps[j].at })
		k := 0
		for ; k < len(deps) && deps[k].at <= until; k++ {
			d := deps[k]
			tn.leave(byTask[d.name])
			if c, ok := st.running[d.name]; ok {
				st.apply(c, -1)
				delete(st.running, d.name)
				advance(d.at)
			}
		}
		deps = deps[k:]
	}
	var wall time.Duration
	var peak uint64
	wl := frag.NewWorkload()
	life := &lifecycle{objective: cfg.Objective}
	if policy == PolicyDrasat && !cfg.NoReserve && cfg.Wait {
		// drasat is told that tasks wait (as the controller's claims do):
		// the reservation, and coverage in the look-ahead. Not in the
		// dropping replay: there only held tasks (Hold) stay pending, and
		// they fit.
		life.reserver = reserve.New()
		life.cover = true
	}
	if policy == PolicyDrasat && cfg.Hold > 0 {
		// Trace time: the rate is measured over a window at least, and the
		// scenarios get half the batch's budget, as in the controller.
		life.holder = hold.New(hold.Options{MaxHold: cfg.Hold, IdlePerClaim: cfg.HoldIdlePerClaim, Lookback: max(time.Minute, cfg.Window),
			Timeout: timeout / 2, Objective: cfg.Objective, Policy: alloc.Binpack, Seed: seed})
	}
	heldEver := map[int]bool{} // tasks held back at least once
	var heldWaits []float64
	lastEnd := math.Inf(-1)
	var pending []int    // GPU task indices waiting, in arrival order
	var cpuPending []int // CPU-only task indices waiting (openb-wait), in arrival order
	var waits []float64
	var pendingSeries []TimePoint
	nextDeparture := func() float64 {
		t := math.Inf(1)
		for _, d := range deps {
			t = math.Min(t, d.at)
		}
		return t
	}
	heldNow := 0 // tasks the last window held back
	for i := 0; i < len(tasks) || (cfg.Wait && len(pending)+len(cpuPending) > 0 && len(deps) > 0) || heldNow > 0; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		next := math.Inf(1)
		if i < len(tasks) {
			next = tasks[i].arrive
		}
		if cfg.Wait && len(pending)+len(cpuPending) > 0 {
			next = math.Min(next, nextDeparture())
		}
		if heldNow > 0 {
			next = math.Min(next, lastEnd) // held tasks are decided again in the next window
		}
		k := math.Floor(next / win)
		end := (k + 1) * win
		j := i
		for j < len(tasks) && tasks[j].arrive < end {
			j++
		}
		release(end)
		objs := *base
		objs.Claims = nil
		names := make([]string, 0, len(st.running))
		for n := range st.running {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			objs.Claims = append(objs.Claims, st.running[n])
		}
		if cfg.Wait && cfg.MaxWait > 0 {
			// Tasks that would have waited longer than the maximum by now
			// were dropped before this window.
			var keep []int
			for _, t := range pending {
				if end-tasks[t].arrive > cfg.MaxWait.Seconds() {
					rs.Dropped++
				} else {
					keep = append(keep, t)
				}
			}
			pending = keep
			// CPU-only tasks too (not counted in Dropped, which counts GPU
			// tasks: they are among CPUTasks but not CPUTasksPlaced).
			cpuPending = slices.DeleteFunc(cpuPending, func(t int) bool { return end-tasks[t].arrive > cfg.MaxWait.Seconds() })
		}
		for t := i; t < j; t++ {
			if tasks[t].numGPU == 0 {
				cpuPending = append(cpuPending, t)
				rs.CPUTasks++
				wl.ObserveTask(nil, taskRequests(&tasks[t]))
				continue
			}
			pending = append(pending, t)
			c := openbClaim(&tasks[t], gm)
			if pods {
				wl.ObserveTask(c, taskRequests(&tasks[t])) // the workload learnt from the trace's past
			} else {
				wl.Observe(c)
			}
			if life.holder != nil {
				life.holder.Observe(time.Unix(0, 0).Add(time.Duration(tasks[t].arrive*float64(time.Second))), c.Name, c)
			}
		}
		// The CPU-only tasks of the window go where the scheduler puts
		// them, before the window's GPU tasks are decided.
		var cpuStill []int
		for _, t := range cpuPending {
			tk := &tasks[t]
			if !tn.place(tk) {
				if cfg.Wait {
					cpuStill = append(cpuStill, t)
				}
				continue
			}
			rs.CPUTasksPlaced++
			leave := math.Max(tk.leave, end)
			if cfg.Wait {
				leave = end + (tk.leave - tk.arrive)
			}
			deps = append(deps, departure{at: leave, name: tk.name})
		}
		cpuPending = cpuStill
		if pods {
			objs.Pods = tn.pods(byTask)
			for _, t := range pending {
				objs.Pods = append(objs.Pods, taskPod(tasks[t].name, tasks[t].cpu, tasks[t].mem, tasks[t].name))
			}
		}
		for _, t := range pending {
			c := openbClaim(&tasks[t], gm)
			if cfg.Aging > 0 {
				// Ageing: a claim's weight grows with its wait, so that
				// max-claims does not pass a large task over forever.
				w := 1 + int64((end-tasks[t].arrive)/cfg.Aging.Seconds())
				c.Annotations = map[string]string{model.WeightAnnotation: strconv.FormatInt(min(w, model.MaxWeight), 10)}
			}
			objs.Claims = append(objs.Claims, c)
		}
		life.now = time.Unix(0, 0).Add(time.Duration(end * float64(time.Second)))
		h := startHeapSampler()
		start := time.Now()
		out, err := runPolicy(ctx, policy, &objs, model.CompatKEP5963, timeout, wl, false, life)
		wall += time.Since(start)
		if pk := h.Peak(); pk > peak {
			peak = pk
		}
		if err != nil {
			return nil, fmt.Errorf("%s on %s, window at %.0fs: %w", policy, inst, end, err)
		}
		if out.reservation.Claim != "" {
			rs.ReservedWindows++
		}
		if err := validate(policy, fmt.Sprintf("%s, window at %.0fs", inst, end), &objs, model.CompatKEP5963, out.allocated); err != nil {
			return nil, err
		}
		rs.Windows++
		if out.stats != nil && out.stats.Optimal {
			rs.OptimalWindows++
		}
		if out.stats != nil && out.stats.FragExact {
			rs.FragExactWindows++
		}
		admitted := map[string]bool{}
		for _, c := range out.allocated {
			admitted[c.Name] = true
		}
		byName := map[string]int{}
		for _, t := range pending {
			byName[tasks[t].name] = t
		}
		for _, c := range out.allocated {
			t := &tasks[byName[c.Name]]
			st.running[c.Name] = c
			st.apply(c, +1)
			if pods {
				tn.admit(t, c)
			}
			row.Admitted++
			row.Devices += len(c.Status.Allocation.Devices.Results)
			leave := math.Max(t.leave, end) // the dropping replay: the task ends when the trace says
			if cfg.Wait || heldEver[byName[c.Name]] {
				leave = end + (t.leave - t.arrive) // a task that waited runs its whole duration
			}
			deps = append(deps, departure{at: leave, name: c.Name})
			waits = append(waits, end-t.arrive)
			if heldEver[byName[c.Name]] {
				heldWaits = append(heldWaits, end-t.arrive)
			}
		}
		var still []int
		heldNow = len(out.held)
		for _, t := range pending {
			if out.held[tasks[t].name] {
				heldEver[t] = true
			}
			switch {
			case admitted[tasks[t].name]:
			case out.held[tasks[t].name]: // stays pending in both replays
				still = append(still, t)
			case !cfg.Wait:
			default:
				still = append(still, t)
			}
		}
		pending = still
		lastEnd = end
		advance(end)
		pendingSeries = append(pendingSeries, TimePoint{Hours: end / 3600, Value: float64(len(pending))})
		i = j
	}
	rs.Unplaced = len(pending)
	rs.HeldTasks = len(heldEver)
	rs.MeanHeldWaitS, _ = meanP99(heldWaits)
	rs.MaxHeldWaitS = slices.Max(append(heldWaits, 0))
	if cfg.Wait {
		rs.MeanWaitS, rs.P99WaitS = meanP99(waits)
		rs.Pending = decimate(pendingSeries, 200)
	}
	release(math.Inf(1))
	rs.HoursSpanned += lastT / 3600
	if rs.HoursSpanned > 0 {
		rs.MeanFreeGPUs = freeArea / rs.HoursSpanned
		row.Util = utilArea / rs.HoursSpanned
	}
	rs.FreeGPUs = decimate(series, 200)
	row.WallMs = float64(wall.Microseconds()) / 1000
	row.WallsMs = []float64{row.WallMs}
	row.PeakHeapMiB = float64(peak) / (1 << 20)
	if row.Claims > 0 {
		row.AdmittedPct = 100 * float64(row.Admitted) / float64(row.Claims)
	}
	// End state is empty; report the busiest moment instead.
	row.UnitsFree = rs.MinFreeGPUs
	row.UnitsUsed = row.Units - rs.MinFreeGPUs
	return row, nil
}

// decimate keeps at most n points, the minimum of each bucket.
func decimate(pts []TimePoint, n int) []TimePoint {
	if len(pts) <= n {
		return pts
	}
	var out []TimePoint
	per := float64(len(pts)) / float64(n)
	for b := 0; b < n; b++ {
		lo, hi := int(float64(b)*per), int(float64(b+1)*per)
		if hi > len(pts) {
			hi = len(pts)
		}
		best := pts[lo]
		for _, p := range pts[lo:hi] {
			if p.Value < best.Value {
				best = TimePoint{Hours: pts[lo].Hours, Value: p.Value}
			}
		}
		out = append(out, best)
	}
	return out
}

// meanP99 is the mean and the 99th percentile (nearest rank) of xs.
func meanP99(xs []float64) (mean, p99 float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	for _, x := range s {
		mean += x
	}
	mean /= float64(len(s))
	k := int(math.Ceil(0.99*float64(len(s)))) - 1
	return mean, s[max(k, 0)]
}

// openbGPUName names the fleet in instance names: a100 or h100.
func openbGPUName(gpu string) string {
	if gpu == "" {
		return "a100"
	}
	return strings.ToLower(gpu)
}

// openbPods is the pod list's name: default when none is given.
func openbPods(pods string) string {
	if pods == "" {
		return "default"
	}
	return pods
}

// sampleReplay takes the replay's sample of the trace: sz.Nodes nodes drawn
// with seed (kept in name order), the tasks' arrivals and departures
// compressed by load, and the first sz.Claims tasks to arrive.
func sampleReplay(nodes []openbNode, tasks []openbTask, sz Size, seed uint64, load float64) ([]openbNode, []openbTask) {
	if sz.Nodes > 0 && sz.Nodes < len(nodes) {
		rng := rand.New(rand.NewPCG(seed, 0x6f70656e62))
		rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		nodes = nodes[:sz.Nodes]
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	}
	for i := range tasks {
		t := &tasks[i]
		t.arrive = float64(t.creation) / load
		t.leave = t.arrive + float64(t.delete-t.creation)
	}
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].arrive < tasks[j].arrive })
	if sz.Claims > 0 {
		// The first sz.Claims GPU tasks, with the CPU-only tasks that
		// arrive among them.
		n := 0
		for k := range tasks {
			if tasks[k].numGPU > 0 {
				if n++; n == sz.Claims {
					tasks = tasks[:k+1]
					break
				}
			}
		}
	}
	return nodes, tasks
}

// taskRequests is what task t's pod requests of its node.
func taskRequests(t *openbTask) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(t.cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(t.mem<<20, resource.BinarySI)}
}
