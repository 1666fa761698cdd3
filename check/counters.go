package check

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/drasat/drasat/input"
	"k8s.io/apimachinery/pkg/api/resource"
)

// consumers returns the placements that consume counters and compatibility
// groups, as the scheduler sees them: each existing non-admin device once
// (the allocated state is a set of devices; admin access is not part of
// it), and every new result, admin access included (upstream's allocator
// checks and reserves counters for admin-access devices it allocates),
// except that a shared device consumes once: through its first new share,
// and not at all when an existing share consumed already.
func (c *checker) consumers() []*placement {
	var out []*placement
	seen := map[devKey]bool{}
	sharedBefore := map[devKey]bool{}
	for _, p := range c.placements {
		if p.dev == nil {
			continue
		}
		if !p.isNew {
			if !p.admin && p.isShare() {
				sharedBefore[p.dev.key] = true
			}
			if p.admin || seen[p.dev.key] {
				continue
			}
			seen[p.dev.key] = true
		}
		out = append(out, p)
	}
	newShare := map[devKey]bool{}
	kept := out[:0]
	for _, p := range out {
		if p.isNew && shared(p.dev) {
			if sharedBefore[p.dev.key] || newShare[p.dev.key] {
				continue
			}
			newShare[p.dev.key] = true
		}
		kept = append(kept, p)
	}
	return kept
}

// touchedPools returns the pools in which a new result consumes counters;
// as upstream, only those are checked (a pool whose existing allocations
// already overflow blocks new consumers, but is not itself new). A further
// share of a shared device consumes none.
func (c *checker) touchedPools() map[*pool]bool {
	out := map[*pool]bool{}
	for _, p := range c.consumers() {
		if p.isNew && len(p.dev.spec.ConsumesCounters) > 0 {
			out[p.dev.pool] = true
		}
	}
	return out
}

// in lists the devices a placement charges in pool generation pl (none if
// pl does not have the name). The allocated state knows devices by name
// only, so a device allocated from one generation counts, with what this
// generation says it consumes, in every generation that has it; and where
// one name is in the slices of several nodes (pl.dups), an allocated name
// consumes for every one of them, as upstream sums the consumption of
// every device of the pool whose name is allocated. The allocator checks
// counters only when it allocates a device that consumes some: so only the
// last claim with such devices in pl (o.last) is checked with just its own
// devices, and new claims without any (o.after) can come after it and are
// never checked there: they count for nothing.
func (p *placement) in(pl *pool, o lastOrder) []*device {
	k := keyOf(p.res)
	if k.pool() != pl.key || pl.issue != "" {
		return nil
	}
	if p.isNew && p.dev != nil && p.dev.pool == pl && (!pl.dups || p.claim == o.last) {
		return []*device{p.dev}
	}
	if p.isNew && pl.dups && o.after[p.claim] {
		return nil
	}
	return pl.named[k.Device]
}

// lastOrder is one order of the new claims for a pool generation whose
// names repeat across nodes' slices: the claim checked last, and the
// claims placed after it.
type lastOrder struct {
	last  string
	after map[string]bool
}

// lastChoices are the orders worth trying in pool generation pl: with one
// name in several nodes' slices, the checks hold when some order of the
// new claims passes; otherwise the order does not matter.
func lastChoices(pl *pool, cons []*placement) []lastOrder {
	if !pl.dups {
		return []lastOrder{{}}
	}
	consuming, after := []string{}, map[string]bool{}
	for _, p := range cons {
		if !p.isNew || p.dev == nil || p.dev.pool != pl {
			continue
		}
		if len(p.dev.spec.ConsumesCounters) > 0 {
			if !slices.Contains(consuming, p.claim) {
				consuming = append(consuming, p.claim)
			}
			delete(after, p.claim)
		} else if !slices.Contains(consuming, p.claim) {
			after[p.claim] = true
		}
	}
	var out []lastOrder
	for _, k := range consuming {
		out = append(out, lastOrder{k, after})
	}
	if len(out) == 0 {
		out = []lastOrder{{after: after}}
	}
	return out
}

