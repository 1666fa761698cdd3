package explain

import (
	"context"
	"sort"
	"time"

	"github.com/go-air/gini/logic"
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// WhatIf names the fewest allocations that must leave their devices for
// the claim to fit. Allocations in the claim's way (holding one of its
// candidate devices, or a device of a counter set its candidates draw from,
// or a compatibleOnlyWith partner) may be released; a released claim that
// is pending in the problem may move to other free devices in the same
// solve. The solver minimises the number released, then, among those, the
// number that cannot move (evictions). Allocations not in the way stay.
type WhatIf struct {
	// Possible is false when the claim does not fit even with every
	// allocation in its way released.
	Possible bool `json:"possible"`
	// Optimal: the numbers are proven minimal (false when the budget ran out).
	Optimal bool       `json:"optimal"`
	Release []Released `json:"release"`
	// Devices the claim would get.
	Devices []string `json:"devices,omitempty"`
}

// Released is one allocation to release.
type Released struct {
	Claim    string   `json:"claim"`
	Existing bool     `json:"existing"`
	From     []string `json:"from"`
	// MovedTo lists the devices the claim can move to; empty: it is evicted.
	MovedTo []string `json:"movedTo,omitempty"`
}

// blockers are the allocations in target's way.
func (e *explainer) blockers(target *model.Claim) []int {
	devs := map[int]bool{}
	sets := map[int]bool{}
	for _, r := range target.Requests {
		for _, a := range r.Alternatives {
			for _, d := range append(append([]int(nil), a.Candidates...), a.AllMatch...) {
				devs[d] = true
				for _, o := range e.p.Devices[d].Incompatible {
					devs[o] = true
				}
				for _, c := range e.p.Devices[d].Consumes {
					sets[c.Set] = true
				}
			}
		}
	}
	var out []int
	for i, ds := range e.fixed {
		in := false
		for _, d := range ds {
			if devs[d] {
				in = true
			}
			for _, c := range e.p.Devices[d].Consumes {
				if sets[c.Set] {
					in = true
				}
			}
		}
		if in && e.allocs[i].Claim != target.Key {
			out = append(out, i)
		}
	}
	return out
}

func (e *explainer) whatIf(ctx context.Context, target *model.Claim, opts Options) (*WhatIf, error) {
	if target.Err != nil {
		return &WhatIf{Optimal: true}, nil
	}
	if !time.Now().Before(opts.Deadline) || ctx.Err() != nil {
		// No time to encode the claims in the way: no answer (it reads
		// "no answer within the budget").
		return &WhatIf{}, nil
	}
	blockers := e.blockers(target)
	byKey := map[string]*model.Claim{}
	for _, c := range e.p.Claims {
		byKey[c.Key] = c
	}
	claims := []*model.Claim{target}
	unitOf := map[int]int{} // blocker -> unit index
	for _, b := range blockers {
		if c := byKey[e.allocs[b].Claim]; c != nil && c != target && c.Err == nil {
			unitOf[b] = len(claims)
			claims = append(claims, c)
		}
	}
	m, err := e.encode(ctx, claims)
	if err != nil {
		return nil, err
	}
	isBlocker := map[int]bool{}
	var changed, evicted []z.Lit
	for _, b := range blockers {
		isBlocker[b] = true
		k := m.Fixed[b]
		changed = append(changed, k.Not())
		ev := m.C.Lit()
		if ui, ok := unitOf[b]; ok {
			a := m.Units[ui].Admit
			m.Clauses = append(m.Clauses, []z.Lit{k.Not(), a.Not()}, []z.Lit{k, a, ev})
		} else {
			m.Clauses = append(m.Clauses, []z.Lit{k, ev})
		}
		evicted = append(evicted, ev)
	}
	var chCard, evCard *logic.CardSort
	if len(changed) > 0 {
		chCard = logic.NewCardSort(changed, m.C)
		evCard = logic.NewCardSort(evicted, m.C)
	}
	s := solver.New(m.C, m.Clauses)
	base := goal(m, opts.Prefer)
	for _, g := range m.Groups {
		if g.Kind == encode.GroupFixed && isBlocker[g.Fixed] {
			continue
		}
		base = append(base, g.Lit)
	}
	solve := func(extra ...z.Lit) solver.Result {
		return s.Solve(ctx, opts.Deadline, append(append([]z.Lit(nil), base...), extra...)...)
	}
	w := &WhatIf{Optimal: true}
	if chCard == nil {
		r := solve()
		w.Possible, w.Optimal = r == solver.Sat, r != solver.Unknown
		if w.Possible {
			w.Devices = e.unitDevices(m, 0, s)
		}
		return w, nil
	}
	// Fewest released, counting up: the first satisfiable bound is proven
	// minimal by the unsatisfiable ones before it.
	best := -1
	for b := 0; b <= len(changed); b++ {
		r := solve(chCard.Leq(b))
		if r == solver.Sat {
			best = b
			break
		}
		if r == solver.Unknown {
			w.Optimal = false
			if solve() == solver.Sat { // any solution at all
				best = len(changed)
			}
			break
		}
	}
	if best < 0 {
		return w, nil
	}
	w.Possible = true
	lim := chCard.Leq(best)
	done := false
	for ev := 0; ev <= best && !done; ev++ {
		switch solve(lim, evCard.Leq(ev)) {
		case solver.Sat:
			done = true
		case solver.Unknown:
			w.Optimal = false
			if solve(lim) != solver.Sat {
				return w, nil
			}
			done = true
		}
	}
	for _, b := range blockers {
		if s.Value(m.Fixed[b]) {
			continue
		}
		a := e.allocs[b]
		rel := Released{Claim: a.Claim, Existing: a.Existing}
		for _, d := range e.fixed[b] {
			rel.From = append(rel.From, e.p.Devices[d].ID.String())
		}
		if ui, ok := unitOf[b]; ok && s.Value(m.Units[ui].Admit) {
			rel.MovedTo = e.unitDevices(m, ui, s)
		}
		w.Release = append(w.Release, rel)
	}
	sort.Slice(w.Release, func(i, j int) bool { return w.Release[i].Claim < w.Release[j].Claim })
	w.Devices = e.unitDevices(m, 0, s)
	return w, nil
}

// unitDevices lists the devices unit ui gets in the solver's model.
func (e *explainer) unitDevices(m *encode.Model, ui int, s *solver.S) []string {
	var out []string
	for _, x := range m.Units[ui].X {
		if s.Value(x.Lit) {
			out = append(out, e.p.Devices[x.Dev].ID.String())
		}
	}
	return out
}
