package model

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Pods: the pending pods that use pending claims are part of the problem.
// A claim's node-local devices pin its pods to the node (the result's
// nodeSelector), so drasat may only choose a node the kube-scheduler's
// filters accept for every pod using the claim, and all claims of one pod
// must land on one node (docs/semantics.md, "Pods").
//
// Per pod and node the build applies, with the scheduler's own libraries
// (k8s.io/component-helpers), the filters NodeUnschedulable, NodeName,
// TaintToleration, NodeAffinity and NodeResourcesFit for the pod alone; a
// node that fails one is excluded for every claim of the pod's group
// (Claim.ExcludedNodes, reason in Pod.Refused). What pods placed together
// on one node take of its resources is a constraint between claims
// (PodGroup, NodeFree), kept by the engine (alloc) and the SAT model
// (encode). Pods with what drasat does not model are left to the
// scheduler: their claims get Claim.Err (PodLeftToScheduler).

// Pod is a pending pod (not bound to a node) that uses a pending claim.
type Pod struct {
	Index int
	Key   string // namespace/name
	Obj   *corev1.Pod
	// Claims are the pending claims it uses, by index, sorted.
	Claims []int
	// Requests are what the pod asks of each of Problem.Resources (the
	// scheduler's NodeResourcesFit request, "pods" counting 1).
	Requests []int64
	// Refused maps a node the pod cannot run on to why ("node-1
	// cordoned"); nil when it may run everywhere.
	Refused map[int]string
	// Unmodelled, when not empty, says what of the pod drasat does not
	// model; its claims are left to the scheduler.
	Unmodelled string
}

// PodGroup is a set of pending claims that pods tie to one node: the
// claims of one pod, joined with those of every pod sharing one of them.
// Its claims are one decision: all admitted on one node, or none.
type PodGroup struct {
	Index  int
	Claims []int // sorted
	Pods   []int // sorted
	// Requests sum what its pods ask, per Problem.Resources.
	Requests []int64
}

// PodLeftToScheduler prefixes the error of a claim whose pod drasat does
// not model: the adapter removes the pod's gate without allocating.
const PodLeftToScheduler = "left to the kube-scheduler: "

// unlimited marks a resource a node has no allocatable entry for in a
// node without status.allocatable (files): not checked.
const unlimited = math.MaxInt64

// buildPods links pending pods to the pending claims they use, computes
// their admissible nodes and their groups. Only with Node objects: nodes
// known by name alone say nothing about labels, taints or resources.
func (b *builder) buildPods() {
	if len(b.objs.Nodes) == 0 || len(b.objs.Pods) == 0 {
		return
	}
	p := b.p
	claimByKey := map[string]int{}
	for _, c := range p.Claims {
		claimByKey[c.Key] = c.Index
	}
	for _, obj := range b.objs.Pods {
		if obj.Spec.NodeName != "" || obj.DeletionTimestamp != nil || terminal(obj) {
			continue
		}
		var claims []int
		for _, name := range PodClaimNames(obj) {
			if i, ok := claimByKey[obj.Namespace+"/"+name]; ok && !slices.Contains(claims, i) {
				claims = append(claims, i)
			}
		}
		if len(claims) == 0 {
			continue
		}
		sort.Ints(claims)
		p.Pods = append(p.Pods, &Pod{Index: len(p.Pods), Key: obj.Namespace + "/" + obj.Name, Obj: obj, Claims: claims})
	}
	if len(p.Pods) == 0 {
		return
	}
	b.podResources()
	antiAffinity := boundAntiAffinity(b.objs.Pods)
	for _, pod := range p.Pods {
		pod.Unmodelled = unmodelled(pod.Obj, antiAffinity)
		if pod.Unmodelled == "" {
			pod.Refused = b.refused(pod)
		}
		for _, ci := range pod.Claims {
			p.Claims[ci].Pods = append(p.Claims[ci].Pods, pod.Index)
		}
	}
	b.podGroups()
}

