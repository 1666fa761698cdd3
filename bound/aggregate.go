package bound

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// shapeKey is equal for items that need the same devices: the same
// counts of the same kinds per request.
func shapeKey(it item) string {
	var sb strings.Builder
	for _, rq := range it.reqs {
		fmt.Fprintf(&sb, "%d%v;", rq.cnt, rq.kinds)
	}
	return sb.String()
}

// fits tells whether the shapes (multiset, as item reqs) fit into v.
func fitsAll(shapes [][]itemReq, v []kc) bool {
	if len(shapes) == 0 {
		return true
	}
	ok := false
	var try func(reqs []itemReq, v []kc)
	try = func(reqs []itemReq, v []kc) {
		if ok {
			return
		}
		if len(reqs) == 0 {
			if fitsAll(shapes[1:], v) {
				ok = true
			}
			return
		}
		rq := reqs[0]
		var choose func(j, left int, v []kc)
		choose = func(j, left int, v []kc) {
			if ok {
				return
			}
			if left == 0 {
				try(reqs[1:], v)
				return
			}
			if j == len(rq.kinds) {
				return
			}
			kd := rq.kinds[j]
			have := 0
			for _, x := range v {
				if x.kind == kd {
					have = x.n
				}
			}
			for t := min(have, left); t >= 0; t-- {
				next := v
				if t > 0 {
					next = take(v, kd, t)
				}
				choose(j+1, left-t, next)
			}
		}
		choose(0, rq.cnt, v)
	}
	try(shapes[0], v)
	return ok
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
	var st AggregateStats
	ps := r.patternItems()
	shapeOf := map[string]int{}
	var shapes [][]itemReq
	itemShape := make([]int, len(ps.items))
	for i, it := range ps.items {
		k := shapeKey(it)
		s, ok := shapeOf[k]
		if !ok {
			s = len(shapes)
			shapeOf[k] = s
			shapes = append(shapes, it.reqs)
		}
		itemShape[i] = s
	}
	st.Types, st.Shapes = len(r.types), len(shapes)
	var rows, gens, bounds, obj []string
	supply := map[int][]string{}
	for ti, bt := range r.types {
		lay := r.layoutsOf(bt)
		if lay == nil {
			return st, fmt.Errorf("bin type %d: too many layouts to enumerate", ti)
		}
		var vecs [][]kc
		for _, v := range lay.vecs {
			var s []kc
			for _, x := range v {
				s = append(s, kc{x.kind, int(x.n)})
			}
			vecs = append(vecs, s)
		}
		fitsSome := func(ms [][]itemReq) bool {
			for _, v := range vecs {
				if fitsAll(ms, v) {
					return true
				}
			}
			return false
		}
		// Maximal patterns, shapes in nondecreasing order.
		var pats [][]int
		var cur []int
		var dfs func(from int)
		dfs = func(from int) {
			ext := false
			for s := 0; s < len(shapes); s++ {
				ms := make([][]itemReq, 0, len(cur)+1)
				for _, c := range cur {
					ms = append(ms, shapes[c])
				}
				if !fitsSome(append(ms, shapes[s])) {
					continue
				}
				ext = true
				if s < from {
					continue
				}
				cur = append(cur, s)
				dfs(s)
				cur = cur[:len(cur)-1]
			}
			if !ext {
				pats = append(pats, append([]int(nil), cur...))
			}
		}
		dfs(0)
		st.Patterns += len(pats)
		var cs []string
		for pi, pat := range pats {
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
	var sb strings.Builder
	sb.WriteString("\\ drasat aggregated claim-pattern model: c<type>_<pattern> bins of a type taking a pattern, y<class> claims of a class admitted\n")
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
	return st, err
}
