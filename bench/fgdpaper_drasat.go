package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// drasat in the paper's protocol. drasat decides the pods that use
// claims; a CPU-only pod is the kube-scheduler's (drasat does not gate
// it), so here it is placed on arrival by the scheduler's default scores
// (fpSchedulerScore). GPU tasks are decided by the same code path as
// the bench's drasat policy and the controller (alloc.Run with
// max-claims and the frag look-ahead against the GPU tasks arrived so
// far, the upgrade on, pods with their CPU and memory in the model) on
// the cluster's DRA objects, every Window GPU arrivals: a task is
// decided at most Window−1 arrivals after it came, with those arrivals
// known. A task not admitted in its window is turned away, as in the
// protocol. The curve counts a task as allocated from its arrival.

// DefaultFPDrasatWindow is the number of GPU arrivals decided together.
const DefaultFPDrasatWindow = 10

// Who places the CPU-only tasks in the drasat policy (FGDPaperConfig.DrasatCPU).
const (
	// FPCPUScheduler: the kube-scheduler's default profile,
	// NodeResourcesFit's LeastAllocated plus BalancedAllocation.
	FPCPUScheduler = "scheduler"
	// FPCPUMostAllocated: the kube-scheduler with the profile shipped in
	// deploy/scheduler (NodeResourcesFit's MostAllocated plus
	// BalancedAllocation), a setting an operator has.
	FPCPUMostAllocated = "most-allocated"
	// FPCPUFGD: FGD's score, an ablation (no scheduler scores so).
	FPCPUFGD = "fgd"
	// FPCPUDrasat: drasat itself, as the controller with
	// --place-pods-without-claims: the pods are gated and placed in the
	// window's pass, after its claims, by frag.PlacePods (the
	// controller's decision code).
	FPCPUDrasat = "drasat"
)

// FPCPUPlacers are the values of FGDPaperConfig.DrasatCPU.
var FPCPUPlacers = []string{FPCPUScheduler, FPCPUMostAllocated, FPCPUFGD, FPCPUDrasat}

// placeCPUByDrasat places the window's CPU-only tasks (arrival indices
// idx) as the controller places gated pods without claims: on the
// cluster the window's claims leave (objs, the placements so far as
// running: runDrasat's windowObjects, whose kept objects let memo and
// the workload's kept shapes serve every window), by frag.PlacePods
// against the look-ahead's workload. A task that fits nowhere is turned
// away.
func (s *fpSim) placeCPUByDrasat(ctx context.Context, arrivals []*fpTask, idx []int, wl *frag.Workload, windowObjects func() *input.Objects, memo *model.Memo) error {
	if len(idx) == 0 {
		return nil
	}
	objs := windowObjects()
	pods := make([]*corev1.Pod, len(idx))
	for k, i := range idx {
		pods[k] = fpPod(fmt.Sprintf("t%05d", i), arrivals[i])
		objs.Pods = append(objs.Pods, pods[k])
	}
	p, err := model.Build(ctx, objs, model.Options{Compat: model.CompatKEP5963, Memo: memo})
	if err != nil {
		return err
	}
	m, err := frag.For(ctx, objs, p, wl)
	if err != nil {
		return err
	}
	m.NoScarcity = s.noScarcity
	byName := make(map[string]int, len(s.nodes))
	for n := range s.nodes {
		byName[s.nodes[n].name] = n
	}
	for k, pl := range frag.PlacePods(objs, p, m, pods) {
		if pl.Node == "" {
			continue
		}
		i := idx[k]
		n, ok := byName[pl.Node]
		if !ok || !s.fits(n, arrivals[i]) {
			return fmt.Errorf("INVALID: drasat placed CPU-only task %d on %q, where it does not fit", i, pl.Node)
		}
		s.placed[i].node = n
		s.apply(n, arrivals[i], nil)
	}
	return nil
}

// fpSchedulerScore is the kube-scheduler's score of CPU-only task t on
// node n (schedulerScore).
func (s *fpSim) fpSchedulerScore(n int, t *fpTask, mostAllocated bool) int64 {
	st, nd := &s.st[n], &s.nodes[n]
	return schedulerScore(nd.cpu, nd.mem, nd.cpu-st.cpuLeft, nd.mem-st.memLeft, t.cpu, t.mem, mostAllocated)
}

// fpTargetPct is the share of the tasks FGD's target workload covers.
const fpTargetPct = 95

