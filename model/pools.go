package model

import (
	"fmt"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
)

type poolKey struct{ Driver, Pool string }

// usablePools groups slices into pools as the scheduler does: only the
// highest generation counts, and incomplete or invalid pools are not used.
// It returns the usable pools' slices (pool order: driver, then pool name;
// slices by name) and one issue per pool left out.
func usablePools(slices []*resourceapi.ResourceSlice) ([][]*resourceapi.ResourceSlice, []PoolIssue) {
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
		cur, gen := newestGeneration(byPool[k])
		sort.Slice(cur, func(i, j int) bool { return cur[i].Name < cur[j].Name })
		if want := cur[0].Spec.Pool.ResourceSliceCount; int64(len(cur)) != want {
			issues = append(issues, PoolIssue{k.Driver, k.Pool, fmt.Sprintf("incomplete: generation %d has %d of %d slices", gen, len(cur), want)})
			continue
		}
		if reason := poolInvalid(cur); reason != "" {
			issues = append(issues, PoolIssue{k.Driver, k.Pool, "invalid: " + reason})
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
	var cur []*resourceapi.ResourceSlice
	for _, s := range all {
		if s.Spec.Pool.Generation == gen {
			cur = append(cur, s)
		}
	}
	return cur, gen
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
