package model

// The pod rules in State: which node each pod group's claims were placed
// on, and what the groups placed take of the nodes' resources. Placers
// ask PodAllows before trying a claim on a node and call PlacePod and
// UnplacePod with the claim's devices. The rules are also checked on
// every answer (alloc), so a placer that does not ask only loses claims.

type podState struct {
	load   *PodLoad
	node   map[*PodGroup]int // node of the group's placed claims
	placed map[*PodGroup]int // claims of the group placed
}

func (s *State) podRules() *podState {
	if s.pods == nil {
		s.pods = &podState{load: NewPodLoad(s.P), node: map[*PodGroup]int{}, placed: map[*PodGroup]int{}}
	}
	return s.pods
}

// PodAllows tells whether claim c may be placed on node n as far as its
// pods go: the other placed claims of its group are on n, or none is and
// the group's pods fit on n besides the groups placed there.
func (s *State) PodAllows(c *Claim, n int) bool {
	g := c.Group
	if g == nil || n < 0 || !s.P.Pinning(c) {
		return true
	}
	ps := s.podRules()
	if ps.placed[g] > 0 {
		return ps.node[g] == n
	}
	return ps.load.Fits(g, n)
}

// PlacePod records claim c placed on node n.
func (s *State) PlacePod(c *Claim, n int) {
	g := c.Group
	if g == nil || n < 0 || !s.P.Pinning(c) {
		return
	}
	ps := s.podRules()
	if ps.placed[g] == 0 {
		ps.node[g] = n
		ps.load.Take(g, n)
		s.notePod(g, n, 1)
	}
	ps.placed[g]++
}

// UnplacePod undoes PlacePod(c, n).
func (s *State) UnplacePod(c *Claim, n int) {
	g := c.Group
	if g == nil || n < 0 || !s.P.Pinning(c) {
		return
	}
	ps := s.podRules()
	if ps.placed[g] == 0 {
		return
	}
	ps.placed[g]--
	if ps.placed[g] == 0 {
		ps.load.Release(g, ps.node[g])
		s.notePod(g, ps.node[g], minusOne)
		delete(ps.node, g)
	}
}

// NodeLeft is what is left of resource j (per Problem.Resources) on node n
// besides the pod groups placed so far; ok is false when the node's
// amount is not known (Problem.Limited).
func (s *State) NodeLeft(n, j int) (left int64, ok bool) {
	if n < 0 || n >= len(s.P.NodeFree) || !s.P.Limited(n, j) {
		return 0, false
	}
	if s.pods == nil {
		return s.P.NodeFree[n][j], true
	}
	return s.pods.load.Free(n, j), true
}
