package model

import (
	"math"
	"sync"
)

// Node fingerprints let a placer remember what it worked out for one node
// (the frag look-ahead tries every node for every claim, hundreds of times
// a pass on a large cluster) and know when the node has changed since.
//
// State.NodeFingerprint(n) is a sum of keys over what was taken since
// NewState from the devices and counter sets local to node n, and over the
// pod groups placed on n, plus a hash of every take that is not local to
// one node. A take and its release add and remove the same key, so a state
// restored to the same content has the same fingerprint again, and two
// states of one problem with the same content on n have the same
// fingerprint. Keys are random 64-bit words: different contents share a
// fingerprint with probability about 2⁻⁶⁴, so a placer that reuses an
// answer still checks that its devices fit.

// locality is, per device, the node whose state alone a take of the
// device changes, or -1: shared by the copies of a Problem (Build sets it).
type locality struct {
	once sync.Once
	node []int32
}

// changeNodes is the per-device node of locality.
func (p *Problem) changeNodes() []int32 {
	l := p.locality
	if l == nil {
		return computeChangeNodes(p)
	}
	l.once.Do(func() { l.node = computeChangeNodes(p) })
	return l.node
}

// computeChangeNodes: a device is local to node n when only n reaches it,
// every counter set it draws from is used by devices of n alone, and the
// devices it excludes (compatibleOnlyWith) are local to n too: then taking
// it changes what fits on n and nowhere else.
func computeChangeNodes(p *Problem) []int32 {
	setNode := make([]int, len(p.CounterSets))
	for i, cs := range p.CounterSets {
		setNode[i] = p.CommonNode(cs.Devices)
	}
	out := make([]int32, len(p.Devices))
	for i, d := range p.Devices {
		n := -1
		if !d.All && len(d.Reach) == 1 {
			n = d.Reach[0]
		}
		for _, c := range d.Consumes {
			if setNode[c.Set] != n {
				n = -1
			}
		}
		out[i] = int32(n)
	}
	// A device's fit depends on its incompatible partners: partners on
	// different nodes (or not local) are not local either, to a fixpoint.
	for changed := true; changed; {
		changed = false
		for i, d := range p.Devices {
			for _, o := range d.Incompatible {
				if out[o] != out[i] && (out[o] >= 0 || out[i] >= 0) {
					out[i], out[o] = -1, -1
					changed = true
				}
			}
		}
	}
	return out
}

// NodeFingerprint identifies the state of node n: its local devices and
// counter sets, its pod load, and everything not local to one node. It is
// equal for equal contents (see above); n < 0 is the devices reachable from
// every node, whose state is all in the non-local part.
func (s *State) NodeFingerprint(n int) uint64 {
	last := len(s.sums) - 1
	f := mix64(s.sums[last] ^ 0x6a09e667f3bcc909)
	if s.oneClaim {
		f = ^f
	}
	if n >= 0 && n < last {
		f += s.sums[n]
	}
	return f
}

// noteTake adds (sign 1) or removes (sign -1) the key of taking device d
// for alternative a.
func (s *State) noteTake(d int, a *Alternative, exclusive bool, sign uint64) {
	k := mix64(uint64(d)<<1 | b2u(exclusive))
	if s.P.Devices[d].MultiAlloc {
		for j, x := range a.CapacityAmounts(d) {
			k += mix64(0x9e3779b97f4a7c15+uint64(j)) * uint64(x)
		}
		for j, x := range a.CapacityShares(d) {
			k += mix64(0xbb67ae8584caa73b+uint64(j)) * math.Float64bits(x)
		}
	}
	i := len(s.sums) - 1
	if n := s.change[d]; n >= 0 {
		i = int(n)
	}
	s.sums[i] += sign * k
}

// notePod adds (sign 1) or removes (sign -1) the key of g's pods' requests
// on node n.
func (s *State) notePod(g *PodGroup, n int, sign uint64) {
	if n < 0 || n >= len(s.sums)-1 {
		return
	}
	var k uint64
	for j, v := range g.Requests {
		k += mix64(0x3c6ef372fe94f82b+uint64(j)) * uint64(v)
	}
	s.sums[n] += sign * k
}

const minusOne = ^uint64(0)

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// mix64 is splitmix64's finaliser: a bijection that spreads every input
// bit over the output.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
