// Package mip writes an allocation problem as a mixed-integer program in
// CPLEX LP format, so that an exact MIP solver (CBC, HiGHS, SCIP, Gurobi)
// can check drasat's answers on instances too large for brute force.
//
// The program has the semantics of the SAT model (encode): the same
// variables, linearised. Maximise the admitted weight subject to
//
//   - a non-simple claim c: admit a_c; per request exactly one selected
//     alternative s when admitted (s = a_c for a single one); per
//     alternative Σ x(c, alt, d) = Count·s (allocation mode All: x ≤ s and
//     every matching device of the chosen node);
//   - node: when the devices could come from different nodes, node
//     variables with Σ = a_c, and x ≤ Σ of the nodes its device reaches;
//   - matchAttribute: one value variable per attribute value, at most one
//     chosen, x ≤ its value; distinctAttribute: at most one x per value;
//     a device lacking the attribute is not taken for the constrained
//     requests;
//   - interchangeable simple claims (one request for one device, no
//     constraints) form a class: an integer count n ≤ the class size and
//     Σ x = n;
//   - a device serves at most one claim; counters Σ amount·(x of the
//     device) ≤ free per counter of every counter set (admin access picks
//     count too, as upstream checks them); compatibility groups under
//     kep5963 one mode per counter set (at most one), a used device needs
//     one of its modes, under wildcard used devices with disjoint
//     non-empty lists exclude each other; compatibleOnlyWith pairs exclude
//     each other;
//   - identical non-simple claims are admitted in input order (symmetry,
//     as the SAT model does; it does not change the optimum);
//   - pods (model.PodGroup): a claim never uses a node its pods refuse or
//     a failing selector excludes; the claims of a group that a node ties
//     (model.Problem.Pinning) choose their node with node variables, are
//     admitted together (equal admission) on the same node (equal node
//     variables), and per node and resource the groups' requests times
//     their first claim's node variable sum to at most what the node has
//     free (model.Problem.NodeFree).
package mip

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/drasat/drasat/model"
)

// Var names of the program, so a solver's solution can be read back.
type Var struct {
	Name string
	// Claims holds the claim of the variable; for a simple class's count
	// and picks, the class's first claim.
	Claims []*model.Claim
	// Dev, Req, Alt: a device variable; Dev is -1 otherwise.
	Dev, Req, Alt int
	// Node is the node of a node variable, -1 otherwise.
	Node int
	Kind VarKind
}

// VarKind tells what a variable stands for.
type VarKind int

// The kinds of variables.
const (
	Admit      VarKind = iota // a non-simple claim is admitted (binary)
	Count                     // how many claims of a simple class are admitted (integer)
	Pick                      // a device serves a request alternative of a non-simple claim (binary)
	ClassPick                 // a device serves a claim of a simple class (binary)
	NodeChoice                // a non-simple claim's node (binary)
	Helper                    // selections, nodes, values, modes (binary)
)

// Program is the written program's variables, in the order they were made.
type Program struct {
	Vars []*Var
	// class lists the claims of each simple class, by its first claim.
	class map[*model.Claim][]*model.Claim
	// Rows counts the constraints.
	Rows int
}

type term struct {
	coef int64
	v    int
}

type writer struct {
	p *model.Problem
	// admit and nodes are each written claim's admission variable and
	// node variables by node, for the pod rules.
	admit map[int]int
	nodes map[int]map[int]int
	prog  *Program
	rows  []string
	bin   []int
	ints  []int
	bound map[int]int64 // upper bound of integer variables
	obj   []term
}

func (w *writer) newVar(v *Var) int {
	w.prog.Vars = append(w.prog.Vars, v)
	return len(w.prog.Vars) - 1
}

func (w *writer) helper(name string) int {
	i := w.newVar(&Var{Name: name, Dev: -1, Node: -1, Kind: Helper})
	w.bin = append(w.bin, i)
	return i
}

