package bench

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/drasat/drasat/frag"
)

// The paper's policies on a plain-Go cluster state, one arrival at a
// time, as its simulator (a kube-scheduler with one score plugin) decides:
// filter the nodes that fit (CPU, memory, and for a GPU task GPUs of an
// accepted model with enough milli-GPU left), score them with the policy's
// integer score, take the highest with ties broken uniformly at random
// (the scheduler's selectHost), then pick the GPUs on the node (the
// policy's GPU selection). The facts below come from reading the
// simulator's plugins; the code is ours.

// Constants of the simulator's scores: the largest node it normalises by
// (128 CPUs, 8 GPUs) and the scheduler's score range.
const (
	fpMaxSpecCPU = 128000
	fpMaxSpecGPU = 8000
	fpMaxScore   = 100
)

type fpNodeState struct {
	cpuLeft, memLeft int64
	gpuLeft          []int64 // milli-GPU left per GPU, by index
	// aff counts the GPU tasks on the node by kind (GPU Clustering):
	// 0 shared GPU, k k whole GPUs (k ≤ 8), 9 other.
	aff [10]int32
	ver uint32 // bumped on every change: invalidates the caches below
	// FGD: the node's fragmentation and the score per task shape, valid
	// while their ver equals the node's.
	fragVer uint32
	frag    float64
	cache   []fpCached
}

type fpCached struct {
	ver   uint32
	score int64
	gpu   int
}

// fpTypical is one shape of FGD's target workload with its frequency.
type fpTypical struct {
	cpu, milli int64
	num        int
	specs      []string
	freq       float64
}

// fpPlacement is one arrival's outcome: node -1 when turned away.
type fpPlacement struct {
	task *fpTask
	node int
	gpus []int
}

type fpSim struct {
	nodes     []fpNode
	st        []fpNodeState
	list      *fpList
	policy    string
	rng       *rand.Rand
	capMilli  int64
	usedMilli int64
	typical   []fpTypical
	// tie ranks the nodes for equal scores, lowest first: by name unless
	// the arrival stream says otherwise (fpArrivalsSimulator).
	tie    []int
	placed []fpPlacement
	gpuBuf []int64
	// freshWindows: runDrasat makes every window's objects and model
	// anew, without keeping them (the reference the kept ones are tested
	// against).
	freshWindows bool
	// noScarcity: runDrasat's look-ahead weighs FGD's measure alone
	// (FGDPaperConfig.DrasatNoScarcity).
	noScarcity bool
	// listWorkload: runDrasat's look-ahead knows the list's workload
	// before the first arrival (FPWorkloadList).
	listWorkload bool
	// workload: runDrasat's look-ahead workload, for tests.
	workload *frag.Workload
	// shapeBuilds: how often runDrasat's look-ahead workload built its
	// shapes (frag.Workload.ShapeBuilds), for tests.
	shapeBuilds int
}

func isFPPolicy(p string) bool {
	switch p {
	case FPDrasat, FPDrasatBinpack, FPFirstFit, FPUpstream:
		return true
	}
	for _, q := range FGDPaperPolicies {
		if p == q {
			return true
		}
	}
	return false
}

// newFPSim starts a curve on the empty cluster. tie ranks the nodes for
// ties (the arrival stream's node order); nil ranks them by name.
func newFPSim(nodes []fpNode, l *fpList, policy string, seed uint64, tie []int) *fpSim {
	s := &fpSim{nodes: nodes, list: l, policy: policy, st: make([]fpNodeState, len(nodes)),
		rng: rand.New(rand.NewPCG(seed, 0x6667642d74696573^uint64(len(policy))<<32^uint64(policy[0]))), tie: tie}
	if s.tie == nil {
		s.tie = make([]int, len(nodes))
		for rank, n := range fpNodesByName(nodes) {
			s.tie[n] = rank
		}
	}
	for i, n := range nodes {
		st := &s.st[i]
		st.cpuLeft, st.memLeft, st.ver = n.cpu, n.mem, 1
		st.gpuLeft = make([]int64, n.gpus)
		for g := range st.gpuLeft {
			st.gpuLeft[g] = 1000
		}
		if policy == FPFGD || policy == FPDrasat || policy == FPDrasatBinpack {
			st.cache = make([]fpCached, len(l.shapes))
		}
	}
	s.capMilli = fpCapMilli(nodes)
	if policy == FPFGD || policy == FPDrasat || policy == FPDrasatBinpack {
		s.typical = fpTargetWorkload(l, fpTargetPct)
	}
	return s
}

