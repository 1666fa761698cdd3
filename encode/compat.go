package encode

import (
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/model"
)

// noGroups stands for "no compatibility groups", which under KEP-5963 is
// compatible only with itself.
const noGroups = "\x00none"

// groups encodes compatibility groups for one counter set.
func (m *Model) groups(si int, cons []consumer) {
	if m.P.Options.Compat == model.CompatWildcard {
		m.wildcardGroups(si, cons)
	} else {
		m.kepGroups(si, cons)
	}
}

// compatibleOnlyWith forbids device pairs the research extension rules out.
func (m *Model) compatibleOnlyWith(devs []int) {
	for _, d := range devs {
		dev := m.P.Devices[d]
		for _, o := range dev.Incompatible {
			other := m.P.Devices[o]
			g := newGroup(GroupCompatibleOnlyWith)
			g.Device, g.Other = d, o
			if other.InUse {
				m.guarded(&g, func() { m.clause(m.Used[d].Not()) })
			} else if lo, ok := m.Used[o]; ok && o > d {
				m.guarded(&g, func() { m.clause(m.Used[d].Not(), lo.Not()) })
			}
		}
	}
}

func groupsOf(dev *model.Device, set int) []string {
	for _, c := range dev.Consumes {
		if c.Set == set {
			return c.Groups
		}
	}
	return nil
}

func modesOf(groups []string) []string {
	if len(groups) == 0 {
		return []string{noGroups}
	}
	return groups
}

// kepGroups: all devices allocated from the set share one common group.
// One "mode" variable per group is chosen (at most one); a used device
// needs the chosen mode to be one of its groups.
func (m *Model) kepGroups(si int, cons []consumer) {
	set := m.P.CounterSets[si]
	grouped := len(set.ExistingGroups) > 0
	for _, c := range cons {
		if len(groupsOf(m.P.Devices[c.dev], si)) > 0 {
			grouped = true
		}
	}
	if !grouped {
		return // nobody has groups: all are mutually compatible
	}
	// Modes still open given what is already allocated.
	allowed := map[string]bool{}
	first := true
	for _, g := range set.ExistingGroups {
		next := map[string]bool{}
		for _, x := range modesOf(g) {
			if first || allowed[x] {
				next[x] = true
			}
		}
		allowed, first = next, false
	}
	modes := map[string]z.Lit{}
	var names []string
	for _, c := range cons {
		for _, g := range modesOf(groupsOf(m.P.Devices[c.dev], si)) {
			if _, ok := modes[g]; !ok && (first || allowed[g]) {
				modes[g] = m.C.Lit()
				names = append(names, g)
			}
		}
	}
	var ms []z.Lit
	for _, n := range names {
		ms = append(ms, modes[n])
	}
	m.atMostOne(ms)
	for _, c := range cons {
		or := []z.Lit{c.lit.Not()}
		for _, g := range modesOf(groupsOf(m.P.Devices[c.dev], si)) {
			if l, ok := modes[g]; ok {
				or = append(or, l)
			}
		}
		m.clause(or...)
	}
}

// wildcardGroups (the seed proposal): two devices conflict only when both
// have groups and share none; devices without groups go with anything.
func (m *Model) wildcardGroups(si int, cons []consumer) {
	set := m.P.CounterSets[si]
	disjoint := func(a, b []string) bool {
		if len(a) == 0 || len(b) == 0 {
			return false
		}
		for _, x := range a {
			for _, y := range b {
				if x == y {
					return false
				}
			}
		}
		return true
	}
	for i, c := range cons {
		gd := groupsOf(m.P.Devices[c.dev], si)
		for _, e := range set.ExistingGroups {
			if disjoint(gd, e) {
				m.clause(c.lit.Not())
			}
		}
		for _, o := range cons[i+1:] {
			if disjoint(gd, groupsOf(m.P.Devices[o.dev], si)) {
				m.clause(c.lit.Not(), o.lit.Not())
			}
		}
	}
}