// row adds Σ terms op rhs ("<=", ">=" or "=").
func (w *writer) row(name string, ts []term, op string, rhs int64) {
	if len(ts) == 0 {
		return
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, " %s:", name)
	for i, t := range ts {
		if i > 0 && i%8 == 0 {
			sb.WriteString("\n  ")
		}
		switch {
		case t.coef == 1:
			fmt.Fprintf(&sb, " + %s", w.prog.Vars[t.v].Name)
		case t.coef == -1:
			fmt.Fprintf(&sb, " - %s", w.prog.Vars[t.v].Name)
		case t.coef < 0:
			fmt.Fprintf(&sb, " - %d %s", -t.coef, w.prog.Vars[t.v].Name)
		default:
			fmt.Fprintf(&sb, " + %d %s", t.coef, w.prog.Vars[t.v].Name)
		}
	}
	fmt.Fprintf(&sb, " %s %d", op, rhs)
	w.rows = append(w.rows, sb.String())
}

func ones(vs []int, coef int64) []term {
	out := make([]term, len(vs))
	for i, v := range vs {
		out[i] = term{coef, v}
	}
	return out
}

// WriteLP writes the program of all pending claims of p to out and
// returns its variables. Claims of weight 0 add nothing to the objective
// and are left out.
func WriteLP(out io.Writer, p *model.Problem) (*Program, error) {
	for _, d := range p.Devices {
		if d.MultiAlloc {
			// Shares and their capacity sums are not linearised here.
			return nil, fmt.Errorf("device %s allows multiple allocations: consumable capacity is not supported by the LP export", d.ID)
		}
	}
	w := &writer{p: p, prog: &Program{class: map[*model.Claim][]*model.Claim{}}, bound: map[int]int64{}, admit: map[int]int{}, nodes: map[int]map[int]int{}}
	uses := map[int][]int{} // device -> non-admin pick variables
	type adminUse struct{ dev, v int }
	var admin []adminUse
	simple := map[string]int{} // class key -> count variable
	simplePicks := map[int][]int{}
	prevSame := map[string]int{}
	for _, c := range p.Claims {
		if c.Weight <= 0 {
			continue
		}
		if key := simpleKey(c); key != "" {
			if n, ok := simple[key]; ok {
				lead := w.prog.Vars[n].Claims[0]
				w.prog.class[lead] = append(w.prog.class[lead], c)
				w.bound[n]++
				continue
			}
			n := w.newVar(&Var{Name: fmt.Sprintf("n%d", c.Index), Claims: []*model.Claim{c}, Dev: -1, Node: -1, Kind: Count})
			simple[key] = n
			w.prog.class[c] = []*model.Claim{c}
			w.ints = append(w.ints, n)
			w.bound[n] = 1
			w.obj = append(w.obj, term{c.Weight, n})
			var xs []int
			for _, d := range c.Requests[0].Alternatives[0].Candidates {
				if !p.Devices[d].Reachable() {
					continue
				}
				x := w.newVar(&Var{Name: fmt.Sprintf("y%d_%d", c.Index, d), Claims: []*model.Claim{c}, Dev: d, Node: -1, Kind: ClassPick})
				w.bin = append(w.bin, x)
				xs = append(xs, x)
				uses[d] = append(uses[d], x)
			}
			simplePicks[n] = xs
			continue
		}
		a := w.newVar(&Var{Name: fmt.Sprintf("a%d", c.Index), Claims: []*model.Claim{c}, Dev: -1, Node: -1, Kind: Admit})
		w.bin = append(w.bin, a)
		w.admit[c.Index] = a
		w.obj = append(w.obj, term{c.Weight, a})
		if prev, ok := prevSame[c.ClassKey()]; ok {
			w.row(fmt.Sprintf("sym%d", c.Index), []term{{1, a}, {-1, prev}}, "<=", 0)
		}
		prevSame[c.ClassKey()] = a
		for _, pk := range w.claim(c, a) {
			if pk.admin {
				admin = append(admin, adminUse{pk.dev, pk.v})
			} else {
				uses[pk.dev] = append(uses[pk.dev], pk.v)
			}
		}
	}
	// Count rows of simple classes, in variable order.
	var counts []int
	for _, n := range simple {
		counts = append(counts, n)
	}
	sort.Ints(counts)
	for _, n := range counts {
		w.row("cnt"+w.prog.Vars[n].Name, append(ones(simplePicks[n], 1), term{-1, n}), "=", 0)
	}
	devs := make([]int, 0, len(uses))
	for d := range uses {
		devs = append(devs, d)
	}
	sort.Ints(devs)
	for _, d := range devs {
		if len(uses[d]) > 1 {
			w.row(fmt.Sprintf("dev%d", d), ones(uses[d], 1), "<=", 1)
		}
	}
	// Consumers of counter sets: a used device (the sum of its picks), or
	// one admin-access pick.
	type consumer struct {
		dev int
		vs  []int
	}
	bySet := map[int][]consumer{}
	for _, d := range devs {
		for _, cc := range p.Devices[d].Consumes {
			bySet[cc.Set] = append(bySet[cc.Set], consumer{d, uses[d]})
		}
	}
	for _, au := range admin {
		for _, cc := range p.Devices[au.dev].Consumes {
			bySet[cc.Set] = append(bySet[cc.Set], consumer{au.dev, []int{au.v}})
		}
	}
	sets := make([]int, 0, len(bySet))
	for s := range bySet {
		sets = append(sets, s)
	}
	sort.Ints(sets)
	for _, si := range sets {
		set := p.CounterSets[si]
		cons := bySet[si]
		for j := range set.Counters {
			var ts []term
			total := int64(0)
			for _, c := range cons {
				amt := consumption(p.Devices[c.dev], si, j)
				total += amt * int64(len(c.vs))
				for _, v := range c.vs {
					if amt != 0 {
						ts = append(ts, term{amt, v})
					}
				}
			}
			if total > set.Free[j] {
				w.row(fmt.Sprintf("ctr%d_%d", si, j), ts, "<=", set.Free[j])
			}
		}
		w.groups(si, func(yield func(dev int, vs []int)) {
			for _, c := range cons {
				yield(c.dev, c.vs)
			}
		})
	}
	w.pods()
	// compatibleOnlyWith.
	for _, d := range devs {
		for _, o := range p.Devices[d].Incompatible {
			if p.Devices[o].InUse {
				w.row(fmt.Sprintf("cow%d_%d", d, o), ones(uses[d], 1), "<=", 0)
			} else if vo, ok := uses[o]; ok && o > d {
				w.row(fmt.Sprintf("cow%d_%d", d, o), append(ones(uses[d], 1), ones(vo, 1)...), "<=", 1)
			}
		}
	}
	return w.prog, w.write(out)
}

