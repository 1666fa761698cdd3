package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/model"
)

// The paper's measure: 100 minus the mean allocated share over the
// arrivals whose arrived share rounds to the level, else within a point.
func TestFPUnallocatedAt(t *testing.T) {
	c := &fpCurve{capMilli: 10000,
		arrived:   []int64{4000, 7960, 8040, 8100, 9000, 12000},
		allocated: []int64{4000, 7900, 7900, 8000, 8500, 9000}}
	for _, tc := range []struct {
		pct  int
		want float64
	}{
		{40, 60},                // one arrival at 40 %: 40 % allocated
		{80, 100 - (79+79)/2.0}, // 79.6 and 80.4 round to 80
		{81, 100 - 80},          // 81.0
		{90, 100 - 85},          // 90.0
		{89, 100 - 85},          // none at 89: within a point, 90
		{120, 100 - 90},         // 120
		{60, math.NaN()},        // nothing near
		{82, 100 - 80},          // none at 82: within a point, 81.0 only
	} {
		got := c.unallocatedAt(tc.pct)
		if math.IsNaN(tc.want) != math.IsNaN(got) || !math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("unallocatedAt(%d) = %v, want %v", tc.pct, got, tc.want)
		}
	}
}

// fpTiny: node a (2 T4, 32 CPUs, GPU 1 has 500 milli left, a shared-GPU
// task on it) and node b (8 G2, 96 CPUs, idle); the target workload is
// half 0.5-GPU tasks of 4 CPUs, half whole-GPU tasks of 8 CPUs.
func fpTiny(policy string) (*fpSim, *fpTask) {
	l := &fpList{name: "tiny"}
	l.tasks = []fpTask{
		{name: "s", cpu: 4000, mem: 1024, num: 1, milli: 500, shape: 0},
		{name: "w", cpu: 8000, mem: 1024, num: 1, milli: 1000, shape: 1},
	}
	l.shapes = append([]fpTask(nil), l.tasks...)
	nodes := []fpNode{{name: "a", model: "T4", cpu: 32000, mem: 65536, gpus: 2}, {name: "b", model: "G2", cpu: 96000, mem: 65536, gpus: 8}}
	s := newFPSim(nodes, l, policy, 1, nil)
	s.apply(0, &fpTask{cpu: 0, num: 1, milli: 500}, []int{1})
	return s, &l.tasks[0]
}

// Every score on the tiny cluster, computed by hand from the simulator's
// formulas (see the policies' comments).
func TestFPScores(t *testing.T) {
	type score struct{ a, b int64 }
	for _, tc := range []struct {
		policy string
		want   score
	}{
		// (1 − ((32−4)/128·½ + (1.5−0.5)/8·½)) × 100 = 82.8; b: 17.2
		{FPBestFit, score{82, 17}},
		// 1 − ½(0.25·0.03125 + 0.1875·0.0625) = 0.990; b: 1 − ½(0.75·0.03125 + 1·0.0625) = 0.957
		{FPDotProd, score{99, 95}},
		// a: a shared GPU with 500 left: 100 − 50/10; b idle: 33 − 8
		{FPPacking, score{95, 25}},
		// a hosts only shared-GPU tasks: 25·6500/8000 + 75; b idle: 0 + 25
		{FPClustering, score{95, 25}},
	} {
		s, task := fpTiny(tc.policy)
		var got score
		switch tc.policy {
		case FPBestFit:
			got = score{s.bestFitScore(0, task), s.bestFitScore(1, task)}
		case FPDotProd:
			got = score{s.dotProdScore(0, task), s.dotProdScore(1, task)}
		case FPPacking:
			got = score{s.packingScore(0, task), s.packingScore(1, task)}
		case FPClustering:
			got = score{s.clusteringScore(0, task), s.clusteringScore(1, task)}
		}
		if got != tc.want {
			t.Errorf("%s: scores %+v, want %+v", tc.policy, got, tc.want)
		}
		if n, g := s.decide(task); n != 0 || !reflect.DeepEqual(g, []int{1}) {
			t.Errorf("%s: placed on node %d GPUs %v, want node a GPU 1 (the best fit)", tc.policy, n, g)
		}
	}
	// FGD: on a, GPU 1 takes the fragment away: F 250 → 0, score
	// sigmoid(0.25) = 56; GPU 0 would leave no whole GPU: 250 → 500, 43.
	// On b the 0.5 GPU strands 500 milli for whole-GPU tasks: 0 → 250, 43.
	s, task := fpTiny(FPFGD)
	if f := s.nodeFrag(0, s.st[0].cpuLeft, s.st[0].gpuLeft); f != 250 {
		t.Errorf("fgd: frag of a = %v, want 250", f)
	}
	if sc, g := s.fgdScore(0, task); sc != 56 || g != 1 {
		t.Errorf("fgd: a scores %d on GPU %d, want 56 on GPU 1", sc, g)
	}
	if sc, g := s.fgdScore(1, task); sc != 43 || g != 0 {
		t.Errorf("fgd: b scores %d on GPU %d, want 43 on GPU 0", sc, g)
	}
	// The caches follow the node's changes: with 4 CPUs left on a the
	// whole-GPU shape (8 CPUs) fits no more, so its half of the 1500
	// milli left is a fragment (750); the task of 4 CPUs still fits. With
	// 3 CPUs left nothing fits: all 1500 is.
	s.apply(0, &fpTask{cpu: 28000}, nil)
	if f := s.nodeFrag(0, s.st[0].cpuLeft, s.st[0].gpuLeft); f != 750 {
		t.Errorf("fgd: frag of a with 4 CPUs left = %v, want 750", f)
	}
	// Placing the task then leaves no CPU: 750 → 1000 on either GPU,
	// sigmoid(−0.25) = 43, the first GPU (the cached 56 is gone).
	if sc, g := s.fgdScore(0, task); sc != 43 || g != 0 {
		t.Errorf("fgd: a with 4 CPUs left scores %d on GPU %d, want 43 on GPU 0", sc, g)
	}
	if !s.fits(0, task) {
		t.Errorf("a has 4 CPUs left, the task asks 4: does not fit")
	}
	s.apply(0, &fpTask{cpu: 1000}, nil)
	if f := s.nodeFrag(0, s.st[0].cpuLeft, s.st[0].gpuLeft); f != 1500 || s.fits(0, task) {
		t.Errorf("fgd: a with 3 CPUs left: frag %v (want 1500), fits %v (want false)", f, s.fits(0, task))
	}
}

