package alloc

import (
	"unsafe"

	"github.com/drasat/drasat/model"
)

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
	// Claims of one class share their candidate list (model's match
	// cache): its devices are joined once, and every claim holding it
	// joins their set through the first one. At 1,000 nodes a MIG claim
	// has tens of thousands of candidates, and joining each claim with
	// each was most of this function's time.
	type list struct {
		data *int
		n    int
	}
	joined := map[list]bool{}
	for _, c := range p.Claims {
		for _, r := range c.Requests {
			for _, a := range r.Alternatives {
				if len(a.Candidates) == 0 {
					continue
				}
				union(c.Index, dev(a.Candidates[0]))
				l := list{unsafe.SliceData(a.Candidates), len(a.Candidates)}
				if joined[l] {
					continue
				}
				joined[l] = true
				for _, d := range a.Candidates[1:] {
					union(dev(a.Candidates[0]), dev(d))
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
