package bound

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/drasat/drasat/model"
)

// NodeAggregate is the aggregated claim-pattern model per node
// (WriteNodeAggregateLP) as data, for a solver to read: the LP writer
// (for CBC) and the in-house solver (SolveNodeAggregate) read the same
// structure, and their answers use the same variable names, which
// RealiseLayouts and NodesOf read back.
type NodeAggregate struct {
	Stats  AggregateStats
	Shapes int
	// Nodes are the nodes with bins, sorted.
	Nodes []int
	// Groups are the bins grouped by type and node, in the order the
	// first bin of each appears.
	Groups []BinGroup
	// Classes are the classes the model serves, in class order.
	Classes []NodeClass
	// Capacities are the node resources the classes' pods compete for
	// (NodeClass.Requests): the pod-aware problem's per-node rows.
	Capacities []NodeCapacity

	r  *Relaxation
	ag *aggregated
	// oneNode marks a model of one node cut out of a larger one
	// (DistributeByNode): its dive gets one short round.
	oneNode bool
	// merged: the pod groups of several claims made one class
	// (podgroups.go), by the class's Class, and memberDemand their
	// claims' own items, by class key.
	merged       map[int][]groupMember
	memberDemand map[string][]ShapeDemand
	// spread marks, by Class, the classes whose distinct items take a
	// bin each (distinct.go).
	spread map[int]bool
}

// BinGroup is the bins of one type on one node: c<Type>_<Node>_<p> of
// them take pattern p, Bins in all.
type BinGroup struct {
	Type, Node, Bins int
	// Patterns are the type's maximal patterns: per pattern, how many
	// items of each shape it holds (shapes ascending, counts > 0).
	Patterns [][]ShapeCount
}

// ShapeCount is a number of items of one shape.
type ShapeCount struct{ Shape, N int }

// ShapeDemand is what one claim needs of one shape: N items (the
// multiplicity of a claim split into single-device items).
type ShapeDemand struct {
	Shape int
	N     float64
}

// NodeClass is one class of interchangeable claims: y<Class>_<n> of them
// on node n, at most Max in all.
type NodeClass struct {
	Class  int
	Weight float64
	Max    int
	// Nodes are the nodes its claims may take (one when the claims are
	// held to a node), ascending.
	Nodes []int
	// Demand is what one claim needs, by shape ascending.
	Demand []ShapeDemand
	// Requests is what one claim's pods request of each node resource
	// (model.Problem.Resources), in units of the resource's
	// NodeCapacity.Unit; a pod group of several claims is one class
	// with the group's requests (podgroups.go), or, when some of its
	// claims are not in the model, splits them evenly among its claims.
	// Nil when the claim's pods do not count on node resources.
	Requests []int64
}

// NodeCapacity is what node Node has free of resource Resource
// (model.Problem.Resources) for the pending pods: the requests of the
// classes placed there stay within Free. Both count in Unit, the greatest
// common divisor of the resource's free amounts and requests, which keeps
// the LP's coefficients small and exact.
type NodeCapacity struct {
	Node, Resource int
	Free, Unit     int64
}

// Var is the name of the row of the node's capacity in the LP file.
func (c *NodeCapacity) Var() string { return fmt.Sprintf("r%d_%d", c.Resource, c.Node) }

// Var is the name of the count of the group's bins taking pattern p.
func (g *BinGroup) Var(p int) string { return fmt.Sprintf("c%d_%d_%d", g.Type, g.Node, p) }

// Var is the name of the count of the class's claims on node n.
func (k *NodeClass) Var(n int) string { return fmt.Sprintf("y%d_%d", k.Class, n) }