// pods writes the pod rules of the groups a node ties: equal admission
// and node variables for the group's claims, and per node and resource
// the requests of the groups placed there within what it has free.
func (w *writer) pods() {
	p := w.p
	type placed struct {
		req int64
		v   int
	}
	load := map[[2]int][]placed{} // (node, resource) -> groups' node variables
	for _, g := range p.PodGroups {
		first := p.Claims[g.Claims[0]]
		if !p.Pinning(first) {
			continue
		}
		a0, ok := w.admit[first.Index]
		for _, ci := range g.Claims[1:] {
			a, in := w.admit[ci]
			switch {
			case ok && in:
				w.row(fmt.Sprintf("pod%d_%d", g.Index, ci), []term{{1, a}, {-1, a0}}, "=", 0)
				for n := range p.Nodes {
					v0, in0 := w.nodes[first.Index][n]
					v, in1 := w.nodes[ci][n]
					switch {
					case in0 && in1:
						w.row(fmt.Sprintf("podn%d_%d_%d", g.Index, ci, n), []term{{1, v}, {-1, v0}}, "=", 0)
					case in0:
						w.row(fmt.Sprintf("podn%d_%d_%d", g.Index, ci, n), []term{{1, v0}}, "<=", 0)
					case in1:
						w.row(fmt.Sprintf("podn%d_%d_%d", g.Index, ci, n), []term{{1, v}}, "<=", 0)
					}
				}
			case in:
				// A claim of the group is not in the program (weight 0):
				// the group's pods cannot run with it unallocated.
				w.row(fmt.Sprintf("pod%d_%d", g.Index, ci), []term{{1, a}}, "<=", 0)
			case ok:
				w.row(fmt.Sprintf("pod%d_%d", g.Index, ci), []term{{1, a0}}, "<=", 0)
			}
		}
		for n, v := range w.nodes[first.Index] {
			for j, r := range g.Requests {
				if r > 0 && p.Limited(n, j) {
					load[[2]int{n, j}] = append(load[[2]int{n, j}], placed{r, v})
				}
			}
		}
	}
	keys := make([][2]int, 0, len(load))
	for k := range load {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		return keys[a][0] < keys[b][0] || keys[a][0] == keys[b][0] && keys[a][1] < keys[b][1]
	})
	for _, k := range keys {
		var ts []term
		var total int64
		for _, pl := range load[k] {
			ts = append(ts, term{pl.req, pl.v})
			total += pl.req
		}
		if free := max(p.NodeFree[k[0]][k[1]], 0); total > free {
			w.row(fmt.Sprintf("res%d_%d", k[0], k[1]), ts, "<=", free)
		}
	}
}

