package model

import "fmt"

// KeepOff removes from the pending claim c's candidates every device that
// node n reaches (devices on all nodes stay), so that no allocation of c
// uses node n: a reservation keeps the node for another claim. The build's
// candidate lists are shared between claims, so c gets copies; its class
// key changes with the node kept off, so that it is only interchangeable
// with claims kept off the same nodes. Every placement and encoding of the
// claim reads its candidates, so the exclusion holds everywhere. A claim
// fixed to node n (a pod bound there) is left as it is.
func (p *Problem) KeepOff(c *Claim, n int) {
	if c.FixedNode == n {
		return
	}
	key := c.ClassKey()
	moved := map[*Alternative]*Alternative{}
	for ri, r := range c.Requests {
		rc := *r
		rc.Alternatives = make([]*Alternative, len(r.Alternatives))
		for ai, a := range r.Alternatives {
			ac := *a
			ac.Candidates = nil
			for _, d := range a.Candidates {
				if dev := p.Devices[d]; dev.All || !dev.Reaches(n) {
					ac.Candidates = append(ac.Candidates, d)
				}
			}
			ac.indexByNode(p)
			rc.Alternatives[ai] = &ac
			moved[a] = &ac
		}
		c.Requests[ri] = &rc
	}
	// Derived attributes' values are kept per alternative.
	for i, k := range c.Constraints {
		if k.AltValues == nil {
			continue
		}
		kc := *k
		kc.AltValues = map[*Alternative]map[int][]string{}
		for a, v := range k.AltValues {
			if b, ok := moved[a]; ok {
				a = b
			}
			kc.AltValues[a] = v
		}
		c.Constraints[i] = &kc
	}
	c.nodes = nil
	c.classKey = key + fmt.Sprintf("\x00kept off node %d", n)
}