// Filters: memory, the GPU model, whole GPUs need fully free GPUs; ties go
// to the lowest node name (the simulator's scheduler), Random draws.
func TestFPFitsAndTies(t *testing.T) {
	s, task := fpTiny(FPBestFit)
	big := *task
	big.mem = 70000
	if s.fits(1, &big) {
		t.Error("a task asking more memory than the node has fits")
	}
	spec := *task
	spec.specs = []string{"V100M16"}
	if s.fits(0, &spec) || s.fits(1, &spec) {
		t.Error("a task for V100M16 fits a T4 or G2 node")
	}
	whole := fpTask{cpu: 1000, num: 2, milli: 1000}
	if s.fits(0, &whole) {
		t.Error("2 whole GPUs fit node a, which has one fully free")
	}
	nodes := []fpNode{{name: "n2", model: "T4", cpu: 8000, mem: 8192, gpus: 1}, {name: "n1", model: "T4", cpu: 8000, mem: 8192, gpus: 1}}
	l := &fpList{tasks: []fpTask{{name: "x", cpu: 1000, mem: 10, num: 1, milli: 1000}}}
	l.shapes = l.tasks
	tie := newFPSim(nodes, l, FPBestFit, 1, nil)
	if n, _ := tie.decide(&l.tasks[0]); nodes[n].name != "n1" {
		t.Errorf("tie went to %s, want n1 (lowest name)", nodes[n].name)
	}
	seen := map[int]bool{}
	for seed := uint64(0); seed < 20; seed++ {
		n, _ := newFPSim(nodes, l, FPRandom, seed, nil).decide(&l.tasks[0])
		seen[n] = true
	}
	if len(seen) != 2 {
		t.Errorf("random over 20 seeds chose nodes %v, want both", seen)
	}
}

// The baselines of a cluster without drasat or FGD: first-fit takes the
// first node by name and the first GPU by index that fit; upstream scores
// nodes as the kube-scheduler's default profile does (the emptier node
// wins) and takes the first GPU that fits, where best fit takes the one
// with least left.
func TestFPFirstFitAndUpstream(t *testing.T) {
	for _, tc := range []struct {
		policy string
		node   string
		gpu    int
	}{
		{FPFirstFit, "a", 0}, // a before b; GPU 0 (1000 left) before GPU 1 (500)
		{FPBestFit, "a", 1},  // for contrast: GPU 1 fits with least left
		{FPUpstream, "b", 0}, // LeastAllocated: 92 of 96 CPUs left beat 28 of 32
	} {
		s, task := fpTiny(tc.policy)
		n, gpus := s.decide(task)
		if n < 0 || s.nodes[n].name != tc.node || len(gpus) != 1 || gpus[0] != tc.gpu {
			t.Errorf("%s: node %d GPUs %v, want node %s GPU %d", tc.policy, n, gpus, tc.node, tc.gpu)
		}
	}
}