// fpCapMilli is the cluster's GPU capacity in milli-GPUs, what the
// arrivals are measured against.
func fpCapMilli(nodes []fpNode) int64 {
	var c int64
	for _, n := range nodes {
		c += int64(n.gpus) * 1000
	}
	return c
}

// fpTargetWorkload is FGD's target workload: the list's task shapes (CPU
// and GPU request and GPU model constraint; CPU-only tasks included),
// most frequent first (ties: the larger shape first), the top ones that
// together make up pct % of the tasks, frequencies renormalised to 1.
func fpTargetWorkload(l *fpList, pct float64) []fpTypical {
	counts := make([]float64, len(l.shapes))
	for i := range l.tasks {
		counts[l.tasks[i].shape]++
	}
	idx := make([]int, len(l.shapes))
	for i := range idx {
		idx[i] = i
	}
	less := func(a, b *fpTask) bool { // the shapes' order, smaller first
		if a.cpu != b.cpu {
			return a.cpu < b.cpu
		}
		if a.milli != b.milli {
			return a.milli < b.milli
		}
		if a.num != b.num {
			return a.num < b.num
		}
		return a.spec < b.spec
	}
	sort.Slice(idx, func(i, j int) bool {
		a, b := idx[i], idx[j]
		if counts[a] != counts[b] {
			return counts[a] > counts[b]
		}
		return less(&l.shapes[b], &l.shapes[a])
	})
	total := float64(len(l.tasks))
	var out []fpTypical
	cum := 0.0
	for _, i := range idx {
		if cum >= pct*total/100 {
			break
		}
		sh := &l.shapes[i]
		cum += counts[i]
		out = append(out, fpTypical{cpu: sh.cpu, milli: sh.milli, num: sh.num, specs: sh.specs, freq: counts[i]})
	}
	// The simulator's arithmetic, to the last bit: each count is first a
	// share of all tasks, then divided by the kept shapes' share. Scores
	// are integers cut from floats, so a rounding apart flips ties: with
	// count / kept, 4 of the 70 FGD curves of the paper's lists and seeds
	// left the published value (up to 0.16 points).
	for i := range out {
		out[i].freq = out[i].freq / total / (cum / total)
	}
	return out
}

// fits tells whether task t fits on node n now (the scheduler's
// NodeResourcesFit for CPU and memory, the GPU-share filter for GPUs).
func (s *fpSim) fits(n int, t *fpTask) bool {
	st := &s.st[n]
	if st.cpuLeft < t.cpu || st.memLeft < t.mem {
		return false
	}
	if t.num == 0 {
		return true
	}
	if !t.accepts(s.nodes[n].model) {
		return false
	}
	k := 0
	for _, v := range st.gpuLeft {
		if v >= t.milli {
			k++
		}
	}
	return k >= t.num
}

// turnedAway lists the arrivals s placed nowhere, with the demand arrived
// by then (c's curve).
func (s *fpSim) turnedAway(seed uint64, c *fpCurve) []FPTurnedAway {
	var out []FPTurnedAway
	for i, pl := range s.placed {
		if pl.node >= 0 {
			continue
		}
		t := pl.task
		out = append(out, FPTurnedAway{Seed: seed, Arrival: i, Task: t.name, ArrivedPct: 100 * float64(c.arrived[i]) / float64(s.capMilli),
			GPUs: t.num, MilliGPU: t.milli, CPUMilli: t.cpu, MemMiB: t.mem, Models: t.specs})
	}
	return out
}

