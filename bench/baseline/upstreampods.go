package baseline

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// upstreamPods are the pending pods of the upstream simulation and what
// the nodes have left of their allocatable: the kube-scheduler runs
// NodeUnschedulable, TaintToleration, NodeAffinity and NodeResourcesFit
// before DynamicResources, so a node those refuse is never offered to the
// allocator. A pod is placed with its first claim allocated; its other
// claims are then tried on that node only (the scheduler allocates a
// pod's claims in one cycle; the generated batches have one claim a pod).
type upstreamPods struct {
	byClaim map[string][]*corev1.Pod // claim key -> pending pods using it
	node    map[*corev1.Pod]string   // placed pods
	used    map[string]map[corev1.ResourceName]int64
	nodes   map[string]*corev1.Node
}

func newUpstreamPods(objs *input.Objects) *upstreamPods {
	u := &upstreamPods{byClaim: map[string][]*corev1.Pod{}, node: map[*corev1.Pod]string{},
		used: map[string]map[corev1.ResourceName]int64{}, nodes: map[string]*corev1.Node{}}
	for _, n := range objs.Nodes {
		u.nodes[n.Name] = n
	}
	for _, p := range objs.Pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName != "" {
			u.take(p, p.Spec.NodeName)
			continue
		}
		for _, name := range model.PodClaimNames(p) {
			key := p.Namespace + "/" + name
			u.byClaim[key] = append(u.byClaim[key], p)
		}
	}
	return u
}

func (u *upstreamPods) take(p *corev1.Pod, node string) {
	if u.used[node] == nil {
		u.used[node] = map[corev1.ResourceName]int64{}
	}
	for r, v := range model.PodRequests(p) {
		u.used[node][r] += v
	}
}

// filter keeps the nodes where every pod of the claim may run and fits,
// or says why there is none.
func (u *upstreamPods) filter(claim string, nodes []*corev1.Node) ([]*corev1.Node, string) {
	pods := u.byClaim[claim]
	if len(pods) == 0 {
		return nodes, ""
	}
	var out []*corev1.Node
	var why string
	for _, n := range nodes {
		reason := ""
		for _, p := range pods {
			if at, ok := u.node[p]; ok && at != n.Name {
				reason = fmt.Sprintf("pod %s/%s runs on %s", p.Namespace, p.Name, at)
			} else if r := model.NodeRefuses(p, n); r != "" {
				reason = r
			} else if !ok {
				reason = u.fits(p, n)
			}
			if reason != "" {
				break
			}
		}
		if reason == "" {
			out = append(out, n)
		} else if why == "" {
			why = reason
		}
	}
	if len(out) == 0 {
		return nil, "no node for its pods: " + why
	}
	return out, ""
}

// fits is NodeResourcesFit for a pod not placed yet: "" when its requests
// fit in what node n has left (a node without allocatable is not checked).
func (u *upstreamPods) fits(p *corev1.Pod, n *corev1.Node) string {
	alloc := n.Status.Allocatable
	if len(alloc) == 0 {
		return ""
	}
	for r, v := range model.PodRequests(p) {
		if v == 0 {
			continue
		}
		have := model.ResourceAmount(r, alloc[r])
		if u.used[n.Name][r]+v > have {
			return fmt.Sprintf("needs %s %s, %s has %s free", model.FormatResource(r, v), r, n.Name, model.FormatResource(r, max(have-u.used[n.Name][r], 0)))
		}
	}
	return ""
}

// place counts the claim's pods on the node its allocation selects.
func (u *upstreamPods) place(claim string, result *resourceapi.AllocationResult, tried []*corev1.Node) {
	pods := u.byClaim[claim]
	if len(pods) == 0 || result.NodeSelector == nil {
		return
	}
	ns, err := nodeaffinity.NewNodeSelector(result.NodeSelector)
	if err != nil {
		return
	}
	for _, n := range tried {
		if !ns.Match(n) {
			continue
		}
		for _, p := range pods {
			if _, ok := u.node[p]; !ok {
				u.node[p] = n.Name
				u.take(p, n.Name)
			}
		}
		return
	}
}
