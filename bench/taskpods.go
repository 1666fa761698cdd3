package bench

import (
	resourceapi "k8s.io/api/resource/v1"
	"maps"
	"math"
	"math/rand/v2"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// What the trace scenarios (fgd-paper, openb, inflation) share about a
// task as a pod: its CPU and memory requests, its node's allocatable, and
// where the kube-scheduler puts a pod that uses no claim.

// taskPod is a task as the pod pod-NAME requesting cpu milli-CPUs and
// mem MiB; with claim set it uses that ResourceClaim.
func taskPod(name string, cpu, mem int64, claim string) *corev1.Pod {
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + name, Namespace: "default", UID: types.UID("uid-pod-" + name)}}
	p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem<<20, resource.BinarySI)}}}}
	if claim != "" {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	}
	return p
}

// nodeAllocatable is a trace node's allocatable: its CPU (milli) and
// memory (MiB), and room for more pods than the trace ever puts on one.
func nodeAllocatable(cpu, mem int64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(1001, resource.DecimalSI)}
}

// schedulerScore is the kube-scheduler's (v1.37) score of a pod that uses
// no claim, requesting reqCPU and reqMem, on a node of capCPU and capMem
// with usedCPU and usedMem requested already, with its two resource
// scores at weight 1 each as the default profile has them:
// NodeResourcesFit (LeastAllocated, or MostAllocated with mostAllocated
// set; CPU and memory at weight 1, in the plugin's integer arithmetic)
// plus NodeResourcesBalancedAllocation (the change in balance the pod
// brings: 50 + (50 + with − without)/2, where a balance is
// 100 × (1 − |cpu share − memory share|/2)).
func schedulerScore(capCPU, capMem, usedCPU, usedMem, reqCPU, reqMem int64, mostAllocated bool) int64 {
	cpuReq, memReq := min(usedCPU+reqCPU, capCPU), min(usedMem+reqMem, capMem)
	var fit int64
	if mostAllocated {
		fit = (cpuReq*fpMaxScore/capCPU + memReq*fpMaxScore/capMem) / 2
	} else {
		fit = ((capCPU-cpuReq)*fpMaxScore/capCPU + (capMem-memReq)*fpMaxScore/capMem) / 2
	}
	balance := func(cpu, mem int64) int64 {
		return int64((1 - math.Abs(float64(cpu)/float64(capCPU)-float64(mem)/float64(capMem))/2) * fpMaxScore)
	}
	balanced := fpMaxScore/2 + (fpMaxScore/2+balance(cpuReq, memReq)-balance(usedCPU, usedMem))/2
	return fit + balanced
}

// traceNodes is what the trace's running tasks request of each node and
// where each runs, and the kube-scheduler for the pods that use no claim
// (a CPU-only task is not drasat's: it is never gated, and the scheduler
// places it on arrival).
type traceNodes struct {
	nodes []openbNode
	index map[string]int
	cpu   []int64 // requested, per node
	mem   []int64
	rng   *rand.Rand
	// at is the node of each running task, by name; poolNode the node of
	// each pool of the cluster's slices.
	at       map[string]string
	poolNode map[string]string
}

func newTraceNodes(nodes []openbNode, slices []*resourceapi.ResourceSlice, seed uint64) *traceNodes {
	t := &traceNodes{nodes: nodes, index: map[string]int{}, cpu: make([]int64, len(nodes)), mem: make([]int64, len(nodes)),
		rng: rand.New(rand.NewPCG(seed, 0x637075)), at: map[string]string{}, poolNode: map[string]string{}}
	for i, n := range nodes {
		t.index[n.name] = i
	}
	for _, sl := range slices {
		if sl.Spec.NodeName != nil {
			t.poolNode[sl.Spec.Pool.Name] = *sl.Spec.NodeName
		}
	}
	return t
}

// admit runs task on the node of its allocated claim c.
func (t *traceNodes) admit(task *openbTask, c *resourceapi.ResourceClaim) {
	node := t.nodeOf(c)
	t.at[task.name] = node
	t.take(node, task.cpu, task.mem, +1)
}

// nodeOf is the node an allocated claim's devices are on (its first
// device's pool: the trace's devices are node-local).
func (t *traceNodes) nodeOf(c *resourceapi.ResourceClaim) string {
	return t.poolNode[c.Status.Allocation.Devices.Results[0].Pool]
}

// leave ends task, if it runs.
func (t *traceNodes) leave(task *openbTask) {
	if node, ok := t.at[task.name]; ok {
		t.take(node, task.cpu, task.mem, -1)
		delete(t.at, task.name)
	}
}

// take counts (sign +1) or releases (−1) a pod's requests on a node.
func (t *traceNodes) take(node string, cpu, mem int64, sign int64) {
	i := t.index[node]
	t.cpu[i] += sign * cpu
	t.mem[i] += sign * mem
}

// place runs task, which uses no claim, where the scheduler's default
// profile puts it: the best schedulerScore among the nodes it fits, ties
// broken at random as the scheduler's host selection does; false if it
// fits none.
func (t *traceNodes) place(task *openbTask) bool {
	cpu, mem := task.cpu, task.mem
	best, at, ties := int64(math.MinInt64), -1, 0
	for i, n := range t.nodes {
		if t.cpu[i]+cpu > n.cpu || t.mem[i]+mem > n.mem {
			continue
		}
		switch sc := schedulerScore(n.cpu, n.mem, t.cpu[i], t.mem[i], cpu, mem, false); {
		case sc > best:
			best, at, ties = sc, i, 1
		case sc == best:
			ties++
			if t.rng.IntN(ties) == 0 {
				at = i
			}
		}
	}
	if at < 0 {
		return false
	}
	t.take(t.nodes[at].name, cpu, mem, +1)
	t.at[task.name] = t.nodes[at].name
	return true
}

// pods are the running tasks' pods, bound to their nodes, in name order;
// a GPU task's pod uses its claim (named as the task).
func (t *traceNodes) pods(tasks map[string]*openbTask) []*corev1.Pod {
	names := slices.Sorted(maps.Keys(t.at))
	out := make([]*corev1.Pod, 0, len(names))
	for _, n := range names {
		task := tasks[n]
		claim := ""
		if task.numGPU > 0 {
			claim = n
		}
		p := taskPod(n, task.cpu, task.mem, claim)
		p.Spec.NodeName = t.at[n]
		out = append(out, p)
	}
	return out
}