// NodeAggregateBy builds the per-node aggregated model, giving up with an
// error when enumerating the patterns is not done by deadline (zero: no
// deadline) or ctx ends, or when a bin spans nodes.
func (r *Relaxation) NodeAggregateBy(ctx context.Context, deadline time.Time) (*NodeAggregate, error) {
	ag, err := r.aggregateBy(ctx, deadline)
	na := &NodeAggregate{Stats: ag.stats, Shapes: len(ag.shapes), r: r, ag: ag}
	if err != nil {
		return na, err
	}
	type tn struct{ t, n int }
	group := map[tn]int{}
	nodes := map[int]bool{}
	for _, b := range r.Bins {
		n := r.p.CommonNode(b.Devices)
		if n < 0 {
			return na, fmt.Errorf("bin %d: its devices are not all on one node", b.Index)
		}
		k := tn{b.Type, n}
		gi, ok := group[k]
		if !ok {
			gi = len(na.Groups)
			group[k] = gi
			g := BinGroup{Type: b.Type, Node: n}
			for _, pat := range ag.pats[b.Type] {
				cnt := map[int]int{}
				for _, s := range pat {
					cnt[s]++
				}
				var sc []ShapeCount
				for s := range ag.shapes {
					if c := cnt[s]; c > 0 {
						sc = append(sc, ShapeCount{s, c})
					}
				}
				g.Patterns = append(g.Patterns, sc)
			}
			na.Groups = append(na.Groups, g)
		}
		na.Groups[gi].Bins++
		nodes[n] = true
	}
	for n := range nodes {
		na.Nodes = append(na.Nodes, n)
	}
	sort.Ints(na.Nodes)
	for ki, k := range r.classes {
		if !ag.ps.served[ki] {
			continue
		}
		nc := NodeClass{Class: ki, Weight: k.weight, Max: k.n}
		for _, n := range na.Nodes {
			if fn := k.rep.FixedNode; fn >= 0 && fn != n || k.rep.ExcludedNodes[n] {
				continue
			}
			nc.Nodes = append(nc.Nodes, n)
		}
		byShape := map[int]float64{}
		for _, i := range ag.ps.classItems[ki] {
			byShape[ag.itemShape[i]] += ag.ps.items[i].mult
		}
		for s := range ag.shapes {
			if d, ok := byShape[s]; ok {
				nc.Demand = append(nc.Demand, ShapeDemand{s, d})
			}
		}
		na.Classes = append(na.Classes, nc)
	}
	na.mergePodGroups()
	na.podCapacities()
	na.spread = na.spreadClasses()
	return na, nil
}