// terminal tells whether the pod has finished (it holds no resources).
func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// PodClaimNames are the names of the claims pod uses: those its
// spec.resourceClaims name, those generated from templates as its status
// lists them, and, for a template claim not created yet, the name of the
// adapter's stand-in for it ("pod:entry"; no real name holds a ':').
func PodClaimNames(pod *corev1.Pod) []string {
	var out []string
	for _, rc := range pod.Spec.ResourceClaims {
		switch {
		case rc.ResourceClaimName != nil:
			out = append(out, *rc.ResourceClaimName)
		case rc.ResourceClaimTemplateName != nil:
			i := slices.IndexFunc(pod.Status.ResourceClaimStatuses, func(s corev1.PodResourceClaimStatus) bool { return s.Name == rc.Name })
			if i < 0 {
				out = append(out, pod.Name+":"+rc.Name)
			} else if n := pod.Status.ResourceClaimStatuses[i].ResourceClaimName; n != nil {
				out = append(out, *n)
			}
		}
	}
	return out
}

// PodRequests is what the scheduler's NodeResourcesFit asks of a node for
// the pod (init and sidecar containers, overhead, pod-level resources), in
// its units: milli-CPU, and Value() for everything else.
func PodRequests(pod *corev1.Pod) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		out[name] = ResourceAmount(name, q)
	}
	out[corev1.ResourcePods] = 1
	return out
}

