package explain

import (
	"context"
	"time"

	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// A claim's devices all come from one node, so "why does it fit nowhere"
// is "why does it fit on no node", node by node. On a large cluster the
// model of the whole cluster holds every allocation as an assumption, and
// the deletion that makes a core minimal solves it once per reason: for a
// claim that lost on 64 nodes, hundreds of solves that each propagate
// thousands of assumptions. Split by node, each solve sees one node's
// devices and the allocations there, and removing a reason of one node
// changes only that node's model.
//
// The split is exact when the claim's candidates and everything they
// interact with (the other devices of their counter sets, compatibleOnlyWith
// partners) belong to a single node each, which is how node-local drivers
// publish; otherwise the whole-cluster model is used.

// nodePart is the claim's model restricted to the devices of one node.
type nodePart struct {
	m    *encode.Model
	s    *solver.S
	goal []z.Lit
	ids  []int   // the groups the part has, as ids of the split's groups
	lits []z.Lit // the part's literal of each of ids
}

// groupKey identifies a constraint group across models of one problem.
type groupKey struct {
	kind                        encode.GroupKind
	set, counter, device, other int
	claim, constraint, fixed    int
}

func keyOf(g encode.Group) groupKey {
	return groupKey{g.Kind, g.Set, g.Counter, g.Device, g.Other, g.Claim, g.Constraint, g.Fixed}
}

// splitNodes lists the nodes of target's candidates when the claim can be
// explained node by node (see above), else ok is false.
func (e *explainer) splitNodes(target *model.Claim) (nodes []int, ok bool) {
	if target.FixedNode >= 0 {
		return nil, false
	}
	nodes = target.CandidateNodes(e.p)
	if len(nodes) == 0 || nodes[0] < 0 {
		return nil, false
	}
	local := func(d, n int) bool { return e.p.CommonNode([]int{d}) == n }
	for _, r := range target.Requests {
		for _, a := range r.Alternatives {
			if a.All {
				return nil, false
			}
			for _, d := range a.Candidates {
				dev := e.p.Devices[d]
				n := e.p.CommonNode([]int{d})
				if n < 0 {
					return nil, false
				}
				for _, c := range dev.Consumes {
					for _, o := range e.p.CounterSets[c.Set].Devices {
						if !local(o, n) {
							return nil, false
						}
					}
				}
				for _, o := range dev.Incompatible {
					if !local(o, n) {
						return nil, false
					}
				}
			}
		}
	}
	return nodes, true
}

// part encodes target on node n: its candidates there, and the
// allocations holding a device there (the others keep their index in
// Options.Fixed but hold nothing, so group indexes agree across parts).
func (e *explainer) part(ctx context.Context, target *model.Claim, n int, prefer map[int]int) (*nodePart, error) {
	fixed := make([]encode.Fixed, len(e.allocs))
	for i, a := range e.allocs {
		fixed[i].Name = a.Claim
		for _, d := range e.fixed[i] {
			if e.p.Devices[d].Reaches(n) {
				fixed[i].Devices, fixed[i].Amounts = e.fixed[i], e.amounts[i]
				break
			}
		}
	}
	m, err := encode.Encode(ctx, e.p, []*model.Claim{target}, encode.Options{
		Groups: true, PerClaim: true, Fixed: fixed,
		Allowed: func(d int) bool { return e.p.Devices[d].Reaches(n) },
	})
	if err != nil {
		return nil, err
	}
	return &nodePart{m: m, s: solver.New(m.C, m.Clauses), goal: goal(m, prefer)}, nil
}

// solve solves the part with those of its groups that are in.
func (pt *nodePart) solve(ctx context.Context, deadline time.Time, in []bool) solver.Result {
	as := append([]z.Lit(nil), pt.goal...)
	for i, id := range pt.ids {
		if in[id] {
			as = append(as, pt.lits[i])
		}
	}
	return pt.s.Solve(ctx, deadline, as...)
}

// why lists the ids of the part's failed assumptions.
func (pt *nodePart) why() []int {
	failed := map[z.Lit]bool{}
	for _, l := range pt.s.Why() {
		failed[l] = true
	}
	var out []int
	for i, l := range pt.lits {
		if failed[l] {
			out = append(out, pt.ids[i])
		}
	}
	return out
}

// coreByNode is core for a claim split by node.
func (e *explainer) coreByNode(ctx context.Context, target *model.Claim, nodes []int, opts Options) ([]Reason, bool, error) {
	sc, err := e.splitCore(ctx, target, nodes, opts)
	switch {
	case err != nil:
		return nil, false, err
	case sc.fits:
		return []Reason{fitsReason}, true, nil
	case sc.unknown:
		return e.unknown(ctx), false, nil
	}
	reasons := e.reasons(target, nil, sc.groups)
	if len(reasons) == 0 {
		reasons = e.structural(target, opts.Prefer)
	}
	return reasons, sc.minimal, nil
}

// splitResult is what splitCore found: the claim fits, the budget ran out
// before any core was found, or a core (minimal unless the budget ran out
// while reducing it).
type splitResult struct {
	fits, unknown, minimal bool
	groups                 []encode.Group
}

// splitCore finds a core per node from the failed assumptions, reduces
// their union by deletion (dropping a group re-solves only the parts that
// have it), and adds the one-node rule when the claim would fit without it.
func (e *explainer) splitCore(ctx context.Context, target *model.Claim, nodes []int, opts Options) (splitResult, error) {
	var (
		parts  []*nodePart
		groups []encode.Group // by id
		ids    = map[groupKey]int{}
		owners [][]int // parts having each group
	)
	for _, n := range nodes {
		if !time.Now().Before(opts.Deadline) || ctx.Err() != nil {
			return splitResult{unknown: true}, nil
		}
		pt, err := e.part(ctx, target, n, opts.Prefer)
		if err != nil {
			return splitResult{}, err
		}
		for _, g := range pt.m.Groups {
			k := keyOf(g)
			id, ok := ids[k]
			if !ok {
				id = len(groups)
				ids[k] = id
				groups = append(groups, g)
				owners = append(owners, nil)
			}
			owners[id] = append(owners[id], len(parts))
			pt.ids = append(pt.ids, id)
			pt.lits = append(pt.lits, g.Lit)
		}
		parts = append(parts, pt)
	}
	in := make([]bool, len(groups))
	for i := range in {
		in[i] = true
	}
	for _, pt := range parts {
		switch pt.solve(ctx, opts.Deadline, in) {
		case solver.Sat:
			return splitResult{fits: true}, nil
		case solver.Unknown:
			return splitResult{unknown: true}, nil
		}
	}
	// The union of the parts' failed assumptions, in id order.
	clear(in)
	for _, pt := range parts {
		for _, id := range pt.why() {
			in[id] = true
		}
	}
	// Deletion: a group is needed when some part that has it becomes
	// satisfiable without it; the other parts do not change.
	minimal := true
	for id := range groups {
		if !in[id] {
			continue
		}
		in[id] = false
		needed, known := false, true
		for _, pi := range owners[id] {
			switch parts[pi].solve(ctx, opts.Deadline, in) {
			case solver.Sat:
				needed = true
			case solver.Unknown:
				known = false
			}
			if needed || !known {
				break
			}
		}
		if needed || !known {
			in[id] = true
		}
		if !known {
			minimal = false
			break
		}
	}
	var core []encode.Group
	var coreKeys []groupKey
	for id, g := range groups {
		if in[id] {
			core = append(core, g)
			coreKeys = append(coreKeys, keyOf(g))
		}
	}
	// Node by node the claim fits nowhere; whether it would fit with its
	// devices spread over nodes is the one-node rule's question, for the
	// whole cluster's model (claims of one device cannot spread).
	if needsDevices(target, opts.Prefer) > 1 {
		node, decided, err := e.oneNodeNeeded(ctx, target, coreKeys, opts)
		if err != nil {
			return splitResult{}, err
		}
		if node != nil {
			// First, as the whole model lists it.
			core = append([]encode.Group{*node}, core...)
		}
		minimal = minimal && decided
	}
	return splitResult{minimal: minimal, groups: core}, nil
}

// oneNodeNeeded solves the whole cluster's model with the core's groups
// and without the claim's one-node rule: satisfiable means the rule is a
// reason too. It returns the rule's group then; decided is false when the
// solver ran out of budget (the rule is then named, to be safe).
func (e *explainer) oneNodeNeeded(ctx context.Context, target *model.Claim, core []groupKey, opts Options) (*encode.Group, bool, error) {
	m, err := e.encode(ctx, []*model.Claim{target})
	if err != nil {
		return nil, false, err
	}
	var node *encode.Group
	as := goal(m, opts.Prefer)
	want := map[groupKey]bool{}
	for _, k := range core {
		want[k] = true
	}
	for _, g := range m.Groups {
		if g.Kind == encode.GroupNode && g.Claim == target.Index {
			g := g
			node = &g
			continue
		}
		if want[keyOf(g)] {
			as = append(as, g.Lit)
		}
	}
	if node == nil {
		return nil, true, nil
	}
	switch solver.New(m.C, m.Clauses).Solve(ctx, opts.Deadline, as...) {
	case solver.Sat:
		return node, true, nil
	case solver.Unsat:
		return nil, true, nil
	}
	return node, false, nil
}

// needsDevices is how many devices the claim takes at least (preferred
// alternatives as asked).
func needsDevices(c *model.Claim, prefer map[int]int) int {
	total := 0
	for ri, r := range c.Requests {
		least := -1
		for ai, a := range r.Alternatives {
			if want, ok := prefer[ri]; ok && want != ai {
				continue
			}
			if least < 0 || a.Count < least {
				least = a.Count
			}
		}
		total += max(least, 0)
	}
	return total
}
