package frag

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// Pods without claims. FGD places a CPU-only task too, on the node where
// it strands the fewest GPUs: a CPU-only pod that fills a GPU node's CPU
// leaves that node's free GPUs without a task that can use them, which is
// most of the GPUs the FGD paper finds idle. The kube-scheduler's scores
// do not see devices, so drasat chooses these pods' nodes itself (the
// adapter, for gated pods without claims; bench's fgd-paper protocol).

// PodPlacement is the node chosen for a pod without claims.
type PodPlacement struct {
	Pod *corev1.Pod
	// Node is the chosen node's name, "" when the pod fits nowhere or is
	// left to the scheduler.
	Node string
	// Why, when Node is "", says why: no node fits (and why not on each
	// kind of node), or what of the pod drasat does not model.
	Why string
	// Unmodelled: the pod has what drasat does not model (Why says what);
	// it is the scheduler's to place.
	Unmodelled bool
}

// PlacePods chooses a node for each pod, in the order given, on the
// cluster of objs: p is built from objs and m is the measure bound to p;
// each pod's node is chosen with the ones before it placed. A node is
// one the kube-scheduler's filters accept for the pod (NodeUnschedulable,
// TaintToleration, NodeAffinity: model.NodeRefuses) with the pod's
// requests left of its allocatable (NodeResourcesFit) besides the pods
// on it: bound or nominated to it, pinned to it by their allocated claims
// or by a required node affinity only it matches, and those placed here.
// Among them the one whose fragmentation grows least (m.PodCost); ties:
// the node with the fewest free GPUs, then the one left fullest, then
// the first by name. Deterministic.
func PlacePods(objs *input.Objects, p *model.Problem, m *Measure, pods []*corev1.Pod) []PodPlacement {
	s := model.NewState(p)
	if !m.NoScarcity {
		m.setPrices(s)
		defer m.clearPrices()
	}
	placing := map[*corev1.Pod]bool{}
	for _, pod := range pods {
		placing[pod] = true
	}
	left := nodesLeft(objs, p, placing)
	out := make([]PodPlacement, len(pods))
	for i, pod := range pods {
		out[i].Pod = pod
		if why := model.Unmodelled(pod, objs.Pods); why != "" {
			out[i].Why, out[i].Unmodelled = why, true
			continue
		}
		req := model.PodRequests(pod)
		best, bestCost, bestFree, bestLeft := -1, 0.0, 0.0, 0.0
		refusals := map[string]int{}
		for n, node := range p.Nodes {
			if node.Obj == nil {
				continue
			}
			if why := model.NodeRefuses(pod, node.Obj); why != "" {
				refusals[refusalKind(why)]++
				continue
			}
			if r, short := lacks(left[n], req); short {
				refusals["not enough "+string(r)]++
				continue
			}
			cost, free := m.PodCost(s, n, left[n], req)
			after := fullness(node.Obj, left[n], req)
			better := best < 0 || cost < bestCost-1e-9 ||
				cost < bestCost+1e-9 && (free < bestFree-1e-9 || free < bestFree+1e-9 && (after < bestLeft || after == bestLeft && node.Name < p.Nodes[best].Name))
			if better {
				best, bestCost, bestFree, bestLeft = n, cost, free, after
			}
		}
		if best < 0 {
			out[i].Why = noNodeFits(len(p.Nodes), refusals)
			continue
		}
		out[i].Node = p.Nodes[best].Name
		takeReq(left[best], req)
	}
	return out
}

// PodCost is how much node n's fragmentation grows when a pod asking req
// of it goes there, where left is what is left of its resources (nil: not
// known, never short); free is the node's free GPU capacity (the ties).
// F_n changes only through the shapes whose pods then no longer fit.
func (m *Measure) PodCost(s *model.State, n int, left map[corev1.ResourceName]int64, req map[corev1.ResourceName]int64) (cost, free float64) {
	if len(m.nodeSets[n]) == 0 {
		return 0, 0
	}
	v := m.view(s, n)
	for _, f := range v.free {
		free += f
	}
	fits := func(podReq map[corev1.ResourceName]int64, after bool) bool {
		if left == nil {
			return true
		}
		for r, x := range podReq {
			l, ok := left[r]
			if !ok {
				continue
			}
			if after {
				l -= req[r]
			}
			if x > l {
				return false
			}
		}
		return true
	}
	runs := func(after bool) {
		for k, sh := range m.shapes {
			v.runs[k] = fits(sh.podReq, after)
		}
		if m.price != nil {
			v.starved = !fits(m.heldPodReq[n], after)
		}
	}
	runs(false)
	before := m.frag(v)
	runs(true)
	return m.frag(v) - before, free
}