// run places the arrivals one by one and records the curve.
func (s *fpSim) run(arrivals []*fpTask) *fpCurve {
	c := &fpCurve{capMilli: s.capMilli, arrived: make([]int64, 0, len(arrivals)), allocated: make([]int64, 0, len(arrivals))}
	var arrived int64
	for _, t := range arrivals {
		arrived += t.totalMilli()
		n, gpus := s.decide(t)
		s.placed = append(s.placed, fpPlacement{task: t, node: n, gpus: gpus})
		if n >= 0 {
			s.apply(n, t, gpus)
			c.placed++
		} else {
			c.failed++
			if t.num > 0 {
				c.failedGPU++
			}
		}
		c.arrived = append(c.arrived, arrived)
		c.allocated = append(c.allocated, s.usedMilli)
	}
	return c
}

func (s *fpSim) apply(n int, t *fpTask, gpus []int) {
	st := &s.st[n]
	st.cpuLeft -= t.cpu
	st.memLeft -= t.mem
	for _, g := range gpus {
		st.gpuLeft[g] -= t.milli
	}
	if t.num > 0 {
		st.aff[fpAffinity(t)]++
	}
	st.ver++
	s.usedMilli += t.totalMilli()
}

func fpAffinity(t *fpTask) int {
	switch {
	case t.share():
		return 0
	case t.num <= 8:
		return t.num
	}
	return 9
}

// decide returns the node and GPUs for t, or -1.
func (s *fpSim) decide(t *fpTask) (int, []int) {
	best, cnt, bn, bg := int64(math.MinInt64), 0, -1, -1 // cnt: Random's reservoir
	for n := range s.nodes {
		if !s.fits(n, t) {
			continue
		}
		var sc int64
		g := -1
		switch s.policy {
		case FPRandom: // one feasible node drawn uniformly: all equal here
		case FPDotProd:
			sc = s.dotProdScore(n, t)
		case FPClustering:
			sc = s.clusteringScore(n, t)
		case FPPacking:
			sc = s.packingScore(n, t)
		case FPBestFit:
			sc = s.bestFitScore(n, t)
		case FPFGD:
			sc, g = s.fgdScore(n, t)
		case FPUpstream:
			sc = s.fpSchedulerScore(n, t, false)
		}
		switch {
		case s.policy == FPRandom:
			cnt++
			if s.rng.IntN(cnt) == 0 {
				bn, bg = n, g
			}
		case s.policy == FPUpstream: // the scheduler's ties: at random
			switch {
			case sc > best:
				best, bn, cnt = sc, n, 1
			case sc == best:
				cnt++
				if s.rng.IntN(cnt) == 0 {
					bn = n
				}
			}
		case sc > best || sc == best && s.tie[n] < s.tie[bn]:
			best, bn, bg = sc, n, g
		}
	}
	if bn < 0 {
		return -1, nil
	}
	return bn, s.pickGPUs(bn, t, bg)
}

// pickGPUs is the policy's GPU selection on the chosen node: whole GPUs
// are the first fully free ones by index; a shared GPU is FGD's own
// choice, a random fitting one under Random, else the best fit (least
// left that fits, first by index).
func (s *fpSim) pickGPUs(n int, t *fpTask, fgdGPU int) []int {
	if t.num == 0 {
		return nil
	}
	left := s.st[n].gpuLeft
	if !t.share() {
		var out []int
		for g, v := range left {
			if len(out) < t.num && v == 1000 {
				out = append(out, g)
			}
		}
		return out
	}
	switch s.policy {
	case FPFGD:
		return []int{fgdGPU}
	case FPRandom:
		pick, k := -1, 0
		for g, v := range left {
			if v >= t.milli {
				k++
				if s.rng.IntN(k) == 0 {
					pick = g
				}
			}
		}
		return []int{pick}
	}
	pick := -1
	for g, v := range left {
		if v < t.milli {
			continue
		}
		if s.policy == FPFirstFit || s.policy == FPUpstream {
			return []int{g} // first fit, in slice order
		}
		if pick < 0 || v < left[pick] {
			pick = g
		}
	}
	return []int{pick}
}

