package model

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

type poolKey struct{ Driver, Pool string }

// poolCopy is one generation of a pool, as a set of nodes uses it.
type poolCopy struct {
	slices []*resourceapi.ResourceSlice // by name
	gen    int64
	// nodes lists, sorted, the node indices that use this generation of the
	// pool; nil means every node (the common case, and the case without
	// known nodes).
	nodes []int
}

// viewKind is what one node makes of a pool (upstream's GatherPools).
type viewKind int

const (
	viewUnseen     viewKind = iota // no slice of the pool is published for the node
	viewObsolete                   // a newer generation exists that the node sees nothing of: ignored there
	viewIncomplete                 // its generation lacks slices: allocationMode All fails there
	viewUsable
)

// poolView is one node's view of a pool.
type poolView struct {
	kind   viewKind
	gen    int64
	slices []*resourceapi.ResourceSlice // usable: the generation's slices; incomplete: those present
	want   int64                        // resourceSliceCount of the generation
	// target are the slices of the generation published for the node
	// (upstream's DeviceSlicesTargetingNode): device names must be unique
	// among them only.
	target []*resourceapi.ResourceSlice
	// invalid is why the pool is invalid on the node ("" if valid).
	invalid string
}

// viewOn applies upstream's per-node pool rule (GatherPools in
// k8s.io/dynamic-resource-allocation's structured allocator) to the slices
// of one pool, in input order:
//
//  1. the slices published for node n count (its node-local ones first, then
//     the others, as the allocator concatenates them), and of those only the
//     highest generation g;
//  2. if they are as many as resourceSliceCount (of the first of them), the
//     pool is usable on n with them, whatever other nodes see;
//  3. otherwise, if any slice of the pool has a generation above g, the pool
//     is obsolete on n and ignored there;
//  4. otherwise the pool is the generation g of every node: usable when
//     complete, else incomplete.
func viewOn(all []*resourceapi.ResourceSlice, n *corev1.Node) poolView {
	var local, shared []*resourceapi.ResourceSlice
	for _, s := range all {
		if !sliceSeenFrom(s, n) {
			continue
		}
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			local = append(local, s)
		} else {
			shared = append(shared, s)
		}
	}
	seen := append(local, shared...)
	if len(seen) == 0 {
		return poolView{kind: viewUnseen}
	}
	g := seen[0].Spec.Pool.Generation
	for _, s := range seen {
		g = max(g, s.Spec.Pool.Generation)
	}
	atG := ofGeneration(seen, g)
	want := atG[0].Spec.Pool.ResourceSliceCount
	if int64(len(atG)) == want {
		return poolView{kind: viewUsable, gen: g, slices: atG, want: want, target: atG}
	}
	for _, s := range all {
		if s.Spec.Pool.Generation > g {
			return poolView{kind: viewObsolete, gen: g}
		}
	}
	everywhere := ofGeneration(all, g)
	if int64(len(everywhere)) == want {
		return poolView{kind: viewUsable, gen: g, slices: everywhere, want: want, target: atG}
	}
	return poolView{kind: viewIncomplete, gen: g, slices: everywhere, want: want, target: atG}
}

// usablePools groups slices into pools and decides, per node, which
// generation of each pool the node uses, as the scheduler does (viewOn).
// Nodes that use the same slices share one poolCopy; a pool moving between
// nodes may thus give two copies, each restricted to its nodes. Without
// known nodes, the highest generation counts. Incomplete or invalid
// generations are not used; each gives an issue (naming the nodes that see
// it when other nodes use another generation). Copies are in pool order
// (driver, then pool name), then generation.
func usablePools(input []*resourceapi.ResourceSlice, nodes []*corev1.Node) ([]poolCopy, []PoolIssue) {
	byPool := map[poolKey][]*resourceapi.ResourceSlice{}
	for _, s := range input {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		byPool[k] = append(byPool[k], s)
	}
	keys := make([]poolKey, 0, len(byPool))
	for k := range byPool {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Driver != keys[j].Driver {
			return keys[i].Driver < keys[j].Driver
		}
		return keys[i].Pool < keys[j].Pool
	})
	var copies []poolCopy
	var issues []PoolIssue
	for _, k := range keys {
		all := byPool[k]
		views := map[string]*poolView{}
		viewNodes := map[string][]int{}
		var order []string
		if len(nodes) == 0 {
			cur, gen := newestGeneration(all)
			v := poolView{kind: viewUsable, gen: gen, slices: cur, want: cur[0].Spec.Pool.ResourceSliceCount, target: cur}
			if int64(len(cur)) != v.want {
				v.kind = viewIncomplete
			}
			views[""], order = &v, []string{""}
		}
		seeing := 0
		for i, n := range nodes {
			v := viewOn(all, n)
			if v.kind == viewUnseen {
				continue
			}
			seeing++
			if v.kind == viewObsolete {
				continue
			}
			key := fmt.Sprintf("%d/%d", v.kind, v.gen)
			for _, s := range v.slices {
				key += "/" + s.Name
			}
			// Device names are checked per node: nodes that see the
			// generation's slices differently may disagree on validity.
			if v.kind == viewUsable {
				v.invalid = poolInvalid(v.slices, v.target)
				key += "/" + v.invalid
			}
			if views[key] == nil {
				views[key] = &v
				order = append(order, key)
			}
			viewNodes[key] = append(viewNodes[key], i)
		}
		sort.SliceStable(order, func(i, j int) bool { return views[order[i]].gen < views[order[j]].gen })
		for _, key := range order {
			v := views[key]
			cur := slices.Clone(v.slices)
			sort.Slice(cur, func(i, j int) bool { return cur[i].Name < cur[j].Name })
			// Restrict to the nodes using this view unless every node
			// that sees the pool does (then devices keep their own reach).
			var on []int
			where := ""
			if len(nodes) > 0 && len(viewNodes[key]) < seeing {
				on = viewNodes[key]
				names := make([]string, len(on))
				for i, n := range on {
					names[i] = nodes[n].Name
				}
				where = "on node " + strings.Join(names, ", ") + ": "
			}
			if v.kind == viewIncomplete {
				issues = append(issues, PoolIssue{Driver: k.Driver, Pool: k.Pool,
					Reason: fmt.Sprintf("%sincomplete: generation %d has %d of %d slices", where, v.gen, len(cur), v.want)})
				continue
			}
			if v.kind == viewUsable && len(nodes) == 0 {
				v.invalid = poolInvalid(v.slices, v.target)
			}
			if reason := v.invalid; reason != "" {
				issues = append(issues, PoolIssue{Driver: k.Driver, Pool: k.Pool, Reason: where + "invalid: " + reason})
				continue
			}
			copies = append(copies, poolCopy{slices: cur, gen: v.gen, nodes: on})
		}
	}
	return copies, issues
}