// podCapacities fills the classes' Requests and the model's Capacities
// from the pods of the classes' claims (model.Problem.PodGroups): a row
// per node and resource the node limits, where the classes that may use
// the node could together ask for more than it has free. Claims of one
// class have pods with the same requests (model.Claim.ClassKey).
func (na *NodeAggregate) podCapacities() {
	p := na.r.p
	if len(p.PodGroups) == 0 {
		return
	}
	reqs := make([][]int64, len(na.Classes))
	for ki := range na.Classes {
		c := na.r.classes[na.Classes[ki].Class].rep
		if g := c.Group; g != nil && p.Pinning(c) {
			reqs[ki] = make([]int64, len(p.Resources))
			for j, v := range g.Requests {
				if _, whole := na.merged[na.Classes[ki].Class]; whole {
					reqs[ki][j] = v // the group's claims as one class
				} else {
					reqs[ki][j] = v / int64(len(g.Claims)) // rounded down: still a relaxation
				}
			}
		}
	}
	for j := range p.Resources {
		unit := int64(0)
		for ki := range reqs {
			if reqs[ki] != nil && reqs[ki][j] > 0 {
				unit = gcd(unit, reqs[ki][j])
			}
		}
		if unit == 0 {
			continue
		}
		var rows []NodeCapacity
		for _, n := range na.Nodes {
			if !p.Limited(n, j) {
				continue
			}
			free := max(p.NodeFree[n][j], 0)
			var ask int64
			for ki, k := range na.Classes {
				if reqs[ki] != nil && slices.Contains(k.Nodes, n) {
					ask += reqs[ki][j] * int64(k.Max)
				}
			}
			if ask > free {
				rows = append(rows, NodeCapacity{Node: n, Resource: j, Free: free})
				unit = gcd(unit, free)
			}
		}
		for i := range rows {
			rows[i].Unit = unit
			rows[i].Free /= unit
		}
		na.Capacities = append(na.Capacities, rows...)
		if len(rows) == 0 {
			continue
		}
		for ki := range na.Classes {
			if reqs[ki] != nil {
				if na.Classes[ki].Requests == nil {
					na.Classes[ki].Requests = make([]int64, len(p.Resources))
				}
				na.Classes[ki].Requests[j] = reqs[ki][j] / unit
			}
		}
	}
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// WriteLP writes the model as an integer program in CPLEX LP format
// (WriteNodeAggregateLP).
func (na *NodeAggregate) WriteLP(w io.Writer) error {
	type sn struct{ s, n int }
	var rows, gens, bounds, obj []string
	supply := map[sn][]string{}
	for gi := range na.Groups {
		g := &na.Groups[gi]
		var cs []string
		for p, pat := range g.Patterns {
			name := g.Var(p)
			cs = append(cs, name)
			gens = append(gens, name)
			for _, sc := range pat {
				supply[sn{sc.Shape, g.Node}] = append(supply[sn{sc.Shape, g.Node}], fmt.Sprintf("%d %s", sc.N, name))
			}
		}
		rows = append(rows, fmt.Sprintf("t%d_%d: %s = %d", g.Type, g.Node, strings.Join(cs, " + "), g.Bins))
	}
	demand := map[sn][]string{}
	type jn struct{ j, n int }
	asks := map[jn][]string{}
	for ki := range na.Classes {
		k := &na.Classes[ki]
		var ys []string
		for _, n := range k.Nodes {
			y := k.Var(n)
			ys = append(ys, y)
			gens = append(gens, y)
			bounds = append(bounds, fmt.Sprintf("0 <= %s <= %d", y, k.Max))
			obj = append(obj, fmt.Sprintf("%g %s", k.Weight, y))
			for _, d := range k.Demand {
				demand[sn{d.Shape, n}] = append(demand[sn{d.Shape, n}], fmt.Sprintf("%g %s", d.N, y))
			}
			for j, v := range k.Requests {
				if v > 0 {
					asks[jn{j, n}] = append(asks[jn{j, n}], fmt.Sprintf("%d %s", v, y))
				}
			}
		}
		if len(ys) > 0 {
			rows = append(rows, fmt.Sprintf("k%d: %s <= %d", k.Class, strings.Join(ys, " + "), k.Max))
		}
	}
	for s := 0; s < na.Shapes; s++ {
		for _, n := range na.Nodes {
			d := demand[sn{s, n}]
			if len(d) == 0 {
				continue
			}
			row := fmt.Sprintf("s%d_%d: %s", s, n, strings.Join(d, " + "))
			if sup := supply[sn{s, n}]; len(sup) > 0 {
				row += " - " + strings.Join(sup, " - ")
			}
			rows = append(rows, row+" <= 0")
		}
	}
	for _, c := range na.Capacities {
		if a := asks[jn{c.Resource, c.Node}]; len(a) > 0 {
			rows = append(rows, fmt.Sprintf("%s: %s <= %d", c.Var(), strings.Join(a, " + "), c.Free))
		}
	}
	// Distinct rows (distinct.go): claims that need a bin each only
	// where their node's slots lie on enough bins.
	for i, r := range na.distinctRows() {
		var ys, ds []string
		for _, ki := range r.Classes {
			ys = append(ys, na.Classes[ki].Var(r.Node))
		}
		for t := 1; t <= r.Steps; t++ {
			d := r.Var(t)
			gens = append(gens, d)
			bounds = append(bounds, fmt.Sprintf("0 <= %s <= 1", d))
			ds = append(ds, d)
			if t > 1 {
				rows = append(rows, fmt.Sprintf("do%d_%d: %s - %s <= 0", i, t, d, r.Var(t-1)))
			}
			cover := []string{fmt.Sprintf("%d %s", r.Items*t, d)}
			for gi := range na.Groups {
				g := &na.Groups[gi]
				if g.Node != r.Node {
					continue
				}
				for p, pat := range g.Patterns {
					if sl := slotsOf(pat, r.Shape); sl > 0 {
						cover = append(cover, fmt.Sprintf("- %d %s", min(sl, t), g.Var(p)))
					}
				}
			}
			rows = append(rows, fmt.Sprintf("dv%d_%d: %s <= 0", i, t, strings.Join(cover, " ")))
		}
		if rest := r.Most - r.Steps; rest > 0 {
			d := r.Var(r.Steps + 1)
			gens = append(gens, d)
			bounds = append(bounds, fmt.Sprintf("0 <= %s <= %d", d, rest))
			ds = append(ds, d)
			rows = append(rows, fmt.Sprintf("do%d_%d: %s - %d %s <= 0", i, r.Steps+1, d, rest, r.Var(r.Steps)))
		}
		rows = append(rows, fmt.Sprintf("dl%d: %s - %s = 0", i, strings.Join(ys, " + "), strings.Join(ds, " - ")))
	}
	return writeIntegerLP(w, "drasat aggregated claim-pattern model per node: c<type>_<node>_<pattern>, y<class>_<node>", obj, rows, bounds, gens)
}

// RealiseLayouts is Relaxation.RealiseLayouts for a solution of this
// model, without enumerating the patterns again.
func (na *NodeAggregate) RealiseLayouts(values map[string]float64) ([]bool, error) {
	keep, _, err := na.r.realiseLayouts(na.ag, values, true)
	return keep, err
}

// Realisation is a solution of the per-node model made concrete: the
// devices each bin keeps (RealiseLayouts), each admitted claim's node
// (Relaxation.NodesOf) and the bins whose pattern slots its items take.
type Realisation struct {
	Keep  []bool      // by device
	Nodes map[int]int // claim index -> node
	// Bins is, per claim index, the bins (Bin.Index) whose patterns
	// hold the claim's items: the claim's shapes, taken slot by slot
	// from the bins of its node in bin order (a distinctAttribute
	// claim's one a bin, distinct.go). A claim whose node has no slot
	// left for one of its items (not in an integral solution), or whose
	// distinct items found fewer bins than they are, has no entry.
	Bins map[int][]int
}

// Realise turns a solution of this model into layouts, nodes and the bins
// of each claim's items. The bins let a caller realise the answer one
// group of bins at a time (the bins sharing claims), where the claims of
// a node held to the node alone leave the SAT model the whole node's
// packing to search.
func (na *NodeAggregate) Realise(values map[string]float64, claims []*model.Claim) (*Realisation, error) {
	keep, patOf, err := na.r.realiseLayouts(na.ag, values, true)
	if err != nil {
		return nil, err
	}
	re := &Realisation{Keep: keep, Nodes: na.r.NodesOf(na.expand(values), claims), Bins: map[int][]int{}}
	// The free slots per node and shape, bin by bin.
	type sn struct{ s, n int }
	type slot struct{ bin, left int }
	slots := map[sn][]slot{}
	for _, b := range na.r.Bins {
		pi := patOf[b.Index]
		if pi < 0 {
			continue
		}
		n := na.r.p.CommonNode(b.Devices)
		cnt := map[int]int{}
		for _, s := range na.ag.pats[b.Type][pi] {
			cnt[s]++
		}
		for s := range na.ag.shapes {
			if c := cnt[s]; c > 0 {
				slots[sn{s, n}] = append(slots[sn{s, n}], slot{b.Index, c})
			}
		}
	}
	demand := map[string][]ShapeDemand{}
	for ki := range na.Classes {
		demand[na.r.classes[na.Classes[ki].Class].key] = na.Classes[ki].Demand
	}
	for key, d := range na.memberDemand { // a merged pod group's claims
		demand[key] = d
	}
	for _, c := range claims {
		n, ok := re.Nodes[c.Index]
		if !ok {
			continue
		}
		var bins []int
		fits := true
		spread := distinctDevices(c)
		for _, d := range demand[c.ClassKey()] {
			q := slots[sn{d.Shape, n}]
			for need := int(math.Round(d.N)); need > 0; {
				if len(q) == 0 {
					fits = false
					break
				}
				take := min(need, q[0].left)
				if spread {
					take = 1 // one item a bin, the next from the next bin
				}
				bins = append(bins, q[0].bin)
				q[0].left -= take
				need -= take
				if q[0].left == 0 {
					q = q[1:]
				} else if spread {
					q = append(q[1:], q[0])
				}
			}
			slots[sn{d.Shape, n}] = q
		}
		items := len(bins)
		sort.Ints(bins)
		bins = slices.Compact(bins)
		if fits && !(spread && len(bins) < items) {
			re.Bins[c.Index] = bins
		}
	}
	return re, nil
}
