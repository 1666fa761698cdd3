package explain

import (
	"fmt"
	"sort"
	"strings"

	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/model"
)

// reasons turns the groups of a minimal core into reasons. Allocations in
// the core are attributed to the resource groups they take part in; any
// left over get a reason of their own.
func (e *explainer) reasons(target *model.Claim, m *encode.Model, groups []encode.Group) []Reason {
	var fixed []int
	for _, g := range groups {
		if g.Kind == encode.GroupFixed {
			fixed = append(fixed, g.Fixed)
		}
	}
	used := map[int]bool{}
	claimsOf := func(pred func(d int) bool) []string {
		var out []string
		for _, i := range fixed {
			for _, d := range e.fixed[i] {
				if pred(d) {
					out = append(out, e.allocs[i].Claim)
					used[i] = true
					break
				}
			}
		}
		return out
	}
	var out []Reason
	// Counters: one reason per counter set.
	counters := map[int][]int{}
	var sets []int
	for _, g := range groups {
		if g.Kind == encode.GroupCounter {
			if counters[g.Set] == nil {
				sets = append(sets, g.Set)
			}
			counters[g.Set] = append(counters[g.Set], g.Counter)
		}
	}
	for _, si := range sets {
		set := e.p.CounterSets[si]
		js := counters[si]
		sort.Ints(js)
		var names []string
		for _, j := range js {
			names = append(names, set.Counters[j])
		}
		claims := claimsOf(func(d int) bool {
			for _, c := range e.p.Devices[d].Consumes {
				if c.Set == si {
					for _, j := range js {
						if c.Amounts[j] > 0 {
							return true
						}
					}
				}
			}
			return false
		})
		baked := e.bakedOfSet(si)
		claims = append(claims, baked...)
		what := "counter " + names[0]
		if len(names) > 1 {
			what = "counters " + list(names)
		}
		r := Reason{Kind: KindCounter, CounterSet: set.Name, Counters: names, Claims: claims, Node: e.setNode(si)}
		switch {
		case len(claims) > 0:
			r.Message = fmt.Sprintf("%s of %s %s used by %s", what, e.setName(si), isAre(len(names)), e.claimsText(claims))
		default:
			r.Message = fmt.Sprintf("%s of %s %s too small for the devices the claim needs from it", what, e.setName(si), isAre(len(names)))
		}
		out = append(out, r)
	}
	// Devices in use: one reason per set of holders.
	var devOrder []string
	devsBy := map[string][]string{}
	holdersBy := map[string][]string{}
	for _, g := range groups {
		if g.Kind != encode.GroupDevice {
			continue
		}
		dev := e.p.Devices[g.Device]
		claims := claimsOf(func(d int) bool { return d == g.Device })
		claims = append(claims, e.baked[g.Device]...)
		k := strings.Join(claims, ",")
		if devsBy[k] == nil {
			devOrder = append(devOrder, k)
		}
		devsBy[k] = append(devsBy[k], dev.ID.String())
		holdersBy[k] = claims
	}
	for _, k := range devOrder {
		devs, claims := devsBy[k], holdersBy[k]
		what := "device " + devs[0] + " is"
		if len(devs) > 1 {
			what = "devices " + list(devs) + " are"
		}
		out = append(out, Reason{Kind: KindDevice, Devices: devs, Claims: claims,
			Message: fmt.Sprintf("%s allocated to %s", what, e.claimsText(claims))})
	}
	for _, g := range groups {
		switch g.Kind {
		case encode.GroupCompat:
			out = append(out, e.compatReason(target, g.Set, claimsOf))
		case encode.GroupCompatibleOnlyWith:
			a, b := e.p.Devices[g.Device], e.p.Devices[g.Other]
			claims := claimsOf(func(d int) bool { return d == g.Device || d == g.Other })
			claims = append(claims, e.baked[g.Other]...)
			msg := fmt.Sprintf("devices %s and %s cannot be allocated together (compatibleOnlyWith)", a.ID, b.ID)
			if len(claims) > 0 {
				msg += "; one of them is allocated to " + e.claimsText(claims)
			}
			out = append(out, Reason{Kind: KindCompatibleOnlyWith, Devices: []string{a.ID.String(), b.ID.String()}, Claims: claims, Message: msg})
		case encode.GroupCapacity:
			dev := e.p.Devices[g.Device]
			claims := claimsOf(func(d int) bool { return d == g.Device })
			msg := fmt.Sprintf("capacity %s of shared device %s is too small for the share the claim needs", dev.Capacity[g.Counter].Name, dev.ID)
			if len(claims) > 0 {
				msg = fmt.Sprintf("capacity %s of shared device %s is used by %s", dev.Capacity[g.Counter].Name, dev.ID, e.claimsText(claims))
			}
			out = append(out, Reason{Kind: KindCapacity, Devices: []string{dev.ID.String()}, Claims: claims, Message: msg})
		case encode.GroupConstraint:
			out = append(out, e.constraintReason(target, g.Constraint))
		case encode.GroupNode:
			out = append(out, e.nodeReason(target))
		}
	}
	for _, i := range fixed {
		if !used[i] {
			out = append(out, Reason{Kind: KindAllocation, Claims: []string{e.allocs[i].Claim},
				Message: fmt.Sprintf("the allocation of %s is in the way", e.claimsText([]string{e.allocs[i].Claim}))})
		}
	}
	return out
}