func consumption(dev *model.Device, set, counter int) int64 {
	for _, c := range dev.Consumes {
		if c.Set == set {
			return c.Amounts[counter]
		}
	}
	return 0
}

// simpleKey is the class of a simple claim (one request for one device of
// one alternative, no constraints, no bound node), "" for other claims;
// as encode.IsSimple.
func simpleKey(c *model.Claim) string {
	if c.Err != nil || c.FixedNode >= 0 || len(c.ExcludedNodes) > 0 || c.Group != nil || len(c.Requests) != 1 || len(c.Constraints) != 0 || len(c.Requests[0].Alternatives) != 1 {
		return ""
	}
	a := c.Requests[0].Alternatives[0]
	if a.All || a.AdminAccess || a.Count != 1 {
		return ""
	}
	return c.ClassKey()
}

type pick struct {
	dev, v int
	admin  bool
}

// claim writes the rows of one non-simple claim admitted by a, and
// returns its device variables.
func (w *writer) claim(c *model.Claim, a int) []pick {
	p := w.p
	ci := c.Index
	if c.Err != nil {
		w.row(fmt.Sprintf("err%d", ci), []term{{1, a}}, "<=", 0)
		return nil
	}
	// Candidate nodes, as the SAT model chooses them.
	needNode, nodeSet := false, map[int]bool{}
	single := len(c.Requests) == 1 && len(c.Requests[0].Alternatives) == 1 &&
		!c.Requests[0].Alternatives[0].All && c.Requests[0].Alternatives[0].Count == 1
	for _, r := range c.Requests {
		for _, alt := range r.Alternatives {
			for _, d := range alt.Candidates {
				dev := p.Devices[d]
				if !dev.All {
					needNode = true
				}
				for _, n := range dev.Reach {
					nodeSet[n] = true
				}
			}
			if alt.All {
				needNode = needNode || len(p.Nodes) > 0
			}
		}
	}
	if c.FixedNode >= 0 {
		nodeSet = map[int]bool{c.FixedNode: true}
		needNode = true
	}
	// Excluded nodes (pods refuse them, a selector fails there) and the
	// pods' node always take node variables.
	pinning := p.Pinning(c)
	if pinning && len(p.Nodes) > 0 {
		needNode = true
	}
	var nodeIdx, nodeVar []int
	if needNode && (!(single && c.FixedNode < 0) || pinning || len(c.ExcludedNodes) > 0) {
		for n := range nodeSet {
			nodeIdx = append(nodeIdx, n)
		}
		if len(nodeSet) == 0 && c.FixedNode < 0 {
			for n := range p.Nodes {
				nodeIdx = append(nodeIdx, n)
			}
		}
		nodeIdx = slices.DeleteFunc(nodeIdx, func(n int) bool { return c.ExcludedNodes[n] })
		sort.Ints(nodeIdx)
		w.nodes[ci] = map[int]int{}
		for _, n := range nodeIdx {
			nv := w.helper(fmt.Sprintf("nd%d_%d", ci, n))
			w.prog.Vars[nv].Kind, w.prog.Vars[nv].Node, w.prog.Vars[nv].Claims = NodeChoice, n, []*model.Claim{c}
			nodeVar = append(nodeVar, nv)
			w.nodes[ci][n] = nv
		}
		w.row(fmt.Sprintf("node%d", ci), append(ones(nodeVar, 1), term{-1, a}), "=", 0)
	}
	nodeOf := func(n int) (int, bool) {
		i := sort.SearchInts(nodeIdx, n)
		if i < len(nodeIdx) && nodeIdx[i] == n {
			return nodeVar[i], true
		}
		return 0, false
	}
	var picks []pick
	perDevice := map[int][]int{}
	type xref struct {
		req, alt, dev, v int
	}
	var xsAll []xref
	for ri, r := range c.Requests {
		sels := make([]int, len(r.Alternatives))
		for ai := range r.Alternatives {
			if len(r.Alternatives) == 1 {
				sels[ai] = a
			} else {
				sels[ai] = w.helper(fmt.Sprintf("s%d_%d_%d", ci, ri, ai))
			}
		}
		if len(sels) > 1 {
			w.row(fmt.Sprintf("sel%d_%d", ci, ri), append(ones(sels, 1), term{-1, a}), "=", 0)
		}
		for ai, alt := range r.Alternatives {
			var xs []int
			xOf := map[int]int{}
			for _, d := range alt.Candidates {
				dev := p.Devices[d]
				if !dev.Reachable() || (c.FixedNode >= 0 && !dev.Reaches(c.FixedNode)) {
					continue
				}
				x := w.newVar(&Var{Name: fmt.Sprintf("x%d_%d_%d_%d", ci, ri, ai, d), Claims: []*model.Claim{c}, Dev: d, Req: ri, Alt: ai, Node: -1, Kind: Pick})
				w.bin = append(w.bin, x)
				xs = append(xs, x)
				xOf[d] = x
				xsAll = append(xsAll, xref{ri, ai, d, x})
				perDevice[d] = append(perDevice[d], x)
				picks = append(picks, pick{d, x, alt.AdminAccess})
				if nodeVar != nil && !dev.All {
					ts := []term{{1, x}}
					for _, n := range dev.Reach {
						if nv, ok := nodeOf(n); ok {
							ts = append(ts, term{-1, nv})
						}
					}
					w.row(fmt.Sprintf("on%d_%d_%d_%d", ci, ri, ai, d), ts, "<=", 0)
				}
			}
			sel := sels[ai]
			name := fmt.Sprintf("%d_%d_%d", ci, ri, ai)
			if !alt.All {
				// Exactly Count devices when selected, none otherwise.
				w.row("cnt"+name, append(ones(xs, 1), term{-int64(alt.Count), sel}), "=", 0)
				if len(xs) == 0 {
					w.row("none"+name, []term{{1, sel}}, "<=", 0)
				}
				continue
			}
			for _, x := range xs {
				w.row("in"+w.prog.Vars[x].Name, []term{{1, x}, {-1, sel}}, "<=", 0)
			}
			w.allMode(name, alt, sel, xOf, nodeIdx, nodeVar)
		}
	}
	devs := make([]int, 0, len(perDevice))
	for d, vs := range perDevice {
		if len(vs) > 1 {
			devs = append(devs, d)
		}
	}
	sort.Ints(devs)
	for _, d := range devs {
		w.row(fmt.Sprintf("once%d_%d", ci, d), ones(perDevice[d], 1), "<=", 1)
	}
	// At most 32 results per claim, all requests together.
	if len(xsAll) > model.MaxResults {
		vs := make([]int, len(xsAll))
		for i, x := range xsAll {
			vs[i] = x.v
		}
		w.row(fmt.Sprintf("results%d", ci), ones(vs, 1), "<=", model.MaxResults)
	}
	// Constraints over value sets (list-type attributes have several
	// values; derivedAttributes replace them per alternative):
	// matchAttribute picks one value that every chosen device has,
	// distinctAttribute lets no value be had by two chosen devices.
	for ki, k := range c.Constraints {
		byValue := map[string][]int{}
		setOf := map[int][]string{}
		var values []string
		for _, x := range xsAll {
			req := c.Requests[x.req]
			alt := req.Alternatives[x.alt]
			if !k.Applies(req, alt) {
				continue
			}
			vals := k.ValuesOf(alt, x.dev)
			if len(vals) == 0 {
				w.row(fmt.Sprintf("lack%d_%d_%s", ci, ki, w.prog.Vars[x.v].Name), []term{{1, x.v}}, "<=", 0)
				continue
			}
			setOf[x.v] = vals
			for _, v := range vals {
				if byValue[v] == nil {
					values = append(values, v)
				}
				byValue[v] = append(byValue[v], x.v)
			}
		}
		switch k.Kind {
		case model.MatchAttribute:
			if len(values) <= 1 {
				continue
			}
			vvOf := map[string]int{}
			var vs []int
			for vi, v := range values {
				vv := w.helper(fmt.Sprintf("v%d_%d_%d", ci, ki, vi))
				vvOf[v] = vv
				vs = append(vs, vv)
			}
			for _, x := range xsAll {
				vals, ok := setOf[x.v]
				if !ok {
					continue
				}
				ts := []term{{1, x.v}}
				for _, v := range vals {
					ts = append(ts, term{-1, vvOf[v]})
				}
				w.row(fmt.Sprintf("m%d_%d_%s", ci, ki, w.prog.Vars[x.v].Name), ts, "<=", 0)
			}
			w.row(fmt.Sprintf("match%d_%d", ci, ki), ones(vs, 1), "<=", 1)
		case model.DistinctAttribute:
			for vi, v := range values {
				if len(byValue[v]) > 1 {
					w.row(fmt.Sprintf("dist%d_%d_%d", ci, ki, vi), ones(byValue[v], 1), "<=", 1)
				}
			}
		}
	}
	return picks
}

