package model

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

type poolKey struct{ Driver, Pool string }

// usablePools groups slices into pools as the scheduler does: only the
// highest generation counts (but see nodeGeneration), and incomplete or
// invalid pools are not used. It returns the usable pools' slices (pool
// order: driver, then pool name; slices by name) and one issue per pool
// left out.
func usablePools(slices []*resourceapi.ResourceSlice, nodes []*corev1.Node) ([][]*resourceapi.ResourceSlice, []PoolIssue) {
	byPool := map[poolKey][]*resourceapi.ResourceSlice{}
	for _, s := range slices {
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
	var pools [][]*resourceapi.ResourceSlice
	var issues []PoolIssue
	for _, k := range keys {
		all := byPool[k]
		cur, gen := newestGeneration(all)
		if g, ok := nodeGeneration(all, gen, nodes); ok {
			cur, gen = ofGeneration(all, g), g
		}
		sort.Slice(cur, func(i, j int) bool { return cur[i].Name < cur[j].Name })
		if want := cur[0].Spec.Pool.ResourceSliceCount; int64(len(cur)) != want {
			issues = append(issues, PoolIssue{Driver: k.Driver, Pool: k.Pool, Reason: fmt.Sprintf("incomplete: generation %d has %d of %d slices", gen, len(cur), want)})
			continue
		}
		if reason := poolInvalid(cur); reason != "" {
			issues = append(issues, PoolIssue{Driver: k.Driver, Pool: k.Pool, Reason: "invalid: " + reason})
			continue
		}
		pools = append(pools, cur)
	}
	return pools, issues
}

// newestGeneration returns the slices of a pool's newest generation, in
// input order, and that generation: the allocator ignores the others.
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

// nodeGeneration: the upstream allocator builds a pool per node from the
// slices that node can see, and keeps their highest generation; when those
// slices are a complete set it uses them even if another node sees a newer
// generation (a driver moving the pool between nodes), and when they are
// not but a newer generation exists, it ignores the pool on that node. When
// every node that sees the pool sees one and the same older generation
// complete, that generation is the pool's (ok). Otherwise the highest
// generation stands, as for every node when nodes see different ones.
func nodeGeneration(all []*resourceapi.ResourceSlice, highest int64, nodes []*corev1.Node) (int64, bool) {
	var chosen int64 = -1
	for _, n := range nodes {
		var seen []*resourceapi.ResourceSlice
		var g int64 = -1
		for _, s := range all {
			if !sliceSeenFrom(s, n) {
				continue
			}
			switch {
			case s.Spec.Pool.Generation > g:
				g, seen = s.Spec.Pool.Generation, []*resourceapi.ResourceSlice{s}
			case s.Spec.Pool.Generation == g:
				seen = append(seen, s)
			}
		}
		switch {
		case g < 0:
			continue // this node does not see the pool
		case g == highest:
			return 0, false
		case int64(len(seen)) != seen[0].Spec.Pool.ResourceSliceCount:
			continue // obsolete on this node: ignored there
		case chosen >= 0 && chosen != g:
			return 0, false
		}
		chosen = g
	}
	return chosen, chosen >= 0
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

// poolInvalid mirrors the allocator's pool validation: unique device and
// counter-set names, and consumption only of counters that exist.
func poolInvalid(slices []*resourceapi.ResourceSlice) string {
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
	devices := map[string]bool{}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			if devices[d.Name] {
				return fmt.Sprintf("device %q defined twice (slice %s)", d.Name, s.Name)
			}
			devices[d.Name] = true
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