// claimsText lists claims, marking those allocated by the run being
// explained rather than in the input: "ns/a and ns/b (allocated by this
// run)", or "ns/e; allocated by this run: ns/a".
func (e *explainer) claimsText(claims []string) string {
	if len(claims) == 0 {
		return "an existing claim"
	}
	run := map[string]bool{}
	for _, a := range e.allocs {
		if !a.Existing {
			run[a.Claim] = true
		}
	}
	var old, now []string
	for _, c := range claims {
		if run[c] {
			now = append(now, c)
		} else {
			old = append(old, c)
		}
	}
	switch {
	case len(now) == 0:
		return list(old)
	case len(old) == 0:
		return list(now) + " (allocated by this run)"
	}
	return list(old) + "; allocated by this run: " + list(now)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// setName is "counter set S (node N)" or "counter set S (pool D/P)".
func (e *explainer) setName(si int) string {
	set := e.p.CounterSets[si]
	if n := e.setNode(si); n != "" {
		return fmt.Sprintf("counter set %s (node %s)", set.Name, n)
	}
	return fmt.Sprintf("counter set %s (pool %s/%s)", set.Name, set.Driver, set.Pool)
}

// setNode is the one node all devices of the set are on, or "".
func (e *explainer) setNode(si int) string {
	node := e.p.CommonNode(e.p.CounterSets[si].Devices)
	if node < 0 {
		return ""
	}
	return e.p.Nodes[node].Name
}

// bakedOfSet names existing claims (baked into p) holding devices of set si.
func (e *explainer) bakedOfSet(si int) []string {
	seen := map[string]bool{}
	for _, d := range e.p.CounterSets[si].Devices {
		for _, h := range e.baked[d] {
			seen[h] = true
		}
	}
	return sortedSet(seen)
}

func groupsText(g []string) string {
	if len(g) == 0 {
		return "[] (none)"
	}
	return "[" + strings.Join(g, ", ") + "]"
}

// compatReason describes a compatibility group conflict on set si: which
// allocated devices, with which groups, against the groups of the claim's
// candidate devices on that set.
func (e *explainer) compatReason(target *model.Claim, si int, claimsOf func(func(int) bool) []string) Reason {
	set := e.p.CounterSets[si]
	r := Reason{Kind: KindCompat, CounterSet: set.Name, Node: e.setNode(si)}
	// Groups of the claim's candidates on this set.
	mine := map[string]bool{}
	for _, req := range target.Requests {
		for _, a := range req.Alternatives {
			for _, d := range a.Candidates {
				for _, c := range e.p.Devices[d].Consumes {
					if c.Set == si {
						mine[groupsText(c.Groups)] = true
					}
				}
			}
		}
	}
	var held []string
	claims := claimsOf(func(d int) bool {
		for _, c := range e.p.Devices[d].Consumes {
			if c.Set == si {
				return true
			}
		}
		return false
	})
	for i := range e.allocs {
		for _, d := range e.fixed[i] {
			for _, c := range e.p.Devices[d].Consumes {
				if c.Set == si && contains(claims, e.allocs[i].Claim) {
					held = append(held, fmt.Sprintf("%s allocated to %s (groups %s)", e.p.Devices[d].ID.Device, e.claimsText([]string{e.allocs[i].Claim}), groupsText(c.Groups)))
					r.Devices = append(r.Devices, e.p.Devices[d].ID.String())
				}
			}
		}
	}
	for _, d := range set.Devices {
		for _, h := range e.baked[d] {
			for _, c := range e.p.Devices[d].Consumes {
				if c.Set == si {
					held = append(held, fmt.Sprintf("%s allocated to %s (groups %s)", e.p.Devices[d].ID.Device, h, groupsText(c.Groups)))
					r.Devices = append(r.Devices, e.p.Devices[d].ID.String())
					claims = append(claims, h)
				}
			}
		}
	}
	r.Claims = claims
	mineList := sortedSet(mine)
	switch {
	case len(held) > 0:
		r.Message = fmt.Sprintf("compatibility group conflict on %s with device %s; the claim's devices there have groups %s", e.setName(si), strings.Join(held, ", "), strings.Join(mineList, " or "))
	default:
		r.Message = fmt.Sprintf("compatibility groups on %s: the claim's devices there (groups %s) have no group in common", e.setName(si), strings.Join(mineList, " or "))
	}
	return r
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// constraintReason describes a matchAttribute or distinctAttribute that
// the candidates cannot meet together with the rest of the core.
func (e *explainer) constraintReason(c *model.Claim, ki int) Reason {
	k := c.Constraints[ki]
	kind := "matchAttribute"
	if k.Kind == model.DistinctAttribute {
		kind = "distinctAttribute"
	}
	scope := "all requests"
	if len(k.Requests) > 0 {
		scope = "requests " + strings.Join(k.Requests, ", ")
	}
	need := 0
	counts := map[string]map[int]bool{}
	missing := map[int]bool{}
	for _, req := range c.Requests {
		a := req.Alternatives[0]
		if !k.Applies(req, a) {
			continue
		}
		need += a.Count
		for _, d := range a.Candidates {
			vals := k.ValuesOf(a, d)
			if len(vals) == 0 {
				missing[d] = true
				continue
			}
			for _, v := range vals {
				if counts[v] == nil {
					counts[v] = map[int]bool{}
				}
				counts[v][d] = true
			}
		}
	}
	r := Reason{Kind: KindConstraint, Attribute: k.Attribute}
	switch k.Kind {
	case model.MatchAttribute:
		best, bestV := 0, ""
		for v, ds := range counts {
			if len(ds) > best || (len(ds) == best && v < bestV) {
				best, bestV = len(ds), v
			}
		}
		r.Message = fmt.Sprintf("%s %s (%s): the claim's %d devices must share one value of it, but no value has enough usable devices", kind, k.Attribute, scope, need)
		if bestV != "" {
			r.Message += fmt.Sprintf(" (at most %d candidates share a value, %s)", best, strings.SplitN(bestV, ":", 2)[1])
		}
	default:
		r.Message = fmt.Sprintf("%s %s (%s): the claim's %d devices need pairwise different values, but only %d different values are available", kind, k.Attribute, scope, need, len(counts))
	}
	if len(missing) > 0 {
		r.Message += fmt.Sprintf("; %d candidates lack the attribute", len(missing))
	}
	return r
}

// nodeReason describes the one-node rule: how many devices each request
// needs, and the most any single node offers.
func (e *explainer) nodeReason(c *model.Claim) Reason {
	r := Reason{Kind: KindNode}
	perNode := map[int]int{}
	need := 0
	for _, req := range c.Requests {
		a := req.Alternatives[0]
		need += max(a.Count, 1)
		for _, d := range a.Candidates {
			dev := e.p.Devices[d]
			if dev.All {
				for n := range e.p.Nodes {
					perNode[n]++
				}
				continue
			}
			for _, n := range dev.Reach {
				perNode[n]++
			}
		}
	}
	if c.FixedNode >= 0 {
		node := e.p.Nodes[c.FixedNode].Name
		r.Node = node
		r.Message = fmt.Sprintf("the claim is reserved for a pod on node %s, and its devices must be reachable from that node (%d candidates are)", node, perNode[c.FixedNode])
		return r
	}
	best, bestN := 0, -1
	for n, k := range perNode {
		if k > best || (k == best && n < bestN) {
			best, bestN = k, n
		}
	}
	r.Message = fmt.Sprintf("the claim's %d devices must all be reachable from one node", need)
	if bestN >= 0 {
		r.Node = e.p.Nodes[bestN].Name
		r.Message += fmt.Sprintf("; at most %d candidates are on one node (%s)", best, r.Node)
	}
	// The nodes the claim's pods cannot run on are not among its nodes.
	for n := range e.p.Nodes {
		if why, ok := c.PodRefused[n]; ok {
			r.Message += "; " + why
		}
	}
	return r
}