// fpWorkloadClaim is task t's claim as a shape of the workload (nil for
// a CPU-only task).
func fpWorkloadClaim(t *fpTask) *resourceapi.ResourceClaim {
	if t.num == 0 {
		return nil
	}
	return fpClaim("w", t)
}

// runDrasat runs the arrivals with drasat deciding the GPU tasks.
// gpuShapes: the look-ahead's shapes without the pods' CPU; binpack:
// drasat-binpack, no look-ahead.
// cpu says who places the CPU-only tasks (FPCPUPlacers; "" is FPCPUDrasat,
// the controller's default); FGD's score is an ablation: drasat's
// GPU decisions on a cluster whose scheduler placed the rest as FGD would.
// step, when set, is told the arrived share after each window (the
// progress bar: a drasat curve on the whole cluster takes minutes).
func (s *fpSim) runDrasat(ctx context.Context, arrivals []*fpTask, window int, timeout time.Duration, cpu string, gpuShapes, binpack bool, step func(note string)) (*fpCurve, error) {
	if cpu == "" {
		cpu = FPCPUDrasat
	}
	cpuFGD := cpu == FPCPUFGD
	if window <= 0 {
		window = DefaultFPDrasatWindow
	}
	c := &fpCurve{capMilli: s.capMilli}
	// The look-ahead's target workload is FGD's: the tasks by shape of CPU
	// and GPU (CPU-only tasks included), the top 95 %; those of the list
	// before the first arrival (listWorkload, as FGD knows them), or
	// those arrived so far.
	wl := frag.NewWorkload()
	wl.Top = fpTargetPct
	observe := func(t *fpTask) {
		if gpuShapes {
			wl.ObserveTask(fpWorkloadClaim(t), nil)
		} else {
			wl.ObserveTask(fpWorkloadClaim(t), corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(t.cpu, resource.DecimalSI)})
		}
	}
	if s.listWorkload {
		for i := range s.list.tasks {
			observe(&s.list.tasks[i])
		}
	}
	s.workload = wl
	var arrived int64
	var pending []int    // arrival indices of the window's GPU tasks
	var pendingCPU []int // and of its CPU-only tasks, when drasat places them
	s.placed = make([]fpPlacement, 0, len(arrivals))
	life := &lifecycle{upgrade: true, noScarcity: s.noScarcity}
	// The cluster's objects are made once and kept, as are the running
	// tasks' pods and claims (by arrival), so that each window's build
	// finds the devices, pools and nodes of the last one in the memo and
	// builds only what the window adds; s.freshWindows makes every
	// window's objects anew without a memo (the same answers, tested).
	var cluster *input.Objects
	var checkMemo *check.Memo
	var keptPods []*corev1.Pod
	var keptClaims []*resourceapi.ResourceClaim
	if !s.freshWindows {
		cluster = fpClusterObjects(s)
		life.memo = model.NewMemo()
		checkMemo = &check.Memo{}
		keptPods = make([]*corev1.Pod, len(arrivals))
		keptClaims = make([]*resourceapi.ResourceClaim, len(arrivals))
	}
	nodeByName := make(map[string]int, len(s.nodes))
	for n, nd := range s.nodes {
		nodeByName[nd.name] = n
	}
	// windowObjects states the placements so far as running, as fpObjects
	// does (in arrival order).
	windowObjects := func() *input.Objects {
		if s.freshWindows {
			return fpObjects(s, len(s.placed), true)
		}
		objs := &input.Objects{Classes: cluster.Classes, Nodes: cluster.Nodes, Slices: cluster.Slices, Origin: cluster.Origin}
		for i := range s.placed {
			if s.placed[i].node < 0 {
				continue
			}
			if keptPods[i] == nil {
				keptPods[i], keptClaims[i] = fpPlacedObjects(s, i, true)
			}
			objs.Pods = append(objs.Pods, keptPods[i])
			if keptClaims[i] != nil {
				objs.Claims = append(objs.Claims, keptClaims[i])
			}
		}
		return objs
	}
	flush := func() error {
		if len(pending) == 0 {
			err := s.placeCPUByDrasat(ctx, arrivals, pendingCPU, wl, windowObjects, life.memo)
			pendingCPU = pendingCPU[:0]
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		objs := windowObjects()
		// The placements so far are running; the window's tasks are
		// placeholders (node -1) there, added here as pending.
		for _, i := range pending {
			name := fmt.Sprintf("t%05d", i)
			objs.Pods = append(objs.Pods, fpPod(name, arrivals[i]))
			objs.Claims = append(objs.Claims, fpClaim(name, arrivals[i]))
		}
		policy := PolicyDrasat
		if binpack {
			policy = PolicyDrasatBinpack
		}
		out, err := runPolicy(ctx, policy, objs, model.CompatKEP5963, timeout, wl, false, life)
		if err != nil {
			return err
		}
		// Every window's allocation is checked (validate), with what the
		// checker learns of the unchanged cluster kept.
		if err := check.Check(objs, out.allocated, check.Options{Compat: model.CompatKEP5963, Memo: checkMemo}); err != nil {
			return &InvalidError{Policy: FPDrasat, Instance: fmt.Sprintf("fgd-paper window ending at arrival %d", pending[len(pending)-1]), Err: err}
		}
		byName := map[string]int{}
		for _, i := range pending {
			byName[fmt.Sprintf("t%05d", i)] = i
		}
		for _, cl := range out.allocated {
			i, ok := byName[cl.Name]
			if !ok {
				return fmt.Errorf("drasat allocated an unknown claim %s", cl.Name)
			}
			node, gpus := -1, []int(nil)
			for _, r := range cl.Status.Allocation.Devices.Results {
				if n, ok := nodeByName[r.Pool]; ok {
					node = n
				}
				g, err := strconv.Atoi(strings.TrimPrefix(r.Device, "gpu-"))
				if err != nil || node < 0 {
					return fmt.Errorf("drasat allocated %s/%s, not a GPU of the cluster", r.Pool, r.Device)
				}
				gpus = append(gpus, g)
			}
			t := arrivals[i]
			if node < 0 || len(gpus) != t.num || !s.fits(node, t) {
				return fmt.Errorf("INVALID: drasat placed task %s on %v GPUs %v, which it does not fit", cl.Name, node, gpus)
			}
			s.placed[i] = fpPlacement{task: t, node: node, gpus: gpus}
			s.apply(node, t, gpus)
		}
		if err := s.placeCPUByDrasat(ctx, arrivals, pendingCPU, wl, windowObjects, life.memo); err != nil {
			return err
		}
		pendingCPU = pendingCPU[:0]
		// The curve: from the window's first arrival on, each point counts
		// the window's tasks placed up to it.
		var used int64
		if p0 := pending[0]; p0 > 0 {
			used = c.allocated[p0-1]
		}
		for j := pending[0]; j < len(s.placed); j++ {
			if s.placed[j].node >= 0 && s.placed[j].task.num > 0 {
				used += s.placed[j].task.totalMilli()
			}
			c.allocated[j] = used
		}
		if step != nil {
			step(fmt.Sprintf("%.0f%% arrived", 100*float64(c.arrived[len(c.arrived)-1])/float64(s.capMilli)))
		}
		pending = pending[:0]
		return nil
	}
	for i, t := range arrivals {
		arrived += t.totalMilli()
		c.arrived = append(c.arrived, arrived)
		s.placed = append(s.placed, fpPlacement{task: t, node: -1})
		if !s.listWorkload {
			observe(t)
		}
		if t.num == 0 && cpu == FPCPUDrasat {
			pendingCPU = append(pendingCPU, i)
		} else if t.num == 0 {
			best, bn := int64(math.MinInt64), -1
			cnt := 0
			for n := range s.nodes {
				if !s.fits(n, t) {
					continue
				}
				var sc int64
				if cpuFGD {
					sc, _ = s.fgdScore(n, t)
				} else {
					sc = s.fpSchedulerScore(n, t, cpu == FPCPUMostAllocated)
				}
				switch {
				case sc > best:
					best, bn, cnt = sc, n, 1
				case sc == best && cpuFGD:
					if s.tie[n] < s.tie[bn] {
						bn = n
					}
				case sc == best:
					cnt++
					if s.rng.IntN(cnt) == 0 {
						bn = n
					}
				}
			}
			if bn >= 0 {
				s.placed[i].node = bn
				s.apply(bn, t, nil)
			}
		} else {
			pending = append(pending, i)
		}
		c.allocated = append(c.allocated, s.usedMilli)
		if len(pending) >= window {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	s.shapeBuilds = wl.ShapeBuilds()
	for _, pl := range s.placed {
		if pl.node >= 0 {
			c.placed++
		} else {
			c.failed++
			if pl.task.num > 0 {
				c.failedGPU++
			}
		}
	}
	return c, nil
}
