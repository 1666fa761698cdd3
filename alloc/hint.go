package alloc

import (
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/encode"
)

// hint turns an allocation into assumptions for the SAT model: each pick's
// device variable, each admission and chosen node. Under them the solver
// finds a model of that very allocation by propagation, where a free search
// for a model of equal weight can take as long as a proof (best-fit often
// reaches the proven optimum that the SAT model then has to catch up with).
//
// Identical non-simple claims are interchangeable and the model admits them
// in unit order (symmetry breaking), so their placements are handed to the
// class's units in that order. It returns false when some pick has no
// variable, and the caller solves without the hint.
func hint(m *encode.Model, as []*Assignment) ([]z.Lit, bool) {
	byClaim := map[int]*Assignment{}
	for _, a := range as {
		byClaim[a.Claim.Index] = a
	}
	type pickKey struct{ req, alt, dev int }
	var lits []z.Lit
	// Placements of each class of non-simple claims, in claim order, and
	// how many of them are handed out.
	placements := map[string][]*Assignment{}
	handed := map[string]int{}
	for _, u := range m.Units {
		if u.Simple {
			continue
		}
		if a := byClaim[u.Claims[0].Index]; a != nil {
			k := u.Claims[0].ClassKey()
			placements[k] = append(placements[k], a)
		}
	}
	for _, u := range m.Units {
		x := map[pickKey]z.Lit{}
		for _, v := range u.X {
			x[pickKey{v.Req, v.Alt, v.Dev}] = v.Lit
		}
		if u.Simple {
			for _, c := range u.Claims {
				a := byClaim[c.Index]
				if a == nil {
					continue
				}
				l, ok := x[pickKey{0, 0, a.Picks[0].Dev}]
				if !ok {
					return nil, false
				}
				lits = append(lits, l)
			}
			continue
		}
		k := u.Claims[0].ClassKey()
		if handed[k] == len(placements[k]) {
			continue
		}
		a := placements[k][handed[k]]
		handed[k]++
		lits = append(lits, u.Admit)
		for _, pk := range a.Picks {
			l, ok := x[pickKey{pk.Req, pk.Alt, pk.Dev}]
			if !ok {
				return nil, false
			}
			lits = append(lits, l)
		}
		for i, n := range u.NodeIdx {
			if n == a.Node {
				lits = append(lits, u.NodeLit[i])
			}
		}
	}
	return lits, true
}
