package check

import (
	"fmt"
	"sort"

	"github.com/drasat/drasat/input"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// draftDevice is one device of a slice in the KEP-4815 draft's form, its
// mixins applied here again (not by the loader's flattening).
type draftDevice struct {
	name     string
	capacity map[resourceapi.QualifiedName]resource.Quantity
	source   string // "" for a source
}

// checkDraft: rule 10, the KEP-4815 draft's consumesCapacityFrom, checked on
// the draft objects themselves rather than on the counters they were
// flattened to. An allocated device excludes every device on its chain of
// sources and every device below it; and the capacities drawn from a
// source by the allocated devices below it (recursively) fit within the
// source's own.
func (c *checker) checkDraft() {
	if len(c.objs.Draft) == 0 {
		return
	}
	type poolDev struct{ driver, pool, device string }
	devs := map[poolDev]*draftDevice{}
	gen := map[[2]string]int64{}
	for _, s := range c.objs.Draft {
		k := [2]string{s.Spec.Driver, s.Spec.Pool.Name}
		if g, ok := gen[k]; !ok || s.Spec.Pool.Generation > g {
			gen[k] = s.Spec.Pool.Generation
		}
	}
	for _, s := range c.objs.Draft {
		if s.Spec.Pool.Generation != gen[[2]string{s.Spec.Driver, s.Spec.Pool.Name}] {
			continue
		}
		mixins := map[string]*input.DraftCompositeMixin{}
		for _, m := range s.Spec.DeviceMixins {
			mixins[m.Name] = m.Composite
		}
		for _, d := range s.Spec.Devices {
			dd := &draftDevice{name: d.Name, capacity: map[resourceapi.QualifiedName]resource.Quantity{}}
			set := func(caps map[resourceapi.QualifiedName]input.DraftCapacity) {
				for k, v := range caps {
					dd.capacity[k] = v.Quantity
				}
			}
			if d.Basic != nil {
				set(d.Basic.Capacity)
			}
			if cd := d.Composite; cd != nil {
				for _, ref := range cd.Includes {
					if m := mixins[ref.Name]; m != nil {
						set(m.Capacity)
					}
				}
				set(cd.Capacity)
				if len(cd.ConsumesCapacityFrom) > 0 && cd.ConsumesCapacityFrom[0].Name != d.Name {
					dd.source = cd.ConsumesCapacityFrom[0].Name
				}
			}
			devs[poolDev{s.Spec.Driver, s.Spec.Pool.Name, d.Name}] = dd
		}
	}
	// Allocated draft devices per pool.
	used := map[poolDev]*placement{}
	var order []poolDev
	for _, p := range c.consumers() {
		k := poolDev{p.res.Driver, p.res.Pool, p.res.Device}
		if devs[k] == nil {
			continue
		}
		if _, dup := used[k]; !dup {
			order = append(order, k)
		}
		used[k] = p
	}
	ancestors := func(k poolDev) []poolDev {
		var out []poolDev
		for cur := devs[k].source; cur != "" && len(out) <= len(devs); {
			a := poolDev{k.driver, k.pool, cur}
			if devs[a] == nil {
				break
			}
			out = append(out, a)
			cur = devs[a].source
		}
		return out
	}
	drawn := map[poolDev]map[resourceapi.QualifiedName]*resource.Quantity{}
	for _, k := range order {
		for _, a := range ancestors(k) {
			if q, ok := used[a]; ok {
				c.errorf("KEP-4815 draft: %s and %s are both allocated, but %s consumes capacity from %s", used[k], q, k.device, a.device)
			}
			if drawn[a] == nil {
				drawn[a] = map[resourceapi.QualifiedName]*resource.Quantity{}
			}
			for name, q := range devs[k].capacity {
				if _, ok := devs[a].capacity[name]; !ok {
					continue
				}
				if drawn[a][name] == nil {
					z := resource.Quantity{}
					drawn[a][name] = &z
				}
				drawn[a][name].Add(q)
			}
		}
	}
	var srcs []poolDev
	for a := range drawn {
		srcs = append(srcs, a)
	}
	sort.Slice(srcs, func(i, j int) bool { return fmt.Sprint(srcs[i]) < fmt.Sprint(srcs[j]) })
	for _, a := range srcs {
		for name, q := range drawn[a] {
			if capq := devs[a].capacity[name]; q.Cmp(capq) > 0 {
				c.errorf("KEP-4815 draft: devices allocated below %s/%s/%s draw %s of its capacity %s, more than its %s",
					a.driver, a.pool, a.device, q.String(), name, capq.String())
			}
		}
	}
}
