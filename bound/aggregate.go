package bound

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/drasat/drasat/model"
)

// shapeKey is equal for items that need the same devices: the same
// counts of the same kinds per request, in each of the same ways.
func shapeKey(it item) string {
	var sb strings.Builder
	for i, way := range it.alts {
		if i > 0 {
			sb.WriteByte('|')
		}
		for _, rq := range way {
			fmt.Fprintf(&sb, "%d%v;", rq.cnt, rq.kinds)
		}
	}
	return sb.String()
}

// fitsAll tells whether the shapes (multiset, as item ways) fit into v.
func fitsAll(shapes [][][]itemReq, v []kc) bool {
	if len(shapes) == 0 {
		return true
	}
	// takeAny stops (false) at the first way that leaves room for the rest.
	return !takeAny(shapes[0], v, func(after []kc, _ bool) bool {
		return !fitsAll(shapes[1:], after)
	})
}

// AggregateStats describes a written aggregated program.
type AggregateStats struct {
	Types, Shapes, Patterns int
}

// WriteAggregateLP writes the aggregated claim-pattern model as an integer
// program in CPLEX LP format: bins grouped by type (their free state),
// claims by class, and per bin type an integer count of bins per maximal
// pattern. A pattern is a multiset of item shapes (items needing the same
// devices, see patterns.go) that fits one maximal kind vector of the
// type; class k's items of shape s need mult·y_k of the patterns' supply
// of s:
//
//	max Σ w_k y_k   s.t.  Σ_p c(t,p) = m_t,  Σ_{k,i: shape s} mult_i y_k ≤ Σ_{t,p} p[s] c(t,p),
//	                      0 ≤ y_k ≤ n_k, c integer
//
// Its optimum bounds the admitted weight (a relaxation: claims split into
// single-device items lose their node), its LP relaxation is the
// claim-pattern relaxation's value, and an exact MIP solver decides it in
// moments where the whole problem takes hours. It returns an error when a
// bin type has no enumerated layouts.
func (r *Relaxation) WriteAggregateLP(w io.Writer) (AggregateStats, error) {
	ag, err := r.aggregate()
	if err != nil {
		return ag.stats, err
	}
	st, ps, shapes, itemShape := ag.stats, ag.ps, ag.shapes, ag.itemShape
	var rows, gens, bounds, obj []string
	supply := map[int][]string{}
	for ti, bt := range r.types {
		var cs []string
		for pi, pat := range ag.pats[ti] {
			name := fmt.Sprintf("c%d_%d", ti, pi)
			cs = append(cs, name)
			gens = append(gens, name)
			cnt := map[int]int{}
			for _, s := range pat {
				cnt[s]++
			}
			for s := range shapes {
				if n := cnt[s]; n > 0 {
					supply[s] = append(supply[s], fmt.Sprintf("%d %s", n, name))
				}
			}
		}
		rows = append(rows, fmt.Sprintf("t%d: %s = %d", ti, strings.Join(cs, " + "), bt.m))
	}
	demandC := map[int]map[int]float64{}
	for ki, k := range r.classes {
		if !ps.served[ki] {
			continue
		}
		y := fmt.Sprintf("y%d", ki)
		gens = append(gens, y)
		bounds = append(bounds, fmt.Sprintf("0 <= %s <= %d", y, k.n))
		obj = append(obj, fmt.Sprintf("%g %s", k.weight, y))
		for _, i := range ps.classItems[ki] {
			if demandC[itemShape[i]] == nil {
				demandC[itemShape[i]] = map[int]float64{}
			}
			demandC[itemShape[i]][ki] += ps.items[i].mult
		}
	}
	for s := range shapes {
		m := demandC[s]
		if len(m) == 0 {
			continue
		}
		var ks []int
		for k := range m {
			ks = append(ks, k)
		}
		sort.Ints(ks)
		var ds []string
		for _, k := range ks {
			ds = append(ds, fmt.Sprintf("%g y%d", m[k], k))
		}
		row := fmt.Sprintf("s%d: %s", s, strings.Join(ds, " + "))
		if len(supply[s]) > 0 {
			row += " - " + strings.Join(supply[s], " - ")
		}
		rows = append(rows, row+" <= 0")
	}
	err = writeIntegerLP(w, "drasat aggregated claim-pattern model: c<type>_<pattern> bins of a type taking a pattern, y<class> claims of a class admitted", obj, rows, bounds, gens)
	return st, err
}

