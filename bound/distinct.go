package bound

import (
	"fmt"
	"slices"

	"github.com/drasat/drasat/model"
)

// Claims with distinctAttribute (count 2 of 1g on two GPUs, by parentUUID)
// are split into single-device items that keep only their node in the
// per-node model. Realise hands such a claim's items out one a bin, so
// that the group of bins the SAT model then places it on has the distinct
// GPUs it needs; taking them slot by slot would put both on one GPU, which
// the SAT model must reject. Where the node's slots of its shape lie on
// fewer bins than it has items, the claim gets no bins: its group is then
// its whole node, whose SAT model may move a claim of one device to free
// a slot on another GPU.
//
// The per-node model itself keeps such claims off nodes whose slots lie
// on too few bins (distinctRows): without, its optimum put two 1g items
// of one claim in the slots of one GPU, an answer no realisation keeps
// (rich MIG 8x8/300: 233 by the model, 232 realised).

// distinctDevices tells whether c has a distinctAttribute constraint.
func distinctDevices(c *model.Claim) bool {
	for _, con := range c.Constraints {
		if con.Kind == model.DistinctAttribute {
			return true
		}
	}
	return false
}

// distinctRow is the distinct claims of one node that need Items slots of
// Shape, each on its own bin: those of the classes Classes (indices in
// NodeAggregate.Classes), at most Most of them.
//
// D such claims fit the node's bins, whose slots of the shape are c_g,
// exactly when Items·D ≤ Σ_g min(c_g, D) (a bin serves a claim once; fill
// the claims round robin) and all items of the shape fit the slots (the
// shape's row). The first condition in linear form, with δ_t = [D ≥ t]
// for t = 1..Most and B_j the node's bins with at least j slots of the
// shape (pattern counts): Σ_k y(k,n) = Σ_t δ_t, δ_t ≤ δ_{t−1}, and
// Items·t·δ_t ≤ Σ_{j≤t} B_j = Σ_{g,p} min(slots of p, t)·c(g,p) — the
// claims that fit are an interval from 0, so D fits when every t ≤ D
// does.
//
// Rows for t at or above the most slots one bin has of the shape are
// left out: there min(c_g, t) = c_g, so they ask Items·t ≤ the node's
// slots, which the shape's supply row already asks. So δ_t runs to
// Steps = that most − 1, and one count Rest ≤ (Most − Steps)·δ_Steps
// takes the claims beyond.
type distinctRow struct {
	Node, Shape, Items int
	Classes            []int
	Most, Steps        int
}

// distinctRows are the model's distinct rows: for the classes of claims
// whose one request takes Items devices of one shape under a
// distinctAttribute that two devices of one bin never satisfy (their
// values meet, as parentUUID's do), on every node with bins; none for the
// global model (node −1), whose pooled bins bound it anyway.
func (na *NodeAggregate) distinctRows() []distinctRow {
	if len(na.Nodes) > distinctRowsNodes {
		return nil
	}
	type key struct{ n, s, items int }
	byKey := map[key]*distinctRow{}
	var keys []key
	for ki, k := range na.Classes {
		if !na.spread[k.Class] || len(k.Demand) != 1 || k.Demand[0].N < 2 || k.Demand[0].N != float64(int(k.Demand[0].N)) {
			continue
		}
		for _, n := range k.Nodes {
			if n < 0 {
				continue
			}
			kk := key{n, k.Demand[0].Shape, int(k.Demand[0].N)}
			r := byKey[kk]
			if r == nil {
				r = &distinctRow{Node: n, Shape: kk.s, Items: kk.items}
				byKey[kk] = r
				keys = append(keys, kk)
			}
			r.Classes = append(r.Classes, ki)
			r.Most += k.Max
		}
	}
	var out []distinctRow
	for _, kk := range keys {
		r := byKey[kk]
		// At most as many claims as the node's slots could serve.
		slots, widest := 0, 0
		for _, g := range na.Groups {
			if g.Node != r.Node {
				continue
			}
			most := 0
			for _, pat := range g.Patterns {
				most = max(most, slotsOf(pat, r.Shape))
			}
			slots += g.Bins * most
			widest = max(widest, most)
		}
		r.Most = min(r.Most, slots/r.Items)
		r.Steps = min(r.Most, widest-1)
		if r.Most == 0 || r.Steps == 0 {
			continue // nothing fits, or every bin has one slot at most: no row binds
		}
		out = append(out, *r)
	}
	return out
}

// spreadClasses marks the classes whose claims have one request and a
// distinctAttribute that spreads its devices over bins: within each bin
// every device with the attribute has the same values, so no two of one
// bin are distinct (parentUUID on a GPU's devices). Merged pod groups are
// left out: their demand is several claims'.
func (na *NodeAggregate) spreadClasses() map[int]bool {
	out := map[int]bool{}
	for _, k := range na.Classes {
		if _, merged := na.merged[k.Class]; merged {
			continue
		}
		c := na.r.classes[k.Class].rep
		if len(c.Requests) != 1 || len(c.Requests[0].Alternatives) > 1 {
			continue
		}
		for _, con := range c.Constraints {
			whole := len(con.Requests) == 0 || len(con.Requests) == 1 && con.Requests[0] == c.Requests[0].Name
			if con.Kind == model.DistinctAttribute && whole && len(con.AltValues) == 0 && na.oneValueABin(con) {
				out[k.Class] = true
				break
			}
		}
	}
	return out
}

// oneValueABin tells whether, within every bin, the devices with con's
// attribute all have the same values.
func (na *NodeAggregate) oneValueABin(con *model.Constraint) bool {
	for _, b := range na.r.Bins {
		var first []string
		for _, d := range b.Devices {
			v := con.Values.At(d)
			if v == nil {
				continue
			}
			if first == nil {
				first = v
			} else if !slices.Equal(first, v) {
				return false
			}
		}
	}
	return true
}

// distinctRowsNodes is the most nodes a model gets distinct rows on: they
// make the dive's fixings fail more often, and on rich 64x8/2,000 (seeds
// 1 and 2) its answer came after the stage's share of a 10 s budget
// (1,671 and 1,612 admitted, where without them the dive's 1,760 realised
// 1,759); at 8 and 16 nodes they cost nothing measurable and close the
// proofs. The model without them is still a relaxation.
const distinctRowsNodes = 32

// slotsOf is how many items of shape s pattern pat holds.
func slotsOf(pat []ShapeCount, s int) int {
	for _, sc := range pat {
		if sc.Shape == s {
			return sc.N
		}
	}
	return 0
}

// Var is the name of δ_t of the row in the LP file; t = Steps+1 names
// Rest.
func (r *distinctRow) Var(t int) string {
	return fmt.Sprintf("d%d_%d_%d_%d", r.Shape, r.Items, r.Node, t)
}
