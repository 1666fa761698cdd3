package alloc

import (
	"sort"

	"github.com/go-air/gini/logic"
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// drawsOnCounters tells whether some pick consumes from a counter set.
func drawsOnCounters(p *model.Problem, as []*Assignment) bool {
	for _, a := range as {
		for _, pk := range a.Picks {
			if len(p.Devices[pk.Dev].Consumes) > 0 {
				return true
			}
		}
	}
	return false
}

func estimateVariables(claims []*model.Claim) int {
	n := 0
	for _, c := range claims {
		for _, r := range c.Requests {
			for _, a := range r.Alternatives {
				n += len(a.Candidates)
			}
		}
	}
	return n
}

func unitsByClaim(m *encode.Model) map[int]*encode.Unit {
	out := map[int]*encode.Unit{}
	for _, u := range m.Units {
		for _, c := range u.Claims {
			out[c.Index] = u
		}
	}
	return out
}

// objectiveSorter counts admitted weight in unary: each unit contributes
// "at least j of its claims" literals, repeated by weight.
func objectiveSorter(m *encode.Model, claimValue func(*model.Claim) int64) *logic.CardSort {
	var lits []z.Lit
	for _, u := range m.Units {
		w := claimValue(u.Claims[0])
		n := len(u.Claims)
		if u.Simple {
			n = min(n, len(u.X))
		}
		for j := 1; j <= n; j++ {
			l := u.AtLeast(m.C, j)
			for k := int64(0); k < w; k++ {
				lits = append(lits, l)
			}
		}
	}
	return logic.NewCardSort(lits, m.C)
}

// penaltySorter counts, per firstAvailable request, the index of the chosen
// subrequest.
func penaltySorter(m *encode.Model) *logic.CardSort {
	var lits []z.Lit
	for _, u := range m.Units {
		for _, sels := range u.Sel {
			for i, l := range sels {
				for k := 0; k < i; k++ {
					lits = append(lits, l)
				}
			}
		}
	}
	return logic.NewCardSort(lits, m.C)
}

// decode reads the assignments from the last satisfiable model.
func decode(p *model.Problem, m *encode.Model, s *solver.S) []*Assignment {
	var out []*Assignment
	for _, u := range m.Units {
		if u.Simple {
			i := 0
			for _, x := range u.X {
				if i < len(u.Claims) && s.Value(x.Lit) {
					out = append(out, &Assignment{Claim: u.Claims[i], Node: deviceNode(p, x.Dev), Picks: []Pick{{0, 0, x.Dev}}})
					i++
				}
			}
			continue
		}
		if !s.Value(u.Admit) {
			continue
		}
		a := &Assignment{Claim: u.Claims[0], Node: -1}
		for _, x := range u.X {
			if s.Value(x.Lit) {
				a.Picks = append(a.Picks, Pick{x.Req, x.Alt, x.Dev})
			}
		}
		for i, l := range u.NodeLit {
			if s.Value(l) {
				a.Node = u.NodeIdx[i]
			}
		}
		if u.NodeLit == nil && len(a.Picks) > 0 {
			a.Node = deviceNode(p, a.Picks[0].Dev)
		}
		out = append(out, a)
	}
	return out
}

// deviceNode is the node a lone device pins its claim to (-1: any). It
// differs from model.Problem.CommonNode on purpose: a device several
// nodes reach (a multi-host device's node selector) still gives the
// assignment a node, the first that reaches it, where its pod may run;
// the result's nodeSelector is the device's own (nodeSelector, result.go).
func deviceNode(p *model.Problem, d int) int {
	dev := p.Devices[d]
	if dev.All || len(dev.Reach) == 0 {
		return -1
	}
	return dev.Reach[0]
}

// secondary measures the lower levels of the objective: the summed index of
// chosen firstAvailable subrequests, and the untouched counter sets newly
// touched.
func secondary(p *model.Problem, as []*Assignment) (penalty int64, touched int) {
	sets := map[int]bool{}
	for _, a := range as {
		seen := map[int]bool{}
		for _, pk := range a.Picks {
			if !seen[pk.Req] {
				seen[pk.Req] = true
				penalty += int64(pk.Alt)
			}
			alt := a.Claim.Requests[pk.Req].Alternatives[pk.Alt]
			if alt.AdminAccess {
				continue
			}
			for _, c := range p.Devices[pk.Dev].Consumes {
				cs := p.CounterSets[c.Set]
				if cs.Untouched() {
					sets[c.Set] = true
				}
			}
		}
	}
	return penalty, len(sets)
}

// byPrice orders claims by what serving them costs at prices π per unit of
// weight, cheapest first (ties in size order).
func byPrice(rel *bound.Relaxation, bySize []*model.Claim, price []float64, claimValue func(*model.Claim) int64) []*model.Claim {
	out := append([]*model.Claim(nil), bySize...)
	cost := map[int]float64{}
	for _, c := range out {
		cost[c.Index] = rel.ClaimCost(c, price) / float64(max(claimValue(c), 1))
	}
	sort.SliceStable(out, func(i, j int) bool { return cost[out[i].Index] < cost[out[j].Index] })
	return out
}

// interleave orders the stages of several descents for best-fit: the
// second stages of each, then the third ones, and so on, the first stages
// (prices barely moved from the start) last.
func interleave(lists [][][]float64) [][]float64 {
	var out [][]float64
	for k := 1; ; k++ {
		added := false
		for _, l := range lists {
			if k < len(l) {
				out = append(out, l[k])
				added = true
			}
		}
		if !added {
			break
		}
	}
	for _, l := range lists {
		if len(l) > 0 {
			out = append(out, l[0])
		}
	}
	return out
}