// firstPassing runs check for each choice of the last claim and keeps the
// errors of the first choice when none passes.
func (c *checker) firstPassing(choices []lastOrder, check func(o lastOrder)) {
	var first []error
	for i, o := range choices {
		before := len(c.errs)
		check(o)
		if len(c.errs) == before {
			return
		}
		if i == 0 {
			first = append(first, c.errs[before:]...)
		}
		c.errs = c.errs[:before]
	}
	c.errs = append(c.errs, first...)
}

// checkCounters: rule 5. In every pool where new results consume counters,
// for every counter set and counter, the sum consumed by all consumers is at
// most the counter's value (upstream checks all counter sets of the pool
// after each device). Exact quantity arithmetic.
func (c *checker) checkCounters() {
	touched := c.touchedPools()
	cons := c.consumers()
	for _, pl := range c.w.poolOrder {
		if !touched[pl] {
			continue
		}
		// The scheduler's allocated state does not record admin-access
		// results: claims placed after one do not see what it consumes.
		// Claims with such results in pl come first, each seeing the
		// existing allocations, its own results and the other results of
		// such claims; the other claims see every result but those.
		admins := map[string]bool{}
		for _, p := range cons {
			if p.isNew && p.admin && p.dev.pool == pl {
				admins[p.claim] = true
			}
		}
		c.firstPassing(lastChoices(pl, cons), func(o lastOrder) {
			c.poolCounters(pl, cons, o, func(p *placement) bool { return !p.isNew || !p.admin })
			for _, x := range slices.Sorted(maps.Keys(admins)) {
				c.poolCounters(pl, cons, o, func(p *placement) bool { return !p.isNew || p.claim == x || !p.admin && admins[p.claim] })
			}
		})
	}
}

// poolCounters checks the counters of one pool generation, claim last
// placed last.
func (c *checker) poolCounters(pl *pool, cons []*placement, o lastOrder, counted func(*placement) bool) {
	totals := map[string]map[string]resource.Quantity{}
	newBy := map[string]map[string][]*placement{}
	var newInPool []*placement
	for _, p := range cons {
		if !counted(p) {
			continue
		}
		for _, d := range p.in(pl, o) {
			if p.isNew && len(d.spec.ConsumesCounters) > 0 && !slices.Contains(newInPool, p) {
				newInPool = append(newInPool, p)
			}
			for _, cc := range d.spec.ConsumesCounters {
				if totals[cc.CounterSet] == nil {
					totals[cc.CounterSet] = map[string]resource.Quantity{}
					newBy[cc.CounterSet] = map[string][]*placement{}
				}
				for name, cnt := range cc.Counters {
					q := totals[cc.CounterSet][name]
					q.Add(cnt.Value)
					totals[cc.CounterSet][name] = q
					if p.isNew {
						newBy[cc.CounterSet][name] = append(newBy[cc.CounterSet][name], p)
					}
				}
			}
		}
	}
	for _, setName := range pl.setNames {
		cs := pl.counterSets[setName]
		names := make([]string, 0, len(cs.Counters))
		for name := range cs.Counters {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			total, ok := totals[setName][name]
			if !ok {
				total = resource.Quantity{}
			}
			capacity := cs.Counters[name].Value
			if total.Cmp(capacity) <= 0 {
				continue
			}
			who := newBy[setName][name]
			what := "new consumers"
			if len(who) == 0 {
				who, what = newInPool, "existing allocations alone exceed it, yet new devices in the pool were allocated"
			}
			c.errorf("pool %s: counter set %s, counter %s: allocated devices consume %s, more than its value %s; %s: %s",
				pl.key, setName, name, total.String(), capacity.String(), what, list(who))
		}
	}
}

func list(ps []*placement) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ", ")
}

const noGroups = "\x00<none>"

// checkGroups: rule 6, compatibility groups per counter set in which a new
// result consumes.
func (c *checker) checkGroups() {
	type setKey struct {
		pool *pool
		set  string
	}
	touched := map[setKey]bool{}
	cons := c.consumers()
	for _, p := range cons {
		if !p.isNew {
			continue
		}
		for _, cc := range p.dev.spec.ConsumesCounters {
			touched[setKey{p.dev.pool, cc.CounterSet}] = true
		}
	}
	for _, pl := range c.w.poolOrder {
		for _, setName := range pl.setNames {
			if !touched[setKey{pl, setName}] {
				continue
			}
			// As for counters (checkCounters): admin-access results are
			// unseen by claims placed after them.
			filters := []func(*placement) bool{func(p *placement) bool { return !p.isNew || !p.admin }}
			admins := map[string]bool{}
			for _, p := range cons {
				if p.isNew && p.admin && p.dev.pool == pl {
					admins[p.claim] = true
				}
			}
			for _, x := range slices.Sorted(maps.Keys(admins)) {
				filters = append(filters, func(p *placement) bool { return !p.isNew || p.claim == x || !p.admin && admins[p.claim] })
			}
			c.firstPassing(lastChoices(pl, cons), func(o lastOrder) {
				for _, counted := range filters {
					c.setGroups(pl, setName, cons, o, counted)
				}
			})
		}
	}
}