// aggregated is the aggregated model's structure: item shapes and, per bin
// type, its maximal patterns (shape indexes, nondecreasing) and kind vectors.
type aggregated struct {
	stats     AggregateStats
	ps        *patterns
	shapes    [][][]itemReq // per shape: its ways
	itemShape []int
	pats      [][][]int // type -> pattern -> shapes
	vecs      [][][]kc  // type -> its maximal kind vectors
}

func (r *Relaxation) aggregate() (*aggregated, error) {
	return r.aggregateBy(context.Background(), time.Time{})
}

// aggregateBy is aggregate that gives up with an error at deadline (none
// when zero) or when ctx ends: the pattern enumeration is the slow part of
// the model.
func (r *Relaxation) aggregateBy(ctx context.Context, deadline time.Time) (*aggregated, error) {
	ag := &aggregated{ps: r.patternItems()}
	shapeOf := map[string]int{}
	ag.itemShape = make([]int, len(ag.ps.items))
	for i, it := range ag.ps.items {
		k := shapeKey(it)
		s, ok := shapeOf[k]
		if !ok {
			s = len(ag.shapes)
			shapeOf[k] = s
			ag.shapes = append(ag.shapes, it.alts)
		}
		ag.itemShape[i] = s
	}
	shapes := ag.shapes
	ag.stats.Types, ag.stats.Shapes = len(r.types), len(shapes)
	for ti, bt := range r.types {
		lay := r.layoutsOf(bt)
		if lay == nil {
			return ag, fmt.Errorf("bin type %d: too many layouts to enumerate", ti)
		}
		var vecs [][]kc
		for _, v := range lay.vecs {
			var s []kc
			for _, x := range v {
				s = append(s, kc{x.kind, int(x.n)})
			}
			vecs = append(vecs, s)
		}
		ag.vecs = append(ag.vecs, vecs)
		// Maximal patterns, shapes in nondecreasing order. The search
		// keeps what each kind vector can have left after the pattern so
		// far (every way of taking its items, deduplicated): a shape fits
		// when some residual takes it, without packing the whole pattern
		// again at every step.
		extend := func(res [][]kc, s int) [][]kc {
			var out [][]kc
			seen := map[string]bool{}
			for _, r := range res {
				takeAny(shapes[s], r, func(after []kc, _ bool) bool {
					if k := keyOf(after); !seen[k] {
						seen[k] = true
						out = append(out, after)
					}
					return true
				})
			}
			return out
		}
		fitsAny := func(res [][]kc, s int) bool {
			for _, r := range res {
				if !takeAny(shapes[s], r, func([]kc, bool) bool { return false }) {
					return true
				}
			}
			return false
		}
		var pats [][]int
		var cur []int
		var dfs func(from int, res [][]kc)
		steps, late := 0, false
		dfs = func(from int, res [][]kc) {
			if steps++; late || steps%256 == 0 && (ctx.Err() != nil || !deadline.IsZero() && time.Now().After(deadline)) {
				late = true
				return
			}
			// Recurse into the shapes from `from` on; the pattern is maximal
			// when no shape at all fits, and the earlier shapes need
			// checking only when none of those did.
			ext := false
			for s := from; s < len(shapes); s++ {
				next := extend(res, s)
				if len(next) == 0 {
					continue
				}
				ext = true
				cur = append(cur, s)
				dfs(s, next)
				cur = cur[:len(cur)-1]
			}
			for s := 0; s < from && !ext; s++ {
				ext = fitsAny(res, s)
			}
			if !ext {
				pats = append(pats, append([]int(nil), cur...))
			}
		}
		dfs(0, vecs)
		if late {
			return ag, fmt.Errorf("pattern enumeration ran out of time at bin type %d", ti)
		}
		ag.stats.Patterns += len(pats)
		ag.pats = append(ag.pats, pats)
	}
	return ag, nil
}