// newestGeneration returns the slices of a pool's newest generation, in
// input order, and that generation.
func newestGeneration(all []*resourceapi.ResourceSlice) ([]*resourceapi.ResourceSlice, int64) {
	gen := all[0].Spec.Pool.Generation
	for _, s := range all {
		gen = max(gen, s.Spec.Pool.Generation)
	}
	return ofGeneration(all, gen), gen
}

// ofGeneration returns the slices of generation gen, in input order.
func ofGeneration(all []*resourceapi.ResourceSlice, gen int64) []*resourceapi.ResourceSlice {
	var cur []*resourceapi.ResourceSlice
	for _, s := range all {
		if s.Spec.Pool.Generation == gen {
			cur = append(cur, s)
		}
	}
	return cur
}

// sliceSeenFrom: the slice, or with perDeviceNodeSelection one of its
// devices, is published for node n (upstream's GatherPools relevance).
func sliceSeenFrom(s *resourceapi.ResourceSlice, n *corev1.Node) bool {
	matches := func(name *string, all *bool, sel *corev1.NodeSelector) bool {
		switch {
		case name != nil && *name != "":
			return *name == n.Name
		case all != nil && *all:
			return true
		case sel != nil:
			ns, err := nodeaffinity.NewNodeSelector(sel)
			return err == nil && ns.Match(n)
		}
		return false
	}
	if s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if matches(d.NodeName, d.AllNodes, d.NodeSelector) {
				return true
			}
		}
		return false
	}
	return matches(s.Spec.NodeName, s.Spec.AllNodes, s.Spec.NodeSelector)
}

// poolInvalid mirrors the allocator's pool validation (buildPool): device
// names unique among the device slices published for the node (target;
// upstream's validateDeviceNames sees only those, so one name in slices of
// two different nodes is valid on each), counter-set names unique and
// consumption only of counters that exist, across the whole generation.
func poolInvalid(slices, target []*resourceapi.ResourceSlice) string {
	names := map[string]bool{}
	for _, s := range target {
		if len(s.Spec.SharedCounters) > 0 {
			continue // a counter-set slice: its devices are never used
		}
		for _, d := range s.Spec.Devices {
			if names[d.Name] {
				return fmt.Sprintf("device %q defined twice (slice %s)", d.Name, s.Name)
			}
			names[d.Name] = true
		}
	}
	sets := map[string]map[string]bool{}
	for _, s := range slices {
		for _, cs := range s.Spec.SharedCounters {
			if sets[cs.Name] != nil {
				return fmt.Sprintf("counter set %q defined twice (slice %s)", cs.Name, s.Name)
			}
			sets[cs.Name] = map[string]bool{}
			for c := range cs.Counters {
				sets[cs.Name][c] = true
			}
		}
	}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			for _, cc := range d.ConsumesCounters {
				set := sets[cc.CounterSet]
				if set == nil {
					return fmt.Sprintf("device %q consumes from counter set %q, which does not exist", d.Name, cc.CounterSet)
				}
				for c := range cc.Counters {
					if !set[c] {
						return fmt.Sprintf("device %q consumes counter %q, which counter set %q does not have", d.Name, c, cc.CounterSet)
					}
				}
			}
		}
	}
	return ""
}