// ResourceAmount is q in the units the scheduler's NodeResourcesFit
// counts resource r in: milli-CPU, and Value() for everything else.
func ResourceAmount(r corev1.ResourceName, q resource.Quantity) int64 {
	if r == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// podResources fills Problem.Resources, each pod's Requests and each
// node's Free: allocatable minus what bound pods (and pods nominated to
// the node) request, as the scheduler's node info counts them.
func (b *builder) podResources() {
	p := b.p
	names := map[corev1.ResourceName]bool{}
	reqs := make([]map[corev1.ResourceName]int64, len(p.Pods))
	for i, pod := range p.Pods {
		reqs[i] = b.p.Options.Memo.podRequests(pod.Obj)
		for n, v := range reqs[i] {
			if v > 0 {
				names[n] = true
			}
		}
	}
	for n := range names {
		p.Resources = append(p.Resources, n)
	}
	sort.Slice(p.Resources, func(i, j int) bool { return p.Resources[i] < p.Resources[j] })
	for i, pod := range p.Pods {
		pod.Requests = make([]int64, len(p.Resources))
		for j, r := range p.Resources {
			pod.Requests[j] = reqs[i][r]
		}
	}
	used := map[string]map[corev1.ResourceName]int64{}
	inProblem := map[*corev1.Pod]bool{}
	for _, pod := range p.Pods {
		inProblem[pod.Obj] = true
	}
	for _, o := range b.objs.Pods {
		node := o.Spec.NodeName
		if node == "" {
			node = o.Status.NominatedNodeName
		}
		if node == "" && !inProblem[o] && o.DeletionTimestamp == nil {
			// Not bound yet, but its allocated claims pin it to a node
			// (its gate removed, the scheduler has not bound it yet).
			node = b.pinnedTo(o)
		}
		if node == "" && !inProblem[o] && o.DeletionTimestamp == nil && len(o.Spec.SchedulingGates) == 0 {
			// Not bound yet, but ungated and pinned to one node by name
			// (a pod without claims the adapter placed).
			node = PinnedByName(o)
		}
		if node == "" || terminal(o) {
			continue
		}
		if used[node] == nil {
			used[node] = map[corev1.ResourceName]int64{}
		}
		for n, v := range b.p.Options.Memo.podRequests(o) {
			used[node][n] += v
		}
	}
	p.NodeFree = make([][]int64, len(p.Nodes))
	for ni, n := range p.Nodes {
		p.NodeFree[ni] = make([]int64, len(p.Resources))
		alloc := n.Obj.Status.Allocatable
		for j, r := range p.Resources {
			q, ok := alloc[r]
			switch {
			case len(alloc) == 0:
				p.NodeFree[ni][j] = unlimited
				continue
			case !ok:
				p.NodeFree[ni][j] = 0
			default:
				p.NodeFree[ni][j] = ResourceAmount(r, q)
			}
			p.NodeFree[ni][j] -= used[n.Name][r]
		}
	}
}

// Limited tells whether node n's resource j is known (a node without
// status.allocatable is not checked).
func (p *Problem) Limited(n, j int) bool { return p.NodeFree[n][j] != unlimited }

// refused applies the scheduler's node filters to the pod alone.
func (b *builder) refused(pod *Pod) map[int]string {
	p := b.p
	out := map[int]string{}
	aff := nodeaffinity.GetRequiredNodeAffinity(pod.Obj)
	tol := pod.Obj.Spec.Tolerations
	logger := klog.Background()
	// Claims of the pod already allocated pin it to their nodes.
	var pinned []*nodeaffinity.NodeSelector
	for _, name := range PodClaimNames(pod.Obj) {
		if c := b.claimObj(pod.Obj.Namespace, name); c != nil && c.Status.Allocation != nil && c.Status.Allocation.NodeSelector != nil {
			if ns, err := nodeaffinity.NewNodeSelector(c.Status.Allocation.NodeSelector); err == nil {
				pinned = append(pinned, ns)
			}
		}
	}
	for ni, n := range p.Nodes {
		node := n.Obj
		why := nodeRefuses(logger, aff, tol, node)
		switch {
		case why != "":
		case slices.ContainsFunc(pinned, func(s *nodeaffinity.NodeSelector) bool { return !s.Match(node) }):
			why = "another claim of the pod is allocated for other nodes than " + n.Name
		default:
			for j, r := range p.Resources {
				if need := pod.Requests[j]; need > 0 && need > p.NodeFree[ni][j] {
					why = fmt.Sprintf("needs %s %s, %s has %s free", FormatResource(r, need), r, n.Name, FormatResource(r, max(p.NodeFree[ni][j], 0)))
					break
				}
			}
		}
		if why != "" {
			out[ni] = "pod " + pod.Key + ": " + why
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// NodeRefuses says why the scheduler's filters NodeUnschedulable,
// TaintToleration (NoSchedule and NoExecute) and NodeAffinity (node
// selector and required node affinity) refuse node for pod, "" when they
// accept it; through the scheduler's own libraries (component-helpers).
func NodeRefuses(pod *corev1.Pod, node *corev1.Node) string {
	return nodeRefuses(klog.Background(), nodeaffinity.GetRequiredNodeAffinity(pod), pod.Spec.Tolerations, node)
}

func nodeRefuses(logger klog.Logger, aff nodeaffinity.RequiredNodeAffinity, tol []corev1.Toleration, node *corev1.Node) string {
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, tol, &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false) {
		return node.Name + " cordoned"
	}
	if taint, bad := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, tol, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); bad {
		return "taint " + taintString(taint) + " of " + node.Name + " not tolerated"
	}
	if ok, err := aff.Match(node); err != nil || !ok {
		return "the pod's node selector or required node affinity does not match " + node.Name
	}
	return ""
}

// taintString is key=value:Effect, as kubectl shows taints.
func taintString(t corev1.Taint) string {
	s := t.Key
	if t.Value != "" {
		s += "=" + t.Value
	}
	return s + ":" + string(t.Effect)
}

// FormatResource shows an amount of resource r in its usual unit: CPUs
// for cpu (given in milli-CPU), Gi/Mi for byte amounts, else the number.
func FormatResource(r corev1.ResourceName, v int64) string {
	switch {
	case r == corev1.ResourceCPU:
		if v%1000 == 0 {
			return fmt.Sprint(v / 1000)
		}
		return fmt.Sprintf("%dm", v)
	case r == corev1.ResourceMemory || r == corev1.ResourceEphemeralStorage || strings.HasPrefix(string(r), corev1.ResourceHugePagesPrefix):
		switch {
		case v >= 1<<30 && v%(1<<30) == 0:
			return fmt.Sprintf("%dGi", v>>30)
		case v >= 1<<20 && v%(1<<20) == 0:
			return fmt.Sprintf("%dMi", v>>20)
		}
	}
	return fmt.Sprint(v)
}

// unmodelled says what of pod drasat does not model (empty: nothing):
// required inter-pod (anti-)affinity, its own or a bound pod's against
// it, topology spread that does not schedule otherwise, volumes whose
// topology may restrict nodes, and host ports (NodePorts compares them
// between pods on a node).
func unmodelled(pod *corev1.Pod, anti []antiTerm) string {
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return "it has required inter-pod affinity"
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return "it has required inter-pod anti-affinity"
		}
	}
	for _, t := range pod.Spec.TopologySpreadConstraints {
		if t.WhenUnsatisfiable == corev1.DoNotSchedule {
			return "it has a topology spread constraint with whenUnsatisfiable DoNotSchedule"
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return "volume " + v.Name + " may restrict its nodes (volume topology)"
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, port := range c.Ports {
				if port.HostPort > 0 {
					return fmt.Sprintf("container %s uses host port %d", c.Name, port.HostPort)
				}
			}
		}
	}
	for _, t := range anti {
		if (len(t.namespaces) == 0 && t.ns == pod.Namespace || slices.Contains(t.namespaces, pod.Namespace) || t.allNS) && t.sel.Matches(labels.Set(pod.Labels)) {
			return "bound pod " + t.pod + " has required anti-affinity against it"
		}
	}
	return ""
}

