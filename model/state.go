package model

// State tracks what is taken while claims are placed one by one: devices,
// counters, and the compatibility-group lists of each counter set. It is the
// one place that decides whether a device can still be allocated; greedy
// placement, layout pricing and the tests' brute force all go through it.
type State struct {
	P      *Problem
	used   []bool
	free   [][]int64
	groups [][][]string // per counter set: group lists of allocated devices
}

// NewState is the state before any pending claim is placed.
func NewState(p *Problem) *State {
	s := &State{P: p, used: make([]bool, len(p.Devices)), free: make([][]int64, len(p.CounterSets)), groups: make([][][]string, len(p.CounterSets))}
	for i, d := range p.Devices {
		s.used[i] = d.InUse
	}
	for i, cs := range p.CounterSets {
		s.free[i] = append([]int64(nil), cs.Free...)
		s.groups[i] = append([][]string(nil), cs.ExistingGroups...)
	}
	return s
}

// Fits tells whether device d can be newly allocated now. Admin access
// (exclusive false) may share a device in use, but like upstream still needs
// its counters free.
func (s *State) Fits(d int, exclusive bool) bool {
	if exclusive && s.used[d] {
		return false
	}
	dev := s.P.Devices[d]
	for _, c := range dev.Consumes {
		for j, a := range c.Amounts {
			if a > s.free[c.Set][j] {
				return false
			}
		}
		if !s.groupsAllow(c.Set, c.Groups) {
			return false
		}
	}
	for _, o := range dev.Incompatible {
		if s.used[o] {
			return false
		}
	}
	return true
}

func (s *State) groupsAllow(set int, g []string) bool {
	lists := s.groups[set]
	if s.P.Options.Compat == CompatWildcard {
		for _, l := range lists {
			if len(g) > 0 && len(l) > 0 && !intersects(g, l) {
				return false
			}
		}
		return true
	}
	// KEP-5963: the intersection over all lists, "no groups" being its own
	// group, must stay non-empty.
	if len(g) == 0 {
		// The common case, no groups anywhere, without allocating.
		for _, l := range lists {
			if len(l) > 0 {
				return false
			}
		}
		return true
	}
	cur := modes(g)
	for _, l := range lists {
		cur = intersect(cur, modes(l))
		if len(cur) == 0 {
			return false
		}
	}
	return true
}

// noGroups stands for "no compatibility groups", compatible under KEP-5963
// only with itself.
const noGroups = "\x00none"

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

// Take allocates device d (exclusive: it occupies the device).
func (s *State) Take(d int, exclusive bool) {
	if exclusive {
		s.used[d] = true
	}
	for _, c := range s.P.Devices[d].Consumes {
		for j, a := range c.Amounts {
			s.free[c.Set][j] -= a
		}
		s.groups[c.Set] = append(s.groups[c.Set], c.Groups)
	}
}

// Release undoes the most recent take of d (takes are undone in reverse).
func (s *State) Release(d int, exclusive bool) {
	if exclusive {
		s.used[d] = false
	}
	for _, c := range s.P.Devices[d].Consumes {
		for j, a := range c.Amounts {
			s.free[c.Set][j] += a
		}
		gs := s.groups[c.Set]
		s.groups[c.Set] = gs[:len(gs)-1]
	}
}

// Used tells whether device d is allocated exclusively in this state.
func (s *State) Used(d int) bool { return s.used[d] }

// Free is what is left of counter j of counter set set in this state.
func (s *State) Free(set, j int) int64 { return s.free[set][j] }
