package encode

import (
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/model"
)

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

// kepGroups: all devices allocated from the set share one common group.
// One "mode" variable per group is chosen (at most one); a used device
// needs the chosen mode to be one of its groups.
func (m *Model) kepGroups(si int, cons []consumer) {
	set := m.P.CounterSets[si]
	grouped := len(set.ExistingGroups) > 0
	for _, c := range cons {
		if len(m.P.Devices[c.dev].GroupsIn(si)) > 0 {
			grouped = true
		}
	}
	if !grouped {
		return // nobody has groups: all are mutually compatible
	}
	modes := map[string]z.Lit{}
	var names []string
	for _, c := range cons {
		for _, g := range model.Modes(m.P.Devices[c.dev].GroupsIn(si)) {
			if _, ok := modes[g]; !ok && set.ModeOpen(g) {
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
		for _, g := range model.Modes(m.P.Devices[c.dev].GroupsIn(si)) {
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
	for i, c := range cons {
		gd := m.P.Devices[c.dev].GroupsIn(si)
		for _, e := range set.ExistingGroups {
			if model.WildcardConflict(gd, e) {
				m.clause(c.lit.Not())
			}
		}
		for _, o := range cons[i+1:] {
			if model.WildcardConflict(gd, m.P.Devices[o.dev].GroupsIn(si)) {
				m.clause(c.lit.Not(), o.lit.Not())
			}
		}
	}
}
