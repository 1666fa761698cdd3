package bench

import (
	"context"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// The inflation simulation is the protocol of the FGD paper (Weng et al.,
// USENIX ATC'23, §6.1): tasks drawn at random from a pod list arrive one
// after another, never leave, until the GPUs they request reach the
// cluster's; along the way the unallocated GPU share and the fragmentation
// are recorded against the arrived workload. Here tasks arrive in batches
// (OpenBConfig.Batch) so drasat allocates a batch at a time; the other
// policies place the batch's tasks one by one in arrival order, which is
// the same as one at a time.

// DefaultInflationBatch is the default number of tasks per batch.
const DefaultInflationBatch = 10

// inflationStep is the arrived workload, in % of the cluster's GPUs,
// between two points of the curve.
const inflationStep = 2.0

// InflationStats are the curves of an inflation run.
type InflationStats struct {
	GPUs int `json:"gpus"`
	// Points are sampled after the batch that brings the arrived
	// workload past every inflationStep %, and at 100 %.
	Points []InflationPoint `json:"points"`
	// At100 is the point where the arrived workload first reaches 100 %
	// of the cluster's GPUs (the run's last point).
	At100 InflationPoint `json:"at100"`
	// OptimalBatches counts drasat's batches proven optimal.
	Batches        int `json:"batches"`
	OptimalBatches int `json:"optimalBatches"`
	// FragExactBatches counts drasat's batches whose placement is proven
	// the least fragmented (the frag policy's exact level).
	FragExactBatches int `json:"fragExactBatches,omitempty"`
	// CPUTasks counts the CPU-only tasks drawn, CPUTasksPlaced those the
	// scheduler placed (OpenBConfig.GPUOnly off).
	CPUTasks       int `json:"cpuTasks,omitempty"`
	CPUTasksPlaced int `json:"cpuTasksPlaced,omitempty"`
}

// InflationPoint is the cluster after some arrived workload, in % of the
// cluster's GPUs: requested by the arrived tasks (the share of a GPU their
// MIG profile takes, see openbShare), unallocated (free memory-slice
// share), and fragmented (FGD's expected fragmentation against the pod
// list's task shapes).
type InflationPoint struct {
	ArrivedPct     float64 `json:"arrived"`
	UnallocatedPct float64 `json:"unallocated"`
	FragPct        float64 `json:"frag"`
	// FragOfFreePct is the fragmented share of the unallocated capacity.
	FragOfFreePct float64 `json:"fragOfFree"`
	Admitted      int     `json:"admitted"`
	Arrived       int     `json:"tasks"`
}

// RunInflation runs the inflation simulation with one policy. The size is
// NODES:BATCH (BATCH 0: OpenBConfig.Batch or DefaultInflationBatch): NODES
// nodes sampled with the seed as in the replay (0: all). Tasks are drawn
// with replacement from the pod list's GPU tasks with the seed, so every
// policy sees the same arrivals; pod lists without times (multigpu50) run.
func RunInflation(ctx context.Context, cfg OpenBConfig, sz Size, seed uint64, policy string, timeout time.Duration) (*Row, error) {
	models, err := gen.MIGFleet(strings.ToLower(cfg.GPU))
	if err != nil || len(models) != 1 {
		return nil, fmt.Errorf("inflation: GPU model %q: want a100 or h100", cfg.GPU)
	}
	gm := &models[0]
	pods := !cfg.GPUOnly
	nodes, tasks, err := loadOpenB(cfg, false, pods)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(tasks, func(t openbTask) bool { return t.numGPU > 0 }) {
		return nil, fmt.Errorf("inflation: pod list %q has no GPU tasks", cfg.Pods)
	}
	if sz.Nodes > 0 && sz.Nodes < len(nodes) {
		rng := rand.New(rand.NewPCG(seed, 0x6f70656e62))
		rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		nodes = nodes[:sz.Nodes]
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	}
	batch := sz.Claims
	if batch <= 0 {
		batch = cfg.Batch
	}
	if batch <= 0 {
		batch = DefaultInflationBatch
	}
	gpus := 0
	for _, n := range nodes {
		gpus += n.gpus
	}
	base := openbCluster(nodes, gm, pods)
	inst := fmt.Sprintf("inflation %d nodes %d GPUs %s %s batch %d", len(nodes), gpus, openbPods(cfg.Pods), openbGPUName(cfg.GPU), batch)
	if cfg.GPUOnly {
		inst += " gpu only"
	}
	row := &Row{Scenario: "inflation", Instance: inst, Size: Size{Nodes: len(nodes), Claims: batch}, Compat: model.CompatKEP5963,
		Policy: policy, UnitName: "GPUs", UtilName: "memory slices", Units: gpus}
	is := &InflationStats{GPUs: gpus}
	row.Inflation = is

	// The reporting measure: the pod list's own distribution of shapes.
	target := frag.NewWorkload()
	for i := range tasks {
		if tasks[i].numGPU > 0 {
			target.Observe(openbClaim(&tasks[i], gm))
		}
	}
	// The pods (with pods): every task's requests on its node, the
	// CPU-only tasks where the scheduler puts them on arrival.
	tn := newTraceNodes(nodes, base.Slices, seed)
	drawn := map[string]*openbTask{}
	learnt := frag.NewWorkload() // what the policies know: the arrived tasks
	rng := rand.New(rand.NewPCG(seed, 0x696e666c))
	var running []*resourceapi.ResourceClaim
	requested := 0.0
	var wall time.Duration
	var peak uint64
	seq := 0
	nextSample := 0.0
	for requested < float64(gpus) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		objs := *base
		objs.Claims = append([]*resourceapi.ResourceClaim(nil), running...)
		batchStart := len(objs.Claims)
		var batchPods []*corev1.Pod
		for k := 0; k < batch && requested < float64(gpus); {
			t := tasks[rng.IntN(len(tasks))]
			t.name = fmt.Sprintf("task-%05d", seq)
			seq++
			if t.numGPU == 0 {
				learnt.ObserveTask(nil, taskRequests(&t))
				is.CPUTasks++
				if tn.place(&t) {
					is.CPUTasksPlaced++
					drawn[t.name] = &t
				}
				continue
			}
			k++
			c := openbClaim(&t, gm)
			if pods {
				learnt.ObserveTask(c, taskRequests(&t))
				drawn[t.name] = &t
				batchPods = append(batchPods, taskPod(t.name, t.cpu, t.mem, t.name))
			} else {
				learnt.Observe(c)
			}
			objs.Claims = append(objs.Claims, c)
			requested += openbShare(&t, gm)
			row.Claims++
		}
		if pods {
			objs.Pods = append(tn.pods(drawn), batchPods...)
		}
		h := startHeapSampler()
		start := time.Now()
		out, err := runPolicy(ctx, policy, &objs, model.CompatKEP5963, timeout, learnt, false, &lifecycle{objective: cfg.Objective, upgrade: true})
		wall += time.Since(start)
		if pk := h.Peak(); pk > peak {
			peak = pk
		}
		if err != nil {
			return nil, fmt.Errorf("%s on %s, batch %d: %w", policy, inst, is.Batches+1, err)
		}
		if err := validate(policy, fmt.Sprintf("%s, batch %d", inst, is.Batches+1), &objs, model.CompatKEP5963, out.allocated); err != nil {
			return nil, err
		}
		is.Batches++
		if cfg.Step != nil {
			cfg.Step(fmt.Sprintf("batch %d, %.0f%% arrived", is.Batches, 100*requested/float64(gpus)))
		}
		if out.stats != nil && out.stats.Optimal {
			is.OptimalBatches++
		}
		if out.stats != nil && out.stats.FragExact {
			is.FragExactBatches++
		}
		running = append(running, out.allocated...)
		if pods {
			for _, c := range out.allocated {
				tn.admit(drawn[c.Name], c)
			}
		}
		// After the batch's pods are counted on their nodes.
		if cfg.InflationTrace != nil {
			if err := cfg.InflationTrace.batch(ctx, policy, seed, is.Batches, base, running, objs.Claims[batchStart:], out.allocated, drawn, tn); err != nil {
				return nil, err
			}
		}
		row.Admitted += len(out.allocated)
		for _, c := range out.allocated {
			row.Devices += len(c.Status.Allocation.Devices.Results)
		}
		// The curve is sampled every inflationStep % of arrived workload
		// and at 100 %: measuring builds the whole cluster's model, which
		// on hundreds of nodes costs more than the policies.
		arrived := 100 * requested / float64(gpus)
		if requested < float64(gpus) && arrived < nextSample {
			continue
		}
		for nextSample <= arrived {
			nextSample += inflationStep
		}
		pt, err := inflationPoint(ctx, base, running, target)
		if err != nil {
			return nil, err
		}
		pt.ArrivedPct = arrived
		pt.Admitted, pt.Arrived = row.Admitted, row.Claims
		is.Points = append(is.Points, pt)
	}
	if n := len(is.Points); n > 0 {
		is.At100 = is.Points[n-1]
		row.Util = 1 - is.At100.UnallocatedPct/100
	}
	row.WallMs = float64(wall.Microseconds()) / 1000
	row.WallsMs = []float64{row.WallMs}
	row.PeakHeapMiB = float64(peak) / (1 << 20)
	if row.Claims > 0 {
		row.AdmittedPct = 100 * float64(row.Admitted) / float64(row.Claims)
	}
	st, err := clusterState(ctx, base, running)
	if err != nil {
		return nil, err
	}
	for g := range st.P.CounterSets {
		if st.Free(g, 0) == st.P.CounterSets[g].Capacity[0] && untouched(st, g) {
			row.UnitsFree++
		}
	}
	row.UnitsUsed = row.Units - row.UnitsFree
	return row, nil
}