// allMode: on the chosen node every matching device must be taken, and a
// node where one cannot be taken is ruled out.
func (w *writer) allMode(name string, alt *model.Alternative, sel int, xOf map[int]int, nodeIdx, nodeVar []int) {
	if nodeVar == nil {
		if len(alt.AllMatch) == 0 {
			w.row("all"+name, []term{{1, sel}}, "<=", 0)
		}
		for _, d := range alt.AllMatch {
			if x, ok := xOf[d]; ok {
				w.row(fmt.Sprintf("all%s_%d", name, d), []term{{1, sel}, {-1, x}}, "<=", 0)
			} else {
				w.row(fmt.Sprintf("all%s_%d", name, d), []term{{1, sel}}, "<=", 0)
			}
		}
		return
	}
	usable := func(d int) bool { _, ok := xOf[d]; return ok }
	for k, n := range nodeIdx {
		nv := nodeVar[k]
		devs, ok := alt.AllOnNode(w.p, n, usable)
		if !ok {
			w.row(fmt.Sprintf("alln%s_%d", name, n), []term{{1, sel}, {1, nv}}, "<=", 1)
			continue
		}
		for _, d := range devs {
			x := xOf[d]
			w.row(fmt.Sprintf("alln%s_%d_%s", name, n, w.prog.Vars[x].Name), []term{{1, sel}, {1, nv}, {-1, x}}, "<=", 1)
		}
	}
}

