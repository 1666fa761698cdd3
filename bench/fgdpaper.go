package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	randv1 "math/rand"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The fgd-paper scenario is the experiment of the FGD paper (Weng et al.,
// "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
// Fragmentation Gradient Descent", USENIX ATC'23, §6) on the Alibaba
// trace's own cluster: 1,213 nodes with their CPU, memory and GPUs of
// their model, every task with its CPU, memory and GPU request, CPU-only
// tasks included. Its protocol (the paper's simulator, "workload
// tuning"): the pod list is shuffled, then tasks drawn from it with
// replacement are appended until the GPUs requested reach 130 % of the
// cluster's; they arrive one at a time, never leave, and each is placed
// (or turned away) on arrival. The measure is the share of the cluster's
// GPUs left unallocated against the arrived workload.
//
// The baselines run on a plain-Go cluster state (fpState), incremental
// per arrival; fgdpaper_dra.go states the same cluster in DRA terms (a
// shared GPU is a device with consumable milli-GPU capacity) and the
// tests check the fast path against drasat's engine and the independent
// checker.

// FGDPaperConfig configures the fgd-paper scenario.
type FGDPaperConfig struct {
	// Dir holds the trace (OpenBDir); Lists are pod list names ("default"
	// for openb_pod_list_default.csv); none: every list in Dir.
	Dir   string
	Lists []string
	// Policies to run (FGDPaperDefaultPolicies when empty).
	Policies []string
	// Seeds: seeds Seed, Seed+1, ... Seed+Seeds-1.
	Seed  uint64
	Seeds int
	// Ratio is the GPU demand that arrives, in multiples of the cluster's
	// GPUs (FGDPaperRatio when 0).
	Ratio float64
	// Nodes, when > 0, samples that many nodes of the trace (with Seed);
	// the arrivals follow their GPUs (130 % of theirs), the task list is
	// the same.
	Nodes int
	// Verify checks the final state of every policy's first seed with the
	// independent checker (check.CheckAll) in DRA terms.
	Verify bool
	// Window and Timeout: the drasat policy decides this many GPU arrivals
	// together (DefaultFPDrasatWindow when 0), within Timeout each
	// (10 s when 0).
	Window  int
	Timeout time.Duration
	// DrasatCPU: who places the CPU-only tasks in the drasat policy, one
	// of FPCPUPlacers ("": FPCPUDrasat, as the controller does with its
	// default --place-pods-without-claims).
	DrasatCPU string
	// Workers: this many curves (each a list, policy and seed) run at
	// once (1 when 0); the report does not depend on it.
	Workers int
	// DrasatGPUShapes: the drasat policy's look-ahead learns task shapes
	// by their claims alone, without the pods' CPU (a parameter the
	// cross-validation in docs/bench.md chooses).
	DrasatGPUShapes bool
	// DrasatNoScarcity: the drasat policy's look-ahead weighs FGD's
	// measure alone, without the cost of taking GPUs that tasks held to
	// their model will want (frag.Measure.NoScarcity, an ablation).
	DrasatNoScarcity bool
	// DrasatWorkload: what the drasat policies' look-ahead learns the
	// workload from, one of FPWorkloads ("": FPWorkloadList).
	DrasatWorkload string
	// TurnedAway: every result lists the tasks its policy turned away
	// (FPResult.TurnedAway), for finding out which tasks a policy loses
	// and when.
	TurnedAway bool
	// Arrivals: which random stream orders and draws the tasks, one of
	// FPArrivalStreams ("": FPArrivalsSimulator).
	Arrivals string
	// Progress, when set, is told how far the run has come.
	Progress func(done, total int, label string) `json:"-"`
}

// What the drasat policies' look-ahead learns the workload from.
// FPWorkloadList (the default): every task of the pod list, known before
// the first arrives, as FGD's target workload is (a controller that has
// seen its cluster's workload before); the arrivals, drawn from the
// list, add nothing to it. FPWorkloadArrived: the tasks arrived so far,
// learnt as they come (a controller started on an empty cluster, with
// no history). Chosen by cross-validation (docs/bench.md).
const (
	FPWorkloadArrived = "arrived"
	FPWorkloadList    = "list"
)

// FPWorkloads lists the values of FGDPaperConfig.DrasatWorkload.
var FPWorkloads = []string{FPWorkloadArrived, FPWorkloadList}

// The arrival streams. Both follow the paper's protocol; they differ in
// the random numbers. FPArrivalsSimulator draws them as the paper's
// simulator does (Go's math/rand seeded with the seed, one draw spent
// before the shuffle, tasks appended while one GPU's share of the next
// still fits, then its random node order for ties), so that seed 42
// arrives in the order the paper's seed 42 did, ties fall the same way,
// and a curve can be compared with the published one seed by seed.
// FPArrivalsPCG is drasat's own stream (math/rand/v2 PCG), the one the
// tables of earlier releases were measured with.
const (
	FPArrivalsSimulator = "simulator"
	FPArrivalsPCG       = "pcg"
)

// FPArrivalStreams lists the arrival streams.
var FPArrivalStreams = []string{FPArrivalsSimulator, FPArrivalsPCG}

// FGDPaperRatio is the paper's arrived GPU demand: 130 % of the cluster's.
const FGDPaperRatio = 1.3

// The paper's policies, as its simulator implements them.
const (
	FPRandom     = "random"
	FPDotProd    = "dotprod"
	FPClustering = "gpu-clustering"
	FPPacking    = "gpu-packing"
	FPBestFit    = "bestfit"
	FPFGD        = "fgd"
	// FPDrasat is drasat's online policy (fgdpaper_drasat.go).
	FPDrasat = "drasat"
	// FPDrasatBinpack is drasat without the frag look-ahead: max-claims,
	// then binpack (the bench's drasat-binpack).
	FPDrasatBinpack = "drasat-binpack"
)

// FGDPaperPolicies lists the fgd-paper policies in the paper's order.
var FGDPaperPolicies = []string{FPRandom, FPDotProd, FPClustering, FPPacking, FPBestFit, FPFGD}

// FGDPaperDefaultPolicies are what the scenario runs unless told: the
// paper's baselines, DRA's own allocators and drasat's two policies, so
// that the table answers whether the controller's default (FPDrasat)
// beats each of them. The drasat curves take minutes each on the whole
// cluster, the others seconds.
var FGDPaperDefaultPolicies = append(slices.Clone(FGDPaperPolicies), FPFirstFit, FPUpstream, FPDrasatBinpack, FPDrasat)

// The baselines of a cluster without drasat or FGD, beside the paper's
// (run with -p): what DRA does out of the box.
const (
	// FPFirstFit: the first node by name that fits, and on it the first
	// GPUs by index that fit (whole GPUs: the first fully free ones).
	FPFirstFit = "first-fit"
	// FPUpstream: the kube-scheduler's default profile
	// (NodeResourcesFit's LeastAllocated plus BalancedAllocation, ties at
	// random; no score sees DRA devices) for every task, and the
	// upstream structured allocator's first fit for its GPUs (devices in
	// slice order, the first with enough capacity left).
	FPUpstream = "upstream"
)

// FGDPaperLevels are the arrived-workload levels (% of the cluster's GPUs)
// the table reports.
var FGDPaperLevels = []int{80, 90, 100, 110, 120, 130}

// fpNode is one trace node: CPU in milli, memory in MiB, GPUs of a model.
type fpNode struct {
	name, model string
	cpu, mem    int64
	gpus        int
}

// fpTask is one task: CPU in milli, memory in MiB, num GPUs of milli
// each (milli 1000: whole GPUs; 0 and num 0: CPU only), spec the GPU
// models it accepts ("" any).
type fpTask struct {
	name     string
	cpu, mem int64
	num      int
	milli    int64
	spec     string
	specs    []string
	shape    int // index into fpList.shapes (CPU, GPU request and spec)
}

func (t *fpTask) totalMilli() int64 { return int64(t.num) * t.milli }
func (t *fpTask) share() bool       { return t.num == 1 && t.milli < 1000 }

// accepts tells whether the task may run on a GPU of model m.
func (t *fpTask) accepts(m string) bool {
	if len(t.specs) == 0 {
		return true
	}
	for _, s := range t.specs {
		if s == m {
			return true
		}
	}
	return false
}

// fpList is a pod list with its distinct task shapes.
type fpList struct {
	name   string
	tasks  []fpTask
	shapes []fpTask // representatives: cpu, num, milli, spec
}

// loadFPNodes reads openb_node_list_gpu_node.csv.
func loadFPNodes(dir string) ([]fpNode, error) {
	path := filepath.Join(dir, "openb_node_list_gpu_node.csv")
	rows, err := readCSV(path)
	if err != nil {
		return nil, err
	}
	var out []fpNode
	for i, r := range rows {
		var n fpNode
		n.name, n.model = strings.TrimSpace(r["sn"]), strings.TrimSpace(r["model"])
		if n.name == "" {
			return nil, fmt.Errorf("fgd-paper: %s: row %d: field sn is empty", path, i+2)
		}
		where := fmt.Sprintf("%s (node %s)", path, n.name)
		if n.cpu, err = atoi(where, "cpu_milli", r["cpu_milli"]); err != nil {
			return nil, err
		}
		if n.mem, err = atoi(where, "memory_mib", r["memory_mib"]); err != nil {
			return nil, err
		}
		g, err := atoi(where, "gpu", r["gpu"])
		if err != nil {
			return nil, err
		}
		if n.cpu < 0 || n.mem < 0 || g < 0 || g > 64 {
			return nil, fmt.Errorf("fgd-paper: %s: cpu_milli, memory_mib or gpu out of range", where)
		}
		n.gpus = int(g)
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("fgd-paper: %s: no nodes", path)
	}
	return out, nil
}

// FGDPaperLists names the pod lists in dir (openb_pod_list_NAME.csv), sorted.
func FGDPaperLists(dir string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(dir, "openb_pod_list_*.csv"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range m {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "openb_pod_list_"), ".csv"))
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("fgd-paper: no pod list (openb_pod_list_*.csv) in %s", dir)
	}
	return out, nil
}