// RealiseLayouts turns a solution of the aggregated model (values of its
// c<type>_<pattern> variables, as written by WriteAggregateLP) into one
// layout per bin: the bins of each type, in order, take the patterns the
// solution counts, and each such bin keeps the devices of a maximal layout
// whose kind vector holds its pattern. It returns the devices kept
// (indexed by device); bins the solution leaves without a pattern keep
// all their devices. What the claims then get is for the SAT model to
// decide: the pattern says only which devices each GPU is carved into.
func (r *Relaxation) RealiseLayouts(values map[string]float64, perNode bool) ([]bool, error) {
	ag, err := r.aggregate()
	if err != nil {
		return nil, err
	}
	keep, _, err := r.realiseLayouts(ag, values, perNode)
	return keep, err
}

// realiseLayouts is RealiseLayouts that also returns each bin's pattern
// (an index into its type's patterns, by Bin.Index; -1 for a bin the
// solution leaves without one).
func (r *Relaxation) realiseLayouts(ag *aggregated, values map[string]float64, perNode bool) ([]bool, []int, error) {
	keep := make([]bool, len(r.p.Devices))
	patOf := make([]int, len(r.Bins))
	for i := range patOf {
		patOf[i] = -1
	}
	// Bins grouped as the model's variables are: by type, or by type and node.
	type group struct{ t, node int }
	byGroup := map[group][]*Bin{}
	var groups []group
	for _, b := range r.Bins {
		g := group{b.Type, -1}
		if perNode {
			g.node = r.p.CommonNode(b.Devices)
		}
		if byGroup[g] == nil {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], b)
	}
	for _, g := range groups {
		ti := g.t
		lay := r.layoutsOf(r.types[ti])
		bins := byGroup[g]
		next := 0
		for pi, pat := range ag.pats[ti] {
			name := fmt.Sprintf("c%d_%d", ti, pi)
			if perNode {
				name = fmt.Sprintf("c%d_%d_%d", ti, g.node, pi)
			}
			n := int(math.Round(values[name]))
			if n <= 0 {
				continue
			}
			ms := make([][][]itemReq, len(pat))
			for i, s := range pat {
				ms[i] = ag.shapes[s]
			}
			set := bitset(nil)
			for _, cand := range lay.sets {
				var v []kc
				cnt := map[int]int{}
				for i := range lay.kind {
					if cand.has(i) {
						cnt[lay.kind[i]]++
					}
				}
				for k, c := range cnt {
					v = append(v, kc{k, c})
				}
				sort.Slice(v, func(i, j int) bool { return v[i].kind < v[j].kind })
				if fitsAll(ms, v) {
					set = cand
					break
				}
			}
			if set == nil {
				return nil, nil, fmt.Errorf("bin type %d pattern %d: no layout holds it", ti, pi)
			}
			for ; n > 0; n-- {
				if next == len(bins) {
					return nil, nil, fmt.Errorf("bin type %d: the solution uses more than its %d bins", ti, len(bins))
				}
				b := bins[next]
				next++
				patOf[b.Index] = pi
				for i, d := range b.Devices {
					if set.has(i) {
						keep[d] = true
					}
				}
			}
		}
		for ; next < len(bins); next++ {
			for _, d := range bins[next].Devices {
				keep[d] = true
			}
		}
	}
	return keep, patOf, nil
}