func totalLeft(left []int64) int64 {
	var t int64
	for _, v := range left {
		t += v
	}
	return t
}

// bestFitScore: 100 × (1 − Σ_r w_r (free_r − req_r) / maxSpec_r) over CPU
// and GPU with weights ½, truncated (lower leftover scores higher).
func (s *fpSim) bestFitScore(n int, t *fpTask) int64 {
	st := &s.st[n]
	v := float64(st.cpuLeft-t.cpu)/fpMaxSpecCPU*0.5 + float64(totalLeft(st.gpuLeft)-t.totalMilli())/fpMaxSpecGPU*0.5
	return int64((1 - v) * fpMaxScore)
}

// dotProdScore (Tetris' alignment, the simulator's "merge" dimensions and
// "max" normalisation): 100 × (1 − ½ (cpuLeft·cpu + gpuLeft·gpu)) with
// every quantity divided by the largest node's, truncated: the node whose
// free resources align least with the request scores highest.
func (s *fpSim) dotProdScore(n int, t *fpTask) int64 {
	st := &s.st[n]
	dot := float64(st.cpuLeft)/fpMaxSpecCPU*float64(t.cpu)/fpMaxSpecCPU +
		float64(totalLeft(st.gpuLeft))/fpMaxSpecGPU*float64(t.totalMilli())/fpMaxSpecGPU
	return int64(fpMaxScore * (1 - dot/2))
}

// clusteringScore (GPU Clustering): a GPU task prefers nodes that host
// only its kind of task (shared GPU, or k whole GPUs), then nodes hosting
// its kind among others, then idle nodes, then nodes of other kinds; within
// a band, fuller nodes. CPU-only tasks score 0 everywhere.
func (s *fpSim) clusteringScore(n int, t *fpTask) int64 {
	if t.num == 0 {
		return 0
	}
	st := &s.st[n]
	kinds := 0
	for _, c := range st.aff {
		if c > 0 {
			kinds++
		}
	}
	base := int64(fpMaxScore/4) * (fpMaxSpecGPU - totalLeft(st.gpuLeft)) / fpMaxSpecGPU
	switch {
	case st.aff[fpAffinity(t)] > 0 && kinds == 1:
		return base + fpMaxScore*3/4
	case st.aff[fpAffinity(t)] > 0:
		return base + fpMaxScore*2/4
	case kinds == 0:
		return base + fpMaxScore/4
	}
	return base
}

// packingScore (GPU Packing): best, GPUs already shared (fewer milli left
// on them, higher); then free GPUs of a node already in use (fewer, higher);
// last an idle node (fewer GPUs, higher). CPU-only tasks score 0.
func (s *fpSim) packingScore(n int, t *fpTask) int64 {
	if t.milli <= 0 {
		return 0
	}
	left := s.st[n].gpuLeft
	free := 0
	for _, v := range left {
		if v == 1000 {
			free++
		}
	}
	if free == len(left) {
		return max(int64(fpMaxScore/3-free), int64(free))
	}
	idx := make([]int, len(left))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return left[idx[i]] < left[idx[j]] })
	need, freeUsed := t.num, 0
	var used []int
	for _, i := range idx {
		if need == 0 {
			break
		}
		if t.milli <= left[i] {
			need--
			used = append(used, i)
			if left[i] == 1000 {
				freeUsed++
			}
		}
	}
	if freeUsed > 0 {
		return max(int64(fpMaxScore/2-freeUsed), fpMaxScore/3)
	}
	var ratio int64
	for _, g := range used {
		ratio += left[g] * 100 / 1000
	}
	return max(fpMaxScore-ratio/10, fpMaxScore/2)
}