// clusterState is the model state with the running claims allocated.
func clusterState(ctx context.Context, base *input.Objects, running []*resourceapi.ResourceClaim) (*model.State, error) {
	objs := *base
	objs.Claims = running
	p, err := model.Build(ctx, &objs, model.Options{Compat: model.CompatKEP5963})
	if err != nil {
		return nil, err
	}
	return model.NewState(p), nil
}

func untouched(s *model.State, g int) bool {
	cs := s.P.CounterSets[g]
	for j := range cs.Counters {
		if s.Free(g, j) != cs.Capacity[j] {
			return false
		}
	}
	return true
}

// inflationPoint measures the cluster with the running claims.
func inflationPoint(ctx context.Context, base *input.Objects, running []*resourceapi.ResourceClaim, target *frag.Workload) (InflationPoint, error) {
	st, err := clusterState(ctx, base, running)
	if err != nil {
		return InflationPoint{}, err
	}
	objs := *base
	m, err := target.Bind(ctx, &objs, st.P)
	if err != nil {
		return InflationPoint{}, err
	}
	f, free := m.Frag(st)
	g := float64(m.GPUs())
	pt := InflationPoint{UnallocatedPct: 100 * free / g, FragPct: 100 * f / g}
	if free > 0 {
		pt.FragOfFreePct = 100 * f / free
	}
	return pt, nil
}

// openbShare is the GPUs task t asks of the cluster once mapped to MIG:
// num_gpu whole GPUs, or the memory-slice share of its profile (a task of
// gpu_milli 470 takes a 4g profile, half the GPU's memory slices). At 100 %
// the arrived tasks could fill the cluster exactly, so what is left
// unallocated then is lost to fragmentation and to tasks turned away.
func openbShare(t *openbTask, gm *gen.GPUModel) float64 {
	if t.numGPU == 1 {
		if pr, ok := openbProfile(gm, t.milli); ok {
			return float64(pr.Slices) / 8
		}
	}
	return float64(t.numGPU)
}