// WriteNodeAggregateLP writes the aggregated model with one copy per node:
// bins grouped by type and node, claims by class and node. A claim's
// devices all come from one node (every bin here belongs to one node), so
// the claims split into single-device items keep their node, which the
// global model (WriteAggregateLP) loses: with y<k>_<n> class k's claims
// on node n and c<t>_<n>_<p> bins of type t on node n taking pattern p,
//
//	max Σ w_k y_kn  s.t.  Σ_p c(t,n,p) = m_tn,  Σ_n y_kn ≤ n_k,
//	                      Σ_{k,i: shape s} mult_i y_kn ≤ Σ_{t,p} p[s] c(t,n,p)  per shape and node
//
// Its optimum bounds the admitted weight too, and is at most the global
// model's. It returns an error when a bin spans nodes.
func (r *Relaxation) WriteNodeAggregateLP(w io.Writer) (AggregateStats, error) {
	return r.WriteNodeAggregateLPBy(context.Background(), w, time.Time{})
}

// WriteNodeAggregateLPBy is WriteNodeAggregateLP that gives up with an
// error, writing nothing, when enumerating the patterns is not done by
// deadline (zero: no deadline).
func (r *Relaxation) WriteNodeAggregateLPBy(ctx context.Context, w io.Writer, deadline time.Time) (AggregateStats, error) {
	na, err := r.NodeAggregateBy(ctx, deadline)
	if err != nil {
		return na.Stats, err
	}
	return na.Stats, na.WriteLP(w)
}

// NodesOf reads the claims' nodes from a solution of the per-node model
// (WriteNodeAggregateLP): class k's claims, in the order given, fill the
// y<k>_<n> of the nodes in node order. It returns, per claim index, the
// node of each claim the solution admits; the others are left out.
func (r *Relaxation) NodesOf(values map[string]float64, claims []*model.Claim) map[int]int {
	classOf := map[string]int{}
	for ki, k := range r.classes {
		classOf[k.key] = ki
	}
	// A class's claims fill its nodes in node order, so the first node
	// with room only moves forward: one cursor a class instead of a scan
	// of every node for every claim (30,000 claims x 1,000 nodes).
	type fill struct{ node, took int }
	at := map[int]*fill{}
	out := map[int]int{}
	for _, c := range claims {
		ki, ok := classOf[c.ClassKey()]
		if !ok {
			continue
		}
		f := at[ki]
		if f == nil {
			f = &fill{}
			at[ki] = f
		}
		for ; f.node < len(r.p.Nodes); f.node, f.took = f.node+1, 0 {
			if float64(f.took) < values[fmt.Sprintf("y%d_%d", ki, f.node)]-0.5 {
				f.took++
				out[c.Index] = f.node
				break
			}
		}
	}
	return out
}

// writeIntegerLP writes a maximisation over general integers in CPLEX LP
// format; an empty objective or constraint list gets a placeholder so that
// every solver reads the file.
func writeIntegerLP(w io.Writer, comment string, obj, rows, bounds, gens []string) error {
	var sb strings.Builder
	sb.WriteString("\\ " + comment + "\n")
	if len(obj) == 0 {
		obj = []string{"0 zero"}
		gens = append(gens, "zero")
	}
	sb.WriteString("Maximize\n obj: " + strings.Join(obj, " + ") + "\nSubject To\n")
	if len(rows) == 0 {
		rows = append(rows, "trivial: "+strings.Fields(obj[0])[1]+" >= 0")
	}
	for _, r := range rows {
		sb.WriteString(" " + r + "\n")
	}
	if len(bounds) > 0 {
		sb.WriteString("Bounds\n")
		for _, b := range bounds {
			sb.WriteString(" " + b + "\n")
		}
	}
	sb.WriteString("Generals\n " + strings.Join(gens, "\n ") + "\nEnd\n")
	_, err := io.WriteString(w, sb.String())
	return err
}
