package check

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Pod rules (given Node objects): a pending pod that uses a newly
// allocated claim must be able to run on some node that every allocated
// claim of it admits (its nodeSelector) and that the kube-scheduler's
// filters NodeUnschedulable, TaintToleration and NodeAffinity accept, run
// here through the scheduler's libraries; and on each node with
// status.allocatable, the bound pods and the pending pods whose claims pin
// them there (admitting that node alone) must fit, as NodeResourcesFit
// counts them (cpu, memory, ephemeral storage, extended resources, pods).
func (c *checker) checkPods(allocated []*resourceapi.ResourceClaim) {
	objs := c.objs
	if len(objs.Nodes) == 0 || len(objs.Pods) == 0 {
		return
	}
	alloc := map[string]*resourceapi.AllocationResult{} // claim key -> allocation
	isNew := map[string]bool{}
	for _, cl := range objs.Claims {
		if cl.Status.Allocation != nil {
			alloc[claimKey(cl)] = cl.Status.Allocation
		}
	}
	for _, cl := range allocated {
		if cl != nil && cl.Status.Allocation != nil {
			alloc[claimKey(cl)] = cl.Status.Allocation
			isNew[claimKey(cl)] = true
		}
	}
	if len(isNew) == 0 {
		return
	}
	logger := klog.Background()
	used := map[string]corev1.ResourceList{}
	count := func(node string, p *corev1.Pod) {
		if used[node] == nil {
			used[node] = corev1.ResourceList{}
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		req[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
		for name, q := range req {
			sum := used[node][name]
			sum.Add(q)
			used[node][name] = sum
		}
	}
	pinnedBy := map[string][]string{} // node -> pending pods counted there
	for _, p := range objs.Pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName != "" {
			count(p.Spec.NodeName, p)
			continue
		}
		if p.Status.NominatedNodeName != "" {
			count(p.Status.NominatedNodeName, p)
			continue
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		var claims []string
		touched := false
		for _, name := range podClaims(p) {
			key := p.Namespace + "/" + name
			if alloc[key] != nil {
				claims = append(claims, key)
				touched = touched || isNew[key]
			}
		}
		if !touched {
			// Pinned by its allocated claims to one node: it will run there.
			if n := onlyNode(objs.Nodes, claims, alloc); n != "" {
				count(n, p)
			}
			continue
		}
		var ok []*corev1.Node
		var why []string
		for _, n := range objs.Nodes {
			if reason := podRefuses(logger, p, n, claims, alloc); reason != "" {
				why = append(why, reason)
				continue
			}
			ok = append(ok, n)
		}
		podKey := p.Namespace + "/" + p.Name
		if len(ok) == 0 {
			c.errorf("pod %s (claims %v): no node its claims allow can run it: %v", podKey, claims, why)
			continue
		}
		if len(ok) == 1 {
			count(ok[0].Name, p)
			pinnedBy[ok[0].Name] = append(pinnedBy[ok[0].Name], podKey)
		}
	}
	for _, n := range objs.Nodes {
		if len(n.Status.Allocatable) == 0 || len(pinnedBy[n.Name]) == 0 {
			continue
		}
		names := make([]string, 0, len(used[n.Name]))
		for name := range used[n.Name] {
			names = append(names, string(name))
		}
		slices.Sort(names)
		for _, name := range names {
			q := used[n.Name][corev1.ResourceName(name)]
			a := n.Status.Allocatable[corev1.ResourceName(name)]
			if q.Sign() > 0 && q.Cmp(a) > 0 {
				c.errorf("node %s: pods %v with the bound ones request %s %s, allocatable is %s", n.Name, pinnedBy[n.Name], q.String(), name, a.String())
			}
		}
	}
}

// podRefuses tells why node n cannot run pending pod p ("" if it can):
// an allocated claim of p does not admit it, or a filter refuses it.
func podRefuses(logger klog.Logger, p *corev1.Pod, n *corev1.Node, claims []string, alloc map[string]*resourceapi.AllocationResult) string {
	for _, key := range claims {
		if sel := alloc[key].NodeSelector; sel != nil {
			ns, err := nodeaffinity.NewNodeSelector(sel)
			if err != nil {
				return fmt.Sprintf("claim %s: node selector: %v", key, err)
			}
			if !ns.Match(n) {
				return n.Name + ": not among the nodes of claim " + key
			}
		}
	}
	if n.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, p.Spec.Tolerations, &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false) {
		return n.Name + " cordoned"
	}
	if t, bad := corev1helpers.FindMatchingUntoleratedTaint(logger, n.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); bad {
		return fmt.Sprintf("%s: taint %s=%s:%s not tolerated", n.Name, t.Key, t.Value, t.Effect)
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); err != nil || !ok {
		return n.Name + ": node selector or required node affinity of the pod does not match"
	}
	return ""
}

// podClaims are the claim names a pod uses: named, generated (status), or
// a stand-in "pod:entry" for a template claim not created yet.
func podClaims(p *corev1.Pod) []string {
	var out []string
	for _, rc := range p.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			out = append(out, *rc.ResourceClaimName)
			continue
		}
		found := false
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.Name == rc.Name {
				found = true
				if st.ResourceClaimName != nil {
					out = append(out, *st.ResourceClaimName)
				}
			}
		}
		if !found && rc.ResourceClaimTemplateName != nil {
			out = append(out, p.Name+":"+rc.Name)
		}
	}
	return out
}

// onlyNode is the one node that every claim's node selector admits, or
// "" (none, or several).
func onlyNode(nodes []*corev1.Node, claims []string, alloc map[string]*resourceapi.AllocationResult) string {
	if len(claims) == 0 {
		return ""
	}
	found := ""
	for _, n := range nodes {
		ok := true
		for _, key := range claims {
			if sel := alloc[key].NodeSelector; sel != nil {
				ns, err := nodeaffinity.NewNodeSelector(sel)
				if err != nil || !ns.Match(n) {
					ok = false
					break
				}
			}
		}
		if ok {
			if found != "" {
				return ""
			}
			found = n.Name
		}
	}
	return found
}