// loadFPList reads openb_pod_list_NAME.csv. As the paper's simulator
// reads it: gpu_milli above 1000 counts as 1000, a task with num_gpu 0
// (or gpu_milli 0) asks for CPU and memory only, gpu_spec lists accepted
// models separated by '|' (the column may be missing).
func loadFPList(dir, name string) (*fpList, error) {
	path := filepath.Join(dir, "openb_pod_list_"+name+".csv")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("fgd-paper: pod list %q: %w", name, err)
	}
	rows, err := readCSV(path)
	if err != nil {
		return nil, err
	}
	l := &fpList{name: name}
	shapes := map[string]int{}
	for i, r := range rows {
		var t fpTask
		t.name = strings.TrimSpace(r["name"])
		if t.name == "" {
			return nil, fmt.Errorf("fgd-paper: %s: row %d: field name is empty", path, i+2)
		}
		where := fmt.Sprintf("%s (task %s)", path, t.name)
		if t.cpu, err = atoi(where, "cpu_milli", r["cpu_milli"]); err != nil {
			return nil, err
		}
		if t.mem, err = atoi(where, "memory_mib", r["memory_mib"]); err != nil {
			return nil, err
		}
		num, err := atoi(where, "num_gpu", r["num_gpu"])
		if err != nil {
			return nil, err
		}
		if t.milli, err = atoi(where, "gpu_milli", r["gpu_milli"]); err != nil {
			return nil, err
		}
		if t.cpu < 0 || t.mem < 0 || num < 0 || num > 64 || t.milli < 0 {
			return nil, fmt.Errorf("fgd-paper: %s: cpu_milli, memory_mib, num_gpu or gpu_milli out of range", where)
		}
		t.num = int(num)
		if t.milli > 1000 {
			t.milli = 1000
		}
		if t.num == 0 || t.milli == 0 {
			t.num, t.milli = 0, 0
		}
		if t.num > 1 && t.milli < 1000 {
			return nil, fmt.Errorf("fgd-paper: %s: num_gpu %d with gpu_milli %d: a fraction of a GPU is asked of one GPU only", where, t.num, t.milli)
		}
		for _, s := range strings.Split(r["gpu_spec"], "|") {
			if s = strings.TrimSpace(s); s != "" && t.num > 0 {
				t.specs = append(t.specs, s)
			}
		}
		t.spec = strings.Join(t.specs, "|")
		key := fmt.Sprintf("%d/%d/%d/%s", t.cpu, t.num, t.milli, t.spec)
		sh, ok := shapes[key]
		if !ok {
			sh = len(l.shapes)
			shapes[key] = sh
			rep := t
			rep.name = ""
			rep.shape = sh
			l.shapes = append(l.shapes, rep)
		}
		t.shape = sh
		l.tasks = append(l.tasks, t)
	}
	if len(l.tasks) == 0 {
		return nil, fmt.Errorf("fgd-paper: %s: no tasks", path)
	}
	return l, nil
}