// setGroups checks the compatibility groups of one counter set for the
// placements counted.
func (c *checker) setGroups(pl *pool, setName string, cons []*placement, o lastOrder, counted func(*placement) bool) {
	type entry struct {
		p      *placement
		groups []string
	}
	var es []entry
	for _, p := range cons {
		if !counted(p) {
			continue
		}
		for _, d := range p.in(pl, o) {
			for _, cc := range d.spec.ConsumesCounters {
				if cc.CounterSet == setName {
					es = append(es, entry{p, cc.CompatibilityGroups})
				}
			}
		}
	}
	describe := func(e entry) string {
		if len(e.groups) == 0 {
			return e.p.String() + " [<none>]"
		}
		return e.p.String() + " [" + strings.Join(e.groups, ",") + "]"
	}
	prefix := fmt.Sprintf("pool %s: counter set %s: compatibility groups", pl.key, setName)
	if c.compat == CompatWildcard {
		for i := range es {
			for j := i + 1; j < len(es); j++ {
				a, b := es[i], es[j]
				if (!a.p.isNew && !b.p.isNew) || len(a.groups) == 0 || len(b.groups) == 0 || intersects(a.groups, b.groups) {
					continue
				}
				c.errorf("%s (wildcard): %s and %s share no group", prefix, describe(a), describe(b))
			}
		}
		return
	}
	if len(es) == 0 {
		return
	}
	common := modes(es[0].groups)
	for _, e := range es[1:] {
		common = intersect(common, modes(e.groups))
	}
	if len(common) == 0 {
		var parts []string
		for _, e := range es {
			parts = append(parts, describe(e))
		}
		c.errorf("%s (kep5963): the devices allocated from it have no common group: %s", prefix, strings.Join(parts, ", "))
	}
}

func modes(g []string) []string {
	if len(g) == 0 {
		return []string{noGroups}
	}
	return g
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		for _, y := range b {
			if x == y {
				out = append(out, x)
				break
			}
		}
	}
	return out
}

func intersects(a, b []string) bool { return len(intersect(a, b)) > 0 }

// checkCompatibleOnlyWith: rule 7, the research extension. For each
// allocated device with expression E, E must hold for every other allocated
// device of its pool. Only results occupying their device count (existing
// and new non-admin results); pairs of two existing devices are not
// reported.
func (c *checker) checkCompatibleOnlyWith() {
	if len(c.objs.CompatibleOnlyWith) == 0 {
		return
	}
	byPool := map[poolKey][]*placement{}
	seen := map[devKey]bool{}
	for _, p := range c.placements {
		if p.dev == nil || p.admin {
			continue
		}
		if !p.isNew {
			if seen[p.dev.key] {
				continue
			}
			seen[p.dev.key] = true
		}
		byPool[p.dev.pool.key] = append(byPool[p.dev.pool.key], p)
	}
	for _, pl := range c.w.poolOrder {
		ps := byPool[pl.key]
		for _, a := range ps {
			k := a.dev.key
			expr, ok := c.objs.CompatibleOnlyWith[input.DeviceID{Driver: k.Driver, Pool: k.Pool, Device: k.Device}]
			if !ok {
				continue
			}
			for _, b := range ps {
				if b.dev.key == k || (!a.isNew && !b.isNew) {
					continue
				}
				ok, err := c.w.eval(expr, b.dev)
				if err != nil {
					c.errorf("compatibleOnlyWith of %s: %v", a, err)
					continue
				}
				if !ok {
					c.errorf("compatibleOnlyWith of %s: expression %q is false for %s", a, expr, b)
				}
			}
		}
	}
}