// nodeFrag is FGD's fragmentation of a node in milli-GPU (§4 of the paper,
// the simulator's "frag amount except Q3"): for each target shape m,
// weighted by its frequency, the GPU capacity on the node that m cannot
// use: all of it when m fits nowhere on the node (too few GPUs with
// enough left, too little CPU, another GPU model, or a CPU-only shape),
// else what is left on the GPUs with less left than m asks of one.
//
// The sum is taken as the simulator takes it: per kind of fragment (lack
// of both, of GPU, of CPU, CPU-only shapes that fit or not, no access), in
// the shapes' order, then over the kinds in that order. Scores are
// integers cut from floats of differences, so another order rounds
// differently and flips ties now and then: summed in one running sum, 6
// of the 70 FGD curves of the paper's lists and seeds left the published
// value (up to 0.15 points).
func (s *fpSim) nodeFrag(n int, cpuLeft int64, left []int64) float64 {
	const (
		lackBoth = iota
		lackGPU
		lackCPU
		cpuOnlyFits
		cpuOnlyLacks
		noAccess
		kinds
	)
	var by [kinds]float64
	model := s.nodes[n].model
	total := float64(totalLeft(left))
	for i := range s.typical {
		p := &s.typical[i]
		cpuFits := cpuLeft >= p.cpu
		switch {
		case p.milli == 0 && cpuFits:
			by[cpuOnlyFits] += p.freq * total
			continue
		case p.milli == 0:
			by[cpuOnlyLacks] += p.freq * total
			continue
		case !fpAccepts(p.specs, model):
			by[noAccess] += p.freq * total
			continue
		}
		k := 0
		var small int64
		for _, v := range left {
			if v >= p.milli {
				k++
			} else {
				small += v
			}
		}
		switch {
		case k >= p.num && cpuFits: // the rest of the GPUs serve m: not fragment
			by[lackGPU] += p.freq * float64(small)
		case k >= p.num:
			by[lackCPU] += p.freq * total
		case cpuFits:
			by[lackGPU] += p.freq * total
		default:
			by[lackBoth] += p.freq * total
		}
	}
	f := 0.0
	for _, v := range by {
		f += v
	}
	return f
}

func fpAccepts(specs []string, model string) bool {
	if len(specs) == 0 {
		return true
	}
	for _, s := range specs {
		if s == model {
			return true
		}
	}
	return false
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// fgdScore: the node (and, for a shared GPU, the GPU) where the node's
// fragmentation grows least: 100 × sigmoid((F_before − F_after) / 1000),
// truncated; a shared GPU is the first GPU with the highest such score,
// whole GPUs go to the fully free GPUs with the lowest indices.
func (s *fpSim) fgdScore(n int, t *fpTask) (int64, int) {
	st := &s.st[n]
	c := &st.cache[t.shape]
	if c.ver == st.ver {
		return c.score, c.gpu
	}
	if st.fragVer != st.ver {
		st.frag, st.fragVer = s.nodeFrag(n, st.cpuLeft, st.gpuLeft), st.ver
	}
	before := st.frag
	best, bg := int64(0), -1
	if t.share() {
		for g, v := range st.gpuLeft {
			if v < t.milli {
				continue
			}
			st.gpuLeft[g] -= t.milli
			after := s.nodeFrag(n, st.cpuLeft-t.cpu, st.gpuLeft)
			st.gpuLeft[g] += t.milli
			sc := int64(sigmoid((before-after)/1000) * fpMaxScore)
			if bg < 0 || sc > best {
				best, bg = sc, g
			}
		}
	} else {
		s.gpuBuf = append(s.gpuBuf[:0], st.gpuLeft...)
		need := t.num
		for g, v := range s.gpuBuf {
			if need > 0 && v == 1000 && t.milli == 1000 {
				s.gpuBuf[g] = 0
				need--
			}
		}
		after := s.nodeFrag(n, st.cpuLeft-t.cpu, s.gpuBuf)
		best = int64(sigmoid((before-after)/1000) * fpMaxScore)
	}
	*c = fpCached{ver: st.ver, score: best, gpu: bg}
	return best, bg
}
