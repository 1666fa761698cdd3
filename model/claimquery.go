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