// fpArrivalsBy is the arrival sequence of the named stream.
// With the simulator's stream it also returns the nodes' tie order (see
// fpArrivalsSimulator); nil: ties go to the lowest node name.
func fpArrivalsBy(stream string, l *fpList, nodes []fpNode, capMilli int64, ratio float64, seed uint64) ([]*fpTask, []int) {
	if stream == FPArrivalsPCG {
		return fpArrivals(l, capMilli, ratio, seed), nil
	}
	return fpArrivalsSimulator(l, nodes, capMilli, ratio, seed)
}

// fpSimulatorStartDraws is how many numbers of the generator the paper's
// simulator spends between tuning the workload and numbering the nodes:
// its scheduler starts in between, and something in the start draws from
// the same global generator (its informers' jittered waits, as far as we
// can tell). Measured, not read: with 10 the prefixes agree with the simulator's own log for every
// node it names (default list, seed 42, 485 nodes), and the five
// deterministic baselines then give the paper's published results on all
// its lists and seeds (docs/bench.md); with 9 or 11 they do not.
const fpSimulatorStartDraws = 10

// fpArrivalsSimulator is the paper's simulator's arrival sequence for one
// seed, random number by random number: it seeds Go's math/rand (the
// Go 1 generator, whose sequence for a seed is fixed) with the seed,
// spends one Int (the simulator prints it), shuffles the tasks sorted by
// name, then tunes the demand to ratio × the cluster's GPUs: down by
// removing tasks at random, or up by appending tasks drawn from the list
// sorted by name until one whose milli-GPU per GPU would overshoot (the
// simulator compares one GPU's share, not the task's total: a multi-GPU
// task can take the demand past the target by its other GPUs).
//
// The next numbers of the same stream order the nodes for ties: the
// simulator sorts the nodes by name and prefixes the i-th with the i-th
// number of a random permutation ("0882-openb-node-0071"), so the lowest
// name its scheduler prefers among equal scores is the lowest prefix.
// The second result, tie[n], is node n's prefix.
func fpArrivalsSimulator(l *fpList, nodes []fpNode, capMilli int64, ratio float64, seed uint64) ([]*fpTask, []int) {
	byName := fpTasksByName(l)
	rng := randv1.New(randv1.NewSource(int64(seed)))
	rng.Int()
	out := append([]*fpTask(nil), byName...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	demand := fpDemand(out)
	target := ratio * float64(capMilli)
	switch {
	case float64(demand) > target:
		for float64(demand) > target && len(out) > 0 {
			i := rng.Intn(len(out))
			demand -= out[i].totalMilli()
			out = append(out[:i], out[i+1:]...)
		}
	case float64(demand) < target:
		for {
			t := byName[rng.Intn(len(byName))]
			if float64(demand+t.milli) > target {
				break
			}
			demand += t.totalMilli()
			out = append(out, t)
		}
	}
	return out, fpSimulatorNodeOrder(rng, nodes)
}

// fpSimulatorNodeOrder is the simulator's tie order of the nodes, drawn
// after the tuning: the draws its scheduler's start spends, then the
// permutation whose i-th number prefixes the i-th node by name.
func fpSimulatorNodeOrder(rng *randv1.Rand, nodes []fpNode) []int {
	for range fpSimulatorStartDraws {
		rng.Int63()
	}
	byName := fpNodesByName(nodes)
	tie := make([]int, len(nodes))
	for i, prefix := range rng.Perm(len(nodes)) {
		tie[byName[i]] = prefix
	}
	return tie
}

// fpTasksByName is the list's tasks sorted by name, the order both
// streams shuffle and draw from.
func fpTasksByName(l *fpList) []*fpTask {
	byName := make([]*fpTask, len(l.tasks))
	for i := range l.tasks {
		byName[i] = &l.tasks[i]
	}
	sort.Slice(byName, func(i, j int) bool { return byName[i].name < byName[j].name })
	return byName
}

// fpDemand is the tasks' GPU demand in milli.
func fpDemand(tasks []*fpTask) int64 {
	var d int64
	for _, t := range tasks {
		d += t.totalMilli()
	}
	return d
}

// fpNodesByName is the nodes' indexes sorted by name.
func fpNodesByName(nodes []fpNode) []int {
	byName := make([]int, len(nodes))
	for i := range byName {
		byName[i] = i
	}
	sort.Slice(byName, func(i, j int) bool { return nodes[byName[i]].name < nodes[byName[j]].name })
	return byName
}

// fpArrivals is drasat's own arrival sequence for one seed: the list
// sorted by name and shuffled, then tasks drawn with replacement from
// the list (sorted by name) appended while the GPU demand stays within
// ratio × the cluster's GPUs. Every policy of a seed sees the same
// sequence.
func fpArrivals(l *fpList, capMilli int64, ratio float64, seed uint64) []*fpTask {
	byName := fpTasksByName(l)
	rng := rand.New(rand.NewPCG(seed, 0x6667642d6f726472))
	out := append([]*fpTask(nil), byName...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	demand := fpDemand(out)
	target := ratio * float64(capMilli)
	if float64(demand) > target {
		// More demand than the target: tasks are dropped at random until
		// it fits (the simulator's tune-down).
		for float64(demand) > target && len(out) > 0 {
			i := rng.IntN(len(out))
			demand -= out[i].totalMilli()
			out = append(out[:i], out[i+1:]...)
		}
		return out
	}
	for {
		t := byName[rng.IntN(len(byName))]
		if float64(demand+t.totalMilli()) > target {
			break
		}
		demand += t.totalMilli()
		out = append(out, t)
	}
	return out
}

// fpCurve is one run: after every arrival, the GPU demand arrived and the
// GPUs allocated, in milli.
type fpCurve struct {
	capMilli  int64
	arrived   []int64
	allocated []int64
	placed    int
	failed    int
	failedGPU int // failed tasks that asked for GPUs
}

// unallocatedAt is the paper's measure at arrived level pct (% of the
// cluster's GPUs): 100 minus the mean allocated share (%) over the
// arrivals whose arrived share rounds to pct; when none does, over those
// within one point (the paper's analysis script). NaN when none is near.
func (c *fpCurve) unallocatedAt(pct int) float64 {
	sum, n := 0.0, 0
	for w := 0; w <= 1 && n == 0; w++ {
		for i := range c.arrived {
			a := math.Round(100 * float64(c.arrived[i]) / float64(c.capMilli))
			if a >= float64(pct-w) && a <= float64(pct+w) {
				sum += 100 * float64(c.allocated[i]) / float64(c.capMilli)
				n++
			}
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return 100 - sum/float64(n)
}

// FPPoint is one level of a curve over the seeds: median, min and max of
// the unallocated GPU share (%).
type FPPoint struct {
	Arrived int     `json:"arrived"`
	Median  float64 `json:"median"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
}

// FPResult is one policy on one list over the seeds.
type FPResult struct {
	List   string `json:"list"`
	Policy string `json:"policy"`
	Seeds  []uint64
	// Curve holds every level 0..130 (the figure); the table reads
	// FGDPaperLevels of it.
	Curve []FPPoint `json:"curve"`
	// PerSeed is the unallocated share at 100 % for each seed.
	PerSeed []FPValue `json:"perSeedAt100"`
	// PerSeedAtLevels is the unallocated share at each of FGDPaperLevels
	// (outer) for each seed (inner; NaN where a seed never reached the
	// level): the seeds share their arrivals across policies, so two
	// policies compare seed by seed.
	PerSeedAtLevels [][]FPValue `json:"perSeedAtLevels"`
	// Arrivals, Placed and Failed (turned away; FailedGPU of them GPU
	// tasks) are summed over the seeds.
	Arrivals, Placed, Failed, FailedGPU int
	// WallS is the wall time per curve (mean over the seeds), seconds.
	WallS float64 `json:"wallSecondsPerCurve"`
	// Verified: the first seed's final state passed check.CheckAll.
	Verified bool `json:"verified,omitempty"`
	// TurnedAway lists the tasks turned away, seed by seed in arrival
	// order (only with FGDPaperConfig.TurnedAway).
	TurnedAway []FPTurnedAway `json:"turnedAway,omitempty"`
}

// FPValue is an unallocated share, in %; NaN where a seed's arrivals
// never reached the level (on a few nodes one task can be several % of
// the GPUs), which JSON has no number for: it is null there.
type FPValue float64

// MarshalJSON writes NaN as null.
func (v FPValue) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(v)) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(v))
}

// UnmarshalJSON reads null as NaN.
func (v *FPValue) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = FPValue(math.NaN())
		return nil
	}
	var f float64
	err := json.Unmarshal(b, &f)
	*v = FPValue(f)
	return err
}

// FPTurnedAway is one task a policy turned away.
type FPTurnedAway struct {
	Seed uint64 `json:"seed"`
	// Arrival is the task's place in the arrivals (0 first), Task its pod
	// in the list, ArrivedPct the GPU demand arrived with it, in % of the
	// cluster's GPUs.
	Arrival    int     `json:"arrival"`
	Task       string  `json:"task"`
	ArrivedPct float64 `json:"arrivedPct"`
	// What it asked for: GPUs of MilliGPU each (0: CPU only), CPU in
	// milli, memory in MiB, and the GPU models it accepts (none: any).
	GPUs     int      `json:"gpus"`
	MilliGPU int64    `json:"milliGPU"`
	CPUMilli int64    `json:"cpuMilli"`
	MemMiB   int64    `json:"memMiB"`
	Models   []string `json:"models,omitempty"`
}

// At returns the point at level pct.
func (r *FPResult) At(pct int) FPPoint {
	for _, p := range r.Curve {
		if p.Arrived == pct {
			return p
		}
	}
	return FPPoint{Arrived: pct, Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
}

// FPReport is the fgd-paper outcome.
type FPReport struct {
	Nodes, GPUs int
	Ratio       float64
	Seeds       []uint64
	Results     []*FPResult
	Machine     Machine
	MaxRSSMiB   float64
	// Interrupted: the run ended early (its context); Results holds the
	// lists and policies whose every seed finished.
	Interrupted bool `json:"interrupted,omitempty"`
}

// RunFGDPaper runs every policy on every list for every seed. When ctx
// ends first, it returns the report of what finished (Interrupted) with
// the error: a run of hours stopped keeps its finished curves.
func RunFGDPaper(ctx context.Context, cfg FGDPaperConfig) (*FPReport, error) {
	dir, err := OpenBDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	nodes, err := loadFPNodes(dir)
	if err != nil {
		return nil, err
	}
	if cfg.Nodes > 0 && cfg.Nodes < len(nodes) {
		rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e6f646573))
		rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		nodes = nodes[:cfg.Nodes]
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	}
	lists := cfg.Lists
	if len(lists) == 0 {
		if lists, err = FGDPaperLists(dir); err != nil {
			return nil, err
		}
	}
	policies := cfg.Policies
	if len(policies) == 0 {
		policies = FGDPaperDefaultPolicies
	}
	if cfg.Arrivals != "" && !slices.Contains(FPArrivalStreams, cfg.Arrivals) {
		return nil, fmt.Errorf("fgd-paper: arrivals %q: want one of %s", cfg.Arrivals, strings.Join(FPArrivalStreams, ", "))
	}
	if cfg.DrasatWorkload != "" && !slices.Contains(FPWorkloads, cfg.DrasatWorkload) {
		return nil, fmt.Errorf("fgd-paper: drasat workload %q: want one of %s", cfg.DrasatWorkload, strings.Join(FPWorkloads, ", "))
	}
	for _, p := range policies {
		if !isFPPolicy(p) {
			return nil, fmt.Errorf("fgd-paper: policy %q: want one of %s, %s, %s, %s or %s", p, strings.Join(FGDPaperPolicies, ", "), FPFirstFit, FPUpstream, FPDrasat, FPDrasatBinpack)
		}
	}
	seeds := cfg.Seeds
	if seeds <= 0 {
		seeds = 1
	}
	ratio := cfg.Ratio
	if ratio <= 0 {
		ratio = FGDPaperRatio
	}
	rep := &FPReport{Nodes: len(nodes), Ratio: ratio,
		Machine: Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}}
	for _, n := range nodes {
		rep.GPUs += n.gpus
	}
	for s := 0; s < seeds; s++ {
		rep.Seeds = append(rep.Seeds, cfg.Seed+uint64(s))
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = 1
	}
	total := len(lists) * len(policies) * seeds
	prog := &fpProgress{report: cfg.Progress, total: total}
	// Every curve (list, policy, seed) is independent of the others: its
	// own arrivals, state and DRA objects; the lists and nodes are only
	// read. So they run on the workers and are gathered in order: the
	// report is the same for any Workers.
	loaded := make([]*fpList, len(lists))
	for i, name := range lists {
		if loaded[i], err = loadFPList(dir, name); err != nil {
			return nil, err
		}
	}
	perList := len(policies) * len(rep.Seeds)
	runs := make([]fpRun, len(lists)*perList)
	runErr := fpEachCurve(ctx, len(runs), workers, func(k int) error {
		l, pol, si := loaded[k/perList], policies[k%perList/len(rep.Seeds)], k%len(rep.Seeds)
		r, err := runFPCurve(ctx, cfg, prog, nodes, l, pol, rep.Seeds[si], ratio, si == 0 && cfg.Verify)
		runs[k] = r
		return err
	})
	if runErr != nil && ctx.Err() == nil {
		return nil, runErr
	}
	for li, name := range lists {
		for pi, pol := range policies {
			res := &FPResult{List: name, Policy: pol, Seeds: rep.Seeds}
			first := li*perList + pi*len(rep.Seeds)
			runs := runs[first : first+len(rep.Seeds)]
			if slices.ContainsFunc(runs, func(r fpRun) bool { return r.curve == nil }) {
				rep.Interrupted = true // a seed did not finish: no result
				continue
			}
			var curves []*fpCurve
			var wall time.Duration
			for _, r := range runs {
				c := r.curve
				wall += r.wall
				res.Verified = res.Verified || r.verified
				curves = append(curves, c)
				if cfg.TurnedAway {
					res.TurnedAway = append(res.TurnedAway, r.turnedAway...)
				}
				res.Arrivals += len(c.arrived)
				res.Placed += c.placed
				res.Failed += c.failed
				res.FailedGPU += c.failedGPU
			}
			res.WallS = wall.Seconds() / float64(len(curves))
			for pct := 0; pct <= int(math.Round(100*ratio)); pct++ {
				var vs []float64
				for _, c := range curves {
					if v := c.unallocatedAt(pct); !math.IsNaN(v) {
						vs = append(vs, v)
					}
				}
				if len(vs) == 0 {
					continue
				}
				res.Curve = append(res.Curve, FPPoint{Arrived: pct, Median: median(vs), Min: slicesMin(vs), Max: slicesMax(vs)})
			}
			for _, c := range curves {
				res.PerSeed = append(res.PerSeed, FPValue(c.unallocatedAt(100)))
			}
			for _, lv := range FGDPaperLevels {
				var at []FPValue
				for _, c := range curves {
					at = append(at, FPValue(c.unallocatedAt(lv)))
				}
				res.PerSeedAtLevels = append(res.PerSeedAtLevels, at)
			}
			rep.Results = append(rep.Results, res)
		}
	}
	rep.MaxRSSMiB = maxRSSMiB()
	if runErr != nil {
		// Interrupted: the results whose every seed finished, and why not
		// the rest.
		rep.Interrupted = true
		return rep, runErr
	}
	prog.finish()
	return rep, nil
}

// fpRun is one seed's curve of one policy on one list.
type fpRun struct {
	curve      *fpCurve
	wall       time.Duration
	verified   bool
	turnedAway []FPTurnedAway
}

// runFPCurve runs one policy's curve for one seed; verify checks its
// final state with the independent checker.
func runFPCurve(ctx context.Context, cfg FGDPaperConfig, prog *fpProgress, nodes []fpNode, l *fpList, pol string, seed uint64, ratio float64, verify bool) (fpRun, error) {
	label := fmt.Sprintf("%s %s seed %d", l.name, pol, seed)
	prog.step(label)
	start := time.Now()
	arr, tie := fpArrivalsBy(cfg.Arrivals, l, nodes, fpCapMilli(nodes), ratio, seed)
	sim := newFPSim(nodes, l, pol, seed, tie)
	sim.noScarcity = cfg.DrasatNoScarcity
	sim.listWorkload = cfg.DrasatWorkload != FPWorkloadArrived
	var c *fpCurve
	if pol == FPDrasat || pol == FPDrasatBinpack {
		timeout := cfg.Timeout
		if timeout <= 0 {
			timeout = 10 * time.Second
		}
		var step func(string)
		if cfg.Progress != nil {
			step = func(note string) { prog.step(label + ": " + note) }
		}
		var err error
		if c, err = sim.runDrasat(ctx, arr, cfg.Window, timeout, cfg.DrasatCPU, cfg.DrasatGPUShapes, pol == FPDrasatBinpack, step); err != nil {
			return fpRun{}, fmt.Errorf("fgd-paper: drasat on %s, seed %d: %w", l.name, seed, err)
		}
	} else {
		c = sim.run(arr)
	}
	r := fpRun{curve: c, wall: time.Since(start)}
	if verify {
		if err := sim.verify(ctx); err != nil {
			return fpRun{}, fmt.Errorf("fgd-paper: %s on %s, seed %d: %w", pol, l.name, seed, err)
		}
		r.verified = true
	}
	if cfg.TurnedAway {
		r.turnedAway = sim.turnedAway(seed, c)
	}
	prog.curveDone()
	return r, nil
}

// fpEachCurve calls run(0..n-1) on up to workers goroutines; the first
// error (in order) wins, and no run starts after the context ends or a
// run failed.
func fpEachCurve(ctx context.Context, n, workers int, run func(k int) error) error {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				if err := ctx.Err(); err != nil {
					errs[k] = err
				} else {
					errs[k] = run(k)
				}
				if errs[k] != nil {
					failed.Store(true)
				}
			}
		}()
	}
	for k := 0; k < n && !failed.Load(); k++ {
		next <- k
	}
	close(next)
	wg.Wait()
	return firstError(errs)
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// fpProgress reports the curves done to Progress, from any worker.
type fpProgress struct {
	mu     sync.Mutex
	report func(done, total int, label string)
	total  int
	done   int
}

func (p *fpProgress) step(label string) {
	if p.report == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.report(p.done, p.total, label)
}

func (p *fpProgress) curveDone() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
}

func (p *fpProgress) finish() {
	if p.report != nil {
		p.report(p.total, p.total, "done")
	}
}

func slicesMin(vs []float64) float64 {
	m := vs[0]
	for _, v := range vs {
		m = math.Min(m, v)
	}
	return m
}

func slicesMax(vs []float64) float64 {
	m := vs[0]
	for _, v := range vs {
		m = math.Max(m, v)
	}
	return m
}