// groups writes the compatibility groups of counter set si over its
// consumers.
func (w *writer) groups(si int, each func(yield func(dev int, vs []int))) {
	set := w.p.CounterSets[si]
	type cons struct {
		dev int
		vs  []int
	}
	var cs []cons
	each(func(dev int, vs []int) { cs = append(cs, cons{dev, vs}) })
	if w.p.Options.Compat == model.CompatWildcard {
		for i, c := range cs {
			gd := w.p.Devices[c.dev].GroupsIn(si)
			for _, e := range set.ExistingGroups {
				if model.WildcardConflict(gd, e) {
					w.row(fmt.Sprintf("wx%d_%d_%d", si, i, c.dev), ones(c.vs, 1), "<=", 0)
					break
				}
			}
			for j, o := range cs[i+1:] {
				if model.WildcardConflict(gd, w.p.Devices[o.dev].GroupsIn(si)) {
					w.row(fmt.Sprintf("wp%d_%d_%d", si, i, i+1+j), append(ones(c.vs, 1), ones(o.vs, 1)...), "<=", 1)
				}
			}
		}
		return
	}
	grouped := len(set.ExistingGroups) > 0
	for _, c := range cs {
		if len(w.p.Devices[c.dev].GroupsIn(si)) > 0 {
			grouped = true
		}
	}
	if !grouped {
		return
	}
	modes := map[string]int{}
	var ms []int
	for _, c := range cs {
		for _, g := range model.Modes(w.p.Devices[c.dev].GroupsIn(si)) {
			if _, ok := modes[g]; !ok && set.ModeOpen(g) {
				modes[g] = w.helper(fmt.Sprintf("md%d_%d", si, len(modes)))
				ms = append(ms, modes[g])
			}
		}
	}
	if len(ms) > 1 {
		w.row(fmt.Sprintf("mode%d", si), ones(ms, 1), "<=", 1)
	}
	for i, c := range cs {
		ts := ones(c.vs, 1)
		for _, g := range model.Modes(w.p.Devices[c.dev].GroupsIn(si)) {
			if m, ok := modes[g]; ok {
				ts = append(ts, term{-1, m})
			}
		}
		// Each consumer is at most one device use (Σ picks ≤ 1), so
		// Σ picks ≤ Σ its modes says "used only under one of its modes".
		w.row(fmt.Sprintf("gm%d_%d", si, i), ts, "<=", 0)
	}
}