// FGD's target workload: shapes by frequency (ties: larger first), the
// top 95 % of tasks, frequencies renormalised.
func TestFPTargetWorkload(t *testing.T) {
	l := &fpList{}
	add := func(n int, tk fpTask) {
		tk.shape = len(l.shapes)
		l.shapes = append(l.shapes, tk)
		for i := 0; i < n; i++ {
			l.tasks = append(l.tasks, tk)
		}
	}
	add(50, fpTask{cpu: 4000, num: 1, milli: 500})
	add(30, fpTask{cpu: 8000})
	add(16, fpTask{cpu: 8000, num: 1, milli: 1000})
	add(2, fpTask{cpu: 1000, num: 1, milli: 200})
	add(2, fpTask{cpu: 2000, num: 1, milli: 200})
	got := fpTargetWorkload(l, 95)
	// 50+30+16 = 96 ≥ 95: three shapes, renormalised over 96.
	if len(got) != 3 || got[0].milli != 500 || got[1].milli != 0 || got[2].milli != 1000 {
		t.Fatalf("target workload %+v", got)
	}
	if math.Abs(got[0].freq-50.0/96) > 1e-12 || math.Abs(got[2].freq-16.0/96) > 1e-12 {
		t.Errorf("frequencies %v %v, want 50/96 and 16/96", got[0].freq, got[2].freq)
	}
	got = fpTargetWorkload(l, 99)
	if len(got) != 5 || got[3].cpu != 2000 {
		t.Errorf("at 99 %% the tie of the 2-task shapes goes larger first: %+v", got)
	}
}

func fpTestData(t *testing.T) string {
	t.Helper()
	dir, err := OpenBDir("")
	if err != nil {
		t.Skipf("trace not available: %v", err)
	}
	return dir
}