// antiTerm is a bound pod's required anti-affinity term.
type antiTerm struct {
	pod, ns    string
	namespaces []string
	allNS      bool
	sel        labels.Selector
}

// boundAntiAffinity lists the required anti-affinity terms of bound pods.
// A term whose selector does not parse matches everything (conservative).
func boundAntiAffinity(pods []*corev1.Pod) []antiTerm {
	var out []antiTerm
	for _, o := range pods {
		if o.Spec.NodeName == "" || terminal(o) || o.Spec.Affinity == nil || o.Spec.Affinity.PodAntiAffinity == nil {
			continue
		}
		for _, t := range o.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
			if err != nil || t.LabelSelector == nil {
				sel = labels.Everything()
			}
			out = append(out, antiTerm{pod: o.Namespace + "/" + o.Name, ns: o.Namespace, namespaces: t.Namespaces,
				allNS: t.NamespaceSelector != nil, sel: sel})
		}
	}
	return out
}

// podGroups joins pods sharing claims into groups, excludes the nodes
// some pod of a group refuses for all its claims, and fails the claims
// of groups with a pod drasat does not model.
func (b *builder) podGroups() {
	p := b.p
	sets := NewDisjointSets(len(p.Claims))
	find := sets.Find
	for _, pod := range p.Pods {
		for _, c := range pod.Claims[1:] {
			sets.Union(c, pod.Claims[0])
		}
	}
	index := map[int]int{}
	for _, pod := range p.Pods {
		r := find(pod.Claims[0])
		gi, ok := index[r]
		if !ok {
			gi = len(p.PodGroups)
			index[r] = gi
			p.PodGroups = append(p.PodGroups, &PodGroup{Index: gi, Requests: make([]int64, len(p.Resources))})
		}
		g := p.PodGroups[gi]
		g.Pods = append(g.Pods, pod.Index)
		for j, v := range pod.Requests {
			g.Requests[j] = SumUnits(g.Requests[j], v)
		}
		for _, c := range pod.Claims {
			if !slices.Contains(g.Claims, c) {
				g.Claims = append(g.Claims, c)
			}
		}
	}
	// Groups in the order of their first claim.
	for _, g := range p.PodGroups {
		sort.Ints(g.Claims)
	}
	sort.Slice(p.PodGroups, func(i, j int) bool { return p.PodGroups[i].Claims[0] < p.PodGroups[j].Claims[0] })
	for gi, g := range p.PodGroups {
		g.Index = gi
		var left string
		refused := map[int]string{}
		for _, pi := range g.Pods {
			pod := p.Pods[pi]
			if pod.Unmodelled != "" && left == "" {
				left = "pod " + pod.Key + ": " + pod.Unmodelled
			}
			for n, why := range pod.Refused {
				if _, ok := refused[n]; !ok {
					refused[n] = why
				}
			}
		}
		var none error
		if len(refused) == len(p.Nodes) {
			none = Reject(ReasonNoNode, fmt.Errorf("no node for its pods: %s", refusedSummary(p, refused)))
		}
		for _, ci := range g.Claims {
			c := p.Claims[ci]
			c.Group = g
			if none != nil && c.Err == nil && left == "" {
				c.Err = none
			}
			if left != "" {
				if c.Err == nil {
					c.Err = Reject(ReasonLeftToScheduler, fmt.Errorf("%s%s", PodLeftToScheduler, left))
				}
				continue
			}
			if len(refused) > 0 {
				if c.ExcludedNodes == nil {
					c.ExcludedNodes = map[int]bool{}
				}
				for n := range refused {
					c.ExcludedNodes[n] = true
				}
				c.PodRefused = refused
			}
		}
	}
}

