package model

// EveryRequest tells whether every request of c has an alternative for
// which ok holds: the shape of "c can be served at all" questions (enough
// candidates, a candidate among some devices, a candidate that fits on a
// node), asked by the engine and the look-ahead alike.
func (c *Claim) EveryRequest(ok func(*Alternative) bool) bool {
	for _, r := range c.Requests {
		served := false
		for _, a := range r.Alternatives {
			if ok(a) {
				served = true
				break
			}
		}
		if !served {
			return false
		}
	}
	return true
}

// AllOnNode is what allocationMode All asks of alternative a on node n:
// every matching device n sees, in order, each of which the caller must be
// able to take (usable). ok is false when one of them cannot be taken or
// none matches on n: the alternative is then ruled out there. The SAT model
// and the MIP export both state it, so that they cannot disagree.
func (a *Alternative) AllOnNode(p *Problem, n int, usable func(d int) bool) (devs []int, ok bool) {
	for _, d := range a.AllMatch {
		if !p.Devices[d].SeenFrom(n) {
			continue
		}
		if !usable(d) {
			return nil, false
		}
		devs = append(devs, d)
	}
	return devs, len(devs) > 0
}