// nodesLeft is, per node of p, what is left of its allocatable besides the
// pods on it (nil: a node without status.allocatable, not checked).
func nodesLeft(objs *input.Objects, p *model.Problem, placing map[*corev1.Pod]bool) []map[corev1.ResourceName]int64 {
	byName := map[string]int{}
	left := make([]map[corev1.ResourceName]int64, len(p.Nodes))
	for n, node := range p.Nodes {
		byName[node.Name] = n
		if node.Obj == nil || len(node.Obj.Status.Allocatable) == 0 {
			continue
		}
		left[n] = map[corev1.ResourceName]int64{}
		for r, q := range node.Obj.Status.Allocatable {
			left[n][r] = model.ResourceAmount(r, q)
		}
	}
	claims := map[string]*nodeaffinity.NodeSelector{} // allocated claim -> its node selector (nil: any node)
	for _, c := range objs.Claims {
		if a := c.Status.Allocation; a != nil {
			var sel *nodeaffinity.NodeSelector
			if a.NodeSelector != nil {
				sel, _ = nodeaffinity.NewNodeSelector(a.NodeSelector)
			}
			claims[c.Namespace+"/"+c.Name] = sel
		}
	}
	for _, pod := range objs.Pods {
		if placing[pod] || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		node := pod.Spec.NodeName
		if node == "" {
			node = pod.Status.NominatedNodeName
		}
		if node == "" {
			node = pinned(pod, p, claims)
		}
		n, ok := byName[node]
		if !ok || left[n] == nil {
			continue
		}
		takeReq(left[n], p.Options.Memo.PodRequests(pod))
	}
	return left
}

// pinned is the one node a pending pod can only go to: the one its
// allocated claims' node selectors admit together, or else, for a pod
// that is not gated, the one its node selector and required node
// affinity match (a pod placed by PlacePods, not bound yet); "" otherwise.
func pinned(pod *corev1.Pod, p *model.Problem, claims map[string]*nodeaffinity.NodeSelector) string {
	var sels []*nodeaffinity.NodeSelector
	some := false
	for _, name := range model.PodClaimNames(pod) {
		sel, ok := claims[pod.Namespace+"/"+name]
		if !ok {
			continue
		}
		some = true
		if sel != nil {
			sels = append(sels, sel)
		}
	}
	if !some && (len(pod.Spec.SchedulingGates) > 0 || len(pod.Spec.NodeSelector) == 0 && noRequiredAffinity(pod)) {
		return ""
	}
	aff := nodeaffinity.GetRequiredNodeAffinity(pod)
	node := ""
	for _, n := range p.Nodes {
		if n.Obj == nil {
			continue
		}
		if some && slices.ContainsFunc(sels, func(s *nodeaffinity.NodeSelector) bool { return !s.Match(n.Obj) }) {
			continue
		}
		if !some {
			if ok, err := aff.Match(n.Obj); err != nil || !ok {
				continue
			}
		}
		if node != "" {
			return ""
		}
		node = n.Name
	}
	return node
}

// noRequiredAffinity: the pod has no required node affinity.
func noRequiredAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	return a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil
}

// lacks names a resource req asks for more of than left has.
func lacks(left map[corev1.ResourceName]int64, req map[corev1.ResourceName]int64) (corev1.ResourceName, bool) {
	if left == nil {
		return "", false
	}
	names := make([]string, 0, len(req))
	for r := range req {
		names = append(names, string(r))
	}
	sort.Strings(names)
	for _, r := range names {
		if x := req[corev1.ResourceName(r)]; x > 0 && x > left[corev1.ResourceName(r)] {
			return corev1.ResourceName(r), true
		}
	}
	return "", false
}

func takeReq(left map[corev1.ResourceName]int64, req map[corev1.ResourceName]int64) {
	if left == nil {
		return
	}
	for r, x := range req {
		left[r] -= x
	}
}

// fullness is the share of the node's CPU and memory that stays free
// with the pod on it (lower: fuller; the scheduler's MostAllocated).
func fullness(node *corev1.Node, left map[corev1.ResourceName]int64, req map[corev1.ResourceName]int64) float64 {
	if left == nil {
		return math.Inf(1)
	}
	t := 0.0
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q, ok := node.Status.Allocatable[r]
		if a := model.ResourceAmount(r, q); ok && a > 0 {
			t += float64(left[r]-req[r]) / float64(a)
		}
	}
	return t
}

// refusalKind groups NodeRefuses' reasons for the summary: the reason
// without the node's name.
func refusalKind(why string) string {
	switch {
	case strings.HasSuffix(why, " cordoned"):
		return "cordoned"
	case strings.HasPrefix(why, "taint "):
		return "a taint not tolerated"
	default:
		return "node selector or required node affinity not matched"
	}
}

// noNodeFits says why a pod fits on none of the nodes, as the scheduler's
// FailedScheduling does: "0/5 nodes fit: 3 not enough cpu, 2 cordoned".
func noNodeFits(nodes int, refusals map[string]int) string {
	kinds := make([]string, 0, len(refusals))
	for k := range refusals {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if refusals[kinds[i]] != refusals[kinds[j]] {
			return refusals[kinds[i]] > refusals[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	why := "0/" + strconv.Itoa(nodes) + " nodes fit"
	for i, k := range kinds {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		why += sep + strconv.Itoa(refusals[k]) + " " + k
	}
	return why
}