// Pinning tells whether claim c's placement is tied to a node by its
// pods: it belongs to a group of several claims, or its pods consume
// node resources drasat counts. Such claims always get a node.
func (p *Problem) Pinning(c *Claim) bool {
	g := c.Group
	if g == nil {
		return false
	}
	if len(g.Claims) > 1 {
		return true
	}
	for j, v := range g.Requests {
		if v == 0 {
			continue
		}
		for n := range p.Nodes {
			if p.Limited(n, j) {
				return true
			}
		}
	}
	return false
}

// refusedSummary lists why pods refuse nodes, node by node in name order,
// at most three nodes.
func refusedSummary(p *Problem, refused map[int]string) string {
	var parts []string
	for n := range p.Nodes {
		if why, ok := refused[n]; ok {
			if len(parts) == 3 {
				parts = append(parts, fmt.Sprintf("and %d more nodes", len(refused)-3))
				break
			}
			parts = append(parts, why)
		}
	}
	return strings.Join(parts, "; ")
}

// podNodeConflicts fails the claims of a group whose claims have no node
// in common where each could be served (a GPU on one node, the pod's NIC
// on another only): naming the claims and the pod explains why none is
// allocated.
func (b *builder) podNodeConflicts() {
	p := b.p
	for _, g := range p.PodGroups {
		b.podRefusesDevices(g)
		b.podFailsTogether(g)
		if len(g.Claims) < 2 {
			continue
		}
		var common map[int]bool
		var names []string
		failed := false
		for _, ci := range g.Claims {
			c := p.Claims[ci]
			if c.Err != nil {
				failed = true
				break
			}
			names = append(names, c.Obj.Name)
			nodes := servingNodes(p, c, false)
			if common == nil {
				common = nodes
				continue
			}
			for n := range common {
				if !nodes[n] {
					delete(common, n)
				}
			}
		}
		if failed || len(common) > 0 {
			continue
		}
		var pods []string
		for _, pi := range g.Pods {
			pods = append(pods, p.Pods[pi].Key)
		}
		err := Reject(ReasonSamePod, fmt.Errorf("claims %s of pod %s cannot share a node", strings.Join(names, " and "), strings.Join(pods, ", ")))
		for _, ci := range g.Claims {
			p.Claims[ci].Err = err
		}
	}
}

// podRefusesDevices fails the claims of g that could be served only on
// nodes their pods refuse, naming those nodes' reasons.
func (b *builder) podRefusesDevices(g *PodGroup) {
	p := b.p
	for _, ci := range g.Claims {
		c := p.Claims[ci]
		if c.Err != nil || len(c.PodRefused) == 0 || len(servingNodes(p, c, false)) > 0 {
			continue
		}
		serving := servingNodes(p, c, true)
		if len(serving) == 0 {
			continue // no node serves it anyway: the devices say why
		}
		refused := map[int]string{}
		for n := range serving {
			refused[n] = c.PodRefused[n]
		}
		c.Err = Reject(ReasonNoNode, fmt.Errorf("its pods cannot run where its devices are: %s", refusedSummary(p, refused)))
	}
}

