package model

import "slices"

// State tracks what is taken while claims are placed one by one: devices,
// counters, the compatibility-group lists of each counter set, and the
// capacity left on shared (allowMultipleAllocations) devices. It is the one
// place that decides whether a device can still be allocated; greedy
// placement, layout pricing and the tests' brute force all go through it.
//
// Fits, Take and Release are for devices without allowMultipleAllocations
// (or shares that consume no capacity); a share of a shared device goes
// through FitsFor, TakeFor and ReleaseFor with the alternative it serves,
// which says how much capacity it consumes.
type State struct {
	P      *Problem
	used   []bool
	free   [][]int64
	groups [][][]string // per counter set: group lists of allocated devices
	shares []int32      // per device: new shares of a shared device
	capa   [][]int64    // per shared device: capacity left, per Device.Capacity
	// capShare: per shared device, what is left of each capacity as a
	// share of its value (CapacityDim.FreeShare minus the new shares),
	// kept also where capa is not; frag's measure reads it.
	capShare [][]float64
	// oneClaim: the state follows the scheduler's search for one claim,
	// which does not know Device.OrderExclusive.
	oneClaim bool
	// pods: the pod groups placed so far (podstate.go); nil until used.
	pods *podState
	// sums: per node, then one for the rest, NodeFingerprint's sums
	// (fingerprint.go); change: per device, the node its takes change.
	sums   []uint64
	change []int32
}

