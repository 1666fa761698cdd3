package alloc

import "github.com/drasat/drasat/model"

// components splits the pending claims into groups that can never affect
// each other: two claims interact only through a shared candidate device,
// a shared counter set (counters and compatibility groups), or devices tied
// by compatibleOnlyWith. Each group keeps input order.
func components(p *model.Problem) [][]*model.Claim {
	nd, ns := len(p.Devices), len(p.CounterSets)
	uf := model.NewDisjointSets(len(p.Claims) + nd + ns)
	find, union := uf.Find, uf.Union
	dev := func(d int) int { return len(p.Claims) + d }
	set := func(s int) int { return len(p.Claims) + nd + s }
	for _, c := range p.Claims {
		for _, r := range c.Requests {
			for _, a := range r.Alternatives {
				for _, d := range a.Candidates {
					union(c.Index, dev(d))
				}
			}
		}
	}
	for _, d := range p.Devices {
		for _, cons := range d.Consumes {
			union(dev(d.Index), set(cons.Set))
		}
		for _, o := range d.Incompatible {
			union(dev(d.Index), dev(o))
		}
	}
	podUnions(p, union)
	index := map[int]int{}
	var out [][]*model.Claim
	for _, c := range p.Claims {
		r := find(c.Index)
		i, ok := index[r]
		if !ok {
			i = len(out)
			index[r] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], c)
	}
	return out
}
