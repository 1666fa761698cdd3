package frag

import (
	"sort"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// Refine implements alloc.Lookahead: it re-places the claims res admits,
// largest first, each where FGD's expected fragmentation grows least, and
// keeps that placement when every claim fits and the cluster ends less
// fragmented than with res's placement. The claims admitted, hence the
// objective and its proof, are res's.
func (m *Measure) Refine(p *model.Problem, res *alloc.Result) *alloc.Result {
	if p != m.p || len(m.shapes) == 0 || len(res.Assignments) == 0 {
		return res
	}
	old := model.NewState(p)
	for _, a := range res.Assignments {
		for _, pk := range a.Picks {
			alt := a.Claim.Requests[pk.Req].Alternatives[pk.Alt]
			old.Take(pk.Dev, !alt.AdminAccess)
		}
	}
	oldFrag, _ := m.Frag(old)
	claims := make([]*model.Claim, len(res.Assignments))
	size := map[int]float64{}
	for i, a := range res.Assignments {
		claims[i] = a.Claim
		for _, pk := range a.Picks {
			size[a.Claim.Index] += consumedShare(m, pk.Dev)
		}
	}
	sort.SliceStable(claims, func(i, j int) bool { return size[claims[i].Index] > size[claims[j].Index] })
	s := model.NewState(p)
	var placed []*alloc.Assignment
	for _, c := range claims {
		a, ok := m.Place(s, c, FGD)
		if !ok {
			return res
		}
		placed = append(placed, a)
	}
	if newFrag, _ := m.Frag(s); newFrag >= oldFrag-1e-9 {
		return res
	}
	sort.Slice(placed, func(i, j int) bool { return placed[i].Claim.Index < placed[j].Claim.Index })
	out := *res
	out.Assignments = placed
	return &out
}

var _ alloc.Lookahead = (*Measure)(nil)
