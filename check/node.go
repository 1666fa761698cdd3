package check

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkNode: rule 8. The allocation's nodeSelector must pin the claim to one
// node (matchFields metadata.name In [node]) when a device is node-local or
// binds to its node, must admit at least one known node, and every node it
// admits must reach every device; with only devices available on all nodes
// it must be nil. A claim used by a bound pod must be usable on the pod's
// node. Finally allocationMode All is checked against the node the claim
// was allocated for (see checkAll).
func (c *checker) checkNode(nc *newClaim) {
	sel := nc.alloc.NodeSelector
	var devs []*placement
	var local *placement
	everywhere := true
	for _, p := range nc.placements {
		if p.dev == nil {
			continue
		}
		devs = append(devs, p)
		if local == nil && nodeLocal(p.dev) {
			local = p
		}
		if !availableEverywhere(p.dev) {
			everywhere = false
		}
	}
	prefix := "claim " + nc.key
	var admitted []*corev1.Node
	switch {
	case local != nil:
		name, ok := singleNodeName(sel)
		if !ok {
			c.errorf("%s: device %s is node-local or binds to its node, so nodeSelector must be exactly matchFields metadata.name In [<node>], got %s",
				prefix, keyOf(local.res), selString(sel))
			return
		}
		n := c.w.nodeByName[name]
		if n == nil {
			if len(c.objs.Nodes) > 0 {
				c.errorf("%s: nodeSelector names node %s, which does not exist", prefix, name)
				return
			}
			n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		}
		admitted = []*corev1.Node{n}
	case sel == nil:
		admitted = c.w.nodes
	default:
		for _, n := range c.w.nodes {
			ok, err := c.w.matchNode(sel, n)
			if err != nil {
				c.errorf("%s: nodeSelector: %v", prefix, err)
				return
			}
			if ok {
				admitted = append(admitted, n)
			}
		}
		if len(admitted) == 0 {
			c.errorf("%s: nodeSelector %s admits none of the known nodes", prefix, selString(sel))
		}
		if everywhere && len(devs) > 0 {
			c.errorf("%s: all devices are available on all nodes, so nodeSelector should be nil, got %s", prefix, selString(sel))
		}
	}
	if len(c.w.nodes) == 0 && local == nil {
		for _, p := range devs {
			if !availableEverywhere(p.dev) {
				c.errorf("%s: device %s is not available on all nodes, and there are no nodes", prefix, keyOf(p.res))
			}
		}
	}
	for _, p := range devs {
		for _, n := range admitted {
			ok, err := c.w.allocatable(p.dev, n)
			if err != nil {
				c.errorf("%s: device %s: %v", prefix, keyOf(p.res), err)
				break
			}
			if !ok {
				c.errorf("%s: device %s is not available on node %s, which the allocation's nodeSelector admits", prefix, keyOf(p.res), n.Name)
				break
			}
		}
	}

	// The node the claim was allocated for: the bound pod's, else any node
	// the selector admits (none when there are no nodes at all).
	witnesses := admitted
	if len(c.w.nodes) == 0 && local == nil {
		witnesses = []*corev1.Node{nil}
	}
	if nc.seenBy != nil {
		witnesses = slices.DeleteFunc(slices.Clone(witnesses), func(n *corev1.Node) bool { return !slices.Contains(nc.seenBy, n) })
	}
	if b, ok := c.fixed[nc.key]; ok {
		n := c.w.nodeByName[b.node]
		if n == nil {
			n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: b.node}}
		}
		admits := sel == nil
		if sel != nil {
			admits, _ = c.w.matchNode(sel, n)
		}
		if !admits {
			c.errorf("%s: used by pod %s, which is bound to node %s, but the allocation's nodeSelector %s does not admit that node", prefix, b.pod, b.node, selString(sel))
		}
		for _, p := range devs {
			if ok, _ := c.w.allocatable(p.dev, n); !ok {
				c.errorf("%s: used by pod %s, which is bound to node %s, but device %s is not available there", prefix, b.pod, b.node, keyOf(p.res))
			}
		}
		if nc.seenBy == nil || slices.Contains(nc.seenBy, n) {
			witnesses = []*corev1.Node{n}
		}
	}
	c.checkAll(nc, witnesses)
}

// checkAll: rule 3 for allocationMode All. For some node the claim may have
// been allocated for, every device of a usable pool that matches the class
// and request selectors and is available on that node is allocated, and no
// pool with slices for that node is incomplete or invalid (the scheduler
// refuses "All" then). A nil node stands for "no nodes": every device counts.
func (c *checker) checkAll(nc *newClaim, witnesses []*corev1.Node) {
	var all []*alt
	for _, a := range nc.alts {
		if a.mode == resourceapi.DeviceAllocationModeAll {
			all = append(all, a)
		}
	}
	if len(all) == 0 || len(witnesses) == 0 {
		return
	}
	var first []string
	for _, n := range witnesses {
		var problems []string
		for _, a := range all {
			got := map[devKey]bool{}
			for _, p := range a.placements {
				got[keyOf(p.res)] = true
			}
			class := c.classes[a.class]
			for _, pl := range c.w.viewsOf(n) {
				relevant := n == nil
				for _, s := range pl.slices {
					if !relevant && c.w.sliceRelevant(s, n) {
						relevant = true
					}
				}
				if !relevant {
					continue
				}
				if pl.issue != "" {
					problems = append(problems, fmt.Sprintf("request %s: pool %s is not usable (%s)", a.name, pl.key, pl.issue))
					continue
				}
				for _, d := range pl.devices {
					if got[d.key] {
						continue
					}
					if n != nil {
						if ok, _ := c.w.reach(d, n); !ok {
							continue
						}
					}
					// A device whose capacities cannot serve the request
					// does not count among "all" (it never could).
					if _, fits, _ := consumption(a.capacity, d.spec.Capacity); fits && c.matchesAll(class, a.selectors, d) {
						problems = append(problems, fmt.Sprintf("request %s: matching device %s is not allocated", a.name, d.key))
					}
				}
			}
		}
		if len(problems) == 0 {
			return
		}
		if first == nil {
			where := "with no nodes"
			if n != nil {
				where = "on node " + n.Name
			}
			first = append([]string{where}, problems...)
		}
	}
	c.errorf("claim %s: allocationMode All is incomplete %s: %s", nc.key, first[0], strings.Join(first[1:], "; "))
}

// singleNodeName returns N if sel is exactly matchFields metadata.name In [N].
func singleNodeName(sel *corev1.NodeSelector) (string, bool) {
	if sel == nil || len(sel.NodeSelectorTerms) != 1 {
		return "", false
	}
	t := sel.NodeSelectorTerms[0]
	if len(t.MatchExpressions) != 0 || len(t.MatchFields) != 1 {
		return "", false
	}
	r := t.MatchFields[0]
	if r.Key != "metadata.name" || r.Operator != corev1.NodeSelectorOpIn || len(r.Values) != 1 || r.Values[0] == "" {
		return "", false
	}
	return r.Values[0], true
}

func selString(sel *corev1.NodeSelector) string {
	if sel == nil {
		return "<nil>"
	}
	var terms []string
	for _, t := range sel.NodeSelectorTerms {
		var reqs []string
		for _, r := range t.MatchExpressions {
			reqs = append(reqs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
		}
		for _, r := range t.MatchFields {
			reqs = append(reqs, fmt.Sprintf("field %s %s %v", r.Key, r.Operator, r.Values))
		}
		terms = append(terms, "{"+strings.Join(reqs, ", ")+"}")
	}
	return strings.Join(terms, " or ")
}