// NewState is the state before any pending claim is placed.
func NewState(p *Problem) *State {
	s := &State{P: p, used: make([]bool, len(p.Devices)), free: make([][]int64, len(p.CounterSets)), groups: make([][][]string, len(p.CounterSets)),
		shares: make([]int32, len(p.Devices)), capa: make([][]int64, len(p.Devices)), capShare: make([][]float64, len(p.Devices)),
		sums: make([]uint64, len(p.Nodes)+1), change: p.changeNodes()}
	for i, d := range p.Devices {
		s.used[i] = d.InUse
		for _, c := range d.Capacity {
			s.capa[i] = append(s.capa[i], c.Free)
			s.capShare[i] = append(s.capShare[i], c.FreeShare)
		}
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
func (s *State) Fits(d int, exclusive bool) bool { return s.FitsFor(d, nil, exclusive) }

// FitsFor tells whether device d can be newly allocated now for alternative
// a. A shared device is never occupied by new claims (only an existing
// dedicated result holds it); a share must fit in the capacity left, and
// only the device's first share needs its counters and groups.
func (s *State) FitsFor(d int, a *Alternative, exclusive bool) bool {
	return s.capacityFits(d, a) && s.fitsBesidesCapacity(d, a, exclusive)
}

// capacityFits: a share of shared device d for a fits in the capacity left.
func (s *State) capacityFits(d int, a *Alternative) bool {
	if !s.P.Devices[d].MultiAlloc {
		return true
	}
	amounts := a.CapacityAmounts(d)
	for j, left := range s.capa[d] {
		var need int64
		if amounts != nil {
			need = amounts[j]
		}
		if need > left {
			return false
		}
	}
	return true
}

// fitsBesidesCapacity is FitsFor without capacityFits (the allocator checks
// the capacity left after a claim's constraints).
func (s *State) fitsBesidesCapacity(d int, a *Alternative, exclusive bool) bool {
	if exclusive && s.used[d] {
		return false
	}
	dev := s.P.Devices[d]
	if s.charges(d) {
		if !s.countersFit(dev) {
			return false
		}
	}
	// Admin access does not occupy the device: only devices that take
	// their device exclude each other (as in the SAT model).
	if !exclusive && !dev.MultiAlloc {
		return true
	}
	for _, o := range dev.Incompatible {
		if s.Taken(o) && !(s.oneClaim && slices.Contains(dev.OrderExclusive, o)) {
			return false
		}
	}
	return true
}

// charges tells whether a new allocation of d consumes its counters: every
// allocation of a device that is not shared, only the first share of one
// that is (counting existing shares).
func (s *State) charges(d int) bool {
	dev := s.P.Devices[d]
	return !dev.MultiAlloc || !dev.ExistingShared && s.shares[d] == 0
}

// Taken tells whether d is allocated in this state: held, or shared by a
// new claim.
func (s *State) Taken(d int) bool { return s.used[d] || s.shares[d] > 0 }

func (s *State) countersFit(dev *Device) bool {
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
	return true
}

func (s *State) groupsAllow(set int, g []string) bool {
	lists := s.groups[set]
	if s.P.Options.Compat == CompatWildcard {
		for _, l := range lists {
			if WildcardConflict(g, l) {
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
	cur := Modes(g)
	for _, l := range lists {
		cur = intersect(cur, Modes(l))
		if len(cur) == 0 {
			return false
		}
	}
	return true
}

// NoGroups stands for "no compatibility groups", compatible under KEP-5963
// only with itself.
const NoGroups = "\x00none"

// Modes are a device's KEP-5963 modes on a counter set: its groups, or
// NoGroups when it has none. Devices may share a set when the
// intersection of their modes is not empty.
func Modes(g []string) []string {
	if len(g) == 0 {
		return []string{NoGroups}
	}
	return g
}

// WildcardConflict is the wildcard semantics' rule: two devices conflict
// only when both have groups and share none (no groups go with anything).
func WildcardConflict(a, b []string) bool {
	return len(a) > 0 && len(b) > 0 && !intersects(a, b)
}

// GroupsIn are d's compatibility groups on counter set set (nil: none).
func (d *Device) GroupsIn(set int) []string {
	for _, c := range d.Consumes {
		if c.Set == set {
			return c.Groups
		}
	}
	return nil
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
func (s *State) Take(d int, exclusive bool) { s.TakeFor(d, nil, exclusive) }

// TakeFor allocates device d for alternative a: a share of a shared
// device, or the device itself (exclusive: it occupies the device).
func (s *State) TakeFor(d int, a *Alternative, exclusive bool) {
	dev := s.P.Devices[d]
	charge := s.charges(d)
	s.noteTake(d, a, exclusive, 1)
	if dev.MultiAlloc {
		for j, x := range a.CapacityAmounts(d) {
			s.capa[d][j] -= x
		}
		for j, x := range a.CapacityShares(d) {
			s.capShare[d][j] -= x
		}
		s.shares[d]++
	} else if exclusive {
		s.used[d] = true
	}
	if !charge {
		return
	}
	for _, c := range dev.Consumes {
		for j, a := range c.Amounts {
			s.free[c.Set][j] -= a
		}
		s.groups[c.Set] = append(s.groups[c.Set], c.Groups)
	}
}

// Release undoes the most recent take of d (takes are undone in reverse).
func (s *State) Release(d int, exclusive bool) { s.ReleaseFor(d, nil, exclusive) }

// ReleaseFor undoes the most recent TakeFor(d, a, exclusive).
func (s *State) ReleaseFor(d int, a *Alternative, exclusive bool) {
	dev := s.P.Devices[d]
	s.noteTake(d, a, exclusive, minusOne)
	if dev.MultiAlloc {
		for j, x := range a.CapacityAmounts(d) {
			s.capa[d][j] += x
		}
		for j, x := range a.CapacityShares(d) {
			s.capShare[d][j] += x
		}
		s.shares[d]--
	} else if exclusive {
		s.used[d] = false
	}
	if !s.charges(d) {
		return
	}
	for _, c := range dev.Consumes {
		for j, a := range c.Amounts {
			s.free[c.Set][j] += a
		}
		gs := s.groups[c.Set]
		s.groups[c.Set] = gs[:len(gs)-1]
	}
}

// Used tells whether device d is allocated exclusively in this state.
func (s *State) Used(d int) bool { return s.used[d] }

// ShareLeft is what is left of capacity j (per Device.Capacity) of shared
// device d, as a share of its value (0..1; below 0 when existing
// allocations overdraw it).
func (s *State) ShareLeft(d, j int) float64 { return s.capShare[d][j] }

// Free is what is left of counter j of counter set set in this state.
func (s *State) Free(set, j int) int64 { return s.free[set][j] }