// servingNodes are the nodes, not excluded (but for the nodes its pods
// refuse, with podRefusedToo), from which every request of c has
// candidates.
func servingNodes(p *Problem, c *Claim, podRefusedToo bool) map[int]bool {
	out := map[int]bool{}
	for n := range p.Nodes {
		_, refused := c.PodRefused[n]
		if (!c.ExcludedNodes[n] || podRefusedToo && refused) && (c.FixedNode < 0 || c.FixedNode == n) {
			out[n] = true
		}
	}
	for _, r := range c.Requests {
		ok := map[int]bool{}
		for _, a := range r.Alternatives {
			for n := range out {
				if len(a.onNode[n]) > 0 {
					ok[n] = true
				}
			}
		}
		for n := range out {
			if !ok[n] {
				delete(out, n)
			}
		}
	}
	return out
}

// pinnedTo is the one node the allocated claims of pod admit together,
// or "" (no allocated claim, or several nodes).
func (b *builder) pinnedTo(pod *corev1.Pod) string {
	var sels []*nodeaffinity.NodeSelector
	some := false
	for _, name := range PodClaimNames(pod) {
		if c := b.claimObj(pod.Namespace, name); c != nil && c.Status.Allocation != nil {
			some = true
			if c.Status.Allocation.NodeSelector != nil {
				ns, err := nodeaffinity.NewNodeSelector(c.Status.Allocation.NodeSelector)
				if err != nil {
					return ""
				}
				sels = append(sels, ns)
			}
		}
	}
	if !some || len(sels) == 0 {
		return ""
	}
	node := ""
	for _, n := range b.p.Nodes {
		if !slices.ContainsFunc(sels, func(s *nodeaffinity.NodeSelector) bool { return !s.Match(n.Obj) }) {
			if node != "" {
				return ""
			}
			node = n.Name
		}
	}
	return node
}

// claimObj is the input claim namespace/name (nil if none).
func (b *builder) claimObj(ns, name string) *resourceapi.ResourceClaim {
	if b.claimObjs == nil {
		b.claimObjs = map[string]*resourceapi.ResourceClaim{}
		for _, c := range b.objs.Claims {
			if _, ok := b.claimObjs[c.Namespace+"/"+c.Name]; !ok {
				b.claimObjs[c.Namespace+"/"+c.Name] = c
			}
		}
	}
	return b.claimObjs[ns+"/"+name]
}

// podFailsTogether: when a claim of g cannot be allocated, neither can
// the others (a pod's claims are one decision); they say which and why.
func (b *builder) podFailsTogether(g *PodGroup) {
	p := b.p
	var failed *Claim
	for _, ci := range g.Claims {
		if c := p.Claims[ci]; c.Err != nil && c.unheld == nil {
			failed = c
			break
		}
	}
	if failed == nil {
		return
	}
	for _, ci := range g.Claims {
		if c := p.Claims[ci]; c.Err == nil {
			c.Err = Reject(ReasonSamePod, fmt.Errorf("claim %s of the same pods cannot be allocated: %v", failed.Obj.Name, failed.Err))
		}
	}
}

// Unmodelled says what of pod drasat does not model, "" when nothing,
// among the pods of the cluster (their required anti-affinity counts):
// for pods without claims the adapter places (frag.PlacePods).
func Unmodelled(pod *corev1.Pod, pods []*corev1.Pod) string {
	return unmodelled(pod, boundAntiAffinity(pods))
}

// PinnedByName is the node pod's required node affinity pins it to by
// metadata.name (every term requires metadata.name In [that one node]),
// "" when it does not: how the adapter pins a pod without claims.
func PinnedByName(pod *corev1.Pod) string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	node := ""
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		this := ""
		for _, r := range t.MatchFields {
			if r.Key == "metadata.name" && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				this = r.Values[0]
			}
		}
		if this == "" || node != "" && this != node {
			return ""
		}
		node = this
	}
	return node
}