// fpTestCluster is the trace's nodes and pod list name (skipped without
// the trace).
func fpTestCluster(t *testing.T, list string) ([]fpNode, *fpList) {
	t.Helper()
	dir := fpTestData(t)
	nodes, err := loadFPNodes(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := loadFPList(dir, list)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, l
}

// The same seed gives the same curve; another seed other arrivals.
func TestFPDeterministic(t *testing.T) {
	dir := fpTestData(t)
	run := func(seed uint64) *FPReport {
		rep, err := RunFGDPaper(context.Background(), FGDPaperConfig{Dir: dir, Lists: []string{"default"}, Nodes: 100,
			Policies: []string{FPRandom, FPFGD}, Seed: seed, Seeds: 2})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	a, b, c := run(5), run(5), run(6)
	if !reflect.DeepEqual(fpCurves(a), fpCurves(b)) {
		t.Error("two runs with seed 5 differ")
	}
	if reflect.DeepEqual(fpCurves(a), fpCurves(c)) {
		t.Error("seeds 5 and 6 give the same curves")
	}
	if n := len(a.Results[1].Curve); n != 131 {
		t.Errorf("fgd curve has %d levels, want 0..130", n)
	}
}

func fpCurves(rep *FPReport) [][]FPPoint {
	var out [][]FPPoint
	for _, r := range rep.Results {
		out = append(out, r.Curve)
	}
	return out
}

// The fast path is DRA semantics: on a sample of trace nodes, with the
// trace's tasks (a tenth constrained to GPU models), every policy's final
// state passes the independent checker (devices, shared capacity,
// selectors, each node's CPU and memory), and at sampled arrivals, for
// every node, the fast path's "fits" equals what drasat's engine admits
// for the task pinned to that node on the same state.
func TestFPEquivalentToDRA(t *testing.T) {
	dir := fpTestData(t)
	nodes, err := loadFPNodes(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Six nodes: each GPU count and several models, small CPUs among them.
	var pick []fpNode
	seen := map[string]bool{}
	for _, n := range nodes {
		k := fmt.Sprintf("%d/%s", n.gpus, n.model)
		if !seen[k] && len(pick) < 6 && (n.cpu <= 32000 || n.gpus >= 4) {
			seen[k] = true
			pick = append(pick, n)
		}
	}
	l, err := loadFPList(dir, "gpuspec10")
	if err != nil {
		t.Fatal(err)
	}
	checks, agree := 0, 0
	for pi, pol := range append(slices.Clone(FGDPaperPolicies), FPFirstFit, FPUpstream) {
		s := newFPSim(pick, l, pol, 7, nil)
		arr := fpArrivals(l, s.capMilli, FGDPaperRatio, 7)
		s.run(arr)
		if err := check.CheckAll(fpObjects(s, len(s.placed), false), check.Options{}); err != nil {
			t.Fatalf("%s: final state rejected by the checker: %v", pol, err)
		}
		// Replay and ask the engine at a few GPU arrivals (another set per
		// policy, some early and some when the cluster is full).
		replay := newFPSim(pick, l, pol, 7, nil)
		for i, pl := range s.placed {
			if pl.task.num > 0 && (i+pi)%4 == 0 && checks < 300 {
				for n := range pick {
					fast := replay.fits(n, pl.task)
					eng := fpEngineFits(t, replay, i, pl.task, n)
					checks++
					if fast != eng {
						t.Errorf("%s arrival %d (%d×%d milli, %d CPU, %d MiB, spec %q) on %s (%s): fast path fits=%v, engine admits=%v",
							pol, i, pl.task.num, pl.task.milli, pl.task.cpu, pl.task.mem, pl.task.spec, pick[n].name, pick[n].model, fast, eng)
					} else if fast {
						agree++
					}
				}
			}
			replay.placed = append(replay.placed, pl)
			if pl.node >= 0 {
				replay.apply(pl.node, pl.task, pl.gpus)
			}
		}
	}
	if checks < 200 || agree == 0 || agree == checks {
		t.Errorf("%d checks, %d fits: want both outcomes sampled", checks, agree)
	}
}

// fpEngineFits asks drasat's engine whether task t, pinned to node n by
// its pod's nodeSelector, can be allocated on the state of s.
func fpEngineFits(t *testing.T, s *fpSim, i int, tk *fpTask, n int) bool {
	t.Helper()
	objs := fpObjects(s, len(s.placed), true)
	name := fmt.Sprintf("t%05d", i)
	pod := fpPod(name, tk)
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": s.nodes[n].name}
	objs.Pods = append(objs.Pods, pod)
	objs.Claims = append(objs.Claims, fpClaim(name, tk))
	ctx := context.Background()
	p, err := model.Build(ctx, objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return res.Stats.Admitted == 1
}

// drasat in the protocol on a small sample of the trace: its GPU tasks go
// through the engine in windows, each window's allocation is validated
// by the checker and replayed on the fast state (an invalid one fails
// the run), and the final state, CPU-only pods included, passes the
// checker.
func TestFPDrasatRuns(t *testing.T) {
	dir := fpTestData(t)
	for _, cpu := range FPCPUPlacers {
		policies := []string{FPDrasat}
		if cpu == FPCPUScheduler {
			policies = append(policies, FPDrasatBinpack)
		}
		rep, err := RunFGDPaper(context.Background(), FGDPaperConfig{Dir: dir, Lists: []string{"gpuspec10"}, Nodes: 16,
			Policies: policies, Seed: 3, Seeds: 1, Verify: true, DrasatCPU: cpu})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Results) != len(policies) {
			t.Fatalf("%d results for %d policies", len(rep.Results), len(policies))
		}
		for _, r := range rep.Results {
			if !r.Verified || r.Placed == 0 || r.Failed == 0 || len(r.Curve) < 100 {
				t.Errorf("%s, cpu by %s: verified %v, %d placed, %d turned away, %d levels", r.Policy, cpu, r.Verified, r.Placed, r.Failed, len(r.Curve))
			}
			if u := r.At(130).Median; u < 0 || u > 100 {
				t.Errorf("%s: unallocated at 130 %%: %v", r.Policy, u)
			}
		}
	}
	// The curve counts each task from its arrival: it never falls, never
	// exceeds what arrived, and ends at what the cluster holds.
	nodes, l := fpTestCluster(t, "default")
	s := newFPSim(nodes[:12], l, FPDrasat, 4, nil)
	arr := fpArrivals(l, s.capMilli, FGDPaperRatio, 4)
	steps := 0
	c, err := s.runDrasat(context.Background(), arr, 7, 10*time.Second, FPCPUScheduler, false, false, func(string) { steps++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(c.allocated) != len(arr) || c.allocated[len(arr)-1] != s.usedMilli || c.placed+c.failed != len(arr) {
		t.Fatalf("curve of %d points for %d arrivals, ends at %d of %d held; %d placed %d turned away",
			len(c.allocated), len(arr), c.allocated[len(c.allocated)-1], s.usedMilli, c.placed, c.failed)
	}
	if steps == 0 {
		t.Error("no progress reported")
	}
	for i := range c.allocated {
		if c.allocated[i] > c.arrived[i] || i > 0 && c.allocated[i] < c.allocated[i-1] {
			t.Fatalf("point %d: %d allocated of %d arrived (before: %d)", i, c.allocated[i], c.arrived[i], c.allocated[max(i-1, 0)])
		}
	}
}

// The table names every list, policy and level with the paper's value;
// the page holds the two figures per list.
func TestFPReportOutputs(t *testing.T) {
	dir := fpTestData(t)
	rep, err := RunFGDPaper(context.Background(), FGDPaperConfig{Dir: dir, Lists: []string{"default", "multigpu20"}, Nodes: 60,
		Policies: []string{FPBestFit, FPFGD}, Seed: 1, Seeds: 2})
	if err != nil {
		t.Fatal(err)
	}
	var tab, page, js strings.Builder
	if err := WriteFPTable(&tab, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"list default", "list multigpu20", "130 %", "4.77 [4.62–4.94]", "6.27 [5.88–6.65]", "bestfit", "fgd"} {
		if !strings.Contains(tab.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tab.String())
		}
	}
	if err := WriteFPHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), "<svg"); n != 4 {
		t.Errorf("page has %d figures, want 4", n)
	}
	if err := WriteFPJSON(&js, rep); err != nil || !strings.Contains(js.String(), `"perSeedAt100"`) {
		t.Errorf("json: %v", err)
	}
}

// The kube-scheduler's scores of a CPU-only pod (8 CPUs, 8 GiB), by hand
// from v1.37's NodeResourcesFit and BalancedAllocation. Node a (32 CPUs,
// 64 GiB) already holds 16 CPUs and 16 GiB, node b (96 CPUs, 64 GiB)
// nothing. LeastAllocated: a (25 + 62)/2 = 43, b (91 + 87)/2 = 89;
// MostAllocated: a (75 + 37)/2 = 56, b (8 + 12)/2 = 10. Balance: a from
// 87 to 81, 50 + (50 + 81 − 87)/2 = 72; b from 100 to 97, 73. The default
// spreads the pod to b, the shipped profile packs it on a.
func TestFPSchedulerScores(t *testing.T) {
	s, _ := fpTiny(FPDrasat)
	s.apply(0, &fpTask{cpu: 16000, mem: 16384}, nil)
	pod := &fpTask{cpu: 8000, mem: 8192}
	for _, tc := range []struct {
		most bool
		a, b int64
	}{{false, 43 + 72, 89 + 73}, {true, 56 + 72, 10 + 73}} {
		if a, b := s.fpSchedulerScore(0, pod, tc.most), s.fpSchedulerScore(1, pod, tc.most); a != tc.a || b != tc.b {
			t.Errorf("most allocated %v: scores a %d b %d, want %d and %d", tc.most, a, b, tc.a, tc.b)
		}
	}
}

// The turned-away list holds exactly the tasks each policy placed nowhere:
// as many as the result counts, GPU tasks among them as many as
// FailedGPU, in arrival order per seed, each at the demand arrived with
// it; the file has one line a task.
func TestFPTurnedAway(t *testing.T) {
	dir := fpTestData(t)
	rep, err := RunFGDPaper(context.Background(), FGDPaperConfig{Dir: dir, Lists: []string{"gpuspec10"}, Nodes: 16,
		Policies: []string{FPFirstFit, FPDrasatBinpack}, Seed: 3, Seeds: 2, TurnedAway: true, DrasatCPU: FPCPUDrasat})
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, r := range rep.Results {
		if len(r.TurnedAway) != r.Failed || r.Failed == 0 {
			t.Errorf("%s: %d tasks listed, %d turned away", r.Policy, len(r.TurnedAway), r.Failed)
		}
		gpu := 0
		for i, ta := range r.TurnedAway {
			if ta.GPUs > 0 {
				gpu++
			}
			if ta.Task == "" || ta.ArrivedPct <= 0 || ta.ArrivedPct > 100*FGDPaperRatio+1 {
				t.Errorf("%s: %+v", r.Policy, ta)
			}
			if i > 0 && ta.Seed == r.TurnedAway[i-1].Seed && (ta.Arrival <= r.TurnedAway[i-1].Arrival || ta.ArrivedPct < r.TurnedAway[i-1].ArrivedPct) {
				t.Errorf("%s: %+v after %+v", r.Policy, ta, r.TurnedAway[i-1])
			}
		}
		if gpu != r.FailedGPU {
			t.Errorf("%s: %d GPU tasks listed, %d turned away", r.Policy, gpu, r.FailedGPU)
		}
		lines += len(r.TurnedAway)
	}
	var out strings.Builder
	if err := WriteFPTurnedAway(&out, rep); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != lines+1 {
		t.Errorf("file has %d lines, want %d and a header", n, lines)
	}
}

// The simulator stream gives the paper's own arrivals seed by seed: until
// the first task is turned away the GPUs allocated are the GPUs arrived,
// and the allocated share at these levels (the mean over the arrivals
// rounding to each level) is the one the paper's artifact publishes for
// that list and seed, to the hundredth. default holds 98 % of the
// cluster's GPUs and is tuned up; multigpu50 holds more than 130 % and is
// tuned down. drasat's own stream (pcg) gives other arrivals: the check
// fails with it.
func TestFPArrivalsAreThePapers(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-cluster curves; the full run checks them")
	}
	dir := fpTestData(t)
	levels := []int{1, 10, 25, 50, 75, 90}
	for _, c := range []struct {
		list string
		seed uint64
		want []float64 // allocated %, the paper's artifact
	}{
		{"default", 42, []float64{1.04, 10.03, 24.98, 49.95, 75.02, 89.98}},
		{"default", 43, []float64{0.98, 10.06, 24.93, 50.0, 74.98, 90.01}},
		{"default", 51, []float64{0.96, 10.05, 25.0, 50.03, 74.97, 89.94}},
		{"multigpu50", 44, []float64{1.0, 9.98, 24.94, 49.95, 74.96, 89.92}},
	} {
		for _, stream := range FPArrivalStreams {
			rep, err := RunFGDPaper(context.Background(), FGDPaperConfig{Dir: dir, Lists: []string{c.list},
				Policies: []string{FPBestFit}, Seed: c.seed, Seeds: 1, Arrivals: stream})
			if err != nil {
				t.Fatal(err)
			}
			res := rep.Results[0]
			same := true
			for i, lv := range levels {
				got := 100 - res.At(lv).Median
				if math.Abs(got-c.want[i]) > 0.005 {
					same = false
					if stream == FPArrivalsSimulator {
						t.Errorf("%s seed %d, simulator stream: allocated %.2f %% at %d %% arrived, the paper's artifact %.2f %%", c.list, c.seed, got, lv, c.want[i])
					}
				}
			}
			if stream == FPArrivalsPCG && same {
				t.Errorf("%s seed %d: the pcg stream gives the paper's arrivals too: the check cannot tell streams apart", c.list, c.seed)
			}
		}
	}
}

// The paper's five deterministic baselines reproduce its published
// results seed by seed: on the arrivals and node order of the simulator
// stream, the GPUs allocated at 100 % and 130 % arrived are the artifact's
// to its two decimals. Random draws its scores in parallel in the
// simulator, so no stream can repeat it number by number; it is left out.
func TestFPBaselinesReproduceThePaperSeedBySeed(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-cluster curves; the full run checks them")
	}
	dir := fpTestData(t)
	type key struct {
		list string
		seed uint64
	}
	// allocated % at 100 % and 130 % arrived, the paper's artifact
	published := map[key]map[string][2]float64{
		{"default", 42}:    {FPDotProd: {90.34, 90.54}, FPClustering: {91.33, 91.53}, FPPacking: {91.37, 91.57}, FPBestFit: {92.94, 93.13}, FPFGD: {95.14, 95.29}},
		{"default", 43}:    {FPDotProd: {90.56, 90.84}, FPClustering: {91.69, 91.97}, FPPacking: {91.78, 92.06}, FPBestFit: {92.97, 93.25}, FPFGD: {95.06, 95.32}},
		{"multigpu50", 44}: {FPDotProd: {94.79, 94.93}, FPClustering: {95.93, 96.06}, FPPacking: {96.41, 96.54}, FPBestFit: {95.51, 95.64}, FPFGD: {97.27, 97.37}},
		{"gpuspec10", 45}:  {FPDotProd: {90.4, 90.61}, FPClustering: {92.79, 93.0}, FPPacking: {92.8, 93.01}, FPBestFit: {93.16, 93.35}, FPFGD: {94.82, 95.31}},
		// FGD here needs the simulator's float order (nodeFrag's kinds,
		// the target workload's frequencies): either way else, 0.16 off.
		{"gpuspec10", 44}: {FPDotProd: {90.54, 90.74}, FPClustering: {92.19, 92.39}, FPPacking: {92.27, 92.46}, FPBestFit: {93.11, 93.27}, FPFGD: {94.71, 94.96}},
	}
	for k, byPolicy := range published {
		var policies []string
		for p := range byPolicy {
			policies = append(policies, p)
		}
		slices.Sort(policies)
		rep, err := RunFGDPaper(context.Background(), FGDPaperConfig{Dir: dir, Lists: []string{k.list},
			Policies: policies, Seed: k.seed, Seeds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range rep.Results {
			want := byPolicy[res.Policy]
			for i, lv := range []int{100, 130} {
				got := 100 - res.At(lv).Median
				if math.Abs(got-want[i]) >= 0.01 {
					t.Errorf("%s seed %d, %s: %.3f %% of the GPUs allocated at %d %% arrived, the paper's artifact %.2f %%",
						k.list, k.seed, res.Policy, got, lv, want[i])
				}
			}
		}
	}
}

// The curves run on workers and are gathered in order: one worker and
// three give the same report (curves, per-seed values, counts, turned-away
// tasks), whatever finishes first. Two lists, a drasat policy and
// baselines, three seeds: more curves than workers.
func TestFPWorkersSameReport(t *testing.T) {
	dir := fpTestData(t)
	run := func(workers int) *FPReport {
		rep, err := RunFGDPaper(context.Background(), FGDPaperConfig{Dir: dir, Lists: []string{"gpuspec10", "multigpu20"}, Nodes: 12,
			Policies: []string{FPFGD, FPDrasatBinpack, FPDrasat, FPFirstFit}, Seed: 2, Seeds: 3, TurnedAway: true, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			r.WallS = 0
		}
		rep.MaxRSSMiB = 0
		return rep
	}
	one, three := run(1), run(3)
	if len(one.Results) != 8 || len(three.Results) != 8 {
		t.Fatalf("%d and %d results, want 8", len(one.Results), len(three.Results))
	}
	// %+v, not DeepEqual: a seed that never reaches a level is NaN there.
	for i := range one.Results {
		if a, b := fmt.Sprintf("%+v", *one.Results[i]), fmt.Sprintf("%+v", *three.Results[i]); a != b {
			t.Errorf("%s %s: one worker\n%s\nthree\n%s", one.Results[i].List, one.Results[i].Policy, a, b)
		}
	}
	one.Results, three.Results = nil, nil
	if !reflect.DeepEqual(one, three) {
		t.Errorf("report headers differ: %+v, %+v", one, three)
	}
}

// A run stopped midway returns what finished: the lists and policies
// whose every seed ran, marked interrupted, with the context's error;
// the table says so.
func TestFPInterruptedKeepsFinished(t *testing.T) {
	dir := fpTestData(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const seeds = 2
	rep, err := RunFGDPaper(ctx, FGDPaperConfig{Dir: dir, Lists: []string{"default"}, Nodes: 20,
		Policies: []string{FPFGD, FPBestFit, FPFirstFit}, Seed: 1, Seeds: seeds, Workers: 1,
		Progress: func(done, total int, label string) {
			if done >= seeds { // fgd's seeds are done: stop in bestfit's
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the context's", err)
	}
	if rep == nil || !rep.Interrupted || len(rep.Results) != 1 || rep.Results[0].Policy != FPFGD || len(rep.Results[0].PerSeed) != seeds {
		t.Fatalf("report %+v, want fgd's result alone, interrupted", rep)
	}
	var tab strings.Builder
	if err := WriteFPTable(&tab, rep); err != nil || !strings.Contains(tab.String(), "INTERRUPTED") {
		t.Errorf("table (%v):\n%s", err, tab.String())
	}
}

// On a few nodes one task can be several % of the GPUs, so a seed's
// arrivals can jump over a level: its value there is NaN, which the JSON
// report writes as null and reads back as NaN.
func TestFPJSONSkippedLevel(t *testing.T) {
	dir := fpTestData(t)
	rep, err := RunFGDPaper(context.Background(), FGDPaperConfig{Dir: dir, Lists: []string{"multigpu20"}, Nodes: 12,
		Policies: []string{FPFGD}, Seed: 2, Seeds: 3})
	if err != nil {
		t.Fatal(err)
	}
	nan := 0
	for _, at := range rep.Results[0].PerSeedAtLevels {
		for _, v := range at {
			if math.IsNaN(float64(v)) {
				nan++
			}
		}
	}
	if nan == 0 {
		t.Fatal("no seed skips a level here: the test needs an instance where one does")
	}
	var buf bytes.Buffer
	if err := WriteFPJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var back FPReport
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if a, b := fmt.Sprint(rep.Results[0].PerSeedAtLevels), fmt.Sprint(back.Results[0].PerSeedAtLevels); a != b {
		t.Errorf("read back %s, wrote %s", b, a)
	}
}

// The versus lines compare drasat with each other policy seed by seed:
// two seeds, drasat below fgd on one and level on the other at 100 %,
// above on one at 80 %; the medians' difference beside the counts.
func TestFPVersusSeedBySeed(t *testing.T) {
	result := func(policy string, at80, at100 [2]float64) *FPResult {
		r := &FPResult{List: "l", Policy: policy}
		for _, lv := range FGDPaperLevels {
			vs := [2]float64{5, 5}
			switch lv {
			case 80:
				vs = at80
			case 100:
				vs = at100
			}
			r.Curve = append(r.Curve, FPPoint{Arrived: lv, Median: (vs[0] + vs[1]) / 2})
			r.PerSeedAtLevels = append(r.PerSeedAtLevels, []FPValue{FPValue(vs[0]), FPValue(vs[1])})
		}
		return r
	}
	var out strings.Builder
	writeFPVersus(&out, []*FPResult{
		result(FPFGD, [2]float64{20, 20}, [2]float64{6, 4}),
		result(FPDrasat, [2]float64{21, 20}, [2]float64{4, 4}),
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "fgd") {
		t.Fatalf("want a header and a line for fgd:\n%s", out.String())
	}
	cells := strings.Fields(lines[1])
	// fgd, then (difference, counts) per level: 80 %, 90 %, 100 %, ...
	if want := []string{"+0.50", "(0/1/1)", "+0.00", "(0/2/0)", "-1.00", "(1/1/0)"}; !slices.Equal(cells[1:7], want) {
		t.Errorf("fgd's line %q, want it to start %v", lines[1], want)
	}
	out.Reset()
	writeFPVersus(&out, []*FPResult{result(FPFGD, [2]float64{20, 20}, [2]float64{6, 4})})
	if out.Len() != 0 {
		t.Errorf("no drasat, yet:\n%s", out.String())
	}
}

// With the list's workload the look-ahead knows every task of the list
// before the first arrival, and the arrivals (drawn from it) add nothing;
// without it, it knows the arrivals. A held task that has not arrived yet
// prices its GPUs only with the list (docs/bench.md).
func TestFPDrasatListWorkload(t *testing.T) {
	nodes, l := fpTestCluster(t, "gpuspec10")
	for _, list := range []bool{false, true} {
		s := newFPSim(nodes[:12], l, FPDrasat, 4, nil)
		s.listWorkload = list
		arr := fpArrivals(l, s.capMilli, FGDPaperRatio, 4)
		// What the look-ahead knew when the first window was decided.
		first := -1.0
		step := func(string) {
			if first < 0 {
				first = s.workload.Total()
			}
		}
		if _, err := s.runDrasat(context.Background(), arr, 7, 10*time.Second, FPCPUDrasat, false, false, step); err != nil {
			t.Fatal(err)
		}
		if known := first == float64(len(l.tasks)); known != list {
			t.Errorf("list %v: the first window knew %v tasks of the list's %d", list, first, len(l.tasks))
		}
		want, shapes := float64(len(arr)), map[int]bool{}
		for _, a := range arr {
			shapes[a.shape] = true
		}
		if list {
			want = float64(len(l.tasks))
			clear(shapes)
			for i := range l.tasks {
				shapes[l.tasks[i].shape] = true
			}
		}
		if got := s.workload.Total(); got != want {
			t.Errorf("list %v: the workload counts %v tasks, want %v", list, got, want)
		}
		if got := s.workload.Shapes(); got != len(shapes) {
			t.Errorf("list %v: %d shapes, want %d", list, got, len(shapes))
		}
	}
}