func (w *writer) write(out io.Writer) error {
	bw := bufio.NewWriterSize(out, 1<<16)
	fmt.Fprintln(bw, "\\ drasat allocation problem: maximise the admitted claim weight")
	fmt.Fprintln(bw, "\\ a<i>: claim i admitted; n<i>: claims admitted of the simple class led by claim i;")
	fmt.Fprintln(bw, "\\ x<claim>_<request>_<alternative>_<device>, y<class>_<device>: the device serves it")
	for _, c := range w.p.Claims {
		fmt.Fprintf(bw, "\\ claim %d %s weight %d\n", c.Index, c.Key, c.Weight)
	}
	fmt.Fprintln(bw, "Maximize")
	if len(w.obj) == 0 {
		// A program needs an objective; with no claim it is a constant 0.
		z := w.helper("zero")
		w.obj = []term{{0, z}}
	}
	var sb strings.Builder
	sb.WriteString(" admitted:")
	for i, t := range w.obj {
		if i > 0 && i%8 == 0 {
			sb.WriteString("\n  ")
		}
		fmt.Fprintf(&sb, " + %d %s", t.coef, w.prog.Vars[t.v].Name)
	}
	fmt.Fprintln(bw, sb.String())
	fmt.Fprintln(bw, "Subject To")
	if len(w.rows) == 0 {
		// LP readers want at least one row.
		w.row("trivial", []term{{1, w.obj[0].v}}, ">=", 0)
	}
	for _, r := range w.rows {
		fmt.Fprintln(bw, r)
	}
	w.prog.Rows = len(w.rows)
	if len(w.ints) > 0 {
		fmt.Fprintln(bw, "Bounds")
		for _, n := range w.ints {
			fmt.Fprintf(bw, " 0 <= %s <= %d\n", w.prog.Vars[n].Name, w.bound[n])
		}
		fmt.Fprintln(bw, "Generals")
		writeNames(bw, w.prog, w.ints)
	}
	fmt.Fprintln(bw, "Binaries")
	writeNames(bw, w.prog, w.bin)
	fmt.Fprintln(bw, "End")
	return bw.Flush()
}

func writeNames(bw *bufio.Writer, prog *Program, vs []int) {
	for i, v := range vs {
		if i%10 == 0 {
			if i > 0 {
				bw.WriteByte('\n')
			}
			bw.WriteByte(' ')
		}
		bw.WriteString(" " + prog.Vars[v].Name)
	}
	if len(vs) > 0 {
		bw.WriteByte('\n')
	}
}
